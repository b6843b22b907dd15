// The MCP fixture server's tools for a driver process, and a model that calls its slow tool once.
import { fileURLToPath } from 'node:url';
import { McpServers } from '../../../dist/mcp/index.js';
import { assistantTurns } from '../../../dist/testing/index.js';

const FIXTURE = fileURLToPath(new URL('../../fixtures/mcp-server.mjs', import.meta.url));

let servers = null;

/** The notes server, started in `options.dir`. */
export async function notesTools(options) {
  servers = await McpServers.connect([{ name: 'notes', command: ['node', FIXTURE], cwd: options.dir }]);
  return servers.tools();
}

/** Stops the server, so the driver's process can end. */
export async function close() {
  await servers?.close();
}

/** Calls notes__slow once, then answers. */
export function slowScript() {
  const steps = [{ text: 'calling', toolCalls: [{ name: 'notes__slow', args: {} }] }, { text: 'done' }];
  return (call) => steps[Math.min(assistantTurns(call), steps.length - 1)];
}
