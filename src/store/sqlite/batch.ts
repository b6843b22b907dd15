/**
 * What the store actor runs on SQLite for each batch of writes it gathers: one
 * transaction, each write in a savepoint of its own so it stays all-or-nothing by itself.
 */
import type Database from 'better-sqlite3';
import type { BatchResult, BatchWrites, WriteOutcome } from '../backend.js';
import type { StoreRequestBody } from '../port.js';
import { openWriter } from './schema.js';
import { type StoreWriter, sqliteWriter } from './writer.js';

/**
 * How many writes the log takes before it is moved into the database file, checked between
 * batches (see BatchWriter.idle): a step's commit adds about a dozen pages to the log, so
 * this is about SQLite's own threshold of 1,000 pages.
 */
const CHECKPOINT_WRITES = 64;
/** Past this, a commit moves the log itself, so a store actor that is never idle still keeps it bounded. */
const CHECKPOINT_INLINE_WRITES = 8 * CHECKPOINT_WRITES;

/**
 * A turn's writes as one transaction, each in a savepoint of its own so it stays
 * all-or-nothing by itself: what the store actor runs for each batch it gathers. A write
 * that throws is rolled back alone and its error returned in its place; a commit that
 * fails throws, with nothing of the batch kept.
 *
 * The log is moved into the database file (a checkpoint) between batches, not inside a
 * commit as SQLite does by default: a commit's reply does not wait for it.
 */
export class BatchWriter implements BatchWrites {
  readonly #db: Database.Database;
  readonly #writer: StoreWriter;
  readonly #begin: Database.Statement;
  readonly #commit: Database.Statement;
  readonly #savepoint: Database.Statement;
  readonly #release: Database.Statement;
  readonly #rollbackTo: Database.Statement;
  /** Writes committed since the log was last moved into the database file. */
  #sinceCheckpoint = 0;

  constructor(path: string, options: { synchronous: 'NORMAL' | 'FULL' }) {
    this.#db = openWriter(path, { synchronous: options.synchronous });
    this.#db.pragma('wal_autocheckpoint = 0');
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
  run(writes: readonly StoreRequestBody[], beforeCommit: () => void = () => undefined): BatchResult {
    const outcomes: WriteOutcome[] = [];
    try {
      this.#begin.run();
      for (const request of writes) {
        const mark = this.#writer.markNotifications();
        this.#savepoint.run();
        try {
          const value = this.#writer.apply(request);
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
    this.#sinceCheckpoint += writes.length;
    this.#checkpointPast(CHECKPOINT_INLINE_WRITES);
    return { outcomes, notifications: this.#writer.takeNotifications() };
  }

  /** Moves the log into the database file once it holds about SQLite's usual threshold. */
  idle(): void {
    this.#checkpointPast(CHECKPOINT_WRITES);
  }

  /** A checkpoint that waits for no reader (PASSIVE), once `writes` writes have been committed since the last. */
  #checkpointPast(writes: number): void {
    if (this.#sinceCheckpoint < writes) return;
    this.#sinceCheckpoint = 0;
    this.#db.pragma('wal_checkpoint(PASSIVE)');
  }

  close(): void {
    this.#db.close();
  }
}
