/**
 * Where a store is, as data: what the supervisor hands the store actor's thread and each
 * agent's, so each opens the same store with the backend the target names (./backend.ts).
 * One value for either backend, never a path beside a URL. A PostgreSQL target carries its
 * password: it crosses to this process's own threads and nowhere else.
 */

/** Where a SQLite store is: its file, and how hard its commits are synced. */
export interface SqliteTarget {
  kind: 'sqlite';
  /** The store file, absolute. */
  path: string;
  /** `NORMAL` (default) survives a process crash; `FULL` also survives power loss. */
  synchronous?: 'NORMAL' | 'FULL';
}

/** Where a PostgreSQL store is. */
export interface PostgresTarget {
  connectionString: string;
  /** The PostgreSQL schema the store's tables live in (default `public`). */
  schema?: string;
  /** Connections in the pool (default 10). */
  max?: number;
  /** Milliseconds to wait for a connection (default 10 000). */
  connectTimeoutMs?: number;
  /**
   * Milliseconds a connection may sit idle inside a transaction before the server ends it
   * (PostgreSQL's `idle_in_transaction_session_timeout`; default 5 000). Writes take turns
   * on one lock, so a host frozen mid-write (stopped, or cut off) would hold every other
   * host's commits until then; its write is rolled back whole, and run again, fenced, if
   * the host comes back.
   */
  idleInTransactionTimeoutMs?: number;
}

/** What `idleInTransactionTimeoutMs` is when a PostgreSQL store is opened without it. */
export const IDLE_IN_TRANSACTION_MS = 5_000;

/** How long the server lets a transaction of this store's idle before it ends it; 0: never. */
export function idleInTransactionMs(target: PostgresTarget): number {
  return target.idleInTransactionTimeoutMs ?? IDLE_IN_TRANSACTION_MS;
}

/** A PostgreSQL store as a store target. */
export interface PostgresStoreTarget extends PostgresTarget {
  kind: 'postgres';
}

/** Where a store is, for either backend. */
export type StoreTarget = SqliteTarget | PostgresStoreTarget;

/** One string per store, for a thread that keeps one connection (or pool) per store it is asked about. */
export function targetKey(target: StoreTarget): string {
  return target.kind === 'sqlite'
    ? `sqlite\n${target.path}`
    : `postgres\n${target.connectionString}\n${target.schema ?? ''}`;
}
