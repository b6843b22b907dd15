/**
 * How a writing transaction talks to PostgreSQL without a round trip per statement. The
 * connection pipelines (`pg`'s `pipeline` mode): a statement a rule `put`s (../sql.ts),
 * and the transaction's own (BEGIN, its lock, savepoints), is written to the socket at
 * once and not waited for; the write waits only where a rule reads an answer, and by then
 * the server has run everything before it in order. A step's commit was some twenty round
 * trips, one per statement; it is now one for what the step decides on (the run's row and
 * its draw, read together) and one for the commit. Every statement stays a prepared one.
 *
 * The first statement that fails aborts the transaction; what follows it fails too. The
 * failure handed on is that first one, at the next answer the write waits for.
 */
import type pg from 'pg';
import type { Query } from '../sql.js';

/** Sends `query` on `client` as a prepared statement (connection.ts), resolving to its result. */
export type Sender = (client: pg.PoolClient, query: Query) => Promise<pg.QueryResult>;

/** A statement that failed, and the write (by its place in a batch) that sent it. */
export interface Failure {
  error: unknown;
  write: number;
}

export class Outbox {
  readonly #client: pg.PoolClient;
  readonly #send: Sender;
  #inflight: Promise<unknown>[] = [];
  /** The first statement, in the order sent, that failed, and its place in that order. */
  #failure: (Failure & { at: number }) | null = null;
  #thrown: Failure | null = null;
  /** How many statements were sent: each failure is placed by it, not by when its promise settled. */
  #sent = 0;
  /** Which write of a batch the statements sent from now on belong to; -1 for the transaction's own start. */
  write = 0;

  constructor(client: pg.PoolClient, send: Sender) {
    this.#client = client;
    this.#send = send;
  }

  /** Sends `query` (a put, or a statement of the transaction's own) without waiting for it. */
  put(query: Query): void {
    const write = this.write;
    const at = this.#sent++;
    this.#inflight.push(
      this.#send(this.#client, query)
        .then((result) => query.onRows?.(result.rows))
        .catch((error: unknown) => this.#fail(error, write, at)),
    );
  }

  /**
   * Keeps the failure of the statement sent first: what follows it in the transaction fails
   * because it did, whichever promise settles first.
   */
  #fail(error: unknown, write: number, at: number): void {
    if (this.#failure === null || at < this.#failure.at) this.#failure = { error, write, at };
  }

  /** Sends a statement of the transaction's own, written out, without waiting for it. */
  raw(text: string): void {
    this.put({ op: 'run', text, params: [] });
  }

  /**
   * Sends `query` and waits for its result, and so for everything sent before it; the first
   * of those that failed is the error, else the query's own.
   */
  async ask(query: Query): Promise<pg.QueryResult> {
    const write = this.write;
    const at = this.#sent++;
    let result: pg.QueryResult | undefined;
    try {
      result = await this.#send(this.#client, query);
    } catch (error) {
      this.#fail(error, write, at);
    }
    await this.settle();
    return result as pg.QueryResult;
  }

  /** Waits for everything sent; throws the first failure among it, once. */
  async settle(): Promise<void> {
    const failure = await this.failed();
    if (failure) {
      this.#thrown = failure;
      throw failure.error;
    }
  }

  /** Waits for everything sent; the first failure among it not yet thrown (and forgets it), or null. */
  async failed(): Promise<Failure | null> {
    while (this.#inflight.length > 0) {
      const inflight = this.#inflight;
      this.#inflight = [];
      await Promise.all(inflight);
    }
    const failure = this.#failure;
    this.#failure = null;
    return failure && { error: failure.error, write: failure.write };
  }

  /**
   * Which write `error` belongs to: the one that sent the statement it came from when it
   * is a failure this outbox threw, else the first failure still in flight (which comes
   * before anything the caller did since), else null (the caller's own).
   */
  async blame(error: unknown): Promise<Failure | null> {
    const thrown = this.#thrown;
    this.#thrown = null;
    const pending = await this.failed();
    if (thrown && thrown.error === error) return thrown;
    return pending;
  }
}
