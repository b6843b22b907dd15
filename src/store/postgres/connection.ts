/**
 * The PostgreSQL side of the statements in sql.ts: a pool of `pg` connections, each
 * statement sent with numbered parameters as a named prepared statement (parsed once per
 * connection), its rows returned as SQLite would return them (64-bit integers and sums as
 * numbers, not strings). A write runs in one transaction, retried whole when PostgreSQL
 * gives it up to a deadlock or a serialization failure.
 */
import type { Writable } from 'node:stream';
import pg from 'pg';
import { ErrorCode, HarnessError, StoreError } from '../../errors.js';
import { connectionSecrets, holdSecrets, isKeyValueConnection, maskedConnection } from '../../runtime/secrets.js';
import type { Q, Query } from '../sql.js';
import { idleInTransactionMs, type PostgresTarget } from '../target.js';
import { type LockScope, lockStatements, SETTLED_READ_LOCK } from './locks.js';
import { Outbox } from './outbox.js';

const INT8 = 20;
const NUMERIC = 1700;
const toNumber = (value: string) => Number(value);
/** Counts, ids and milliseconds are 64-bit in PostgreSQL and well within a double here. */
const TYPES = {
  getTypeParser(oid: number, format?: string) {
    if (oid === INT8 || oid === NUMERIC) return toNumber;
    return pg.types.getTypeParser(oid, format as 'text');
  },
};

/**
 * A writing transaction begun on `client`, its start and its locks (see locks.ts: a tree's
 * for a write inside one tree, else the store's) sent without waiting (see outbox.ts).
 */
export function beginWrite(client: pg.PoolClient, scope: LockScope | null): Outbox {
  const outbox = new Outbox(client, send);
  // The transaction's own: a failure here is no write's (see Outbox.write).
  outbox.write = -1;
  outbox.raw('BEGIN ISOLATION LEVEL READ COMMITTED');
  for (const statement of lockStatements(scope)) outbox.put(statement);
  outbox.write = 0;
  return outbox;
}

/**
 * Sends COMMIT behind what the write put, without waiting for those first: one round trip
 * for the rest of the write and its commit. A statement of it that failed aborted the
 * transaction, and the server ends an aborted transaction's COMMIT as a ROLLBACK: nothing
 * of the write is kept, and the first failure, in the order sent, is thrown (a deadlock
 * among them is retried whole, as before). The connection lost meanwhile leaves it unknown
 * whether the COMMIT landed, as a loss during a COMMIT always did.
 */
export async function commitBehind(outbox: Outbox): Promise<void> {
  const result = await outbox.ask({ op: 'run', text: 'COMMIT', params: [] });
  if (result.command !== 'COMMIT')
    throw new Error(`the transaction ended with ${result.command} rather than COMMIT; nothing of it was kept`);
}

/** Deadlock detected, serialization failure: the transaction may simply be run again. */
const RETRYABLE = new Set(['40P01', '40001']);
/** How many times a transaction given up that way is run before its error is the caller's. */
const ATTEMPTS = 8;

/** Whether PostgreSQL gave the transaction up to a deadlock or a serialization failure. */
export function retryable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && RETRYABLE.has(code);
}

/**
 * Whether the connection went away under the transaction: the server ended it (idle in a
 * transaction too long, 25P03; terminated, 57P01), the link broke (class 08), or the
 * client saw its socket close. Before COMMIT is sent nothing of the transaction was kept,
 * so it may be run again on a fresh connection; at COMMIT whether it landed is not known.
 */
export function connectionLost(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string')
    return code === '25P03' || code === '57P01' || code.startsWith('08') || /^E[A-Z]+$/.test(code);
  return /connection terminated|not queryable|connection error/i.test((error as Error)?.message ?? '');
}

/** How a statement's text reads with numbered parameters, and the name it is prepared under. */
const prepared = new Map<string, { name: string; text: string }>();
function preparedOf(text: string): { name: string; text: string } {
  let entry = prepared.get(text);
  if (!entry) {
    let n = 0;
    entry = { name: `ioh_${prepared.size}`, text: text.replace(/\?/g, () => `$${++n}`) };
    prepared.set(text, entry);
  }
  return entry;
}

/**
 * A connection string with its password hidden, for messages: a URL's password and its
 * `?password=`/`?sslpassword=` (any key-like parameter), or in key/value form
 * (`host=h password=p`) every key-like value, quoted or not.
 */
