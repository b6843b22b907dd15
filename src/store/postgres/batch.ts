/**
 * What the store actor runs on PostgreSQL for each batch of writes it gathers: one
 * transaction on one connection, each write in a savepoint of its own when the batch has
 * more than one, so a write that throws is rolled back alone and its error returned in its
 * place. A batch PostgreSQL gives up to a deadlock or a serialization failure runs again
 * whole; a commit that fails throws, with nothing of the batch kept. It takes the locks
 * of the trees its writes decide on first, or the store's (see locks.ts). The statements go out pipelined (see outbox.ts): a
 * write does not wait for the one before it, and a statement that fails is its own
 * write's. The same contract as the SQLite actor's BatchWriter, awaited.
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { BatchResult, BatchWrites, WriteOutcome } from '../backend.js';
import type { StoreRequestBody } from '../port.js';
import type { Notifications } from '../records.js';
import { emptyNotifications, RuleContext, ruleFor } from '../rules/index.js';
import type { PostgresTarget } from '../target.js';
import { beginWrite, commitBehind, connectionLost, PostgresConnection, retryable } from './connection.js';
import { openPostgresSchema } from './index.js';
import { scopeOf } from './locks.js';
import { channelOf, hintPayload, type WorkHint, WorkListener } from './notify.js';
import type { Outbox } from './outbox.js';
import { asCall, type ServerStep, type StepCall, stepCall } from './step-function.js';

/** SQLSTATE of a call to a function that is not there. */
const UNDEFINED_FUNCTION = '42883';

function append(into: Notifications, from: Notifications): void {
  into.events.push(...from.events);
  into.mail.push(...from.mail);
  into.spawned.push(...from.spawned);
  into.ended.push(...from.ended);
}

/**
 * The most writes in one transaction. PostgreSQL keeps every version of a row that a
 * transaction writes until the transaction ends, and each later statement that reads or
 * updates that row walks past them: a root reserving a thousand children, each spawn
 * counting on the root's run row and the tree's account, cost each spawn more than the
 * last (3.7 s before the first child started, against 1.2 s in batches of 32; see
 * docs/MEASUREMENTS.md). SQLite writes a row in place and takes any batch whole.
 */
const MAX_BATCH = 32;

export class PostgresBatchWriter implements BatchWrites {
  readonly maxBatch = MAX_BATCH;
  readonly #connection: PostgresConnection;
  /** Names this writer's hints, so its own listener skips them. */
  readonly #origin = randomUUID();
  readonly #channel: string;
  #listener: WorkListener | null = null;

  /** How this writer calls the store's step function (step-function.ts); null: the store has none it trusts. */
  #stepCall: StepCall | null;

