/**
 * The SQLite side of the statements in ../sql.ts: each answered at once from a
 * better-sqlite3 connection's prepared statements, so a write or read runs to its end
 * synchronously.
 */
import type Database from 'better-sqlite3';
import type { Q, Query } from '../sql.js';
import { StatementCache } from './statements.js';

/** Answers a query from a SQLite connection's statements. */
export function answerSqlite(statements: StatementCache, query: Query): unknown {
  const statement = statements.get(query.text);
  if (query.op === 'get') return statement.get(...query.params);
  if (query.op === 'all' || query.op === 'settled') return statement.all(...query.params);
  if (query.op === 'put') {
    if (query.onRows) query.onRows(statement.all(...query.params));
    else statement.run(...query.params);
    return undefined;
  }
  return { changes: statement.run(...query.params).changes };
}

/**
 * Runs a write or read to its end on a SQLite connection, synchronously. A statement
 * that throws is thrown into the generator, so its own try/catch sees it as it would a
 * direct call.
 */
export function runSync<T>(statements: StatementCache, body: Q<T>): T {
  let step = body.next();
  while (!step.done) {
    let answer: unknown;
    try {
      answer = answerSqlite(statements, step.value);
    } catch (error) {
      step = body.throw(error);
      continue;
    }
    step = body.next(answer);
  }
  return step.value;
}

/** A SQLite connection's statement cache, made once per connection. */
const caches = new WeakMap<Database.Database, StatementCache>();
export function statementsOf(db: Database.Database): StatementCache {
  let cache = caches.get(db);
  if (!cache) {
    cache = new StatementCache(db);
    caches.set(db, cache);
  }
  return cache;
}
