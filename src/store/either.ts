/**
 * Code that reads and writes a store outside its actor — a session's turn rows, a rewind,
 * a follower's reads — written once for both backends. Such code is a generator that
 * yields each read (a {@link Q} of TraceQueries) and each write (a store operation by
 * name); {@link perform} answers them at once from a SQLite `Store`, so its callers stay
 * synchronous there, and awaits each one on a `PostgresStore`, whose every answer is a
 * promise. The logic — what is checked, in what order, what is refused — is the same code
 * on both.
 */

import type { StoreOperation, StoreOperations } from './port.js';
import type { PostgresStore } from './postgres/index.js';
import type { Q } from './sql.js';
import type { TraceReader } from './sqlite/reader.js';
import type { Store } from './sqlite/store.js';

/** A store either backend: a SQLite file's handle or a PostgreSQL one. */
export type AnyStore = Store | PostgresStore;

/** What a call on `S` returns: the answer itself on SQLite, a promise of it on PostgreSQL. */
export type Answer<S, T> = S extends PostgresStore ? Promise<T> : T;

/** One thing the code needs of the store: a read, or a write by name. */
export type Effect = { read: Q<unknown> } | { write: StoreOperation; input: unknown };

/** Code that yields its reads and writes ({@link read}, {@link write}) and returns `T`. */
export type Effects<T> = Generator<Effect, T, unknown>;

/** A read of the store, inside {@link Effects}. */
export function* read<T>(query: Q<T>): Effects<T> {
  return (yield { read: query }) as T;
}

/** A write of the store, committed before the code goes on, inside {@link Effects}. */
export function* write<K extends StoreOperation>(op: K, input: StoreOperations[K][0]): Effects<StoreOperations[K][1]> {
  return (yield { write: op, input }) as StoreOperations[K][1];
}

/** A SQLite reader that is not a `Store` handle (no writer of its own): its writes go through a connection opened for each. */
type Writes = (op: StoreOperation, input: unknown) => unknown;

/**
 * Runs `body` against `store`: at once on SQLite (a write on the handle's own writer
 * connection, in a transaction of its own), awaiting each answer on PostgreSQL. A read or
 * write that throws is thrown into the body, so its own try/finally sees it.
 */
export function perform<S extends AnyStore | TraceReader, T>(
  store: S,
  body: Effects<T>,
  writes?: Writes,
): Answer<S, T> {
  if ((store as { kind?: unknown }).kind === 'postgres')
    return performAsync(store as PostgresStore, body) as Answer<S, T>;
  const sqlite = store as unknown as TraceReader & Partial<Pick<Store, 'write'>>;
  const writeOne: Writes =
    writes ??
    ((op, input) => {
      if (typeof sqlite.write !== 'function')
        throw new TypeError('a write needs a Store handle (Store.open), not a read-only TraceReader');
      return sqlite.write(op, input as never);
    });
  let step = body.next();
  while (!step.done) {
    const effect = step.value;
    let answer: unknown;
    try {
      answer = 'read' in effect ? sqlite.query(effect.read) : writeOne(effect.write, effect.input);
    } catch (error) {
      step = body.throw(error);
      continue;
    }
    step = body.next(answer);
  }
  return step.value as Answer<S, T>;
}

async function performAsync<T>(store: PostgresStore, body: Effects<T>): Promise<T> {
  let step = body.next();
  while (!step.done) {
    const effect = step.value;
    let answer: unknown;
    try {
      answer =
        'read' in effect ? await store.query(effect.read) : await store.call(effect.write, effect.input as never);
    } catch (error) {
      step = body.throw(error);
      continue;
    }
    step = body.next(answer);
  }
  return step.value;
}

/** Where a store is, for messages: a file's path, or a database's URL (its password hidden). */
export function whereIs(store: AnyStore | TraceReader): string {
  return (store as { kind?: unknown }).kind === 'postgres' ? (store as PostgresStore).url : (store as TraceReader).path;
}

/** True when `store` is a PostgreSQL one. */
export function isPostgres(store: unknown): store is PostgresStore {
  return (store as { kind?: unknown } | null)?.kind === 'postgres';
}
