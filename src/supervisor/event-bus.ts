/**
 * Fans the store's committed events out to observers, in commit order. A callback
 * observer is called synchronously per event; an iterator subscriber buffers.
 * An observer that throws is isolated from the rest.
 */
import type { HarnessEvent } from '../runtime/events.js';
import type { LiveEvent } from '../runtime/live.js';
import type { Store } from '../store/sqlite/store.js';
import type { TreeTail } from './tree-tail.js';

/**
 * What `supervisor.observe()` hands an observer that asks for it (one with `attach`): the
 * store, to read what was committed before it was installed, and a way to end a tree.
 */
export interface ObserverContext {
  store: Store;
  /** Cancels the tree `rootId` if this supervisor drives it; every run it ends records `reason`. */
  cancel(rootId: string, reason: string): Promise<void>;
  /** The filter the observer was installed with: what it sees of the store's events. */
  filter?: EventFilter;
  /**
   * Where other hosts commit to the store too (PostgreSQL): hands `deliver` every event of
   * the filter's tree (or of every tree) committed after the event `after`, by any host, in
   * commit order, until the returned close() (see tree-tail.ts). Absent on a SQLite file.
   */
  follow?(after: number, deliver: (event: HarnessEvent) => void): { close(): void };
}

export type Observer = ((event: HarnessEvent) => void) & {
  /** Called once by `supervisor.observe()` as the observer is installed. */
  attach?: (context: ObserverContext) => void;
};
/** An observer that asked for live events as well (see runtime/live.ts): `event.live` tells them apart. */
export type LiveObserver = (event: HarnessEvent | LiveEvent) => void;

export interface EventFilter {
  rootId?: string;
  runId?: string;
  /** Also what agents do as it happens (text as it streams, tool calls starting and ending), never committed. */
  live?: boolean;
}

/** Whether `filter` is scoped to one tree or one run. */
export function scoped(filter: EventFilter | undefined): boolean {
  return filter?.rootId !== undefined || filter?.runId !== undefined;
}

/** Whether `event` is of the tree and run `filter` names (any, where it names none). */
export function matches(filter: EventFilter, event: { rootId: string; runId: string }): boolean {
  return (
    (filter.rootId === undefined || filter.rootId === event.rootId) &&
    (filter.runId === undefined || filter.runId === event.runId)
  );
}

export class EventBus {
  readonly #observers = new Set<{ filter: EventFilter; observer: Observer }>();
  readonly #streams = new Set<EventStream>();
  /** Every tail reading the store for this bus: streams' and observers'. */
  readonly #tails = new Set<TreeTail>();
  #closed = false;
  /** Errors thrown by observers; kept so a broken observer is visible, never fatal. */
  readonly observerErrors: unknown[] = [];

  readonly #live = new Set<{ filter: EventFilter; observer: LiveObserver }>();
  readonly #onLiveChange: (wanted: boolean) => void;

  /** `onLiveChange` hears when the first observer asks for live events, and when the last one leaves. */
  constructor(onLiveChange: (wanted: boolean) => void = () => undefined) {
    this.#onLiveChange = onLiveChange;
  }

