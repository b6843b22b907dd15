/**
 * Classes a second adversarial pass found in what runs commands and reads files, each
 * through a real `runWith` over the scripted model server: a command that leaves its
 * group and changes its user before it is killed, a pipe handed to grep, files far too
 * large to read or rewrite, reads that never yield past the wall clock (driven in-process
 * on a clock the test moves, so the machine's speed decides nothing), and arguments
 * nested deeper than anything should walk.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, truncateSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../dist/clock.js';
import { Policy, runWith, TaskContract } from '../dist/index.js';
import { runInProcess } from './support/in-process.js';
import { processGone } from './support/processes.js';
import { openStore, serve, tempWorkspace, turns } from './support/workspace.js';

async function drive(
  root: string,
  calls: { name: string; args: Record<string, unknown>; rawArguments?: string }[],
  fullAccess = false,
) {
  const store = await openStore();
  const { provider } = await serve(turns([{ text: 'trying', toolCalls: calls }, { text: 'done' }]));
  let contract = TaskContract.workspace('probe', root);
  if (fullAccess) contract = contract.withFullAccess();
  const result = await runWith(contract, provider, store, Policy.permissive());
  const observations = store.steps(result.runId).flatMap((step) => step.observations);
  return { result, observations, store };
}

describe('a second look at commands and files', () => {
  it.runIf(process.getuid?.() === 0)(
    'kills a timed-out command that left its group and changed its user, and everything under it',
    async () => {
      const root = tempWorkspace();
      // Leaves the process group, records its host pid, drops to nobody (which clears the
      // parent-death signal unshare relies on), then waits five minutes.
      const program = [
        'import os, time',
        'os.setsid()',
        "open('pid', 'w').write(os.readlink('/proc/self'))",
        'os.setgroups([]); os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534)',
        'time.sleep(300)',
      ].join('\n');
      // With full access: contained, the command could not change its user at all (no capability is
      // left it); this is the floor's kill, which must hold where nothing else does.
      const { observations } = await drive(
        root,
        [{ name: 'exec', args: { argv: ['python3', '-c', program], timeout_secs: 2 } }],
        true,
      );
      expect(observations[0]?.content).toContain('timed out and was killed');
      const pid = Number(readFileSync(join(root, 'pid'), 'utf8'));
      expect(pid).toBeGreaterThan(0);
      expect(await processGone(pid)).toBe(true);
    },
    60_000,
  );

  it('skips a pipe given to grep instead of waiting on it for good', async () => {
    const root = tempWorkspace({ 'a.txt': 'needle\n' });
    execFileSync('mkfifo', [join(root, 'pipe')]);
    const { result, observations } = await drive(root, [
      { name: 'grep', args: { pattern: 'needle', path: 'pipe' } },
      { name: 'read_file', args: { path: 'pipe' } },
      { name: 'grep', args: { pattern: 'needle' } },
    ]);
    expect(result.outcome.kind).toBe('finished');
    expect(observations[0]?.content).toContain('no matches');
    expect(observations[1]?.content).toContain('not a regular file');
    expect(observations[2]?.content).toContain('a.txt:1:needle');
  }, 60_000);

  it('refuses to read in parts or rewrite a file far larger than any source file, without reading it', async () => {
    // Text first, past what the binary check samples, then a sparse tail: 2 GB on paper, a few bytes on disk.
    const root = tempWorkspace({ 'big.txt': `first line\n${'text line\n'.repeat(2000)}` });
    truncateSync(join(root, 'big.txt'), 2 * 1024 * 1024 * 1024);
    const { result, observations, store } = await drive(root, [
      { name: 'read_file', args: { path: 'big.txt', start_line: 1, end_line: 2 } },
      { name: 'edit_file', args: { path: 'big.txt', old_string: 'first', new_string: 'last' } },
      { name: 'write_file', args: { path: 'big.txt', content: 'small now\n' } },
    ]);
    expect(result.outcome.kind).toBe('finished');
    expect(observations[0]?.content).toContain('limit of 67108864 bytes for a file read in parts');
    expect(observations[1]?.content).toContain('above the write limit');
    expect(observations[2]?.content).toContain('above the write limit');
    const refusals = store.events(result.runId).filter((event) => event.type === 'refusal');
    expect(refusals.map((event) => event.rule)).toEqual(['read.ceiling', 'write.ceiling', 'write.ceiling']);
  }, 60_000);

  it('stops at the wall clock between calls that never yield', async () => {
    // Each ranged read of a 60 MB file is read, decoded and split on the agent's thread.
    const line = `${'x'.repeat(79)}\n`;
    const root = tempWorkspace({ 'log.txt': line.repeat(750_000) });
    // A write first, so none of the reads starts early while the completion streams.
    const calls = [
      { name: 'write_file', args: { path: 'note.txt', content: 'reading\n' } },
      ...Array.from({ length: 60 }, () => ({
        name: 'read_file',
        args: { path: 'log.txt', start_line: 1, end_line: 1 },
      })),
    ];
    // Each call takes half a second by the run's clock; what runs the calls never
    // yields to a timer, so the check between calls is what meets the passed deadline.
    const clock = new ManualClock(Date.now());
    const { provider } = await serve(turns([{ text: 'trying', toolCalls: calls }, { text: 'done' }]));
    const contract = TaskContract.workspace('probe', root).withBudget({ wallSecs: 2 });
    const { runId, exit, store } = await runInProcess(contract, provider, clock, {
      policy: Policy.permissive(),
      onLive: (data) => {
        if (data.type === 'tool-call-end') clock.advance(500);
      },
    });
    const observations = store.steps(runId).flatMap((step) => step.observations);
    expect(exit).toEqual({ kind: 'ended', status: 'budget-exhausted' });
    expect(store.run(runId)?.status).toBe('budget-exhausted');
    expect(observations.at(-1)?.content).toMatch(/^not run/);
  }, 120_000);

  it('refuses arguments nested far deeper than any tool takes, and the run goes on', async () => {
    const root = tempWorkspace({ 'a.txt': 'hello\n' });
    const depth = 100_000;
    const raw = `{"path":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`;
    const { result, observations } = await drive(root, [
      { name: 'read_file', args: {}, rawArguments: raw },
      { name: 'read_file', args: { path: 'a.txt' } },
    ]);
    expect(result.outcome).toEqual({ kind: 'finished', reply: 'done' });
    expect(observations[0]?.content).toContain('nested more than 64 levels deep');
    expect(observations[1]?.content).toBe('hello\n');
    expect(existsSync(join(root, 'a.txt'))).toBe(true);
  }, 60_000);
});
