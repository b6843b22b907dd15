/**
 * Our workspace tools served over MCP: an MCP client from the SDK drives
 * `io-harness mcp-server` (a real child process on stdio, and over streamable HTTP on
 * loopback) and `WorkspaceMcpServer` in-process. A read the policy allows returns the
 * file; a write outside `allowWrite` comes back as an error naming its rule and layer;
 * both are steps of a run in the store. Only the workspace tools are served: nothing a
 * client sends reaches the tree's tools or changes the policy.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { describe, expect, it } from 'vitest';
import { Policy, Store, TaskContract } from '../dist/index.js';
import { WorkspaceMcpServer } from '../dist/mcp/serve.js';
import { tempStorePath } from './support/processes.js';
import { later, tempWorkspace } from './support/workspace.js';

const BIN = fileURLToPath(new URL('../bin/io-harness.mjs', import.meta.url));

type Answer = { content: { type: string; text: string }[]; isError?: boolean };
const text = (answer: unknown) => (answer as Answer).content.map((item) => item.text).join('');

/** A workspace, and a policy that reads it all and writes only under notes/. */
function served() {
  const root = realpathSync(tempWorkspace({ 'a.txt': 'alpha\n', 'notes/.keep': '' }));
  const policy = Policy.empty().layer('served').allowRead('**').allowWrite('notes/**');
  return { root, policy };
}

async function client(transport: Parameters<Client['connect']>[0]) {
  const mcp = new Client({ name: 'test-client', version: '1.0.0' });
  await mcp.connect(transport);
  return mcp;
}

/** What the store holds of the runs the server served: each step's call and whether it failed. */
async function servedSteps(path: string) {
  const store = await Store.open(path);
  try {
    const roots = store.runs().filter((run) => run.parentId === null);
    return {
      roots,
      steps: roots.flatMap((run) =>
        store.steps(run.runId).flatMap((step) => step.observations.map((item) => [item.name, item.isError])),
      ),
      refusals: roots.flatMap((run) =>
        store
          .events(run.runId)
          .flatMap((event) => (event.type === 'refusal' ? [`${event.rule} (${event.layer})`] : [])),
      ),
    };
  } finally {
    store.close();
  }
}

