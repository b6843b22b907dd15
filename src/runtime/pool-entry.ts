/**
 * What a piscina pool of the runtime is given to load on its threads: the CommonJS
 * stand-in (./thread-entry.cts, which says why) and the real entry it imports; and the
 * small bounded pools the tools run work on that may not finish (a search's regular
 * expression, a hostile document): made at first use, idle threads gone, a task past its
 * bound aborted, which ends the thread running it.
 */
import { fileURLToPath } from 'node:url';
import type { Piscina } from 'piscina';

const THREAD_ENTRY = fileURLToPath(new URL('./thread-entry.cjs', import.meta.url));

/** piscina's `filename` and `workerData` for a pool whose threads run `entry`'s default export. */
export function poolEntry(entry: URL): { filename: string; workerData: { entry: string } } {
  return { filename: THREAD_ENTRY, workerData: { entry: entry.href } };
}

/** A small pool of `entry`'s threads, made at the first call: none kept idle, each running one task at a time. */
export function boundedPool(
  entry: URL,
  options: {
    maxThreads: number;
    idleMs: number;
    resourceLimits?: { maxOldGenerationSizeMb: number; maxYoungGenerationSizeMb: number };
  },
): () => Promise<Piscina> {
  let pool: Promise<Piscina> | null = null;
  return () => {
    pool ??= import('piscina').then(
      ({ Piscina }) =>
        new Piscina({
          ...poolEntry(entry),
          minThreads: 0,
          maxThreads: options.maxThreads,
          idleTimeout: options.idleMs,
          concurrentTasksPerWorker: 1,
          ...(options.resourceLimits ? { resourceLimits: options.resourceLimits } : {}),
        }),
    );
    return pool;
  };
}

/**
 * Runs `task` on `pool` until it answers, `signal` fires (the run's deadline or a cancel:
 * `stopped: 'run'`) or `limitMs` pass (`stopped: 'limit'`); a thread that failed under it
 * is `failed`.
 */
export async function runBounded<T>(
  pool: () => Promise<Piscina>,
  task: unknown,
  signal: AbortSignal,
  limitMs: number,
): Promise<{ done: T } | { stopped: 'run' | 'limit' } | { failed: unknown }> {
  if (signal.aborted) return { stopped: 'run' };
  const limit = new AbortController();
  const timer = setTimeout(() => limit.abort(), limitMs);
  try {
    return { done: (await (await pool()).run(task, { signal: AbortSignal.any([signal, limit.signal]) })) as T };
  } catch (error) {
    if (signal.aborted) return { stopped: 'run' };
    if (limit.signal.aborted) return { stopped: 'limit' };
    return { failed: error };
  } finally {
    clearTimeout(timer);
  }
}
