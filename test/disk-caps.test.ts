/**
 * The disk's caps: on by default (one file, and what all a run's commands write), held by
 * the containment helper's count of what a command's processes write to storage, each
 * command held to what the run has left and none started once it is spent; lifted only in
 * so many words (null). Real writes to a real disk, on each rung that has the helper.
 */
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { contractFromJSON, Policy, runWith, TaskContract } from '../dist/index.js';
import { DEFAULT_DISK_CAPS } from '../dist/runtime/exec/containment/boundary.js';
import { hostRungs } from '../dist/runtime/exec/containment/rungs.js';
import { executorFor } from '../dist/runtime/exec/factory.js';
import { later, openStore, serve, tempWorkspace, turns } from './support/workspace.js';

const rungs = hostRungs();
const HELPED = ['bubblewrap', 'landlock', 'namespaces'] as const;

function available(rung: (typeof HELPED)[number]): boolean {
  const probe = rungs[rung];
  if (probe.ok && (rung !== 'namespaces' || rungs.mounts)) return true;
  console.log(`containment rung ${rung}: not available here (${probe.ok ? 'no mounts' : probe.reason}); not run`);
  return false;
}

/** Bytes in the regular files directly in `dir`. */
const bytesIn = (dir: string) =>
  readdirSync(dir)
    .map((name) => statSync(join(dir, name)))
    .filter((stat) => stat.isFile())
    .reduce((sum, stat) => sum + stat.size, 0);

const CAP = 3_000_000;

describe('the disk caps', () => {
  for (const rung of HELPED) {
    it(`holds a run's commands to what they may write in all, and starts none once it is spent, on the ${rung} rung`, async () => {
      if (!available(rung)) return;
      const root = tempWorkspace();
      const executor = executorFor({
        purpose: 'hook',
        root,
        policy: Policy.default(),
        sandbox: { access: 'workspace-write', writableRoots: [], rung, caps: { writtenBytes: CAP } },
      });
      later(() => executor.close());
      const run = (command: string) =>
        executor.run({
          argv: ['sh', '-c', command],
          purpose: 'exec',
          cwd: root,
          timeoutMs: 60_000,
          outputLimit: 4096,
          env: { PATH: process.env.PATH as string },
        });
      // Under the cap, each command alone and the two together: they run to their end.
      const first = await run('head -c 1000000 /dev/zero > a.bin && sync && echo one');
      expect(first).toMatchObject({ started: true, exitStatus: 0, stdout: 'one\n' });
      expect(first.capReached).toBeUndefined();
      const second = await run('head -c 1500000 /dev/zero > b.bin && sync && echo two');
      expect(second).toMatchObject({ started: true, exitStatus: 0 });
      // A third that writes on and on, in small files each under any per-file cap: killed past what was left.
      const third = await run(
        'i=0; while [ $i -lt 200 ]; do head -c 100000 /dev/zero > c$i.bin; sync; sleep 0.05; i=$((i+1)); done; echo three',
      );
      expect(third.capReached).toEqual({ cap: 'writtenBytes', limit: CAP });
      expect(third.stdout).not.toContain('three');
      expect(existsSync(join(root, 'c199.bin'))).toBe(false);
      // Checked every tenth of a second: it may run past the cap by what it writes in one, no more.
      expect(bytesIn(root)).toBeLessThan(CAP + 1_500_000);
      // Spent: the next command is not started, and says why and what to do.
      const fourth = await run('echo four > d.txt');
      expect(fourth.started).toBe(false);
      expect(fourth.error).toMatch(/writtenBytes cap \(3000000\), so no more commands are started/);
      expect(fourth.error).toMatch(/raises the cap .* or lifts it \(null\)/);
      expect(existsSync(join(root, 'd.txt'))).toBe(false);
      // A background command too.
      const job = executor.start({
        argv: ['sh', '-c', 'echo five > e.txt'],
        cwd: root,
        outputLimit: 4096,
        env: { PATH: process.env.PATH as string },
        purpose: 'shell_start',
      });
      await job.settle(10_000);
      expect(job.poll()).toMatch(/could not start: .*writtenBytes cap/);
      expect(existsSync(join(root, 'e.txt'))).toBe(false);
    });
  }

  it("counts a background command's writes against the run when it ends", async () => {
    if (!available('bubblewrap')) return;
    const root = tempWorkspace();
    const executor = executorFor({
      purpose: 'hook',
      root,
      policy: Policy.default(),
      sandbox: { access: 'workspace-write', writableRoots: [], rung: 'bubblewrap', caps: { writtenBytes: CAP } },
    });
    later(() => executor.close());
    const job = executor.start({
      argv: ['sh', '-c', 'head -c 3500000 /dev/zero > big.bin; sync'],
      cwd: root,
      outputLimit: 4096,
      env: { PATH: process.env.PATH as string },
      purpose: 'shell_start',
    });
    await job.settle(30_000);
    // Its count came back when it ended: the run has nothing left.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const after = await executor.run({
      argv: ['true'],
      purpose: 'exec',
      cwd: root,
      timeoutMs: 10_000,
      outputLimit: 4096,
      env: { PATH: process.env.PATH as string },
    });
    expect(after.started).toBe(false);
    expect(after.error).toMatch(/writtenBytes cap/);
  });

  it('puts both disk caps on every contract unless it lifts them, in so many words, and says so in the trace', async () => {
    if (!available('bubblewrap')) return;
    const root = tempWorkspace();
    writeFileSync(join(root, 'w.sh'), 'echo hi\n');
    const exec = { text: 'run', toolCalls: [{ name: 'exec', args: { argv: ['sh', 'w.sh'] } }] };
    const policy = Policy.default().layer('app').allowExec('sh *');
    const caps = async (contract: TaskContract) => {
      const store = await openStore();
      const { provider } = await serve(turns([exec, { text: 'done' }]));
      const result = await runWith(contract, provider, store, policy);
      expect(result.outcome.kind).toBe('finished');
      const contained = store.events(result.runId).find((event) => event.type === 'contained') as
        | { caps: Record<string, string> }
        | undefined;
      return Object.keys(contained?.caps ?? {}).sort();
    };
    expect(await caps(TaskContract.workspace('go', root))).toEqual(['fileBytes', 'writtenBytes']);
    const lifted = TaskContract.workspace('go', root).withSandbox({ caps: { fileBytes: null, writtenBytes: null } });
    expect(await caps(lifted)).toEqual([]);
    // Lifted survives the contract's JSON (a resumed run's contract is read back from it).
    expect(contractFromJSON(JSON.stringify(lifted.toJSON())).toJSON().sandbox?.caps).toEqual({
      fileBytes: null,
      writtenBytes: null,
    });
    expect(() =>
      TaskContract.workspace('go', root).withSandbox({ caps: { cpuSecs: null as unknown as number } }),
    ).toThrow(/caps\.cpuSecs must be a whole number above 0, got null/);
    expect(DEFAULT_DISK_CAPS).toEqual({ fileBytes: 4 * 1024 ** 3, writtenBytes: 16 * 1024 ** 3 });
  });
});
