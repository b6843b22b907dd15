/**
 * The ActorHost seam: one test body drives a 20-agent tree with mailbox traffic in a
 * child process, drops the process mid-tree with a real SIGKILL (no close: the host is
 * gone with everything it held), and resumes the tree from the store in a new process —
 * once with every actor on the calling thread (`isolation: 'in-process'`, which starts no
 * worker thread at all) and once on the piscina pool. Both leave the same trace and ledger,
 * and the same as a run that was never dropped.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../dist/testing/index.js';
import { SQLITE } from './support/backends.js';
import { harness, moduleScript } from './support/harness.js';
import { checkInvariantsOf, snapshotOf, type TreeSnapshot } from './support/invariants.js';
import { Driver, type DriverConfig } from './support/processes.js';

type Isolation = 'in-process' | 'shared';

/** The tree: a root that spawns 20 workers in batches of 5; even ones message their partner, every tenth waits on a grandchild. */
function config(isolation: Isolation, store: string): DriverConfig {
  return {
    store,
    mode: 'run',
    wireScript: 'tree-wire#treeScript',
    options: { workers: 20, perStep: 5 },
    supervisor: { isolation, maxConcurrentAgents: 6 },
    run: { budget: { steps: 400, tokens: 50_000 } },
  };
}

async function drive(settings: DriverConfig): Promise<Driver> {
  const driver = new Driver(settings);
  await driver.exited;
  return driver;
}

/** Runs the tree on `isolation`, dropped at `killAt` (or never), then resumed; what the store holds after. */
async function dropAndResume(
  isolation: Isolation,
  killAt: string | null,
): Promise<{ snapshot: TreeSnapshot; workers: number | undefined }> {
  const { store } = await SQLITE.fresh();
  const first = await drive({ ...config(isolation, store), killAt });
  const rootId = first.rootId as string;
  const acks = [...first.acks];
  if (killAt) {
    // Dropped mid-tree: some steps committed, no result.
    expect((await first.exited).signal, first.stderr).toBe('SIGKILL');
    expect(first.result).toBeUndefined();
    expect(acks.length).toBeGreaterThan(0);
    const again = await drive({ ...config(isolation, store), mode: 'resume', rootId });
    expect(again.error, again.stderr).toBeUndefined();
    expect(again.result?.status).toBe('finished');
    acks.push(...again.acks);
  } else {
    expect(first.result?.status, first.stderr).toBe('finished');
  }
  const rows = await SQLITE.rows(store, rootId);
  checkInvariantsOf(rows, acks);
  return { snapshot: snapshotOf(rows, rootId), workers: first.workers };
}

describe('the actor hosts', () => {
  it('drive a 20-agent tree dropped mid-tree and resumed from the store to the same trace and ledger, in-process and on piscina', async () => {
    const reference = await dropAndResume('in-process', null);
    expect(reference.snapshot.runs).toBe(23);
    expect(reference.snapshot.rootReply).toBe('collected 20 reports');
    // Mid-tree: the 25th batch of writes with a step in it, just after it committed.
    const inProcess = await dropAndResume('in-process', 'commitStep:25:after');
    const pool = await dropAndResume('shared', 'commitStep:25:after');
    // The in-process host started no worker thread, store actor included; the pool did.
    expect(inProcess.workers).toBe(0);
    expect(reference.workers).toBe(0);
    expect(pool.workers).toBeGreaterThan(0);
    expect(inProcess.snapshot).toEqual(reference.snapshot);
    expect(pool.snapshot).toEqual(reference.snapshot);
  });

  it('gives in-process actors the supervisor’s injected clock: every step is stamped with its time', async () => {
    const clock = new ManualClock(1_234_567_000_000);
    const h = await harness({ isolation: 'in-process', clock });
    try {
      const handle = h.supervisor.run({
        task: 'three steps',
        provider: moduleScript('loop', { steps: 2 }),
        budget: { steps: 10, tokens: 10_000 },
      });
      expect((await handle.result).status).toBe('finished');
      const steps = h.store.steps(handle.rootId);
      expect(steps.map((step) => step.seq)).toEqual([1, 2, 3]);
      // Read off the injected clock, not the system's (which is years past it).
      for (const step of steps) expect(step.at).toBe(1_234_567_000_000);
      expect(h.store.runs(handle.rootId)[0]?.createdAt).toBe(1_234_567_000_000);
    } finally {
      await h.close();
    }
  });
});
