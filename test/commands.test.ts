/**
 * Commands inside a run: shell lines checked stage by stage before anything starts,
 * wrappers unwrapped, the floor under every policy, every refusal in the trace naming its
 * rule and layer, and long-lived commands killed (whole process group) when the run ends.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type HttpProviderSpec, Policy, runWith, Store, TaskContract } from '../dist/index.js';
import { assistantTurns, type ModelScript, ScriptedModelServer } from '../dist/testing/index.js';
import { noneLeftUnder, tempStorePath } from './support/processes.js';
import { later } from './support/workspace.js';

async function setup(list: Awaited<ReturnType<ModelScript>>[]) {
  const root = mkdtempSync(join(tmpdir(), 'io-harness-commands-'));
  later(() => rmSync(root, { recursive: true, force: true }));
  const store = await Store.open(tempStorePath());
  later(() => store.close());
  const server = await ScriptedModelServer.start(
    (call) => list[Math.min(assistantTurns(call), list.length - 1)] as Awaited<ReturnType<ModelScript>>,
  );
  later(() => server.close());
  const provider: HttpProviderSpec = { kind: 'openai', model: 'm', baseUrl: `${server.url}/v1`, apiKey: 'k' };
  return { root, store, provider };
}

const policy = Policy.default()
  .layer('project')
  .allowExec('echo*')
  .allowExec('cat*')
  .allowExec('ls*')
  .allowExec('sleep*')
  .allowExec('node -e*')
  .denyExec('curl*');

describe('commands in a run', () => {
  it('runs an allowed line, refuses the rest before anything starts, and names rule and layer for every refusal', async () => {
    const { root, store, provider } = await setup([
      {
        text: 'commands',
        toolCalls: [
          { name: 'shell', args: { command: 'echo hello > out.txt && cat out.txt' } },
          { name: 'shell', args: { command: 'echo first > first.txt; curl https://example.com' } },
          { name: 'shell', args: { command: 'echo $(id)' } },
          { name: 'exec', args: { argv: ['env', 'X=1', 'curl', 'x'] } },
          { name: 'write_file', args: { path: 'io.toml', content: '[policy]\n' } },
        ],
      },
      { text: 'done' },
    ]);
    const result = await runWith(TaskContract.workspace('commands', root), provider, store, policy);
    expect(result.outcome.kind).toBe('finished');
    const [ran, mixed, substituted, wrapped, config] = store.steps(result.runId)[0]?.observations ?? [];
    expect(ran?.content).toContain('exited with status 0');
    expect(ran?.content).toContain('hello');
    expect(readFileSync(join(root, 'out.txt'), 'utf8')).toBe('hello\n');
    // Checked whole before the first stage: the allowed first stage of a refused line never ran.
    expect(mixed?.isError).toBe(true);
    expect(existsSync(join(root, 'first.txt'))).toBe(false);
    expect(substituted?.isError).toBe(true);
    expect(wrapped?.isError).toBe(true);
    expect(config?.isError).toBe(true);
    expect(existsSync(join(root, 'io.toml'))).toBe(false);
    const refusals = store.events(result.runId).filter((event) => event.type === 'refusal');
    expect(refusals.map((event) => [event.tool, event.rule, event.layer])).toEqual([
      ['shell', 'deny-exec curl*', 'project'],
      ['shell', 'shell.unsupported', 'boundary'],
      ['exec', 'deny-exec curl*', 'project'],
      ['write_file', 'deny-write io.toml', 'floor'],
    ]);
    for (const refusal of refusals) expect(refusal.reason.length).toBeGreaterThan(10);
  });

  it('keeps a long-lived command across steps and kills its whole process group when the run ends', async () => {
    const { root, store, provider } = await setup([
      {
        text: 'start',
        toolCalls: [
          {
            name: 'shell_start',
            args: {
              command:
                // Its pid as its own PID namespace numbers it: proof that it ran.
                "node -e \"require('fs').writeFileSync('pid.txt', require('fs').readlinkSync('/proc/self')); console.log('up'); setInterval(() => {}, 1000)\"",
            },
          },
        ],
      },
      { text: 'poll', toolCalls: [{ name: 'shell_poll', args: { handle: 'sh-1', wait_secs: 2 } }] },
      { text: 'done, leaving it running' },
    ]);
    const result = await runWith(TaskContract.workspace('serve', root), provider, store, policy);
    expect(result.outcome.kind).toBe('finished');
    const [started] = store.steps(result.runId)[0]?.observations ?? [];
    expect(started?.content).toContain('started sh-1');
    const [polled] = store.steps(result.runId)[1]?.observations ?? [];
    expect(polled?.content).toMatch(/^running/);
    expect(polled?.content).toContain('up');
    // It ran (it wrote the pid its namespace gave it), and nothing of it is left working in the workspace.
    expect(Number(readFileSync(join(root, 'pid.txt'), 'utf8'))).toBeGreaterThan(0);
    expect(await noneLeftUnder(root)).toBe(true);
    expect(store.intents(result.runId)).toMatchObject([{ kind: 'shell_start' }]);
  });
});
