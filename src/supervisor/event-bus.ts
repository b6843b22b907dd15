/**
 * Fans the store's committed events out to observers, in commit order. A callback
 * observer is called synchronously per event; an iterator subscriber buffers.
 * An observer that throws is isolated from the rest.
 */
import type { HarnessEvent } from '../runtime/events.js';

export type Observer = (event: HarnessEvent) => void;

export interface EventFilter {
  rootId?: string;
  runId?: string;
}

function matches(filter: EventFilter, event: HarnessEvent): boolean {
  return (
    (filter.rootId === undefined || filter.rootId === event.rootId) &&
    (filter.runId === undefined || filter.runId === event.runId)
  );
}

export class EventBus {
  readonly #observers = new Set<{ filter: EventFilter; observer: Observer }>();
  readonly #streams = new Set<EventStream>();
  #closed = false;
  /** Errors thrown by observers; kept so a broken observer is visible, never fatal. */
  readonly observerErrors: unknown[] = [];

  subscribe(observer: Observer, filter: EventFilter = {}): () => void {
    const entry = { filter, observer };
    this.#observers.add(entry);
    return () => this.#observers.delete(entry);
  }

  stream(filter: EventFilter = {}): AsyncIterableIterator<HarnessEvent> {
    const stream = new EventStream(filter, () => this.#streams.delete(stream));
    if (this.#closed) stream.end();
    else this.#streams.add(stream);
    return stream;
  }

  publish(events: readonly HarnessEvent[]): void {
    for (const event of events) {
      for (const { filter, observer } of this.#observers) {
        if (!matches(filter, event)) continue;
        try {
          observer(event);
        } catch (error) {
          if (this.observerErrors.length < 100) this.observerErrors.push(error);
        }
      }
      for (const stream of this.#streams) if (matches(stream.filter, event)) stream.push(event);
    }
  }

  close(): void {
    this.#closed = true;
    for (const stream of this.#streams) stream.end();
    this.#streams.clear();
  }
}

class EventStream implements AsyncIterableIterator<HarnessEvent> {
  readonly filter: EventFilter;
  readonly #buffer: HarnessEvent[] = [];
  readonly #waiting: ((result: IteratorResult<HarnessEvent>) => void)[] = [];
  readonly #detach: () => void;
  #done = false;

  constructor(filter: EventFilter, detach: () => void) {
    this.filter = filter;
    this.#detach = detach;
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
    this.end();
    this.#buffer.length = 0;
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<HarnessEvent> {
    return this;
  }
}
