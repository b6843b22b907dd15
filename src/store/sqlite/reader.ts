/**
 * The typed read API over a store file. It opens its own read-only connection, so
 * any thread or process may use one while the store actor writes: traces, attach,
 * tests and command-line tools all read through this.
 */

import type Database from 'better-sqlite3';
import { type StoreReads, storeReads } from '../port.js';
import { TraceQueries } from '../queries.js';
import { defineReads, type Q, type Synced } from '../sql.js';
import { runSync, statementsOf } from './run.js';
import { openReader } from './schema.js';

const QUERIES = new TraceQueries();

/** The reads are TraceQueries' own, each run on this reader's connection (assigned below). */
export interface TraceReader extends Synced<TraceQueries> {}

/**
 * The typed read API over a store file. It opens its own read-only connection, so
 * any thread or process may use one while the store actor writes: traces, attach,
 * tests and command-line tools all read through this. Every read of
 * {@link TraceQueries} is a method of it, answered at once.
 */
// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: see the interface above.
export class TraceReader {
  readonly path: string;
  readonly #db: Database.Database;

  /** `cacheKiB` bounds this connection's page cache (SQLite's default here is 16 MiB). */
  constructor(path: string, options: { cacheKiB?: number } = {}) {
    this.path = path;
    this.#db = openReader(path, options);
  }

  /** @internal Runs a read on this reader's connection. */
  query<T>(body: Q<T>): T {
    return runSync(statementsOf(this.#db), body);
  }

  close(): void {
    this.#db.close();
  }
}

/** The reads of a SQLite store, answered from a reader connection. */
export function sqliteReads(reader: TraceReader): StoreReads {
  return storeReads(QUERIES, (body) => {
    try {
      return Promise.resolve(reader.query(body));
    } catch (error) {
      return Promise.reject(error);
    }
  });
}

defineReads(TraceReader, QUERIES);
