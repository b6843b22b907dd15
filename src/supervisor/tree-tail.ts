/**
 * A tree's events as every host commits them. On a store several hosts write (PostgreSQL),
 * `supervisor.events({ rootId })` (or `{ runId }`) is not fed by this supervisor's own
 * commits alone: it tails the tree's events in the store, in id order, which is the
 * tree's commit order (a tree's writes take turns on its lock; see store/postgres/locks.ts),
 * so an event another host committed comes in its place and none is missed across a
 * takeover. A tail of every tree (an audit log's) reads with no tree write in flight (a
 * settled read: no smaller id can commit after it), at most every {@link GLOBAL_READ_GAP_MS}:
 * each such read waits for the tree writes in flight and holds new ones back meanwhile. The tail reads when this host commits to the tree,
 * when another host's commit hints at it (LISTEN/NOTIFY, store/postgres/notify.ts), and
 * on a timer in case a hint was lost.
 */
import type { HarnessEvent } from '../runtime/events.js';
import type { LiveEvent } from '../runtime/live.js';
import { TraceQueries } from '../store/queries.js';
import type { Q } from '../store/sql.js';
import type { EventBus, EventFilter, EventStream, LiveObserver } from './event-bus.js';

const QUERIES = new TraceQueries();

/** How often a tail looks at the store with no hint (a NOTIFY can be lost with its connection). */
export const TAIL_POLL_MS = 500;
/** How many events a tail of every tree reads at a time. */
const PAGE = 1000;
/** The least time between two reads of every tree's events (each takes the store's lock a moment). */
export const GLOBAL_READ_GAP_MS = 50;

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

/** Where a tail hands the events it reads, and what it calls when it is done. */
export interface TailSink {
  push(event: HarnessEvent): void;
  /** The tree settled and everything of it was handed on (a tail of one tree only). */
  finish(): void;
}

/**
 * A tail of the store's events, of one tree (`rootId`) or of every tree (null), in id
 * order: for a stream of one tree (a {@link TailSink} that is an EventStream), or for an
 * observer that must see every host's commits (config.hooks()'s audit logs).
 */
export class TreeTail {
  readonly rootId: string | null;
  readonly #sink: TailSink;
  readonly #runId: string | undefined;
  readonly #ports: TailPorts;
  /** The last event id read; null until the tail knows where to start. */
  #after: number | null = null;
  /** The first event this host committed to the tree before "now" was known. */
  #firstOwn: number | null = null;
  #started: Promise<void> | null = null;
  #reading: Promise<void> | null = null;
  #again = false;
  #rootEnded = false;
  #ended = false;
  #timer: NodeJS.Timeout | null = null;
  /** Told once, when the tail stops. */
  onClose: () => void = () => undefined;

  /** False for an observer's tail: it reads on after its tree settles (a resume may come). */
  readonly #endsWithTree: boolean;

  constructor(
    sink: TailSink,
    rootId: string | null,
    runId: string | undefined,
    ports: TailPorts,
    options: { endsWithTree?: boolean } = {},
  ) {
    this.#sink = sink;
    this.rootId = rootId;
    this.#runId = runId;
    this.#ports = ports;
    this.#endsWithTree = options.endsWithTree ?? true;
  }

  /** Whether `event` is of what this tail reads. */
  covers(event: { rootId: string }): boolean {
    return this.rootId === null || this.rootId === event.rootId;
  }

  /**
   * Starts after the event `from`, or (null) from the store's last event as it is read or
   * just before the first event this host committed since the tail was asked for
   * (`firstOwn`), whichever is earlier; then reads on, and ends a tail of one tree at once
   * if the tree had settled elsewhere.
   */
  start(firstOwn: number | null, from: number | null = null): Promise<void> {
    this.#firstOwn ??= firstOwn;
    this.#started ??= (async () => {
      const last = from ?? (await this.#ports.read(QUERIES.lastEventId()).catch(() => 0));
      // Read after the lookup: an event committed here while it was on its way counts too.
      const own = this.#firstOwn;
      this.#after = own === null || from !== null ? last : Math.min(last, own - 1);
      if (this.#ended) return;
      this.#timer = setInterval(() => this.#tick(), TAIL_POLL_MS);
      this.#timer.unref();
      await this.wake();
      await this.#endIfSettled();
    })();
    return this.#started;
  }

