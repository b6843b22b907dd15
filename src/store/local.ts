/**
 * The SQLite backend of the store port, in-process: a writer connection and a reader
 * connection in the calling thread, each write in a transaction of its own. The store
 * actor serves the same writes from its thread (batching a turn's requests into one
 * transaction); this one is for what runs with no thread — an agent in a unit test, a
 * tool that writes while no supervisor is running.
 */
import type Database from 'better-sqlite3';
import { ErrorCode, HarnessError } from '../errors.js';
import { scrubValue } from '../runtime/secrets.js';
import {
  isStoreOperation,
  STORE_OPERATIONS,
  type StoreOperation,
  type StoreOperations,
  type StorePort,
  sqliteReads,
} from './port.js';
import { TraceReader } from './reader.js';
import type { Notifications } from './records.js';
import { openWriter } from './schema.js';
import type { Synced } from './sql.js';
import { runSync, statementsOf } from './sqlite-run.js';
import { WriteRules } from './writer.js';

/** The store's writes on one SQLite connection, each run synchronously; the caller holds the transaction. */
export type StoreWriter = Synced<Pick<WriteRules, StoreOperation>> &
  Pick<WriteRules, 'takeNotifications' | 'markNotifications' | 'rollbackNotifications'>;

type Handler = (input: never) => unknown;

/** The write rules run on a SQLite connection. */
export function sqliteWriter(db: Database.Database): StoreWriter {
  const rules = new WriteRules();
  const statements = statementsOf(db);
  const writer: Record<string, unknown> = {
    takeNotifications: () => rules.takeNotifications(),
    markNotifications: () => rules.markNotifications(),
    rollbackNotifications: (mark: number[]) => rules.rollbackNotifications(mark),
  };
  for (const op of STORE_OPERATIONS) {
    const rule = (rules as unknown as Record<StoreOperation, (input: never) => Parameters<typeof runSync>[1]>)[op];
    writer[op] = (input: never) => runSync(statements, rule.call(rules, input));
  }
  return writer as unknown as StoreWriter;
}

/** Runs one write against a writer by its operation's name; the caller holds the transaction. */
export function applyWrite(writer: StoreWriter, op: string, input: unknown): unknown {
  if (!isStoreOperation(op)) throw new HarnessError(ErrorCode.Internal, `unknown store operation ${String(op)}`);
  const handler = (writer as unknown as Record<StoreOperation, Handler>)[op];
  // No secret this thread holds is written: every row of every write, its events too (see runtime/secrets.ts).
  return handler(scrubValue(input) as never);
}

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
    return body(((op: string, input: unknown) => applyWrite(writer, op, input)) as Write);
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

/**
 * A turn's writes as one transaction, each in a savepoint of its own so it stays
 * all-or-nothing by itself: what the store actor runs for each batch it gathers. A write
 * that throws is rolled back alone and its error returned in its place; a commit that
 * fails throws, with nothing of the batch kept.
 */
export class BatchWriter {
  readonly #db: Database.Database;
  readonly #writer: StoreWriter;
  readonly #begin: Database.Statement;
  readonly #commit: Database.Statement;
  readonly #savepoint: Database.Statement;
  readonly #release: Database.Statement;
  readonly #rollbackTo: Database.Statement;

  constructor(path: string, options: { synchronous: 'NORMAL' | 'FULL' }) {
    this.#db = openWriter(path, { synchronous: options.synchronous });
    this.#writer = sqliteWriter(this.#db);
    this.#begin = this.#db.prepare('BEGIN IMMEDIATE');
    this.#commit = this.#db.prepare('COMMIT');
    this.#savepoint = this.#db.prepare('SAVEPOINT request');
    this.#release = this.#db.prepare('RELEASE request');
    this.#rollbackTo = this.#db.prepare('ROLLBACK TO request');
  }

  /**
   * Runs `writes` in one transaction; `beforeCommit` runs after the last write, inside it.
   * Returns each write's value or error, and what the committed writes announced.
   */
  run(
    writes: readonly { op: string; input: unknown }[],
    beforeCommit: () => void = () => undefined,
  ): { outcomes: ({ ok: true; value: unknown } | { ok: false; error: unknown })[]; notifications: Notifications } {
    const outcomes: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
    try {
      this.#begin.run();
      for (const { op, input } of writes) {
        const mark = this.#writer.markNotifications();
        this.#savepoint.run();
        try {
          const value = applyWrite(this.#writer, op, input);
          this.#release.run();
          outcomes.push({ ok: true, value });
        } catch (error) {
          this.#rollbackTo.run();
          this.#release.run();
          this.#writer.rollbackNotifications(mark);
          outcomes.push({ ok: false, error });
        }
      }
      beforeCommit();
      this.#commit.run();
    } catch (error) {
      if (this.#db.inTransaction) this.#db.exec('ROLLBACK');
      this.#writer.takeNotifications();
      throw error;
    }
    return { outcomes, notifications: this.#writer.takeNotifications() };
  }

  close(): void {
    this.#db.close();
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
  const write = db.transaction((op: string, input: unknown) => applyWrite(writer, op, input));
  return {
    ...sqliteReads(reader),
    call<K extends StoreOperation>(op: K, input: StoreOperations[K][0]): Promise<StoreOperations[K][1]> {
      if (closed) return Promise.reject(new HarnessError(ErrorCode.StoreActorExited, 'the local store is closed'));
      try {
        const value = write(op, input) as StoreOperations[K][1];
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
