/**
 * The embedder's handle on a store file. Opening checks the file (a file that is not
 * SQLite, or whose schema is newer than this code, is refused with nothing written)
 * and brings the schema up to date; the handle then reads through its own read-only
 * connection. A run's writes happen in the store actor a {@link Supervisor} starts; the
 * handle's own (retention, a session's turn rows) on one writer connection it keeps.
 */
import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import type Database from 'better-sqlite3';
import { InvalidArgumentError } from '../../errors.js';
import { keepStoreFiles } from '../../runtime/exec/containment/kept.js';
import type { StoreOperation, StoreOperations } from '../port.js';
import * as retention from '../retention.js';
import { sweepBefore } from '../retention.js';
import type { SqliteTarget } from '../target.js';
import { TraceReader } from './reader.js';
import { runSync, statementsOf } from './run.js';
import { openWriter } from './schema.js';
import { type StoreWriter, sqliteWriter } from './writer.js';

export interface StoreOptions {
  /** `NORMAL` (default) survives a process crash; `FULL` also survives power loss, at about a third of the commit rate. */
  synchronous?: 'NORMAL' | 'FULL';
}

export class Store extends TraceReader {
  /** Which backend this is (a `PostgresStore` says `postgres`). */
  readonly kind = 'sqlite' as const;
  readonly synchronous: 'NORMAL' | 'FULL';

  private constructor(path: string, options: StoreOptions) {
    super(path);
    this.synchronous = options.synchronous ?? 'NORMAL';
  }