  subscribe(observer: Observer | LiveObserver, filter: EventFilter = {}): () => void {
    const entry = { filter, observer: observer as Observer };
    this.#observers.add(entry);
    if (filter.live !== true) return () => this.#observers.delete(entry);
    const live = { filter, observer: observer as LiveObserver };
    this.#live.add(live);
    if (this.#live.size === 1) this.#onLiveChange(true);
    return () => {
      this.#observers.delete(entry);
      if (this.#live.delete(live) && this.#live.size === 0) this.#onLiveChange(false);
    };
  }

  /** True while some observer asked for live events. */
  get wantsLive(): boolean {
    return this.#live.size > 0;
  }

  /** Hands a live event to the observers that asked for them; nothing else sees it. */
  publishLive(event: LiveEvent): void {
    for (const { filter, observer } of this.#live) if (matches(filter, event)) this.deliver(observer, event);
  }

  /** Calls one observer; one that throws is kept note of, never let through. */
  deliver<E>(observer: (event: E) => void, event: E): void {
    try {
      observer(event);
    } catch (error) {
      if (this.observerErrors.length < 100) this.observerErrors.push(error);
    }
  }

  /**
   * An iterator of the committed events `filter` matches. `tailed`: it is fed from the
   * store by a {@link TreeTail} (attached with {@link follow}), where other hosts commit too.
   */
  stream(filter: EventFilter = {}, tailed = false): EventStream {
    const stream = new EventStream(filter, () => this.#streams.delete(stream), tailed);
    if (this.#closed) stream.end();
    else this.#streams.add(stream);
    return stream;
  }

  /**
   * Feeds `stream` from the store from now on, through `tail`; or, with no tail (the run it
   * is scoped to is not in the store), from this host's commits as on one host.
   */
  follow(stream: EventStream, tail: TreeTail | null): void {
    if (stream.done) return;
    if (tail === null) {
      stream.untail();
      return;
    }
    stream.tail = tail;
    this.#addTail(tail, stream.firstOwn);
    // Its tree settled here before the tail was attached: it reads what is left, then ends.
    if (stream.endAsked) void tail.finish();
  }

  /** Starts `tail` after the event `from` (null: from now, or this host's `firstOwn`), woken by this bus until it closes. */
  #addTail(tail: TreeTail, firstOwn: number | null, from: number | null = null): void {
    if (this.#closed) return;
    this.#tails.add(tail);
    tail.onClose = () => this.#tails.delete(tail);
    void tail.start(firstOwn, from);
  }

  /** A tail for an observer (see ObserverContext.follow), from after the event `from` (null: now). */
  followFrom(tail: TreeTail, from: number | null): void {
    this.#addTail(tail, null, from);
  }

  /** Another host committed to these trees (all, when it could not say which): their tails read. */
  wakeTails(rootIds: readonly string[] | 'all'): void {
    for (const tail of this.#tails) {
      if (rootIds === 'all' || tail.rootId === null || rootIds.includes(tail.rootId)) void tail.wake();
    }
  }

  publish(events: readonly HarnessEvent[]): void {
    for (const event of events) {
      for (const { filter, observer } of this.#observers) if (matches(filter, event)) this.deliver(observer, event);
      for (const stream of this.#streams) if (matches(stream.filter, event)) stream.committed(event);
      if (event.eventId > 0) for (const tail of this.#tails) if (tail.covers(event)) tail.committed(event);
    }
  }

  /**
   * Ends the iterators scoped to a tree that has settled: those for its root and those for
   * one of its runs (`runIds`). What they buffered is still read before they end.
   */
  endTree(rootId: string, runIds: ReadonlySet<string>): void {
    for (const stream of [...this.#streams]) {
      const { rootId: root, runId } = stream.filter;
      if (!scoped(stream.filter)) continue;
      if ((root === undefined || root === rootId) && (runId === undefined || runIds.has(runId))) {
        // A tailed stream reads what the store has left first (once its tail is there).
        if (stream.tail) void stream.tail.finish();
        else if (stream.tailed) stream.endAsked = true;
        else {
          this.#streams.delete(stream);
          stream.end();
        }
      }
    }
  }

  close(): void {
    this.#closed = true;
    for (const tail of [...this.#tails]) tail.close();
    for (const stream of this.#streams) stream.end();
    this.#streams.clear();
  }
}

export class EventStream implements AsyncIterableIterator<HarnessEvent> {
  readonly filter: EventFilter;
  readonly #buffer: HarnessEvent[] = [];
  readonly #waiting: ((result: IteratorResult<HarnessEvent>) => void)[] = [];
  readonly #detach: () => void;
  #tailed: boolean;
  #done = false;
  /** A tailed stream whose tree settled before its tail was attached. */
  endAsked = false;
  /** What feeds a tailed stream from the store, once attached. */
  tail: TreeTail | null = null;
  /** A tailed stream's first event committed here before its tail was attached. */
  firstOwn: number | null = null;

  constructor(filter: EventFilter, detach: () => void, tailed = false) {
    this.filter = filter;
    this.#detach = detach;
    this.#tailed = tailed;
  }

  get done(): boolean {
    return this.#done;
  }

  get tailed(): boolean {
    return this.#tailed;
  }

  /** Fed from this host's commits after all (there is nothing in the store to tail). */
  untail(): void {
    this.#tailed = false;
    if (this.endAsked) this.finish();
  }

  /**
   * This host committed `event` (or said it, with no id: a lease lost); a tailed stream
   * reads it from the store instead (its tail is woken by the bus).
   */
  committed(event: HarnessEvent): void {
    if (!this.#tailed || event.eventId === 0) this.push(event);
    else if (!this.tail) this.firstOwn ??= event.eventId;
  }

  /** Ends the stream and takes it off the bus; what it buffered is still read. */
  finish(): void {
    this.#detach();
    this.end();
  }

  push(event: HarnessEvent): void {
    const waiter = this.#waiting.shift();
    if (waiter) waiter({ value: event, done: false });
    else this.#buffer.push(event);
  }

  end(): void {
    this.#done = true;
    for (const waiter of this.#waiting.splice(0)) waiter({ value: undefined, done: true });
  }

  next(): Promise<IteratorResult<HarnessEvent>> {
    const event = this.#buffer.shift();
    if (event) return Promise.resolve({ value: event, done: false });
    if (this.#done) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  return(): Promise<IteratorResult<HarnessEvent>> {
    this.#detach();
    this.tail?.close();
    this.end();
    this.#buffer.length = 0;
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<HarnessEvent> {
    return this;
  }
}
