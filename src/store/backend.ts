/**
 * The one interface a store backend implements for the threads: the store actor's writer
 * and an agent thread's reads, opened for a {@link StoreTarget}. The SQLite backend
 * (sqlite/backend.ts) and the PostgreSQL one (postgres/backend.ts) are each loaded only
 * when a target names it, so a SQLite-only program never loads `pg`.
 */
import type { StoreReads, StoreRequestBody } from './port.js';
import type { WorkHint } from './postgres/notify.js';
import type { Notifications } from './records.js';
import type { StoreTarget } from './target.js';

/** How one write of a batch ended: its value, or the error it threw (it alone rolled back). */
export type WriteOutcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/** What a batch did: one outcome per write, in order, and what its committed writes announced. */
export interface BatchResult {
  outcomes: WriteOutcome[];
  notifications: Notifications;
}

/**
 * The store actor's writer: each batch of writes in one transaction, each write in a
 * savepoint of its own so it stays all-or-nothing by itself; `beforeCommit` runs after the
 * last write, inside the transaction. A commit that fails throws, keeping nothing of the
 * batch. SQLite answers at once; PostgreSQL's answer is awaited.
 */
export interface BatchWrites {
  /**
   * The most writes one batch takes, or undefined for no limit: the actor serves what is
   * queued beyond it as the next batch.
   */
  readonly maxBatch?: number;
  run(writes: readonly StoreRequestBody[], beforeCommit: () => void): BatchResult | Promise<BatchResult>;
  close(): void | Promise<void>;
}

/** A store backend, for one target. */
export interface StoreBackend {
  readonly target: StoreTarget;
  /**
   * Opens the store actor's one writer, checking the store and bringing its schema up to
   * date. `onHint` hears what other hosts' commits hint at, where the backend has other
   * hosts (PostgreSQL; see postgres/notify.ts).
   */
  openBatchWriter(options: { onHint(hint: WorkHint): void }): Promise<BatchWrites>;
  /** An agent thread's reads of the store, on a connection (or a small pool) the thread's actors share. */
  openReads(): StoreReads;
}

/** The backend `target` names, loaded on first use. */
export async function storeBackend(target: StoreTarget): Promise<StoreBackend> {
  if (target.kind === 'sqlite') return (await import('./sqlite/backend.js')).sqliteBackend(target);
  return (await import('./postgres/backend.js')).postgresBackend(target);
}