describe('our tools served over MCP', () => {
  it('serves a read and refuses a write outside allowWrite, naming rule and layer, over stdio from npx io-harness', async () => {
    const { root, policy } = served();
    const path = tempStorePath();
    const policyFile = join(tempWorkspace(), 'policy.json');
    writeFileSync(policyFile, JSON.stringify(policy.toJSON()));
    const mcp = await client(
      new StdioClientTransport({
        command: process.execPath,
        args: [BIN, 'mcp-server', '--root', root, '--store', path, '--policy', policyFile],
        stderr: 'pipe',
      }),
    );
    const listed = (await mcp.listTools()).tools.map((item) => item.name);
    expect(listed).toEqual([
      'edit_file',
      'exec',
      'find',
      'grep',
      'patch_file',
      'read_file',
      'shell',
      'shell_kill',
      'shell_poll',
      'shell_start',
      'write_file',
    ]);
    const read = await mcp.callTool({ name: 'read_file', arguments: { path: 'a.txt' } });
    expect(read.isError).toBe(false);
    expect(text(read)).toContain('alpha');
    const refused = await mcp.callTool({ name: 'write_file', arguments: { path: 'b.txt', content: 'planted\n' } });
    expect(refused.isError).toBe(true);
    expect(text(refused)).toContain('(refused by rule "policy.no-rule" of layer "policy")');
    expect(existsSync(join(root, 'b.txt'))).toBe(false);
    const written = await mcp.callTool({
      name: 'write_file',
      arguments: { path: 'notes/n.txt', content: 'kept\n' },
    });
    expect(written.isError).toBe(false);
    expect(readFileSync(join(root, 'notes', 'n.txt'), 'utf8')).toBe('kept\n');
    // The tree's tools are not served: a client cannot spawn, message or widen anything.
    const spawnCall = await mcp.callTool({ name: 'spawn_agent', arguments: { task: 'x' } });
    expect(spawnCall.isError).toBe(true);
    expect(text(spawnCall)).toContain('there is no tool named "spawn_agent" here');
    await mcp.close();

    // Closing the client ends the server, and its run is in the store, finished.
    const { roots, steps, refusals } = await servedSteps(path);
    expect(roots).toHaveLength(1);
    expect(roots[0]?.status).toBe('finished');
    expect(steps).toEqual([
      ['read_file', false],
      ['write_file', true],
      ['write_file', false],
    ]);
    expect(refusals).toHaveLength(1);
    expect(text(refused)).toContain(refusals[0]?.split(' (')[0]);
  });

  it('serves over streamable HTTP on loopback, one run per client session', async () => {
    const { root, policy } = served();
    const path = tempStorePath();
    const policyFile = join(tempWorkspace(), 'policy.json');
    writeFileSync(policyFile, JSON.stringify(policy.toJSON()));
    const child = spawn(
      process.execPath,
      [BIN, 'mcp-server', '--root', root, '--store', path, '--policy', policyFile, '--http', '0'],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    later(async () => {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await new Promise((resolve) => child.once('exit', resolve));
      }
    });
    const { url, token } = await new Promise<{ url: string; token: string }>((resolve, reject) => {
      let seen = '';
      child.stderr.on('data', (chunk) => {
        seen += chunk;
        const url = /at (http:\/\/\S+\/mcp)/.exec(seen)?.[1];
        const token = /bearer token (\S+)/.exec(seen)?.[1];
        if (url && token) resolve({ url, token });
      });
      child.once('exit', () => reject(new Error(`the server exited: ${seen}`)));
    });
    // Without the token nothing is served, not even a session.
    const stranger = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(stranger.status).toBe(401);
    await expect(client(new StreamableHTTPClientTransport(new URL(url)))).rejects.toThrow();
    const mcp = await client(
      new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    const read = await mcp.callTool({ name: 'read_file', arguments: { path: 'a.txt' } });
    expect(text(read)).toContain('alpha');
    const refused = await mcp.callTool({ name: 'write_file', arguments: { path: 'b.txt', content: 'x\n' } });
    expect(refused.isError).toBe(true);
    expect(text(refused)).toContain('(refused by rule "policy.no-rule" of layer "policy")');
    await mcp.close();
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
    const { roots, steps } = await servedSteps(path);
    expect(roots).toHaveLength(1);
    expect(steps).toEqual([
      ['read_file', false],
      ['write_file', true],
    ]);
  });

  it('starts another run after callsPerRun calls, each call answered in order', async () => {
    const { root, policy } = served();
    const store = await Store.open(tempStorePath());
    later(() => store.close());
    const server = await WorkspaceMcpServer.start({ store, root, policy, callsPerRun: 2 });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const mcp = await client(clientSide);
    // Sent together: taken one at a time, in order, across the runs.
    const answers = await Promise.all(
      ['a.txt', 'notes/.keep', 'a.txt', 'missing.txt', 'a.txt'].map((path) =>
        mcp.callTool({ name: 'read_file', arguments: { path } }),
      ),
    );
    expect(answers.map((answer) => answer.isError)).toEqual([false, false, false, true, false]);
    expect(text(answers[4])).toContain('alpha');
    await mcp.close();
    await server.close();
    // Each run: its calls, then the step that ends it.
    expect(server.runs.map((id) => store.steps(id).flatMap((step) => step.observations).length)).toEqual([2, 2, 1]);
    expect(server.runs.map((id) => store.run(id)?.status)).toEqual(['finished', 'finished', 'finished']);
    await expect(WorkspaceMcpServer.start({ store, root, callsPerRun: 0 })).rejects.toThrow(
      'callsPerRun must be a whole number from 1 to 2147483647, got 0',
    );
    await expect(
      WorkspaceMcpServer.start({ store, contract: TaskContract.workspace('serve', root).withPlanGate() }),
    ).rejects.toThrow('the contract has a plan gate, which a served client');
  });

  it('in-process: a masked tool is not served, bad arguments are an error, and an idle run ends to make way for the next', async () => {
    const { root, policy } = served();
    const store = await Store.open(tempStorePath());
    later(() => store.close());
    const server = await WorkspaceMcpServer.start({
      store,
      policy: policy.layer('locks').denyWrite('notes/locked.txt'),
      contract: TaskContract.workspace('serve', root).withToolMask(['exec', 'shell']),
      idleMs: 300,
    });
    later(() => server.close());
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const mcp = await client(clientSide);
    const listed = (await mcp.listTools()).tools.map((item) => item.name);
    expect(listed).not.toContain('exec');
    expect(listed).not.toContain('shell');
    const denied = await mcp.callTool({ name: 'write_file', arguments: { path: 'notes/locked.txt', content: 'x' } });
    expect(denied.isError).toBe(true);
    expect(text(denied)).toContain('(refused by rule "deny-write notes/locked.txt" of layer "locks")');
    const bad = await mcp.callTool({ name: 'read_file', arguments: { path: 42 } });
    expect(bad.isError).toBe(true);
    expect(text(bad)).toContain('the arguments to read_file are not valid');
    // Idle past idleMs: that run ends finished, and the next call is a run of its own.
    await new Promise((resolve) => setTimeout(resolve, 600));
    const read = await mcp.callTool({ name: 'read_file', arguments: { path: 'a.txt' } });
    expect(text(read)).toContain('alpha');
    await mcp.close();
    await server.close();
    expect(server.runs).toHaveLength(2);
    expect(server.runs.map((id) => store.run(id)?.status)).toEqual(['finished', 'finished']);
    expect(store.steps(server.runs[0] as string).flatMap((step) => step.observations.map((o) => o.name))).toEqual([
      'write_file',
      'read_file',
    ]);
    expect(store.steps(server.runs[1] as string).flatMap((step) => step.observations.map((o) => o.name))).toEqual([
      'read_file',
    ]);
  });
});
