// A model for a driver process that calls the MCP fixture server's slow tool once.
import { assistantTurns } from '../../../dist/testing/index.js';

/** Calls notes__slow once, then answers. */
export function slowScript() {
  const steps = [{ text: 'calling', toolCalls: [{ name: 'notes__slow', args: {} }] }, { text: 'done' }];
  return (call) => steps[Math.min(assistantTurns(call), steps.length - 1)];
}
