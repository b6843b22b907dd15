/**
 * What the store actor runs on PostgreSQL for each batch of writes it gathers: one
 * transaction on one connection, each write in a savepoint of its own when the batch has
 * more than one, so a write that throws is rolled back alone and its error returned in its
 * place. A batch PostgreSQL gives up to a deadlock or a serialization failure runs again
 * whole; a commit that fails throws, with nothing of the batch kept. It takes the store's
 * write lock first (see BEGIN_WRITE). The same contract as the SQLite
 * actor's BatchWriter, awaited.
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { BatchResult, BatchWrites, WriteOutcome } from '../backend.js';
import type { StoreRequestBody } from '../port.js';
import type { Notifications } from '../records.js';
import { emptyNotifications, RuleContext, ruleFor } from '../rules/index.js';
import type { PostgresTarget } from '../target.js';
import { ATTEMPTS, BEGIN_WRITE, connectionLost, PostgresConnection, retryable } from './connection.js';
import { openPostgresSchema } from './index.js';
import { channelOf, hintPayload, type WorkHint, WorkListener } from './notify.js';

function append(into: Notifications, from: Notifications): void {
  into.events.push(...from.events);
  into.mail.push(...from.mail);
  into.spawned.push(...from.spawned);
  into.ended.push(...from.ended);
}

export class PostgresBatchWriter implements BatchWrites {
  readonly #connection: PostgresConnection;
  /** Names this writer's hints, so its own listener skips them. */
  readonly #origin = randomUUID();
  readonly #channel: string;
  #listener: WorkListener | null = null;

  private constructor(connection: PostgresConnection) {
    this.#connection = connection;
    this.#channel = channelOf(connection.target);
  }

  /** Hands on what other hosts' commits hint at (see notify.ts). */
  async listen(onHint: (hint: WorkHint) => void): Promise<void> {
    this.#listener = new WorkListener(this.#connection.target, this.#origin, onHint);
    await this.#listener.start();
  }

  /** Connects (one connection: the actor's batches are one after another) and checks the schema. */
  static async open(target: PostgresTarget): Promise<PostgresBatchWriter> {
    await openPostgresSchema(target);
    return new PostgresBatchWriter(new PostgresConnection({ ...target, max: 1 }));
  }

  async run(writes: readonly StoreRequestBody[], beforeCommit: () => void = () => undefined): Promise<BatchResult> {
    for (let attempt = 1; ; attempt++) {
      const client = await this.#connection.connect();
      let broken = false;
      let committing = false;
      try {
        for (const statement of BEGIN_WRITE) await client.query(statement);
        const lone = writes.length === 1 ? writes[0] : undefined;
        const done = lone ? await this.#alone(client, lone) : await this.#each(client, writes);
        // Other hosts hear of new work when the commit lands (NOTIFY is delivered at commit, or never).
        const hint = hintPayload(this.#origin, done.notifications);
        if (hint !== null) await client.query('SELECT pg_notify($1, $2)', [this.#channel, hint]);
        beforeCommit();
        committing = true;
        // A lone write that threw keeps nothing; a batch keeps what did not throw.
        await client.query(done.outcomes.every((outcome) => outcome.ok) || !lone ? 'COMMIT' : 'ROLLBACK');
        return done;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {
          broken = true;
        });
        // A connection lost before COMMIT kept nothing: the batch runs again, fenced as before.
        if ((retryable(error) || (!committing && connectionLost(error))) && attempt < ATTEMPTS) continue;
        throw this.#connection.errorOf(error);
      } finally {
        client.release(broken);
      }
    }
  }

  /** A batch of one needs no savepoint: it commits, or rolls back, alone. */
  async #alone(client: pg.PoolClient, write: StoreRequestBody): Promise<BatchResult> {
    const rules = new RuleContext({ lockRows: true });
    try {
      const value = await PostgresConnection.drive(client, ruleFor(rules, write));
      return { outcomes: [{ ok: true, value }], notifications: rules.takeNotifications() };
    } catch (error) {
      if (retryable(error) || connectionLost(error)) throw error;
      return { outcomes: [{ ok: false, error: this.#connection.errorOf(error) }], notifications: emptyNotifications() };
    }
  }

  async #each(client: pg.PoolClient, writes: readonly StoreRequestBody[]): Promise<BatchResult> {
    const outcomes: WriteOutcome[] = [];
    const notifications = emptyNotifications();
    for (const write of writes) {
      const rules = new RuleContext({ lockRows: true });
      await client.query('SAVEPOINT request');
      try {
        const value = await PostgresConnection.drive(client, ruleFor(rules, write));
        await client.query('RELEASE SAVEPOINT request');
        outcomes.push({ ok: true, value });
        append(notifications, rules.takeNotifications());
      } catch (error) {
        // A deadlock, a serialization failure or a lost connection is the transaction's: the whole batch runs again.
        if (retryable(error) || connectionLost(error)) throw error;
        await client.query('ROLLBACK TO SAVEPOINT request');
        await client.query('RELEASE SAVEPOINT request');
        outcomes.push({ ok: false, error: this.#connection.errorOf(error) });
      }
    }
    return { outcomes, notifications };
  }

  async close(): Promise<void> {
    await this.#listener?.close();
    await this.#connection.close();
  }
}
