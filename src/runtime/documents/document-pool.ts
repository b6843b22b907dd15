/**
 * Reading and writing documents off the agent's thread: a parser's work on a large or
 * hostile file runs to its end on the thread that started it, so it runs on a thread of a
 * small pool of its own, and a task past its deadline (or the run's: a cancel, the wall
 * clock) is aborted: piscina terminates the thread running it and starts a fresh one for
 * the next. Made at the first document (a run that has none pays nothing); one thread, which
 * exits when idle and never keeps the process alive.
 */
import type { Piscina } from 'piscina';
import { poolEntry } from '../pool-entry.js';

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

let pool: Promise<Piscina> | null = null;

function documentPool(): Promise<Piscina> {
  pool ??= import('piscina').then(
    ({ Piscina }) =>
      new Piscina({
        ...poolEntry(new URL('./document-worker.js', import.meta.url)),
        minThreads: 0,
        maxThreads: 1,
        idleTimeout: IDLE_MS,
        concurrentTasksPerWorker: 1,
      }),
  );
  return pool;
}

/**
 * Runs `task` on the pool: its outcome; or, past `limitMs` or once `signal` fires, an
 * error saying which stopped it.
 */
export async function documentTask(task: DocumentTask, signal: AbortSignal, limitMs: number): Promise<DocumentOutcome> {
  if (signal.aborted) return { error: 'it was stopped before it started: the run is ending' };
  const limit = new AbortController();
  const timer = setTimeout(() => limit.abort(), limitMs);
  try {
    const workers = await documentPool();
    return (await workers.run(task, { signal: AbortSignal.any([signal, limit.signal]) })) as DocumentOutcome;
  } catch (error) {
    if (signal.aborted) return { error: 'it was stopped: the run is ending (a cancel, or its wall clock)' };
    if (limit.signal.aborted)
      return {
        error: `it took longer than ${limitMs >= 1000 ? `${Math.round(limitMs / 100) / 10} s` : `${Math.round(limitMs)} ms`} (withDocuments timeoutSecs), and was stopped`,
      };
    throw error;
  } finally {
    clearTimeout(timer);
  }
}
