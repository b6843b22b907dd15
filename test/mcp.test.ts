/**
 * MCP servers' tools inside the boundary: a real stdio server (test/fixtures/mcp-server.mjs,
 * written with the SDK) and a real streamable-HTTP one on loopback, listed into the
 * catalogue as `<server>__<tool>` and called by a worker-thread agent over the scripted
 * model server, under the policy (a denial names its rule and layer; an ask reaches the
 * approver), each call in the trace; a server that dies is started again once, then
 * reported, and the tree finishes; bad servers are clear errors naming them.
 */
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  answerQuestion,
  CallbackApprover,
  ErrorCode,
  OpenAI,
  Policy,
  runWith,
  Store,
  Supervisor,
  TaskContract,
} from '../dist/index.js';
import { McpServerError, McpServers } from '../dist/mcp/index.js';
import { assistantTurns, ScriptedModelServer } from '../dist/testing/index.js';
import { serveMcpOverHttp } from './support/mcp-http.js';
import { Driver, tempStorePath } from './support/processes.js';
import { later, setEnv, supervisorOnStore, tempWorkspace } from './support/workspace.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/mcp-server.mjs', import.meta.url));

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

/** A streamable-HTTP MCP server on loopback with one tool, `echo`; every request a server of its own (stateless). */
async function httpServer(): Promise<{ url: string; calls: string[] }> {
  const calls: string[] = [];
  const url = await serveMcpOverHttp(() => {
    const server = new McpServer({ name: 'web', version: '1.0.0' });
    server.registerTool(
      'echo',
      { description: 'Says it back.', inputSchema: { text: z.string() } },
      async ({ text }) => {
        calls.push(text);
        return { content: [{ type: 'text', text: `echo: ${text}` }] };
      },
    );
    return server;
  });
  return { url, calls };
}

/**
 * The processes of the fixture working in `dir`, by their ids here, found through /proc: a
 * contained server's own process id is its PID namespace's, not one to look up here.
 */