  private constructor(connection: PostgresConnection, stepFunction: boolean) {
    this.#connection = connection;
    this.#channel = channelOf(connection.target);
    this.#stepCall = stepFunction
      ? { call: stepCall(connection.target.schema ?? 'public'), channel: this.#channel, origin: this.#origin }
      : null;
  }

  /** Hands on what other hosts' commits hint at (see notify.ts). */
  async listen(onHint: (hint: WorkHint) => void): Promise<void> {
    this.#listener = new WorkListener(this.#connection.target, this.#origin, onHint);
    await this.#listener.start();
  }

  /** Connects (one connection: the actor's batches are one after another) and checks the schema. */
  static async open(target: PostgresTarget): Promise<PostgresBatchWriter> {
    const { stepFunction } = await openPostgresSchema(target);
    return new PostgresBatchWriter(new PostgresConnection({ ...target, max: 1 }), stepFunction);
  }

  async run(writes: readonly StoreRequestBody[], beforeCommit: () => void = () => undefined): Promise<BatchResult> {
    // Each write as a call of the step function, made once for whichever way the batch goes.
    const how = this.#stepCall;
    const calls = how ? writes.map((write) => asCall(write, how)) : [];
    if (calls.length > 0 && calls.every((call) => call !== null)) {
      const done = await this.#onServer(writes, calls as ServerStep[], beforeCommit);
      if (done !== null) return done;
    }
    return this.#byRules(writes, calls, beforeCommit);
  }

  /**
   * A batch of plain steps, each one call of the step function, sent with its COMMIT in
   * one flight: one wait on the server. Null when the database kept nothing of it: a step
   * the function leaves to the rule (see LEFT_TO_RULES), or a statement that failed; the
   * batch then runs write by write (#each, its plain steps as calls again), and the rules
   * take the step left to them and say which write failed and why.
   */
  async #onServer(
    writes: readonly StoreRequestBody[],
    steps: readonly ServerStep[],
    beforeCommit: () => void,
  ): Promise<BatchResult | null> {
    try {
      await this.#connection.attempts(async (client, committing) => {
        const outbox = beginWrite(client, scopeOf(writes));
        for (const step of steps) outbox.put(step.query);
        beforeCommit();
        committing();
        await commitBehind(outbox);
      });
    } catch (error) {
      // Lost after COMMIT was sent: whether it landed is not known.
      if (connectionLost(error)) throw this.#connection.errorOf(error);
      // The function is gone (dropped since this writer opened): the rules from now on.
      if ((error as { code?: unknown }).code === UNDEFINED_FUNCTION) this.#stepCall = null;
      return null;
    }
    const notifications = emptyNotifications();
    const outcomes: WriteOutcome[] = steps.map((step) => {
      const done = step.outcome();
      append(notifications, done.notifications);
      return { ok: true, value: done.value };
    });
    return { outcomes, notifications };
  }

  /** The batch by the rules (../rules), in one transaction. */
  async #byRules(
    writes: readonly StoreRequestBody[],
    calls: readonly (ServerStep | null)[],
    beforeCommit: () => void,
  ): Promise<BatchResult> {
    try {
      return await this.#connection.attempts(async (client, committing) => {
        // The transaction's start goes out with its first statements (see outbox.ts).
        const outbox = beginWrite(client, scopeOf(writes));
        const lone = writes.length === 1 ? writes[0] : undefined;
        const done = lone ? await this.#alone(client, lone, outbox) : await this.#each(client, writes, calls, outbox);
        // A lone write that threw keeps nothing.
        if (lone && !done.outcomes[0]?.ok) {
          await client.query('ROLLBACK');
          return done;
        }
        beforeCommit();
        committing();
        if (!lone) {
          // A batch keeps what did not throw: its writes were settled, each in its savepoint.
          // Its hint (see #each) goes with the COMMIT, in one flight.
          await commitBehind(outbox);
          return done;
        }
        try {
          // A lone write's last statements go with its COMMIT (see commitBehind).
          await commitBehind(outbox);
        } catch (error) {
          if (retryable(error) || connectionLost(error)) throw error;
          // A statement of the write failed at the database: the server rolled it back whole.
          return {
            outcomes: [{ ok: false, error: this.#connection.errorOf(error) }],
            notifications: emptyNotifications(),
          };
        }
        return done;
      });
    } catch (error) {
      // A connection lost before COMMIT kept nothing, and ran again (see attempts): this is past that.
      throw this.#connection.errorOf(error);
    }
  }

  /** Other hosts hear of new work when the commit lands (NOTIFY is delivered at commit, or never). */
  #hint(outbox: Outbox, notifications: Notifications): void {
    const hint = hintPayload(this.#origin, notifications);
    if (hint !== null) outbox.put({ op: 'put', text: 'SELECT pg_notify(?, ?)', params: [this.#channel, hint] });
  }

  /** A batch of one needs no savepoint: it commits, or rolls back, alone. */
  async #alone(client: pg.PoolClient, write: StoreRequestBody, outbox: Outbox): Promise<BatchResult> {
    const rules = new RuleContext({ lockRows: true });
    try {
      const value = await PostgresConnection.drive(client, ruleFor(rules, write), outbox);
      const notifications = rules.takeNotifications();
      this.#hint(outbox, notifications);
      // What the rule put and is still in flight fails or stands with it, at the COMMIT sent behind it.
      return { outcomes: [{ ok: true, value }], notifications };
    } catch (error) {
      const { cause } = await this.#blame(outbox, error);
      return { outcomes: [{ ok: false, error: this.#connection.errorOf(cause) }], notifications: emptyNotifications() };
    }
  }

  /**
   * What a failed write's error comes from, and which write sent it (null: the write the
   * caller was running). Thrown instead when it is the transaction's: a deadlock, a
   * serialization failure or a lost connection (the batch runs again whole), or a failure
   * of the transaction's own start (its lock timed out, say).
   */
  async #blame(outbox: Outbox, error: unknown): Promise<{ cause: unknown; write: number | null }> {
    const failure = await outbox.blame(error);
    const cause = failure?.error ?? error;
    if (retryable(cause) || connectionLost(cause) || (failure?.write ?? 0) < 0) throw cause;
    return { cause, write: failure?.write ?? null };
  }

  /**
   * Each write in a savepoint of its own, the writes' statements one stream: a write does
   * not wait for the last one's to be answered. A statement that fails is its write's
   * (each is sent tagged with it): the transaction goes back to that write's savepoint, the
   * write fails alone, and the writes after it, none of whose statements ran, run again.
   * A plain step goes as one call of the step function, waiting for nothing; when the
   * function leaves it to the rule (or fails otherwise), it runs again by the rule, which
   * says what becomes of it.
   */
  async #each(
    client: pg.PoolClient,
    writes: readonly StoreRequestBody[],
    calls: readonly (ServerStep | null)[],
    outbox: Outbox,
  ): Promise<BatchResult> {
    // One entry a write sent, in order: a call's as it is sent, a rule's once it has run.
    const done: ({ outcome: WriteOutcome; notifications: Notifications } | { call: ServerStep })[] = [];
    /** The writes sent as calls that the rules run instead. */
    const byRules = new Set<number>();
    let next = 0;
    const fail = async (error: unknown, current: number): Promise<void> => {
      const { cause, write } = await this.#blame(outbox, error);
      // Back to the savepoint of the write that failed: nothing sent after its failure ran.
      const at = write ?? current;
      outbox.write = at;
      outbox.raw('ROLLBACK TO SAVEPOINT request');
      outbox.raw('RELEASE SAVEPOINT request');
      await outbox.settle();
      const sent = done[at];
      done.length = at;
      if (sent !== undefined && 'call' in sent) {
        // The function kept nothing of it: the rule decides, as if it had never been a call.
        if ((cause as { code?: unknown }).code === UNDEFINED_FUNCTION) this.#stepCall = null;
        byRules.add(at);
        next = at;
        return;
      }
      done.push({
        outcome: { ok: false, error: this.#connection.errorOf(cause) },
        notifications: emptyNotifications(),
      });
      next = at + 1;
    };
    for (;;) {
      while (next < writes.length) {
        const index = next;
        const write = writes[index] as StoreRequestBody;
        const call = this.#stepCall && !byRules.has(index) ? calls[index] : null;
        outbox.write = index;
        outbox.raw('SAVEPOINT request');
        if (call) {
          outbox.put(call.query);
          outbox.raw('RELEASE SAVEPOINT request');
          done.push({ call });
          next = index + 1;
          continue;
        }
        const rules = new RuleContext({ lockRows: true });
        try {
          const value = await PostgresConnection.drive(client, ruleFor(rules, write), outbox);
          outbox.raw('RELEASE SAVEPOINT request');
          done.push({ outcome: { ok: true, value }, notifications: rules.takeNotifications() });
          next = index + 1;
        } catch (error) {
          await fail(error, index);
        }
      }
      try {
        await outbox.settle();
        break;
      } catch (error) {
        await fail(error, writes.length - 1);
      }
    }
    // A call's commit hints for itself (see step-function.ts). The hint is sent with the
    // COMMIT, not waited for alone: NOTIFY takes effect at the commit, or never.
    const byRule = emptyNotifications();
    for (const item of done) if (!('call' in item)) append(byRule, item.notifications);
    this.#hint(outbox, byRule);
    const notifications = emptyNotifications();
    const outcomes = done.map((item): WriteOutcome => {
      if (!('call' in item)) {
        append(notifications, item.notifications);
        return item.outcome;
      }
      const made = item.call.outcome();
      append(notifications, made.notifications);
      return { ok: true, value: made.value };
    });
    return { outcomes, notifications };
  }

  async close(): Promise<void> {
    await this.#listener?.close();
    await this.#connection.close();
  }
}
