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
 * A turn's writes as one transaction, each in a savepoint of its own so it stays
 * all-or-nothing by itself: what the store actor runs for each batch it gathers. A write
 * that throws is rolled back alone and its error returned in its place; a commit that
 * fails throws, with nothing of the batch kept.
 */
export class BatchWriter implements BatchWrites {
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
    return { outcomes, notifications: this.#writer.takeNotifications() };
  }

  close(): void {
    this.#db.close();
  }
}