function fixtureProcesses(dir: string): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((name) => {
      try {
        return (
          readFileSync(`/proc/${name}/cmdline`, 'utf8').includes('mcp-server.mjs') &&
          readlinkSync(`/proc/${name}/cwd`) === dir
        );
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** Whether a process runs: there, and not a zombie waiting to be reaped. */
function isRunning(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

async function connect(...specs: Parameters<typeof McpServers.connect>[0]) {
  const mcp = await McpServers.connect(specs, { connectTimeoutMs: 5_000 });
  cleanup.push(() => mcp.close());
  return mcp;
}

/** A model that calls the given tools, one per step in that order, then answers. */
async function model(calls: { name: string; args: Record<string, unknown> }[]) {
  const server = await ScriptedModelServer.start((call) => {
    const turn = assistantTurns(call);
    const next = calls[turn];
    return next ? { text: `step ${turn}`, toolCalls: [next] } : { text: 'all done' };
  });
  later(() => server.close());
  const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
  return { server, provider };
}

async function supervisor() {
  return supervisorOnStore();
}

describe('MCP servers', () => {
  it("lists a stdio and an HTTP server's tools as <server>__<tool>, called by an agent under the policy, each in the trace", async () => {
    const dir = tempWorkspace({ 'a.txt': 'alpha note\n' });
    const web = await httpServer();
    const mcp = await connect({ name: 'notes', command: ['node', FIXTURE], cwd: dir }, { name: 'web', url: web.url });
    expect(mcp.tools().map((item) => item.name)).toEqual([
      'notes__crash',
      'notes__env_seen',
      'notes__fails',
      'notes__instance',
      'notes__note_read',
      'notes__note_write',
      'notes__pid',
      'notes__prompt',
      'notes__prompts',
      'notes__resource',
      'notes__resources',
      'notes__slow',
      'web__echo',
    ]);
    // The schema is the server's own, passed through.
    expect(mcp.tools().find((item) => item.name === 'notes__note_write')?.definition.parameters).toMatchObject({
      properties: { path: { type: 'string' }, text: { type: 'string' } },
      required: ['path', 'text'],
    });
    const { store, supervisor: running } = await supervisor();
    const asked: string[] = [];
    const approver = new CallbackApprover((request) => {
      asked.push(`${request.subject} (${request.rule}, ${request.layer})`);
      return 'approve';
    });
    const policy = Policy.empty()
      .layer('mcp')
      .allowTool('notes__note_read')
      .allowTool('notes__fails')
      .allowTool('web__*')
      .askTool('notes__env_seen')
      .denyTool('notes__note_write');
    const { provider } = await model([
      { name: 'notes__note_read', args: { path: 'a.txt' } },
      { name: 'web__echo', args: { text: 'hello' } },
      { name: 'notes__note_write', args: { path: 'b.txt', text: 'planted' } },
      { name: 'notes__env_seen', args: { name: 'HOME' } },
      { name: 'notes__fails', args: {} },
      { name: 'notes__note_read', args: { path: 42 } },
    ]);
    const result = await running.run({ task: 'use the tools', provider, policy, approver, tools: mcp.tools() }).result;
    expect(result.status).toBe('finished');
    const observations = store.steps(result.rootId).flatMap((step) => step.observations);
    expect(observations.map((item) => [item.name, item.isError])).toEqual([
      ['notes__note_read', false],
      ['web__echo', false],
      ['notes__note_write', true],
      ['notes__env_seen', false],
      ['notes__fails', true],
      ['notes__note_read', true],
    ]);
    expect(observations[0]?.content).toBe('alpha note\n');
    expect(observations[1]?.content).toBe('echo: hello');
    expect(observations[4]?.content).toContain('the disk is on fire');
    expect(observations[5]?.content).toContain('the arguments to notes__note_read are not valid');
    expect(web.calls).toEqual(['hello']);
    // Denied: refused before it reached the server, naming rule and layer.
    expect(existsSync(join(dir, 'b.txt'))).toBe(false);
    const events = store.events(result.rootId);
    expect(events.filter((event) => event.type === 'refusal')).toMatchObject([
      { tool: 'notes__note_write', rule: 'deny-tool notes__note_write', layer: 'mcp' },
    ]);
    expect(asked).toEqual(['notes__env_seen (ask-tool notes__env_seen, mcp)']);
    // Every call in the trace with its arguments; every call not refused by the policy was journaled as an
    // intent before it left the agent (the last one's arguments were then found bad, on the main thread).
    expect(events.filter((event) => event.type === 'tool-call').map((event) => [event.name, event.args])).toEqual([
      ['notes__note_read', { path: 'a.txt' }],
      ['web__echo', { text: 'hello' }],
      ['notes__note_write', { path: 'b.txt', text: 'planted' }],
      ['notes__env_seen', { name: 'HOME' }],
      ['notes__fails', {}],
      ['notes__note_read', { path: 42 }],
    ]);
    const intents = events.filter((event) => event.type === 'intent-started');
    expect(intents.map((event) => (event as { detail: string }).detail.split(' ')[0])).toEqual([
      'notes__note_read',
      'web__echo',
      'notes__env_seen',
      'notes__fails',
      'notes__note_read',
    ]);
  });

  it('starts the servers a run names for that run alone, inside its containment, and stops them when it ends', async () => {
    const dir = tempWorkspace({ 'a.txt': 'alpha\n' });
    const store = await Store.open(tempStorePath());
    cleanup.push(async () => store.close());
    const outside = tempWorkspace();
    const { provider } = await model([
      { name: 'notes__pid', args: {} },
      { name: 'notes__note_read', args: { path: 'a.txt' } },
      // The server runs inside the run's containment: it writes in the workspace and nowhere else.
      { name: 'notes__note_write', args: { path: join(outside, 'escaped.txt'), text: 'out' } },
      { name: 'notes__note_write', args: { path: 'b.txt', text: 'in' } },
    ]);
    // Starting the server is an exec the run's policy decides, like any command.
    const refused = Policy.default().layer('mcp').allowTool('notes__*').denyExec('node *');
    const servers = [{ name: 'notes', command: ['node', FIXTURE], cwd: dir }];
    const denied = await runWith(TaskContract.workspace('use the notes', dir), provider, store, refused, undefined, {
      mcp: servers,
    }).then(
      () => null,
      (error: unknown) => error as McpServerError,
    );
    expect(denied).toBeInstanceOf(McpServerError);
    expect(denied?.message).toMatch(/^MCP server notes: starting node .* is refused by the policy/);
    expect(denied?.details).toMatchObject({ server: 'notes', rule: 'deny-exec node *', layer: 'mcp' });
    expect(store.runs()).toEqual([]);
    const policy = Policy.default().layer('mcp').allowTool('notes__*').allowExec('node *');
    const result = await runWith(TaskContract.workspace('use the notes', dir), provider, store, policy, undefined, {
      mcp: servers,
    });
    expect(result.outcome.kind).toBe('finished');
    const [pid, read, escaped, wrote] = store.steps(result.runId).flatMap((step) => step.observations);
    expect(read?.content).toBe('alpha\n');
    expect(escaped).toMatchObject({ isError: true, content: expect.stringMatching(/EROFS|EACCES|EPERM|read-only/) });
    expect(existsSync(join(outside, 'escaped.txt'))).toBe(false);
    expect(wrote).toMatchObject({ isError: false, content: 'wrote b.txt' });
    expect(readFileSync(join(dir, 'b.txt'), 'utf8')).toBe('in');
    // It said its pid (inside its own PID namespace, so not one to look up here).
    expect(Number(pid?.content)).toBeGreaterThan(0);
    // Any process of the fixture still working in this workspace.
    const alive = () => fixtureProcesses(dir).length > 0;
    for (let i = 0; i < 200 && alive(); i++) await new Promise((r) => setTimeout(r, 25));
    expect(alive()).toBe(false);
  });

  it("reaches a run's HTTP server through the run's egress proxy: the address floor holds unless that server is allowed local", async () => {
    const dir = tempWorkspace({ 'a.txt': 'alpha\n' });
    const store = await Store.open(tempStorePath());
    cleanup.push(async () => store.close());
    const web = await httpServer();
    const { provider } = await model([{ name: 'web__echo', args: { text: 'through' } }]);
    const policy = Policy.default().layer('mcp').allowTool('web__*').allowNet('127.0.0.1');
    const task = () => TaskContract.workspace('echo it', dir);
    // Loopback is under the address floor: even allowed by the policy, the proxy will not dial it.
    const floored = await runWith(task(), provider, store, policy, undefined, {
      mcp: [{ name: 'web', url: web.url }],
    }).then(
      () => null,
      (error: unknown) => error as McpServerError,
    );
    expect(floored).toBeInstanceOf(McpServerError);
    expect(floored?.details).toMatchObject({ server: 'web', layer: 'address-floor' });
    expect(floored?.message).toMatch(/allowLocalAddress/);
    expect(web.calls).toEqual([]);
    expect(store.runs()).toEqual([]);
    const result = await runWith(task(), provider, store, policy, undefined, {
      mcp: [{ name: 'web', url: web.url, allowLocalAddress: true }],
    });
    expect(result.outcome.kind).toBe('finished');
    expect(web.calls).toEqual(['through']);
    const [echo] = store.steps(result.runId).flatMap((step) => step.observations);
    expect(echo).toMatchObject({ isError: false, content: 'echo: through' });
  });

  it('pauses a run resumed after a SIGKILL mid-call on the intent, and skip does not call the server again', {
    timeout: 120_000,
  }, async () => {
    const dir = tempWorkspace();
    const path = tempStorePath();
    // The supervisor's own servers: started for the tree on run, and again for it on each resume.
    const base = {
      store: path,
      wireScript: 'mcp#slowScript',
      supervisor: { mcp: [{ name: 'notes', command: ['node', FIXTURE], cwd: dir }] },
    };
    const calls = () =>
      existsSync(join(dir, 'slow-calls.txt')) ? readFileSync(join(dir, 'slow-calls.txt'), 'utf8') : '';
    const first = new Driver({ ...base, mode: 'run' });
    later(() => {
      first.child.kill('SIGKILL');
    });
    for (let i = 0; i < 600 && calls() === ''; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(calls()).toBe('x');
    first.child.kill('SIGKILL');
    await first.exited;
    const rootId = first.rootId as string;
    const second = new Driver({ ...base, mode: 'resume', rootId });
    await second.exited;
    expect(second.result?.status, second.stderr).toBe('paused');
    const store = await Store.open(path);
    cleanup.push(async () => store.close());
    const open = store.questions({ status: 'open' });
    expect(open).toMatchObject([{ kind: 'intent', payload: { kind: 'tool', detail: 'notes__slow {}' } }]);
    answerQuestion(store, open[0]?.questionId as string, 'skip', { by: 'operator' });
    const third = new Driver({ ...base, mode: 'resume', rootId });
    await third.exited;
    expect(third.result?.status, third.stderr).toBe('finished');
    // Called once, by the killed process; never again.
    expect(calls()).toBe('x');
    expect(store.steps(rootId)[0]?.observations[0]).toMatchObject({ name: 'notes__slow', isError: true });
  });

  it('gives each tree of a supervisor its own servers, stopped when the tree ends; a resume without them is refused naming the server', async () => {
    const dir = tempWorkspace();
    const notes = { name: 'notes', command: ['node', FIXTURE], cwd: dir };
    const { store, supervisor: running } = await supervisorOnStore({ mcp: [notes] });
    const { provider } = await model([{ name: 'notes__instance', args: {} }]);
    const first = running.run({ task: 'say which server', provider });
    const second = running.run({ task: 'say which server', provider });
    await Promise.all([first.result, second.result]);
    const instances = [first.rootId, second.rootId].map((rootId) => {
      const [said] = store.steps(rootId).flatMap((step) => step.observations);
      expect(said).toMatchObject({ name: 'notes__instance', isError: false });
      return said?.content;
    });
    // One server each, both gone once their trees ended.
    expect(new Set(instances).size).toBe(2);
    for (let i = 0; i < 200 && fixtureProcesses(dir).length > 0; i++) await new Promise((r) => setTimeout(r, 25));
    expect(fixtureProcesses(dir)).toEqual([]);
    // The stored spec says where the tool came from, so a resume can say what to give back.
    const stored = (store.spec(first.rootId) as { tools: { name: string; server?: string }[] }).tools;
    expect(stored).toContainEqual({
      name: 'notes__pid',
      effect: 'acts',
      server: 'notes',
      digest: expect.stringMatching(/^[0-9a-f]{16}$/),
    });
    expect(stored.filter((item) => item.server !== 'notes')).toEqual([]);
    // The supervisor's server given again by a run is one server twice.
    expect(() => running.run({ task: 'twice', provider, mcp: [notes] })).toThrow(
      /run\(\): the MCP server notes is given twice \(by the supervisor and by this call\)/,
    );
    expect(() => running.run({ task: 'bad', provider, mcp: [{ name: 'a__b', url: 'http://x' }] as never })).toThrow(
      /run\(\): MCP server 0: name must be/,
    );
    const bare = await Supervisor.start(store);
    later(() => bare.close());
    const refused = await bare.resume(first.rootId).then(
      () => null,
      (error: unknown) => error as { code: string; message: string; details: unknown },
    );
    expect(refused).toMatchObject({
      code: ErrorCode.ToolsMissing,
      details: { rootId: first.rootId, servers: ['notes'] },
      message: expect.stringContaining(
        'the tools of the MCP server notes (pass it again: resume(rootId, { mcp: [...] }))',
      ),
    });
    // Given back, the finished tree resumes (to nothing left to do), its server started and stopped again.
    const resumed = await bare.resume(first.rootId, { mcp: [notes] });
    expect((await resumed.result).status).toBe('finished');
  });

  it('stops a running tree’s servers before close() returns', async () => {
    const dir = tempWorkspace();
    const store = await Store.open(tempStorePath());
    cleanup.push(async () => store.close());
    // A server that takes a while to exit once told to: close() still returns after it has.
    const notes = { name: 'notes', command: ['node', FIXTURE], cwd: dir, env: { MCP_LINGER_MS: '700' } };
    const running = await Supervisor.start(store, { mcp: [notes] });
    const { provider } = await model([
      { name: 'notes__pid', args: {} },
      { name: 'notes__slow', args: {} },
    ]);
    const handle = running.run({ task: 'say the pid, then wait', provider });
    const slow = join(dir, 'slow-calls.txt');
    for (let i = 0; i < 400 && !existsSync(slow); i++) await new Promise((r) => setTimeout(r, 25));
    expect(existsSync(slow)).toBe(true);
    expect(Number(store.steps(handle.rootId)[0]?.observations[0]?.content)).toBeGreaterThan(0);
    // Its processes as this host sees them (contained, the id it said is its namespace's).
    const pids = fixtureProcesses(dir);
    expect(pids.length).toBeGreaterThan(0);
    await running.close();
    await expect(handle.result).rejects.toMatchObject({ code: ErrorCode.SupervisorClosed });
    // No waiting here: close() returned after the server's process was gone.
    // A zombie left for this host's init to reap runs nothing: gone as well.
    expect(pids.filter(isRunning)).toEqual([]);
  });

  it('closes a contained stdio server only once every process its sandbox started is gone', async () => {
    const dir = tempWorkspace();
    const mcp = await connect({ name: 'notes', command: ['node', FIXTURE], cwd: dir, env: { MCP_CHILD: '1' } });
    const child = () =>
      fixtureProcesses(dir).filter((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('child'));
    for (let i = 0; i < 200 && child().length === 0; i++) await new Promise((r) => setTimeout(r, 25));
    expect(child().length).toBe(1);
    // The launcher, the namespace's first process, the helper and its relay, the server, and what it started.
    const pids = fixtureProcesses(dir);
    await mcp.close();
    // No waiting here: the launcher's exit alone does not say its namespace is gone.
    expect(pids.filter(isRunning)).toEqual([]);
  });

  it("offers a server's resources and prompts as tools that read, decided by the policy by their names", async () => {
    const mcp = await connect({ name: 'notes', command: ['node', FIXTURE], cwd: tempWorkspace() });
    const { store, supervisor: running } = await supervisor();
    const { provider } = await model([
      { name: 'notes__resources', args: {} },
      { name: 'notes__resource', args: { uri: 'notes://readme' } },
      { name: 'notes__prompts', args: {} },
      { name: 'notes__prompt', args: { name: 'summarize', arguments: { topic: 'birds' } } },
      { name: 'notes__resource', args: { uri: 'notes://nothing-here' } },
    ]);
    const policy = Policy.empty()
      .layer('mcp')
      .allowTool('notes__resource*')
      .allowTool('notes__prompts')
      .denyTool('notes__prompt');
    const result = await running.run({ task: 'read', provider, policy, tools: mcp.tools() }).result;
    expect(result.status).toBe('finished');
    const observations = store.steps(result.rootId).flatMap((step) => step.observations);
    expect(JSON.parse(observations[0]?.content ?? '')).toEqual([
      { uri: 'notes://readme', name: 'readme', description: 'What the notes are.', mimeType: 'text/plain' },
    ]);
    expect(observations[1]?.content).toBe('The notes are kept here.');
    expect(JSON.parse(observations[2]?.content ?? '')).toMatchObject([
      { name: 'summarize', description: 'Asks for a summary.', arguments: [{ name: 'topic', required: true }] },
    ]);
    // Not allowed: refused by name, like any tool.
    expect(observations[3]).toMatchObject({ isError: true });
    expect(store.events(result.rootId).filter((event) => event.type === 'refusal')).toMatchObject([
      { tool: 'notes__prompt', rule: 'deny-tool notes__prompt', layer: 'mcp' },
    ]);
    expect(observations[4]).toMatchObject({
      isError: true,
      content: expect.stringContaining('MCP server notes answered'),
    });
    // Reads change nothing: none is journaled.
    expect(store.events(result.rootId).filter((event) => event.type === 'intent-started')).toEqual([]);
    // Allowed, the prompt comes back filled in.
    const prompt = mcp.tools().find((item) => item.name === 'notes__prompt');
    const context = { rootId: 'r', runId: 'r', address: 'root', callId: 'c', signal: new AbortController().signal };
    expect(await prompt?.call({ name: 'summarize', arguments: { topic: 'birds' } }, context)).toEqual({
      content: 'user: Summarize the notes on birds.',
      isError: false,
    });
  });

  it('starts a stdio server without the harness environment: no provider key reaches it', async () => {
    setEnv({ OPENAI_API_KEY: 'sk-not-for-servers', IO_HARNESS_TEST_SECRET: 'canary-mcp' });
    const mcp = await connect({ name: 'notes', command: ['node', FIXTURE], cwd: tempWorkspace() });
    const seen = mcp.tools().find((item) => item.name === 'notes__env_seen');
    const context = { rootId: 'r', runId: 'r', address: 'root', callId: 'c', signal: new AbortController().signal };
    expect(await seen?.call({ name: 'OPENAI_API_KEY' }, context)).toEqual({
      content: 'OPENAI_API_KEY=(unset)',
      isError: false,
    });
    expect((await seen?.call({ name: 'IO_HARNESS_TEST_SECRET' }, context))?.content).toBe(
      'IO_HARNESS_TEST_SECRET=(unset)',
    );
    // What the embedder gives it by name, it has.
    const given = await connect({
      name: 'given',
      command: ['node', FIXTURE],
      cwd: tempWorkspace(),
      env: { GIVEN_VALUE: 'yes' },
    });
    const call = given.tools().find((item) => item.name === 'given__env_seen');
    expect((await call?.call({ name: 'GIVEN_VALUE' }, context))?.content).toBe('GIVEN_VALUE=yes');
    // Closed, its tools say so; nothing is started again.
    await given.close();
    expect(await call?.call({ name: 'GIVEN_VALUE' }, context)).toMatchObject({
      isError: true,
      content: expect.stringContaining('MCP server given was closed'),
    });
  });

  it('starts a server that died mid-call once more, reports a second death, and the tree finishes', async () => {
    const dir = tempWorkspace({ 'a.txt': 'alpha\n' });
    const mcp = await connect({ name: 'notes', command: ['node', FIXTURE], cwd: dir });
    const { store, supervisor: running } = await supervisor();
    const { provider } = await model([
      { name: 'notes__crash', args: {} },
      { name: 'notes__note_read', args: { path: 'a.txt' } },
      { name: 'notes__crash', args: {} },
      { name: 'notes__note_read', args: { path: 'a.txt' } },
    ]);
    const policy = Policy.empty().layer('mcp').allowTool('notes__*');
    const result = await running.run({ task: 'go', provider, policy, tools: mcp.tools() }).result;
    expect(result.status).toBe('finished');
    const observations = store.steps(result.rootId).flatMap((step) => step.observations);
    expect(observations.map((item) => item.isError)).toEqual([true, false, true, true]);
    expect(observations[0]?.content).toMatch(
      /stopped during the call .*whether crash acted is not known\. It was started again\./,
    );
    // Started again: the next call reached it.
    expect(observations[1]?.content).toBe('alpha\n');
    expect(observations[2]?.content).toMatch(/stopped again as it was restarted|stopped during the call/);
    expect(observations[3]?.content).toMatch(/stopped twice and is not started again; its tools are unavailable/);
    // Each crash was one call that reached the server, never sent again.
    expect(readFileSync(join(dir, 'crashes.txt'), 'utf8')).toBe('xx');
    expect(store.run(result.rootId)?.reply).toBe('all done');
  });

  it('refuses a server it cannot start, reach or understand, and a tool it cannot offer, naming the server', async () => {
    const missing = await McpServers.connect([{ name: 'ghost', command: ['no-such-mcp-server-binary'] }]).then(
      () => null,
      (error: unknown) => error as McpServerError,
    );
    expect(missing).toBeInstanceOf(McpServerError);
    expect(missing?.code).toBe(ErrorCode.McpServerFailed);
    expect(missing?.message).toMatch(/^MCP server ghost: /);
    expect(missing?.details).toMatchObject({ server: 'ghost' });
    // Dialling is a net act: refused by the policy before any request is made; asked, it goes to the approver.
    const web = await httpServer();
    const denyWeb = Policy.empty().layer('mcp').denyNet('127.0.0.1');
    await expect(McpServers.connect([{ name: 'web', url: web.url }], { policy: denyWeb })).rejects.toMatchObject({
      code: ErrorCode.McpServerFailed,
      message: expect.stringMatching(/^MCP server web: dialling 127\.0\.0\.1:\d+ is refused by the policy/),
      details: { rule: 'deny-net 127.0.0.1', layer: 'mcp' },
    });
    const askWeb = Policy.empty().layer('mcp').askNet('127.0.0.1');
    await expect(McpServers.connect([{ name: 'web', url: web.url }], { policy: askWeb })).rejects.toMatchObject({
      message: expect.stringContaining('no approver was given'),
    });
    const approved: string[] = [];
    const dialled = await connect({ name: 'web', url: web.url });
    await dialled.close();
    const viaApprover = await McpServers.connect([{ name: 'web', url: web.url }], {
      policy: askWeb,
      approver: new CallbackApprover((request) => {
        approved.push(`${request.act.kind} ${request.subject}`);
        return 'approve';
      }),
    });
    await viaApprover.close();
    expect(approved).toEqual([expect.stringMatching(/^net 127\.0\.0\.1:\d+$/)]);
    expect(web.calls).toEqual([]);
    // A port nobody listens on.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    await expect(
      McpServers.connect([{ name: 'away', url: `http://127.0.0.1:${port}/mcp` }], { connectTimeoutMs: 3_000 }),
    ).rejects.toMatchObject({
      code: ErrorCode.McpServerFailed,
      message: expect.stringContaining(`MCP server away: did not answer`),
    });
    // Bytes that are not JSON-RPC: no answer within the connect timeout, and the process is not left running.
    await expect(
      McpServers.connect([{ name: 'noise', command: ['node', FIXTURE, 'garbage'] }], { connectTimeoutMs: 1_500 }),
    ).rejects.toMatchObject({ code: ErrorCode.McpServerFailed, message: expect.stringMatching(/^MCP server noise: /) });
    // One good server and one bad one: neither is kept.
    await expect(
      McpServers.connect([
        { name: 'fine', command: ['node', FIXTURE], cwd: tempWorkspace() },
        { name: 'ghost', command: ['no-such-mcp-server-binary'] },
      ]),
    ).rejects.toMatchObject({ details: { server: 'ghost' } });
    // A tool whose schema is not JSON Schema, or whose name does not fit, is skipped and said; the rest are offered.
    const odd = await connect({ name: 'odd', command: ['node', FIXTURE, 'badschema'] });
    expect(odd.tools().map((item) => item.name)).toEqual(['odd__good']);
    expect(odd.skipped).toMatchObject([
      { server: 'odd', tool: 'bad', reason: expect.stringContaining('not a usable JSON Schema') },
      { server: 'odd', tool: 'has.dot', reason: expect.stringContaining('is not 1 to 64 letters') },
    ]);
    // Specs that cannot be right are refused before anything starts.
    for (const [spec, said] of [
      [{ name: 'a__b', command: ['node'] }, /name must be/],
      [{ name: 'x', command: [] }, /command must be a non-empty array/],
      [{ name: 'x', url: 'ftp://host' }, /url must be an http or https URL/],
      [{ name: 'x', command: ['node'], url: 'http://h' }, /either command .* or url/],
    ] as const) {
      await expect(McpServers.connect([spec as never])).rejects.toMatchObject({
        code: ErrorCode.InvalidArgument,
        message: expect.stringMatching(said),
      });
    }
  });
});
