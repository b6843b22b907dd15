/**
 * A run driven by another process on a SQLite file, followed from the store: what this
 * process's bus never hears (each process's bus carries only its own commits), read as
 * Attach reads it, in commit order, from the moment the follower is made, as a bus would
 * give it (an earlier pause of the run is not its end). Live events (text as it streams)
 * stay in the driving process; a follower sees each step whole as it commits. Where the
 * driving process dies (its lease lapses, or it is found gone on this host), the follower
 * says so, for the caller to take the run over.
 */
import { processLiveness } from '../store/liveness.js';
import type { Store } from '../store/sqlite/store.js';
import { Attach } from './attach.js';
import { matches } from './event-bus.js';
import type { Observe } from './run-stream.js';

/** How often a follower looks again for the run's end, or for its lease lapsed. */
const LOOK_MS = 200;

/** A follower of the tree of `rootId` (a run of it, `runId`), from now. */
export class StoreFollower {
  readonly #store: Store;
  readonly #rootId: string;
  readonly #runId: string;
  /** The tree's last event when the follower was made: only what comes after is followed. */
  readonly #after: number;

  /** Made at once (a SQLite store answers at once), so nothing committed after this line is missed. */
  constructor(store: Store, rootId: string, runId: string) {
    this.#store = store;
    this.#rootId = rootId;
    this.#runId = runId;
    this.#after = store.treeEvents(rootId).reduce((last, event) => Math.max(last, event.eventId), 0);
  }

  /** An {@link Observe} fed from the store: each event after the follower's start, to every observer whose filter it matches. */
  readonly observe: Observe = (observer, filter) => {
    const stop = new AbortController();
    void (async () => {
      const attach = Attach.open(this.#store, this.#rootId);
      for await (const event of attach.events({ signal: stop.signal })) {
        if (stop.signal.aborted) return;
        if (event.eventId > this.#after && matches(filter, event)) observer(event);
      }
    })().catch(() => {
      // The store closed under the follower: nothing more to give.
    });
    return () => stop.abort();
  };

  /**
   * Resolves `ended` once the run has ended or paused after the follower's start (or is
   * found not running), `lapsed` once its lease has run out with the run still running:
   * the process driving it is gone.
   */
  async settled(now: () => number): Promise<'ended' | 'lapsed'> {
    for (;;) {
      const events = this.#store.treeEvents(this.#rootId, this.#after);
      if (
        events.some((event) => event.runId === this.#runId && (event.type === 'run-end' || event.type === 'run-paused'))
      )
        return 'ended';
      const run = this.#store.run(this.#runId);
      if (!run || (run.status !== 'running' && run.status !== 'queued')) return 'ended';
      const { expiresAt, pid, host } = run.lease;
      // Its lease ran out, or the process holding it, on this host, is gone (a SIGKILL).
      if ((expiresAt !== null && expiresAt < now()) || processLiveness(pid, host) === 'dead') return 'lapsed';
      await new Promise((resolve) => setTimeout(resolve, LOOK_MS));
    }
  }
}
