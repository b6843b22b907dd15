/**
 * grep and find matching under a time bound. A regular expression runs to its end on the
 * thread that started it (nothing can interrupt it there), so the matching runs on a
 * worker thread of a small pool, and a task past its bound is aborted: piscina terminates
 * the worker running an aborted task, and starts a fresh one for the next.
 *
 * The pool is made on the first search (a run that never searches pays nothing, and an
 * agent thread starts without loading it), has one thread that exits when idle, and an
 * idle worker is unref'd, so the pool never keeps a process alive.
 */
import { boundedPool, runBounded } from '../pool-entry.js';
import type { ToolResult } from '../tools/tool.js';
import type { SearchOutcome, SearchTask } from './search.js';

/** The longest one grep or find may run, unless the run's own deadline (or a cancel) comes first. */
export const SEARCH_LIMIT_MS = 10_000;

/** How long an idle search thread lives before it exits. */
const IDLE_MS = 5_000;

const searchPool = boundedPool(new URL('./search-worker.js', import.meta.url), { maxThreads: 1, idleMs: IDLE_MS });

/**
 * Runs a search task on the pool: its outcome; or, when it runs past `limitMs`, a result
 * saying the search was stopped and why; or, when `signal` fires (the run's deadline or a
 * cancel), a result saying the run stopped it.
 */
export async function boundedSearch(
  task: SearchTask,
  signal: AbortSignal,
  limitMs = SEARCH_LIMIT_MS,
): Promise<SearchOutcome | ToolResult> {
  const stoppedByRun: ToolResult = {
    content: `the ${task.kind} was stopped before it finished: the run is ending (its wall-clock ceiling was reached or it was cancelled).`,
    isError: true,
  };
  const ran = await runBounded<SearchOutcome>(searchPool, task, signal, limitMs);
  if ('done' in ran) return ran.done;
  if ('failed' in ran) throw ran.failed;
  if (ran.stopped === 'run') return stoppedByRun;
  const secs = Math.round(limitMs / 100) / 10;
  const what = task.kind === 'grep' ? 'regular expression' : 'glob';
  return {
    content: `the search was stopped after ${secs} s: the ${what} ${JSON.stringify(task.pattern)} may backtrack catastrophically (nested or overlapping repetition such as (a+)+ over a long line); simplify it, or narrow path${task.kind === 'grep' ? ' or glob' : ''}. No lines are reported for it.`,
    isError: true,
  };
}
