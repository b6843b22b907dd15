/**
 * A run driven by another process, followed from the store: what a supervisor's own bus
 * never hears (on a SQLite file, each process's bus carries only its own commits), read as
 * Attach reads it, every committed event of the tree in commit order, to the tree's end.
 * Live events (text as it streams) stay in the driving process; a follower sees each step
 * whole as it commits.
 */
import type { AnyStore } from '../store/either.js';
import { Attach } from './attach.js';
import { matches } from './event-bus.js';
import type { Observe } from './run-stream.js';

/** An {@link Observe} fed from the store: the tree of `rootId`'s committed events, each given to every observer whose filter it matches. */
export function observeFromStore(store: AnyStore, rootId: string): Observe {
  return (observer, filter) => {
    const stop = new AbortController();
    void (async () => {
      const attach = await Attach.open(store, rootId);
      for await (const event of attach.events({ signal: stop.signal })) {
        if (stop.signal.aborted) return;
        if (matches(filter, event)) observer(event);
      }
    })().catch(() => {
      // The store closed under the follower: nothing more to give.
    });
    return () => stop.abort();
  };
}

/** Resolves once the run `runId` of the tree `rootId` has ended or paused, as the store says. */
export async function endedInStore(store: AnyStore, rootId: string, runId: string): Promise<void> {
  const attach = await Attach.open(store, rootId);
  for await (const event of attach.events())
    if (event.runId === runId && (event.type === 'run-end' || event.type === 'run-paused')) return;
}
