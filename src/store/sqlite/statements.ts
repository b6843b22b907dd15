/**
 * Statements prepared on first use and kept for the connection's life. Preparing is a
 * compile; the writes that are not on every step and the read API's queries go through
 * this rather than preparing each time they run.
 */
import type Database from 'better-sqlite3';

export class StatementCache {
  readonly #db: Database.Database;
  readonly #statements = new Map<string, Database.Statement>();

  constructor(db: Database.Database) {
    this.#db = db;
  }

  get(text: string): Database.Statement {
    let statement = this.#statements.get(text);
    if (!statement) {
      statement = this.#db.prepare(text);
      this.#statements.set(text, statement);
    }
    return statement;
  }
}