export function redacted(connectionString: string): string {
  if (isKeyValueConnection(connectionString)) return maskedConnection(connectionString);
  try {
    new URL(connectionString);
    return maskedConnection(connectionString);
  } catch {
    // Not a URL this can parse: hide all of what stands between the scheme and the host.
    const at = connectionString.lastIndexOf('@');
    const start = connectionString.indexOf('://');
    return at > start && start >= 0
      ? `${connectionString.slice(0, start + 3)}***${connectionString.slice(at)}`
      : connectionString;
  }
}

const watched = new WeakSet<pg.PoolClient>();

export class PostgresConnection {
  readonly pool: pg.Pool;
  readonly target: PostgresTarget;

  constructor(target: PostgresTarget) {
    this.target = target;
    // Whatever this thread raises or writes from now on is scrubbed of the password.
    holdSecrets(connectionSecrets(target.connectionString));
    this.pool = new pg.Pool({
      connectionString: target.connectionString,
      max: target.max ?? 10,
      connectionTimeoutMillis: target.connectTimeoutMs ?? 10_000,
      types: TYPES,
      application_name: 'io-harness',
      // A write's statements go out without waiting for each answer (see outbox.ts).
      pipeline: true,
      // Always the store's schema, so no user's own schema (search_path "$user") takes its tables;
      // and a transaction left open by a frozen client is ended by the server (see PostgresTarget).
      options: `-c search_path=${quoteIdentifier(target.schema ?? 'public')} -c idle_in_transaction_session_timeout=${Math.floor(idleInTransactionMs(target))}`,
    });
    // An idle connection the server drops is replaced on the next checkout; it must not end the process.
    this.pool.on('error', () => undefined);
  }

  /**
   * Runs a write or read to its end on `client`, awaiting each statement it waits on. With
   * an `outbox`, what the rule puts is sent without waiting, and what is still in flight
   * at the end is the caller's to settle (before it commits). Without one, a put is awaited
   * like any statement.
   */
  static async drive<T>(client: pg.PoolClient, body: Q<T>, outbox?: Outbox): Promise<T> {
    let step = body.next();
    while (!step.done) {
      let answer: unknown;
      try {
        const query = step.value;
        if (outbox && query.op === 'put') outbox.put(query);
        else if (query.op === 'settled' && !outbox) answer = answerOf(query, await settledRead(client, query));
        else answer = answerOf(query, await (outbox ? outbox.ask(query) : send(client, query)));
      } catch (error) {
        step = body.throw(error);
        continue;
      }
      step = body.next(answer);
    }
    return step.value;
  }

  /** Runs `body` on a connection of the pool outside any transaction (each statement its own). */
  async read<T>(body: Q<T>): Promise<T> {
    const client = await this.connect();
    try {
      return await PostgresConnection.drive(client, body);
    } catch (error) {
      throw storeErrorOf(error, this.target);
    } finally {
      client.release();
    }
  }

