/**
 * A tree's events as every host commits them. On a store several hosts write (PostgreSQL),
 * `supervisor.events({ rootId })` (or `{ runId }`) is not fed by this supervisor's own
 * commits alone: it tails the tree's events in the store, in id order, which is commit
 * order (every writing transaction holds the store's write lock to its commit; see
 * store/postgres/connection.ts), so an event another host committed comes in its place
 * and none is missed across a takeover. The tail reads when this host commits to the tree,
 * when another host's commit hints at it (LISTEN/NOTIFY, store/postgres/notify.ts), and
 * on a timer in case a hint was lost.
 */
import type { HarnessEvent } from '../runtime/events.js';
import { TraceQueries } from '../store/queries.js';
import type { Q } from '../store/sql.js';
import type { EventStream } from './event-bus.js';

const QUERIES = new TraceQueries();

/** How often a tail looks at the store with no hint (a NOTIFY can be lost with its connection). */
export const TAIL_POLL_MS = 500;

export interface TailPorts {
  read<T>(body: Q<T>): Promise<T>;
  /** Whether the tree has nothing left to run and no supervisor here drives it. */
  settledElsewhere(rootId: string): Promise<boolean>;
}

/**
 * The tree of `runId`, once the store has the run: a stream scoped to a run may be asked
 * for as another host stores it. Undefined if the stream is done first.
 */
export async function rootWhenStored(
  read: TailPorts['read'],
  runId: string,
  stream: EventStream,
): Promise<string | undefined> {
  for (;;) {
    const run = await read(QUERIES.run(runId));
    if (run) return run.rootId;
    if (stream.done) return undefined;
    await new Promise((resolve) => setTimeout(resolve, TAIL_POLL_MS).unref());
  }
}

/** One stream's tail of one tree. */
export class TreeTail {
  readonly rootId: string;
  readonly #stream: EventStream;
  readonly #runId: string | undefined;
  readonly #ports: TailPorts;
  /** The last event id read; null until the tail knows where "now" was. */
  #after: number | null = null;
  /** The first event this host committed to the tree before "now" was known. */
  #firstOwn: number | null = null;
  #started: Promise<void> | null = null;
  #reading: Promise<void> | null = null;
  #again = false;
  #rootEnded = false;
  #ended = false;
  #timer: NodeJS.Timeout | null = null;

  constructor(stream: EventStream, rootId: string, runId: string | undefined, ports: TailPorts) {
    this.#stream = stream;
    this.rootId = rootId;
    this.#runId = runId;
    this.#ports = ports;
  }

  /**
   * Starts from the store's last event as it is read, or from just before the first event
   * this host committed to the tree since the stream was asked for (`firstOwn`), whichever
   * is earlier; then reads on, and ends the stream at once if the tree had settled elsewhere.
   */
  start(firstOwn: number | null): Promise<void> {
    this.#firstOwn ??= firstOwn;
    this.#started ??= (async () => {
      const last = await this.#ports.read(QUERIES.lastEventId()).catch(() => 0);
      // Read after the lookup: an event committed here while it was on its way counts too.
      const own = this.#firstOwn;
      this.#after = own === null ? last : Math.min(last, own - 1);
      if (this.#ended) return;
      this.#timer = setInterval(() => this.#tick(), TAIL_POLL_MS);
      this.#timer.unref();
      await this.wake();
      await this.#endIfSettled();
    })();
    return this.#started;
  }

  /** This host committed `event` to the tree. */
  committed(event: HarnessEvent): void {
    if (this.#after === null) this.#firstOwn ??= event.eventId;
    else void this.wake();
  }

  /** Reads what was committed since the last read; reads again at once if woken meanwhile. */
  wake(): Promise<void> {
    if (this.#after === null || this.#ended) return Promise.resolve();
    if (this.#reading) {
      this.#again = true;
      return this.#reading;
    }
    this.#reading = this.#drain().finally(() => {
      this.#reading = null;
      if (this.#rootEnded) void this.#endIfSettled();
    });
    return this.#reading;
  }

  async #drain(): Promise<void> {
    do {
      this.#again = false;
      let events: HarnessEvent[];
      try {
        events = await this.#ports.read(QUERIES.treeEvents(this.rootId, this.#after ?? 0));
      } catch {
        // The store cannot be read now (it is closing): the next wake or tick tries again.
        return;
      }
      for (const event of events) {
        // Returned meanwhile: nothing more is handed on.
        if (this.#ended) return;
        this.#after = event.eventId;
        if (event.type === 'run-end' && event.runId === this.rootId) this.#rootEnded = true;
        if (this.#runId === undefined || event.runId === this.#runId) this.#stream.push(event);
      }
    } while (this.#again && !this.#ended);
  }

  #tick(): void {
    void this.wake().then(() => this.#endIfSettled());
  }

  /** A tree no supervisor here drives ends its stream once it has settled, after its last events. */
  async #endIfSettled(): Promise<void> {
    if (this.#ended || !(await this.#ports.settledElsewhere(this.rootId).catch(() => false))) return;
    await this.finish();
  }

  /** Reads what is left, then ends the stream (and takes it off the bus). */
  async finish(): Promise<void> {
    // Not from inside start(): by the time it asks, "now" is known.
    if (this.#after === null) await this.#started;
    if (this.#ended) return;
    await this.#reading;
    await this.wake();
    this.close();
    this.#stream.finish();
  }

  /** Stops reading (the stream was returned, or the supervisor closes). */
  close(): void {
    this.#ended = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }
}