  /** This host committed `event` to what the tail reads. */
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
        const after = this.#after ?? 0;
        events = await this.#ports.read(
          this.rootId === null ? QUERIES.eventsAfter(after, PAGE) : QUERIES.treeEvents(this.rootId, after),
        );
      } catch {
        // The store cannot be read now (it is closing): the next wake or tick tries again.
        return;
      }
      for (const event of events) {
        // Stopped meanwhile: nothing more is handed on.
        if (this.#ended) return;
        this.#after = event.eventId;
        if (event.type === 'run-end' && event.runId === this.rootId) this.#rootEnded = true;
        if (this.#runId === undefined || event.runId === this.#runId) this.#sink.push(event);
      }
      if (this.rootId === null) {
        // A full page of every tree's events: there may be more.
        if (events.length === PAGE) this.#again = true;
        // Wakes meanwhile are gathered into the next read (see GLOBAL_READ_GAP_MS).
        else await new Promise((resolve) => setTimeout(resolve, GLOBAL_READ_GAP_MS).unref());
      }
    } while (this.#again && !this.#ended);
  }

  #tick(): void {
    void this.wake().then(() => this.#endIfSettled());
  }

  /** A tree no supervisor here drives ends its tail once it has settled, after its last events. */
  async #endIfSettled(): Promise<void> {
    const rootId = this.rootId;
    if (rootId === null || !this.#endsWithTree || this.#ended) return;
    if (!(await this.#ports.settledElsewhere(rootId).catch(() => false))) return;
    await this.finish();
  }

  /** Reads what is left, then tells the sink it is done. */
  async finish(): Promise<void> {
    // Not from inside start(): by the time it asks, where to start is known.
    if (this.#after === null) await this.#started;
    if (this.#ended) return;
    await this.#reading;
    await this.wake();
    this.close();
    this.#sink.finish();
  }

  /** Stops reading (the stream was returned, the observer removed, or the supervisor closes). */
  close(): void {
    if (this.#ended) return;
    this.#ended = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    this.onClose();
  }
}

/**
 * An observer of one tree (or run) on a store other hosts write too: every host's commits
 * to it from the store, from now on, for as long as it is installed (a tree that settles
 * may be resumed); its live events (when it asked for them) from this host's bus. Returns
 * what removes it.
 */
export function observeTree(bus: EventBus, ports: TailPorts, observer: LiveObserver, filter: EventFilter): () => void {
  const off = filter.live
    ? bus.subscribe((event: HarnessEvent | LiveEvent) => 'live' in event && observer(event), filter)
    : () => undefined;
  const tail = followStore(bus, ports, filter, null, (event) => observer(event));
  return () => {
    off();
    tail.close();
  };
}

/**
 * A tail of the store's events for an observer (an acting one's ObserverContext.follow,
 * or a scoped observe()): of its filter's tree, or of every tree (its run's events kept
 * when scoped to a run), after the event `from` (null: now), each event handed to
 * `deliver` with what it throws kept by the bus, never let through. It reads on until
 * closed: a tree that settles may be resumed.
 */
export function followStore(
  bus: EventBus,
  ports: TailPorts,
  filter: EventFilter,
  from: number | null,
  deliver: (event: HarnessEvent) => void,
): { close(): void } {
  const sink = { push: (event: HarnessEvent) => bus.deliver(deliver, event), finish: () => undefined };
  const tail = new TreeTail(sink, filter.rootId ?? null, filter.runId, ports, { endsWithTree: false });
  bus.followFrom(tail, from);
  return tail;
}
