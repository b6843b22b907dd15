/**
 * Every child process a run causes goes through the one executor factory, contained as the
 * run is, and what ran it names its containment: a command gate retried after the run
 * ended (retryGate), a configuration's `run` hook, and an MCP stdio server connected
 * without a word about containment. Each runs code that tries a write outside the
 * workspace and a dial to a loopback listener the test owns and no policy declares,
 * directly and through the egress proxy (test/fixtures/escape-attempts.cjs); the test looks
 * on the host itself: the file is not there and the listener saw no connection. The
 * address floor is lifted for these runs, so what stops the proxied dial is the policy.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { Config, Policy, retryGate, runWith, TaskContract, Verification } from '../dist/index.js';
import { McpServers } from '../dist/mcp/index.js';
import { hostRungs } from '../dist/runtime/exec/containment/rungs.js';
import { later, openStore, serve, setEnv, supervisorOnStore, tempWorkspace, turns } from './support/workspace.js';

const ATTEMPTS = fileURLToPath(new URL('./fixtures/escape-attempts.cjs', import.meta.url));
const MCP_SERVER = fileURLToPath(new URL('./fixtures/mcp-escape-server.mjs', import.meta.url));

const rungs = hostRungs();
/** The rungs that confine writes and carry the egress relay here; one missing is named, never passed over in silence. */
const RUNGS = (['bubblewrap', 'landlock', 'namespaces'] as const).filter((rung) => {
  const ok = rungs[rung].ok && rungs.helper.ok && (rung !== 'namespaces' || rungs.mounts);
  if (!ok) console.log(`executor factory on the ${rung} rung: not tested, not available here`);
  return ok;
});

/** A loopback listener that counts who reached it. */
async function listener(): Promise<{ port: number; reached: () => number }> {
  let reached = 0;
  const server = createServer((socket) => {
    reached++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  later(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { port: (server.address() as { port: number }).port, reached: () => reached };
}

/**
 * A policy under which commands have the egress proxy (it names a host) but not the
 * listener; the floor lifted, so the proxy's refusal of 127.0.0.1 is the policy's.
 */
function egressPolicy(): Policy {
  setEnv({ IO_HARNESS_ALLOW_LOCAL_ADDRESSES: '1' });
  return Policy.default().layer('test').allowWrite('**').allowExec('*').allowNet('registry.example');
}

/** What the attempts printed: neither the write nor either dial got through. */
function expectStopped(seen: { write: string; direct: string; proxy: string }) {
  expect(seen.write).not.toBe('wrote');
  expect(seen.direct).not.toBe('connected');
  expect(seen.proxy).toMatch(/^HTTP\/1\.1 403/);
}

it('is tested on at least one confining rung here', () => {
  expect(RUNGS.length > 0 || process.platform !== 'linux').toBe(true);
});

describe.each(RUNGS)('the executor factory on the %s rung', (rung) => {
  it('contains a command gate retried after the run, with the run’s egress rules, and the trace names it', async () => {
    const policy = egressPolicy();
    const target = await listener();
    const outside = join(tempWorkspace(), 'escaped.txt');
    const root = tempWorkspace({ 'gate.cjs': 'process.exit(1);\n' });
    const store = await openStore();
    const { provider } = await serve(turns([{ text: 'done' }]));
    const contract = TaskContract.workspace('make the gate pass', root)
      .withSandbox({ rung })
      .withRetries(0)
      .withVerification(Verification.command(['node', 'gate.cjs', outside, String(target.port)]));
    const result = await runWith(contract, provider, store, policy);
    expect(result.outcome.kind).toBe('gate-failed');
    // The workspace the run left now holds code that tries its way out; retryGate runs it.
    writeFileSync(join(root, 'gate.cjs'), readFileSync(ATTEMPTS, 'utf8'));
    const retried = await retryGate(store, result.runId);
    expect(retried.verdict).toBe('failed');
    expect(existsSync(outside)).toBe(false);
    expect(target.reached()).toBe(0);
    const events = store.events(result.runId);
    const output = events.filter((event) => event.type === 'gate-output').at(-1) as { stdout: string };
    expectStopped(JSON.parse(output.stdout));
    // The retried evaluation names its containment, and the containment it chose is recorded beside it.
    const evaluated = events.filter((event) => event.type === 'gate-evaluated');
    expect(evaluated.map((event) => [event.retried, event.containment])).toEqual([
      [false, rung],
      [true, rung],
    ]);
    // The egress proxy's refusal of the listener is in the trace, as a run's own would be.
    const refusals = events.filter((event) => event.type === 'refusal');
    expect(refusals.some((event) => event.reason.includes(`127.0.0.1:${target.port}`))).toBe(true);
    const contained = events.filter((event) => event.type === 'contained');
    expect(contained.at(-1)).toMatchObject({ rung, network: 'proxy', egress: 'proxy' });
    expect(contained.length).toBe(2);
  });

  it('contains a configuration’s run hook, and the hooks name their containment', async () => {
    const target = await listener();
    setEnv({ IO_HARNESS_ALLOW_LOCAL_ADDRESSES: '1' });
    const outside = join(tempWorkspace(), 'escaped.txt');
    const root = tempWorkspace({ 'a.txt': 'a\n' });
    const userFile = join(tempWorkspace(), 'io.toml');
    writeFileSync(
      userFile,
      [
        '[sandbox]',
        `rung = "${rung}"`,
        '[[policy.layer]]',
        'name = "test"',
        '[[policy.layer.rule]]',
        'effect = "allow"',
        'act = "net"',
        'pattern = "registry.example"',
        '[[hook]]',
        'name = "escape"',
        'events = ["run-end"]',
        `run = ["node", ${JSON.stringify(ATTEMPTS)}, ${JSON.stringify(outside)}, "${target.port}"]`,
      ].join('\n'),
    );
    const config = Config.discover(root, { userFile });
    const { supervisor } = await supervisorOnStore();
    const hooks = config.hooks();
    later(() => hooks.close());
    supervisor.observe(hooks);
    const { provider } = await serve(() => ({ text: 'done' }));
    const handle = supervisor.run({ contract: config.contract('answer'), provider, policy: config.policy() });
    expect((await handle.result).status).toBe('finished');
    await hooks.idle();
    expect(existsSync(outside)).toBe(false);
    expect(target.reached()).toBe(0);
    expect(hooks.contained()).toMatchObject({ rung, network: 'proxy', egress: 'proxy' });
    expect(hooks.failures).toHaveLength(1);
    expect(hooks.failures[0]).toMatchObject({ hook: 'escape', containment: rung });
    expect(hooks.failures[0]?.message).toMatch(/exited with status 1/);
  });

  it('contains an MCP stdio server (by default on the strongest rung), and names its containment', async () => {
    const policy = egressPolicy();
    const target = await listener();
    const outside = join(tempWorkspace(), 'escaped.txt');
    const dir = tempWorkspace();
    const rooted =
      rung === RUNGS[0]
        ? {}
        : { contain: { sandbox: { access: 'workspace-write', writableRoots: [], rung, caps: {} } } };
    const mcp = await McpServers.connect(
      [{ name: 'escape', command: ['node', MCP_SERVER, outside, String(target.port)], cwd: dir }],
      { policy, connectTimeoutMs: 20_000, ...(rooted as object) },
    );
    later(() => mcp.close());
    expect(existsSync(outside)).toBe(false);
    expect(target.reached()).toBe(0);
    expectStopped(JSON.parse(readFileSync(join(dir, 'seen.json'), 'utf8')));
    expect(mcp.contained('escape')).toMatchObject({ rung, network: 'proxy', egress: 'proxy' });
  });
});
