/**
 * The ActorHost seam: where agent actors run. An actor is one call of the agent entry
 * (./agent-worker.ts) holding three ports for its life — its store port, its host
 * channel, its control port — and the supervisor talks to it only through them, so it
 * cannot tell where the actor runs. Two hosts implement the seam:
 *
 * - the piscina pool (./agent.ts, `ActorPool`): actors on worker threads, many to a thread
 *   (`isolation: 'shared'`, the default) or one each (`isolation: 'thread'`);
 * - the in-process host (below, `isolation: 'in-process'`): actors on the calling thread,
 *   over `MessageChannel`s, with no worker thread started at all. A breakpoint in a tool or
 *   the loop stops where it is set, and tests of tree logic (admission, mailbox, caps,
 *   settling) pay no thread start. What it gives up is isolation: an actor that blocks the
 *   event loop blocks the supervisor with it.
 *
 * The shape is Temporal's: one entry that only wires ports and dispatches, reached either
 * through a thread or directly (its in-process and threaded workflow creators).
 */
import type { MessagePort } from 'node:worker_threads';
import type { Clock } from '../clock.js';
import { ActorExitedError, ErrorCode } from '../errors.js';
import type { StoreTarget } from '../store/target.js';
import { ActorPool, type ActorTask, type AgentStart, actorChannels, type HostedActor, type RunExit } from './agent.js';

/** Where agent actors run: on the shared pool, a thread each, or on the calling thread. */
export type Isolation = 'shared' | 'thread' | 'in-process';

/** The seam between the supervisor and wherever its actors run. */
export interface ActorHost {
  readonly isolation: Isolation;
  /** Starts what the host needs ahead of the first actor, without waiting for it. */
  start(): void;
  /** Hosts one actor reading the store at `target`: its ports are made here, the store's end is handed to `attachStore`. */
  host(start: AgentStart, target: StoreTarget, attachStore: (port: MessagePort) => void): HostedActor;
  /** Loads ahead of need what an agent loads on its first run (threads, modules, the HTTP client). */
  warm(count: number): Promise<void>;
  /** The worker threads this host has running now (none on the calling thread's host). */
  readonly liveThreads: number;
  /**
   * Ends every actor at once, committing nothing more: their exits reject, as when the
   * thread under them dies. What they committed stays, to be resumed.
   */
  destroy(): Promise<void>;
}

export interface ActorHostOptions {
  isolation: Isolation;
  /** With shared isolation, how many threads host the actors. Default: the cores available. */
  threads?: number;
  /** With thread isolation, how long an idle thread is kept for the next actor. */
  idleThreadMs?: number;
  /** The clock in-process actors read (a clock cannot cross to a thread, where runs read the system's). */
  clock?: Clock;
}

/** The host an isolation names. */
export function actorHost(options: ActorHostOptions): ActorHost {
  if (options.isolation === 'in-process') return new InProcessHost(options.clock);
  return new ActorPool({ ...options, isolation: options.isolation });
}

type Entry = (task: ActorTask) => Promise<RunExit | null>;

/**
 * Actors on the calling thread. Each actor's ports are the two ends of `MessageChannel`s
 * made here, so what crosses them is cloned exactly as it is between threads: an actor
 * shares no object with the supervisor here either. The entry is the thread's own,
 * imported on first use so a supervisor that never hosts an actor in-process loads nothing.
 */
export class InProcessHost implements ActorHost {
  readonly isolation = 'in-process' as const;
  readonly liveThreads = 0;
  #entry: Promise<Entry> | null = null;
  /** What ends each live actor at once, by the controller that aborts it. */
  readonly #live = new Set<AbortController>();
  readonly #clock: Clock | undefined;

  constructor(clock?: Clock) {
    this.#clock = clock;
  }

  #load(): Promise<Entry> {
    this.#entry ??= import('./agent-worker.js').then((module) => module.default as Entry);
    return this.#entry;
  }

  start(): void {
    void this.#load();
  }

  host(start: AgentStart, target: StoreTarget, attachStore: (port: MessagePort) => void): HostedActor {
    const { task: channels, control, host } = actorChannels(start, target, attachStore);
    const abort = new AbortController();
    const task: ActorTask = { ...channels, signal: abort.signal, ...(this.#clock ? { clock: this.#clock } : {}) };
    this.#live.add(abort);
    const exit = this.#run(task, abort.signal).finally(() => this.#live.delete(abort));
    return { control, host, exit };
  }

  async #run(task: ActorTask, signal: AbortSignal): Promise<RunExit> {
    const entry = await this.#load();
    // Dropped before it began: nothing ran, nothing is committed.
    if (signal.aborted) throw droppedError();
    const ran = entry(task);
    // As a terminated thread's task rejects at once, so does a dropped actor's exit; the
    // entry, halted by the same signal, commits nothing more on its way out.
    const dropped = new Promise<never>((_, reject) => {
      const onAbort = () => reject(droppedError());
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
    dropped.catch(() => undefined);
    const exit = await Promise.race([ran, dropped]);
    return exit as RunExit;
  }

  async warm(): Promise<void> {
    await this.#load();
  }

  async destroy(): Promise<void> {
    for (const abort of [...this.#live]) abort.abort();
    this.#live.clear();
  }
}

function droppedError(): ActorExitedError {
  return new ActorExitedError(ErrorCode.ActorExited, 'the in-process actor host was destroyed');
}
