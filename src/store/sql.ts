/**
 * The store's statements, written once for both backends. A write or a read is a
 * generator that yields each statement it needs ({@link Query}) and is handed the rows
 * back: `runSync` (sqlite-run.ts) answers them at once from a better-sqlite3 connection, so the
 * SQLite backend stays synchronous; the PostgreSQL backend answers them over the wire
 * and awaits each one (postgres/connection.ts). The rules (fencing, draws, spawns, questions) live in one place,
 * whichever database holds the rows.
 *
 * The statements keep to what both dialects read the same way: `?` placeholders
 * (numbered for PostgreSQL when sent), `INSERT ... ON CONFLICT`, `RETURNING`, `IS NOT
 * DISTINCT FROM`, and `ORDER BY rowid`, which PostgreSQL reads from a column of that
 * name its tables carry.
 *
 * A statement whose answer the rule does not read is a `put`: the rule goes on at once,
 * and PostgreSQL sends it with the next statement the rule waits on, in one round trip
 * (postgres/outbox.ts). Its error, if it has one, reaches the rule at that later statement,
 * so no rule catches around a put.
 */

/**
 * One statement a write or read needs: `get` one row, `all` rows, `run` (how many rows
 * changed), `put` (nothing the rule waits for), or `settled`: rows read while no write of
 * any tree is in flight, so no row with a smaller id than those read can still appear
 * (PostgreSQL reads holding the store's lock; SQLite's one writer commits in id order anyway).
 */
export interface Query {
  readonly op: 'get' | 'all' | 'run' | 'put' | 'settled';
  readonly text: string;
  readonly params: readonly unknown[];
  /** A put's: hears the rows its statement returned, once it has run. */
  readonly onRows?: (rows: unknown[]) => void;
}

/** A write or read that yields its statements and returns `T`. */
export type Q<T> = Generator<Query, T, unknown>;

/** The first row of `text`, or undefined. */
export function* get<T = Record<string, unknown>>(text: string, ...params: unknown[]): Q<T | undefined> {
  return (yield { op: 'get', text, params }) as T | undefined;
}

/** Every row of `text`, read as a {@link Query}'s `settled`: while no write of any tree is in flight (see postgres/locks.ts). */
export function* settled<T = Record<string, unknown>>(text: string, ...params: unknown[]): Q<T[]> {
  return (yield { op: 'settled', text, params }) as T[];
}

/** Every row of `text`. */
export function* all<T = Record<string, unknown>>(text: string, ...params: unknown[]): Q<T[]> {
  return (yield { op: 'all', text, params }) as T[];
}

/** Runs `text`; how many rows it changed. */
export function* run(text: string, ...params: unknown[]): Q<{ changes: number }> {
  return (yield { op: 'run', text, params }) as { changes: number };
}

/** Runs `text` whenever the backend next talks to the database; the rule does not wait for it. */
export function* put(text: string, ...params: unknown[]): Q<void> {
  yield { op: 'put', text, params };
}

/** A {@link put} whose first row `then` hears once the statement has run (before the write commits). */
export function* putThen<T = Record<string, unknown>>(
  then: (row: T | undefined) => void,
  text: string,
  ...params: unknown[]
): Q<void> {
  yield { op: 'put', text, params, onRows: (rows) => then(rows[0] as T | undefined) };
}

/**
 * A {@link put} whose rows the rule reads later: what it returns hands them over once the
 * statement has run, which is by the time the next statement the rule waits on has
 * answered. A read sent this way goes in the same round trip as that statement.
 */
export function* putRows<T = Record<string, unknown>>(text: string, ...params: unknown[]): Q<() => T[]> {
  let rows: T[] | undefined;
  yield {
    op: 'put',
    text,
    params,
    onRows: (answer) => {
      rows = answer as T[];
    },
  };
  return () => {
    if (rows === undefined) throw new Error(`rows read before their statement ran: ${text}`);
    return rows;
  };
}

/** What a class of generator methods looks like run synchronously. */
export type Synced<T> = {
  [K in keyof T]: T[K] extends (...args: infer A) => Generator<Query, infer R, unknown> ? (...args: A) => R : never;
};

/** What a class of generator methods looks like run over an async connection. */
export type Async<T> = {
  [K in keyof T]: T[K] extends (...args: infer A) => Generator<Query, infer R, unknown>
    ? (...args: A) => Promise<R>
    : never;
};

/** The names of a class's own methods (its prototype's, less the constructor). */
export function methodNames(prototype: object): string[] {
  return Object.getOwnPropertyNames(prototype).filter(
    (name) => name !== 'constructor' && typeof (prototype as Record<string, unknown>)[name] === 'function',
  );
}

/**
 * Makes every generator method of `queries` a method of `owner`'s instances, each
 * running its statements through the instance's own `query` (at once on SQLite, awaited
 * on PostgreSQL).
 */
export function defineReads(owner: { prototype: object }, queries: object): void {
  for (const name of methodNames(Object.getPrototypeOf(queries))) {
    const read = (queries as Record<string, (...args: unknown[]) => Q<unknown>>)[name] as (
      ...args: unknown[]
    ) => Q<unknown>;
    Object.defineProperty(owner.prototype, name, {
      value(this: { query(body: Q<unknown>): unknown }, ...args: unknown[]) {
        return this.query(read.apply(queries, args));
      },
      writable: true,
      configurable: true,
    });
  }
}
