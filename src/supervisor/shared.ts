/**
 * The supervisor runWith shares: one per store handle (and per set of plain supervisor
 * options), started by the first call that can share it and reused by every later one, so
 * only that first call pays for the store actor's thread and the pool's. Session turns and
 * the free retryGate go through it too. Its lifetime:
 *
 * - While no tree of it runs it holds nothing up (the supervisor's own keep-alive unrefs its
 *   threads), so a script exits when its last run settles, close() or not; after
 *   {@link IDLE_CLOSE_MS} with no call on it, it closes, on an unref'd timer.
 * - It closes with its store handle: a call on a closed handle is refused as the handle
 *   refuses a write, and the store opened again is a new handle with a supervisor of its own.
 * - One that stopped under its calls (an `onStart` closed it, its store actor died) is let
 *   go, and the next call starts another.
 *
 * A call whose supervisor options hold more than plain values (a clock, tools, models, MCP
 * servers), a kill point, or in-process isolation starts a supervisor of its own and closes
 * it after, as every call did before.
 */
import type { PostgresStore } from '../store/postgres/index.js';
import type { Store } from '../store/sqlite/store.js';
import { Supervisor, type SupervisorOptions } from './supervisor.js';

type AnyStore = Store | PostgresStore;

/** How long a shared supervisor waits, with no call on it, before it closes. */
export const IDLE_CLOSE_MS = 10_000;

interface Shared {
  started: Promise<Supervisor<AnyStore>>;
  /** Calls on it now; at 0 the idle timer runs. */
  calls: number;
  idle: NodeJS.Timeout | null;
}

/** Each store handle's shared supervisors, by their options' key. */
const held = new WeakMap<AnyStore, Map<string, Shared>>();

/**
 * The key under which calls with these options share a supervisor, or null when they may
 * not: only plain values (numbers, strings, booleans) can be told equal, a kill point is a
 * test's own, and in-process actors would hold a PostgreSQL store's connections up.
 */
export function shareKey(options: SupervisorOptions): string | null {
  const entries = Object.entries(options).filter(([, value]) => value !== undefined && value !== null);
  const plain = (value: unknown) => ['number', 'string', 'boolean'].includes(typeof value);
  if (entries.some(([name, value]) => name === 'killAt' || !plain(value))) return null;
  if (options.isolation === 'in-process') return null;
  return JSON.stringify(entries.sort(([a], [b]) => (a < b ? -1 : 1)));
}

/**
 * Runs `body` on the store's shared supervisor for `options` (started if there is none),
 * or on a supervisor of its own when the options cannot share one; only the latter is
 * closed after.
 */
export async function onSharedSupervisor<T>(
  store: AnyStore,
  options: SupervisorOptions,
  body: (supervisor: Supervisor<AnyStore>) => Promise<T>,
): Promise<T> {
  store.assertOpen();
  const key = shareKey(options);
  if (key === null) {
    const own = await Supervisor.start<AnyStore>(store, options);
    try {
      return await body(own);
    } finally {
      await own.close();
    }
  }
  let shared = take(store, key, options);
  try {
    let supervisor = await shared.started;
    if (supervisor.state !== 'running') {
      // It stopped since the last call: this one starts the next. One that failed (its store
      // actor died) is still closed, so its timers go with it; closing a stopped one is a no-op.
      forget(store, key, shared);
      void supervisor.close().catch(() => undefined);
      leave(store, key, shared);
      shared = take(store, key, options);
      supervisor = await shared.started;
    }
    // The handle was closed while the supervisor started: it is closing with it.
    store.assertOpen();
    return await body(supervisor);
  } finally {
    leave(store, key, shared);
  }
}

/** The shared supervisor for `key`, started if there is none or it stopped, with this call counted on it. */
function take(store: AnyStore, key: string, options: SupervisorOptions): Shared {
  let byKey = held.get(store);
  if (!byKey) {
    const stores = new Map<string, Shared>();
    byKey = stores;
    held.set(store, stores);
    store.onClose(() => {
      held.delete(store);
      return Promise.all([...stores.values()].map(stop));
    });
  }
  let shared = byKey.get(key);
  if (!shared) {
    const started = Supervisor.start<AnyStore>(store, options);
    const entry: Shared = { started, calls: 0, idle: null };
    // One that could not start is forgotten: the next call tries again.
    started.catch(() => forget(store, key, entry));
    byKey.set(key, entry);
    shared = entry;
  }
  shared.calls++;
  if (shared.idle) clearTimeout(shared.idle);
  shared.idle = null;
  return shared;
}

/** A call is done with `shared`: the last one out starts its idle timer, or lets a stopped one go. */
function leave(store: AnyStore, key: string, shared: Shared): void {
  shared.calls--;
  if (shared.calls > 0 || held.get(store)?.get(key) !== shared) return;
  void shared.started.then(
    (supervisor) => {
      if (shared.calls > 0 || held.get(store)?.get(key) !== shared) return;
      if (supervisor.state !== 'running') {
        forget(store, key, shared);
        void supervisor.close().catch(() => undefined);
        return;
      }
      if (shared.idle) clearTimeout(shared.idle);
      shared.idle = setTimeout(() => {
        if (shared.calls > 0) return;
        forget(store, key, shared);
        void stop(shared);
      }, IDLE_CLOSE_MS);
      shared.idle.unref();
    },
    () => undefined,
  );
}

function forget(store: AnyStore, key: string, shared: Shared): void {
  const byKey = held.get(store);
  if (byKey?.get(key) === shared) byKey.delete(key);
}

/** Closes a shared supervisor once it has started; a run still on it ends with SUPERVISOR_CLOSED. */
function stop(shared: Shared): Promise<void> {
  if (shared.idle) clearTimeout(shared.idle);
  shared.idle = null;
  return shared.started.then((supervisor) => supervisor.close()).catch(() => undefined);
}
