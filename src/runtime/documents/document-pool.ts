/**
 * Reading and writing documents off the agent's thread: a parser's work on a large or
 * hostile file runs to its end on the thread that started it, so it runs on a thread of a
 * small pool of its own, and a task past its deadline (or the run's: a cancel, the wall
 * clock) is aborted: piscina terminates the thread running it and starts a fresh one for
 * the next. Each thread's heap is bounded, and a thread that dies is an answer, never a
 * throw into the run. Made at the first document (a run that has none pays nothing); up to
 * two threads, which exit when idle and never keep the process alive.
 */
import { availableParallelism } from 'node:os';
import { boundedPool, runBounded } from '../pool-entry.js';

/** One piece of work on a document: the bytes it reads (never a path: the agent's thread reads them, checked). */
export type DocumentTask =
  | { op: 'xlsx-sheets'; bytes: Uint8Array }
  | { op: 'xlsx-read'; bytes: Uint8Array; sheet: string | null; maxRows: number }
  | { op: 'xlsx-write'; sheets: { name: string; rows: string[][] }[] }
  | { op: 'xlsx-set-cell'; bytes: Uint8Array; sheet: string; cell: string; value: string }
  | { op: 'docx-read'; bytes: Uint8Array }
  | { op: 'docx-write'; paragraphs: string[] }
  | { op: 'pptx-read'; bytes: Uint8Array; slide: number | null }
  | { op: 'pdf-read'; bytes: Uint8Array; pages: number[] | null }
  | { op: 'pdf-write'; pages: string[] }
  | { op: 'pdf-watermark'; bytes: Uint8Array; text: string }
  | { op: 'pdf-fill-form'; bytes: Uint8Array; fields: Record<string, string> }
  | { op: 'barcode-read'; bytes: Uint8Array };

/** What a task comes to: text, bytes to write (and a line about them), or what went wrong. */
export type DocumentOutcome = { text: string } | { bytes: Uint8Array; text: string } | { error: string };

/** How long an idle document thread lives before it exits. */
const IDLE_MS = 5_000;
/**
 * The heap a document thread may have: a hostile file that asks for more (a few kilobytes
 * of workbook naming a cell in the last column of every row, a slide listed thousands of
 * times) ends its thread, not the process.
 */
const HEAP_MB = 512;
/** The threads: runs of one process share them, so one slow document does not hold every other. */
const THREADS = Math.max(1, Math.min(2, availableParallelism()));

const documentPool = boundedPool(new URL('./document-worker.js', import.meta.url), {
  maxThreads: THREADS,
  idleMs: IDLE_MS,
  resourceLimits: { maxOldGenerationSizeMb: HEAP_MB, maxYoungGenerationSizeMb: 64 },
});

/**
 * Runs `task` on the pool: its outcome; or, past `limitMs` or once `signal` fires, an
 * error saying which stopped it.
 */
export async function documentTask(task: DocumentTask, signal: AbortSignal, limitMs: number): Promise<DocumentOutcome> {
  const ran = await runBounded<DocumentOutcome>(documentPool, task, signal, limitMs);
  if ('done' in ran) return ran.done;
  if ('stopped' in ran && ran.stopped === 'run')
    return { error: 'it was stopped: the run is ending (a cancel, or its wall clock)' };
  if ('stopped' in ran)
    return {
      error: `it was not done within ${limitMs >= 1000 ? `${Math.round(limitMs / 100) / 10} s` : `${Math.round(limitMs)} ms`} (withDocuments timeoutSecs, the wait for a free document thread included), and was stopped`,
    };
  // The thread ended under it: most often a document that needed more memory than a thread may have.
  const message = ran.failed instanceof Error ? ran.failed.message : String(ran.failed);
  return {
    error: /memory|heap|terminated|exited/i.test(message)
      ? `it needed more memory than a document thread may have (${HEAP_MB} MB), and was stopped`
      : `the document thread failed (${message.slice(0, 300)})`,
  };
}
