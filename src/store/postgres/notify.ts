/**
 * Hints between hosts: a commit that spawns, ends a run, sends mail or records events tells every
 * host listening on the store with `NOTIFY` (sent inside the transaction, so it is
 * delivered when the commit is, and never for a commit that did not happen). A hint is
 * only a hint: each host also looks at the store on a timer, so a notification lost (a
 * listener's connection dropped, a host that was not listening) costs latency, never a
 * message or an admission.
 */
import { createHash } from 'node:crypto';
import pg from 'pg';
import type { Notifications } from '../records.js';
import type { PostgresTarget } from '../target.js';

/** What a hint says: which trees changed, which runs ended, who has mail; `all` when it could not say. */
export interface WorkHint {
  roots: string[];
  /** Trees whose cancel was asked for (see store/rules/cancel.ts): their hosts cancel what they drive. */
  cancels: string[];
  /** Trees with new events: a host following one reads them (supervisor/tree-tail.ts). */
  events: string[];
  ended: { rootId: string; runId: string }[];
  mail: { rootId: string; to: string }[];
  all: boolean;
}

/** PostgreSQL drops a payload past 8000 bytes; a hint that long says only which trees. */
const PAYLOAD_LIMIT = 7_000;

/** The channel of a store: one per schema, so two stores in one database do not wake each other. */
export function channelOf(target: PostgresTarget): string {
  const digest = createHash('sha256')
    .update(target.schema ?? 'public')
    .digest('hex')
    .slice(0, 16);
  return `io_harness_${digest}`;
}

/** The payload a commit's notifications are sent as, or null when they hold nothing another host acts on. */
export function hintPayload(origin: string, notes: Notifications): string | null {
  // A cancel asked for is a tree to look at again: its hosts cancel what they drive of it.
  const cancels = notes.events.filter((event) => event.type === 'cancel-asked').map((event) => event.rootId);
  const events = [...new Set(notes.events.map((event) => event.rootId))];
  if (notes.spawned.length + notes.ended.length + notes.mail.length + cancels.length + events.length === 0) return null;
  const roots = [
    ...new Set([
      ...notes.spawned.map((item) => item.rootId),
      ...notes.ended.map((item) => item.rootId),
      ...notes.mail.map((item) => item.rootId),
      ...cancels,
    ]),
  ];
  const full = JSON.stringify({
    o: origin,
    r: roots,
    e: notes.ended.map((item) => [item.rootId, item.runId]),
    m: notes.mail.map((item) => [item.rootId, item.to]),
    ...(cancels.length > 0 ? { c: cancels } : {}),
    v: events,
  });
  if (full.length <= PAYLOAD_LIMIT) return full;
  const short = JSON.stringify({ o: origin, r: roots, ...(cancels.length > 0 ? { c: cancels } : {}), v: events });
  return short.length <= PAYLOAD_LIMIT ? short : JSON.stringify({ o: origin, all: true });
}

/** A payload read back; null for one this release does not understand, or one of `origin`'s own. */
export function readHint(payload: string | undefined, origin: string): WorkHint | null {
  try {
    const data = JSON.parse(payload ?? '') as {
      o?: unknown;
      r?: unknown;
      e?: unknown;
      m?: unknown;
      c?: unknown;
      v?: unknown;
      all?: unknown;
    };
    if (data.o === origin) return null;
    const pairs = (value: unknown): [string, string][] =>
      Array.isArray(value)
        ? value.filter((pair): pair is [string, string] => Array.isArray(pair) && pair.length === 2)
        : [];
    const names = (value: unknown): string[] =>
      Array.isArray(value) ? value.filter((name): name is string => typeof name === 'string') : [];
    return {
      roots: names(data.r),
      cancels: names(data.c),
      events: names(data.v),
      ended: pairs(data.e).map(([rootId, runId]) => ({ rootId, runId })),
      mail: pairs(data.m).map(([rootId, to]) => ({ rootId, to })),
      all: data.all === true,
    };
  } catch {
    return null;
  }
}

/**
 * One connection LISTENing on the store's channel. When it drops it connects again, backing
 * off, and hands on an `all` hint, since what was sent meanwhile is lost.
 */
export class WorkListener {
  readonly #target: PostgresTarget;
  readonly #origin: string;
  readonly #onHint: (hint: WorkHint) => void;
  #client: pg.Client | null = null;
  #closed = false;
  #delay = 250;
  #timer: NodeJS.Timeout | null = null;

  constructor(target: PostgresTarget, origin: string, onHint: (hint: WorkHint) => void) {
    this.#target = target;
    this.#origin = origin;
    this.#onHint = onHint;
  }

  /** Starts listening; resolves once the first LISTEN is in place, or has failed (then it keeps trying). */
  async start(): Promise<void> {
    await this.#connect(false);
  }

  async #connect(again: boolean): Promise<void> {
    if (this.#closed) return;
    const client = new pg.Client({
      connectionString: this.#target.connectionString,
      connectionTimeoutMillis: this.#target.connectTimeoutMs ?? 10_000,
      application_name: 'io-harness-listen',
    });
    let dropped = false;
    const drop = () => {
      if (dropped) return;
      dropped = true;
      if (this.#client === client) this.#client = null;
      client.end().catch(() => undefined);
      this.#retry();
    };
    client.on('error', drop);
    client.on('end', drop);
    client.on('notification', (message) => {
      const hint = readHint(message.payload, this.#origin);
      if (hint) this.#onHint(hint);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${channelOf(this.#target)}`);
    } catch {
      drop();
      return;
    }
    if (this.#closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.#client = client;
    this.#delay = 250;
    // What was sent while no connection listened is lost: every host looks again.
    if (again) this.#onHint({ roots: [], cancels: [], events: [], ended: [], mail: [], all: true });
  }

  #retry(): void {
    if (this.#closed || this.#timer) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      void this.#connect(true);
    }, this.#delay);
    this.#timer.unref();
    this.#delay = Math.min(this.#delay * 2, 5_000);
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    const client = this.#client;
    this.#client = null;
    await client?.end().catch(() => undefined);
  }
}