  /**
   * Opens (creating if needed) the store at `path`.
   *
   * @example
   * const store = await Store.open('runs.db');
   * console.log(store.runs());
   */
  static async open(path: string, options: StoreOptions = {}): Promise<Store> {
    if (typeof path !== 'string' || path.length === 0) {
      throw new InvalidArgumentError('Store.open needs the path of a SQLite file, for example Store.open("runs.db").');
    }
    if (/^postgres(ql)?:\/\//i.test(path))
      throw new InvalidArgumentError(
        'Store.open opens a SQLite file; a PostgreSQL store opens with PostgresStore.open(url), imported from "io-harness/postgres". No file was made.',
      );
    if (options.synchronous !== undefined && options.synchronous !== 'NORMAL' && options.synchronous !== 'FULL') {
      throw new InvalidArgumentError(
        `Store.open: synchronous must be "NORMAL" or "FULL", got ${JSON.stringify(options.synchronous)}.`,
      );
    }
    // SQLite's in-memory spellings name no file, and the store is shared by threads that each open the file.
    if (/^\s*(:memory:|file::memory:|file:.*[?&]mode=memory)/i.test(path) || /^\s*$/.test(path))
      throw new InvalidArgumentError(
        `Store.open(${JSON.stringify(path)}): the store is a file that the supervisor's threads each open, so it cannot be in memory; pass a path, e.g. a temporary one: Store.open(join(mkdtempSync(join(tmpdir(), 'runs-')), 'runs.db')). No file was made.`,
      );
    const absolute = resolve(path);
    openWriter(absolute, options).close();
    // A resumed run reads its policy, contract and sandbox back from here: no command of any run may read or change it.
    keepStoreFiles(absolute);
    return new Store(absolute, options);
  }

  /** @internal Where the store is, as the supervisor hands it to its threads. */
  get target(): SqliteTarget {
    return { kind: 'sqlite', path: this.path, synchronous: this.synchronous };
  }

  /** This handle's writer connection, opened on its first write and kept until close(). */
  #db: Database.Database | null = null;
  #writer: StoreWriter | null = null;
  #closed = false;
  /** What close() tells (the supervisor runWith shares on this store closes with it, on its own time). */
  readonly #onClose = new Set<() => unknown>();

  /** @internal Throws what a closed handle's writes throw; nothing when it is open. */
  assertOpen(): void {
    if (this.#closed)
      throw new InvalidArgumentError(`the store handle for ${this.path} is closed; open it again with Store.open().`);
  }

  /** @internal Calls `listener` once, when this handle is closed; returns what stops that. */
  onClose(listener: () => unknown): () => void {
    this.#onClose.add(listener);
    return () => this.#onClose.delete(listener);
  }

  /** Runs `body` in one immediate transaction on this handle's writer connection. */
  #write<T>(body: (db: Database.Database) => T): T {
    this.assertOpen();
    this.#db ??= openWriter(this.path, { synchronous: this.synchronous });
    const db = this.#db;
    return db.transaction(() => body(db)).immediate();
  }

  /**
   * @internal One of the store's writes, by name, in a transaction of its own on this
   * handle's connection (what a session writes from the embedder's thread). SQLite's lock
   * orders it against a store actor writing the same file.
   */
  write<K extends StoreOperation>(op: K, input: StoreOperations[K][0]): StoreOperations[K][1] {
    return this.#write((db) => {
      this.#writer ??= sqliteWriter(db);
      try {
        return this.#writer.call(op, input);
      } finally {
        // Nobody here acts on what the write announced: the supervisors reading the file do.
        this.#writer.takeNotifications();
      }
    });
  }

  /**
   * Closes the handle. The supervisor `runWith` shares on it is told to close too, and
   * finishes on its own time: a tree it was still running gives its leases back as it
   * drains, so a resume started at once elsewhere may first meet a ConflictError naming
   * it. Close the supervisors you started yourself (`await supervisor.close()`) before the
   * store when you mean to resume at once.
   */
  override close(): void {
    const listeners = this.#closed ? [] : [...this.#onClose];
    this.#closed = true;
    this.#onClose.clear();
    for (const listener of listeners) listener();
    this.#db?.close();
    this.#db = null;
    this.#writer = null;
    super.close();
  }

  /** The bytes the store's files take on disk (the database and its write-ahead log). */
  size(): { bytes: number } {
    const file = (path: string) => (existsSync(path) ? statSync(path).size : 0);
    return { bytes: file(this.path) + file(`${this.path}-wal`) };
  }

  /** How many rows of each table a session has (its turns' runs and every run they spawned), and the bytes of their words and data. */
  sessionSize(sessionId: string): { rows: Record<string, number>; bytes: number } {
    return this.#write((db) => runSync(statementsOf(db), retention.sessionSize(sessionId, this.path)));
  }

  /**
   * Deletes a session whole: its turns, the runs they drove and every run those spawned,
   * with every row of theirs in every table, in one transaction. Returns the rows removed
   * by table. The file keeps its size until {@link compact}.
   */
  deleteSession(sessionId: string): { removed: Record<string, number> } {
    return this.#write((db) => runSync(statementsOf(db), retention.deleteSession(sessionId, this.path)));
  }

  /**
   * Deletes, in one transaction, every session created before `before`. Refuses the whole
   * sweep, deleting nothing and naming them, if any of those sessions holds a run that can
   * still be resumed (end or cancel it first, or sweep with an earlier date).
   */
  sweepSessions(options: { before: Date | number }): { deleted: string[]; removed: Record<string, number> } {
    const before = sweepBefore(options);
    return this.#write((db) => runSync(statementsOf(db), retention.sweepSessions(before)));
  }

  /**
   * Keeps every row and every number of a session (costs, token counts, durations, which
   * files were touched) and empties every column that holds words: prompts, replies, tool
   * arguments and output, diffs, messages, file contents. JSON columns keep their shape
   * with every string in them emptied.
   */
  archiveSession(sessionId: string): void {
    this.#write((db) => runSync(statementsOf(db), retention.archiveSession(sessionId, this.path)));
  }

  /** Gives the pages freed by deletions back to the filesystem (VACUUM, then the log truncated). Returns the size after. */
  compact(): { bytes: number } {
    const db = openWriter(this.path, { synchronous: this.synchronous });
    try {
      db.exec('VACUUM');
      db.pragma('wal_checkpoint(TRUNCATE)');
    } finally {
      db.close();
    }
    return this.size();
  }
}
