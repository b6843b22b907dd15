/**
 * The SQLite backend of the store port, in-process: a writer connection and a reader
 * connection in the calling thread, each write in a transaction of its own. The store
 * actor serves the same writes from its thread (batching a turn's requests into one
 * transaction); this one is for what runs with no thread — an agent in a unit test, a
 * tool that writes while no supervisor is running.
 */
import type Database from 'better-sqlite3';
import { ErrorCode, HarnessError } from '../../errors.js';
import type { StoreOperation, StoreOperations, StorePort } from '../port.js';
import type { Notifications } from '../records.js';
import { sqliteReads, TraceReader } from './reader.js';
import { openWriter } from './schema.js';
import { sqliteWriter } from './writer.js';

export interface LocalStoreOptions {
  synchronous?: 'NORMAL' | 'FULL';
  /** What each committed write announced (events, mail, spawns, ends); dropped when absent. */
  onNotify?: (notifications: Notifications) => void;
}

/** Runs one of the store's writes by name, typed by its operation. */
export type Write = <K extends StoreOperation>(op: K, input: StoreOperations[K][0]) => StoreOperations[K][1];

/**
 * Writes to the store file at `path`, synchronously, in one immediate transaction, on a
 * connection opened for it and closed after: the one path for what writes with no
 * supervisor running (answering a question from another process, a rewind's backlog).
 * SQLite's lock orders it against a store actor writing the same file.
 */
export function writeTogether<T>(path: string, body: (write: Write) => T): T {
  return inTransaction(path, (db) => {
    const writer = sqliteWriter(db);
    return body((op, input) => writer.call(op, input));
  });
}

/** `body` in one immediate transaction on a connection to `path` opened for it and closed after. */
export function inTransaction<T>(
  path: string,
  body: (db: Database.Database) => T,
  options: { synchronous?: 'NORMAL' | 'FULL' } = {},
): T {
  const db = openWriter(path, options);
  try {
    return db.transaction(() => body(db)).immediate();
  } finally {
    db.close();
  }
}

/** A store port with a close, for the thread that opened it. */
export interface LocalStore extends StorePort {
  close(): void;
}

/** Opens the store file at `path` (creating it) as an in-process store port. */
export function openLocalStore(path: string, options: LocalStoreOptions = {}): LocalStore {
  const db = openWriter(path, { synchronous: options.synchronous ?? 'NORMAL' });
  const writer = sqliteWriter(db);
  const reader = new TraceReader(path);
  let closed = false;
  return {
    ...sqliteReads(reader),
    call<K extends StoreOperation>(op: K, input: StoreOperations[K][0]): Promise<StoreOperations[K][1]> {
      if (closed) return Promise.reject(new HarnessError(ErrorCode.StoreActorExited, 'the local store is closed'));
      try {
        const value = db.transaction(() => writer.call(op, input))();
        options.onNotify?.(writer.takeNotifications());
        return Promise.resolve(value);
      } catch (error) {
        writer.takeNotifications();
        return Promise.reject(error);
      }
    },
    close(): void {
      if (closed) return;
      closed = true;
      reader.close();
      db.close();
    },
  };
}
