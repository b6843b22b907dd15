/**
 * Actors hosted many to a thread: a tree of 100 agents runs on the pool's threads, the
 * pool starts with one thread and grows to its size only for a tree wide enough, an
 * actor whose thread dies takes only the actors that thread hosted (each tree rejected
 * with a typed error, resumable), and with `isolation: 'thread'` each agent has a thread
 * of its own. Every agent names the thread that hosted it (support/scripts/threads.mjs
 * runs in the agents' threads), so the threads are counted, not assumed.
 */
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { HarnessError, type Store } from '../dist/index.js';
import { type Harness, harness, moduleScript } from './support/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/** The thread each run of a tree named in its answer. */
function threadsOf(store: Store, rootId: string): string[] {
  return store.runs(rootId).map((run) => {
    expect(run.reply).toMatch(/^thread \d+$/);
    return run.reply as string;
  });
}

/** The thread a run named in its first step. */
function firstStepThread(store: Store, runId: string): string {
  const text = store.steps(runId)[0]?.completion.text ?? '';
  expect(text).toMatch(/^thread \d+$/);
  return text;
}

describe('actors on a pool of threads', () => {
  it('runs a tree of 100 agents on at most the pool’s threads, every agent finishing', async () => {
    h = await harness({ threads: 2, maxConcurrentAgents: 100, maxTotalAgents: 101 });
    const handle = h.supervisor.run({
      task: 'fan out',
      provider: moduleScript('threads', { children: 100, steps: 2, latencyMs: 20 }),
    });
    const result = await handle.result;
    expect(result).toMatchObject({ status: 'finished', runs: 101 });
    const runs = h.store.runs(handle.rootId);
    expect(runs.filter((run) => run.status === 'finished')).toHaveLength(101);
    const threads = new Set(threadsOf(h.store, handle.rootId));
    expect(threads.size).toBeGreaterThanOrEqual(1);
    expect(threads.size).toBeLessThanOrEqual(2);
    // Never the main thread.
    expect(threads.has('thread 0')).toBe(false);
    expect(h.supervisor.threads).toEqual({ isolation: 'shared', live: 2 });
  });

  it('boots one thread, keeps a lone agent on it, and grows to `threads` for a wide tree, every thread hosting some', async () => {
    h = await harness({ threads: 3, maxConcurrentAgents: 10, maxTotalAgents: 11 });
    expect(h.supervisor.threads).toEqual({ isolation: 'shared', live: 1 });
    const lone = h.supervisor.run({ task: 'alone', provider: moduleScript('threads', { steps: 2 }) });
    expect(await lone.result).toMatchObject({ status: 'finished', runs: 1 });
    expect(h.supervisor.threads).toEqual({ isolation: 'shared', live: 1 });
    const wide = h.supervisor.run({
      task: 'fan out',
      // Every child lives through 3 calls of 50 ms, all at once: more live agents than threads.
      provider: moduleScript('threads', { children: 10, steps: 2, latencyMs: 50 }),
    });
    expect(await wide.result).toMatchObject({ status: 'finished', runs: 11 });
    expect(h.supervisor.threads).toEqual({ isolation: 'shared', live: 3 });
    expect(new Set(threadsOf(h.store, wide.rootId)).size).toBe(3);
  });

  it('stops growing when a new thread cannot start: the agent it took is rejected, resumable, and resumes on the threads there are', async () => {
    const marker = join(tmpdir(), `io-harness-no-threads-${process.pid}-${Date.now()}`);
    const before = process.env.IO_HARNESS_TEST_THREAD_START_FAILS;
    // Read by every agent thread as it starts: once the root writes the file, none can.
    process.env.IO_HARNESS_TEST_THREAD_START_FAILS = marker;
    try {
      h = await harness({ threads: 3, maxConcurrentAgents: 2, maxTotalAgents: 2 });
      // The root waits on its child; the child's thread would be a new one, which fails to start.
      const handle = h.supervisor.run({
        task: 'wait on a child',
        provider: moduleScript('threads', { children: 1, steps: 1, waitOnChildren: true, failNewThreads: marker }),
      });
      const failed = await handle.result.then(
        () => null,
        (error: unknown) => error,
      );
      expect(HarnessError.isInstance(failed) && failed.code).toBe('ACTOR_EXITED');
      expect((failed as Error).message).toMatch(/exited with code: 70/);
      // The pool grows no more: the resumed child goes to the thread there is, not to another that would fail.
      const resumed = await h.supervisor.resume(handle.rootId);
      expect(await resumed.result).toMatchObject({ status: 'finished', runs: 2 });
      expect(h.supervisor.threads).toEqual({ isolation: 'shared', live: 1 });
      expect(new Set(threadsOf(h.store, handle.rootId)).size).toBe(1);
    } finally {
      if (before === undefined) delete process.env.IO_HARNESS_TEST_THREAD_START_FAILS;
      else process.env.IO_HARNESS_TEST_THREAD_START_FAILS = before;
      rmSync(marker, { force: true });
    }
  });

  it('gives each agent a thread of its own with isolation: thread', async () => {
    h = await harness({ isolation: 'thread', maxConcurrentAgents: 6 });
    const handle = h.supervisor.run({
      task: 'fan out',
      // Every child lives through 3 calls of 100 ms, all at once: none can wait for another's thread.
      provider: moduleScript('threads', { children: 6, steps: 2, latencyMs: 100 }),
    });
    expect(await handle.result).toMatchObject({ status: 'finished', runs: 7 });
    const children = h.store.runs(handle.rootId).filter((run) => run.parentId !== null);
    const threads = new Set(children.map((run) => run.reply));
    expect(threads.size).toBe(6);
    expect(h.supervisor.threads.isolation).toBe('thread');
  });

  it('takes down only the actors a dying thread hosted; each of their trees is rejected, resumable, and resumes', async () => {
    h = await harness({ threads: 2 });
    const marker = join(dirname(h.store.path), 'thread-exited');
    rmSync(marker, { force: true });
    // Six one-agent trees over two threads; one of them ends its thread at its third step.
    const handles = Array.from({ length: 6 }, (_, i) =>
      (h as Harness).supervisor.run({
        task: `tree ${i}`,
        provider: moduleScript('threads', {
          steps: 6,
          latencyMs: 60,
          ...(i === 0 ? { exitAtStep: 3, marker } : {}),
        }),
      }),
    );
    const outcomes = await Promise.all(
      handles.map((handle) =>
        handle.result.then(
          () => null,
          (error: unknown) => error,
        ),
      ),
    );
    const store = h.store;
    const dying = firstStepThread(store, handles[0]?.rootId as string);
    const rejected = handles.filter((_, i) => outcomes[i] !== null);
    const finished = handles.filter((_, i) => outcomes[i] === null);
    // Exactly the trees whose actor shared the dying thread were rejected, each with a typed error.
    expect(rejected.map((handle) => handle.rootId).sort()).toEqual(
      handles
        .filter((handle) => firstStepThread(store, handle.rootId) === dying)
        .map((handle) => handle.rootId)
        .sort(),
    );
    expect(rejected.length).toBeGreaterThanOrEqual(1);
    expect(finished.length).toBeGreaterThanOrEqual(1);
    for (const [i, outcome] of outcomes.entries()) {
      if (outcome === null) continue;
      expect(HarnessError.isInstance(outcome) && outcome.code).toBe('ACTOR_EXITED');
      expect((outcome as Error).message).toContain(`supervisor.resume("${handles[i]?.rootId}")`);
    }
    for (const handle of finished) {
      expect(store.run(handle.rootId)?.status).toBe('finished');
      expect(firstStepThread(store, handle.rootId)).not.toBe(dying);
    }
    // The rejected trees are resumable, from their last committed step, and finish.
    for (const handle of rejected) {
      const run = store.run(handle.rootId);
      expect(run?.status).toBe('running');
      const before = run?.lastSeq ?? 0;
      // Its lease is given back as the tree stops.
      for (let tries = 0; store.run(handle.rootId)?.lease.owner !== null && tries < 200; tries++) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const resumed = await h.supervisor.resume(handle.rootId);
      expect(await resumed.result).toMatchObject({ status: 'finished' });
      const seqs = store.steps(handle.rootId).map((step) => step.seq);
      expect(seqs).toEqual(Array.from({ length: 7 }, (_, k) => k + 1));
      expect(seqs.length).toBeGreaterThan(before);
    }
  });

  it('closes a pool while its threads are still starting without taking the process down', () => {
    // Node 20.19+ requires an ES module entry synchronously, and a thread ended inside that
    // is a fatal error for the whole process; the pools load a CommonJS stand-in instead.
    // (The window is narrow: without the stand-in, about one run in two of this dies here.)
    const churn = spawnSync(
      process.execPath,
      [fileURLToPath(new URL('./support/scripts/pool-churn.mjs', import.meta.url)), '60'],
      { encoding: 'utf8', timeout: 120_000 },
    );
    expect(churn.stderr).not.toContain('FATAL');
    expect(churn.stdout.trim()).toBe('survived');
    expect(churn.status).toBe(0);
  });
});