  /**
   * Runs `body` on a connection of the pool, its transaction rolled back when it throws,
   * and again from the start on a fresh one when PostgreSQL gave the transaction up to a
   * deadlock or a serialization failure, or the connection was lost before `body` said it
   * is committing (nothing was kept then). Anything else it throws, or the last of those,
   * is the caller's, as the database raised it.
   */
  async attempts<T>(body: (client: pg.PoolClient, committing: () => void) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const client = await this.connect();
      let broken = false;
      let committing = false;
      try {
        return await body(client, () => {
          committing = true;
        });
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {
          broken = true;
        });
        if ((retryable(error) || (!committing && connectionLost(error))) && attempt < ATTEMPTS) continue;
        throw error;
      } finally {
        client.release(broken);
      }
    }
  }

  /**
   * Runs `make()` in one transaction, retried (with a fresh body) when PostgreSQL aborts
   * it for a deadlock or a serialization failure. An error of the rules rolls back all of it.
   */
  async transaction<T>(
    make: () => Q<T>,
    after: (value: T) => void = () => undefined,
    scope: LockScope | null = null,
  ): Promise<T> {
    let value: T;
    try {
      value = await this.attempts(async (client, committing) => {
        const outbox = beginWrite(client, scope);
        let made: T;
        try {
          made = await PostgresConnection.drive(client, make(), outbox);
        } catch (error) {
          // A statement that failed before the rule threw is the cause (a deadlock is retried).
          throw (await outbox.failed())?.error ?? error;
        }
        committing();
        await commitBehind(outbox);
        return made;
      });
    } catch (error) {
      throw storeErrorOf(error, this.target);
    }
    // Committed: what it announced is handed on, and nothing that does can undo it.
    try {
      after(value);
    } catch {
      // A listener's failure is its own.
    }
    return value;
  }

  /** What an error from this connection is to the caller (see storeErrorOf). */
  errorOf(error: unknown): unknown {
    return storeErrorOf(error, this.target);
  }

  async connect(): Promise<pg.PoolClient> {
    try {
      const client = await this.pool.connect();
      // The server may end a connection while it is checked out (between two statements): the
      // next statement fails, and the socket's own error must not end the process meanwhile.
      if (!watched.has(client)) {
        watched.add(client);
        client.on('error', () => undefined);
      }
      return client;
    } catch (error) {
      throw unreachable(error, this.target);
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

/** PostgreSQL's text cannot hold NUL, which SQLite's can: it is kept as U+FFFD. */
export function textSafe(value: unknown): unknown {
  return typeof value === 'string' && value.includes('\u0000') ? value.replaceAll('\u0000', '\uFFFD') : value;
}

/** Sends `query` as a prepared statement (parsed once per connection). */
function send(client: pg.PoolClient, query: Query): Promise<pg.QueryResult> {
  const { name, text } = preparedOf(query.text);
  corkTurn(client);
  return client.query({ name, text, values: query.params.map(textSafe) });
}

/** The sockets held corked until the end of this turn of the event loop. */
const corked = new WeakSet<object>();

/**
 * Holds `client`'s socket corked until the current turn of the event loop ends, so that the
 * statements a transaction sends one after another without waiting (a rule's puts, BEGIN
 * and the locks, a batch of step calls and its COMMIT) leave in one write, not one each:
 * on loopback each write wakes the server and costs the sender the delivery, which was two
 * fifths of the store actor's time while a root reserved its children. `pg` corks each
 * statement's own messages the same way. The socket is uncorked before anything can wait
 * for an answer, since an answer is only awaited from a later turn.
 */
function corkTurn(client: pg.PoolClient): void {
  const stream = (client as unknown as { connection?: { stream?: Writable } }).connection?.stream;
  if (!stream || typeof stream.cork !== 'function' || corked.has(stream)) return;
  corked.add(stream);
  stream.cork();
  process.nextTick(() => {
    corked.delete(stream);
    stream.uncork();
  });
}

/**
 * A settled read outside a transaction: in one of its own, holding the store's lock
 * exclusive, so no tree write is in flight while it reads (see locks.ts).
 */
async function settledRead(client: pg.PoolClient, query: Query): Promise<pg.QueryResult> {
  await client.query('BEGIN ISOLATION LEVEL READ COMMITTED');
  try {
    await client.query(SETTLED_READ_LOCK);
    const result = await send(client, query);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/** What a rule is handed for `query` from its result. */
function answerOf(query: Query, result: pg.QueryResult): unknown {
  if (query.op === 'get') return result.rows[0];
  if (query.op === 'all' || query.op === 'settled') return result.rows;
  if (query.op === 'put') {
    query.onRows?.(result.rows);
    return undefined;
  }
  return { changes: result.rowCount ?? 0 };
}

export function quoteIdentifier(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** The server could not be reached, or refused the login. */
export function unreachable(error: unknown, target: PostgresTarget): StoreError {
  const reason = (error as Error)?.message || String(error);
  return new StoreError(
    ErrorCode.StoreUnreachable,
    `cannot reach the PostgreSQL store at ${redacted(target.connectionString)}: ${reason}. ` +
      'Check that the server is running and that the URL names its host, port, user, password and database. Nothing was written.',
    { cause: error, details: { url: redacted(target.connectionString), sqlState: (error as { code?: unknown }).code } },
  );
}

/** A rule's own error passes through; a database's becomes a StoreError naming its SQLSTATE. */
function storeErrorOf(error: unknown, target: PostgresTarget): unknown {
  if (HarnessError.isInstance(error)) return error;
  const code = (error as { code?: unknown }).code;
  if (typeof code !== 'string') {
    // The client's own word for a connection that went away; anything else is not the database's.
    return /connection|terminated|timeout/i.test((error as Error)?.message ?? '') ? unreachable(error, target) : error;
  }
  // Connection exceptions (class 08), the server shutting down (57P0x), and the socket's own errors.
  if (code.startsWith('08') || code.startsWith('57P0') || /^E[A-Z]+$/.test(code)) return unreachable(error, target);
  return new StoreError(
    ErrorCode.StoreFailed,
    `the PostgreSQL store refused a statement: ${(error as Error).message} (SQLSTATE ${code}). Nothing of that write was kept.`,
    { cause: error, details: { sqlState: code } },
  );
}
