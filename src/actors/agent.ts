/**
 * The agent actor: one actor per live agent, driving one run through observe, reason,
 * act, check, stop. Actors are hosted on a piscina pool of worker threads: by default many
 * actors share a thread (`isolation: 'shared'`, a pool sized to the cores), or each has a
 * thread of its own (`isolation: 'thread'`). An actor is one task of the pool that holds
 * its three ports for its life: the store actor's (its writes), its host channel (what it
 * asks of the main thread) and its control port (mail, cancel, halt and live events). It
 * talks to nothing else, and it shares no state with the actors beside it but the thread's
 * read connection and module caches.
 */
import { availableParallelism } from 'node:os';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { Piscina } from 'piscina';
import type { Clock } from '../clock.js';
import type { SerializedError } from '../errors.js';
import type { RunStatus } from '../runtime/events.js';
import type { KeptPath } from '../runtime/exec/containment/kept.js';
import type { LiveData } from '../runtime/live.js';
import { poolEntry } from '../runtime/pool-entry.js';
import type { ProviderSpec } from '../runtime/provider.js';
import type { ToolDefinitionData } from '../runtime/tools/tool.js';
import type { StoreTarget } from '../store/target.js';
import type { ActorHost } from './host.js';

export type { WaitChildResult } from '../runtime/tools/ports.js';

/** What starts a run on an actor. */
export interface AgentStart {
  type: 'start';
  runId: string;
  generation: number;
  owner: string;
  resumed: boolean;
  /** The tree's provider with its key, when this supervisor has it; the stored spec never carries keys. */
  provider?: ProviderSpec;
  /** A review gate's provider with its key, likewise. */
  reviewer?: ProviderSpec;
  /** Someone listens to the live channel: publish what the run does as it happens. */
  live?: boolean;
  /** The embedder's tools this tree has, as data; the main thread runs them. */
  tools?: ToolDefinitionData[];
  /**
   * False: the tree has no approver, so an ask is refused without asking the host, and the
   * refusal says so. Otherwise the host's `approve` answers (the supervisor's asks the tree's).
   */
  approver?: boolean;
  /**
   * What the supervisor's thread keeps from every command (the store's files, the
   * configuration's, the binaries the harness runs): kept by this thread's containment too.
   */
  kept?: KeptPath[];
}

/** Supervisor to actor, over its control port. */
export type AgentInput =
  | AgentStart
  /** A message was committed to this actor's address. */
  | { type: 'mail' }
  /** Stop at the next step boundary and end the run as cancelled; `reason` says who asked (default: the supervisor). */
  | { type: 'cancel'; reason?: string }
  /**
   * The tree stopped in this process (it failed, or the supervisor is closing): stop now,
   * commit nothing more, and leave the run as its last commit left it, to be resumed.
   */
  | { type: 'halt' }
  /** Whether anyone listens to the live channel now (an observer came or went). */
  | { type: 'live'; on: boolean }
  /** Every live event before the flush with this id has been handed on. */
  | { type: 'live-flushed'; id: number };

/** How a run left the actor. */
export type RunExit =
  | { kind: 'ended'; status: RunStatus }
  | { kind: 'lease-lost' }
  | { kind: 'error'; error: SerializedError };

/** Actor to supervisor, over its control port. */
export type AgentOutput =
  /** What the run is doing as it happens (see runtime/live.ts): never a committed fact. */
  | { type: 'live'; runId: string; data: LiveData; at: number }
  /** Asks for a `live-flushed` reply once the live events sent before it are handed on. */
  | { type: 'live-flush'; id: number };

/** One actor as the pool's task: what it runs and the ports it holds for its life. */
export interface ActorTask {
  start: AgentStart;
  /** The store the actor reads, on the backend it names (its writes go through `storePort`). */
  target: StoreTarget;
  /** Its own port to the store actor. */
  storePort: MessagePort;
  /** The actor's end of its host channel (see ./host-channel.ts). */
  hostPort: MessagePort;
  /** The actor's end of its control port. */
  controlPort: MessagePort;
  /**
   * On the in-process host only (a signal does not cross to a thread): aborted when the
   * host is dropped, it stops the actor as a halt does, at once, as a thread's end would.
   */
  signal?: AbortSignal;
  /**
   * On the in-process host only (a clock does not cross to a thread): the supervisor's
   * injected clock, which the run reads instead of the system's. On a thread the run reads
   * the system clock.
   */
  clock?: Clock;
}

/**
 * An actor's three channels, made for `start`: the actor's ends in its task, the
 * supervisor's ends returned beside it, the store's end handed to `attachStore`.
 */
export function actorChannels(
  start: AgentStart,
  target: StoreTarget,
  attachStore: (port: MessagePort) => void,
): { task: ActorTask; control: MessagePort; host: MessagePort } {
  const store = new MessageChannel();
  attachStore(store.port1);
  const host = new MessageChannel();
  const control = new MessageChannel();
  const task: ActorTask = {
    start,
    target,
    storePort: store.port2,
    hostPort: host.port2,
    controlPort: control.port2,
  };
  return { task, control: control.port1, host: host.port1 };
}

/** A pool task that only loads what an agent needs, so the first agent on a thread does not pay for it. */
export interface WarmTask {
  warm: true;
}

export const AGENT_WORKER_URL = new URL('./agent-worker.js', import.meta.url);

/** How the pool hosts actors on threads: many to a thread, or a thread each (see ./host.ts for the seam). */
export type PoolIsolation = 'shared' | 'thread';

export interface ActorPoolOptions {
  isolation: PoolIsolation;
  /** With shared isolation, how many threads host the actors. Default: the cores available. */
  threads?: number;
  /** With thread isolation, how long an idle thread is kept for the next actor. */
  idleThreadMs?: number;
}

/** An actor as its host sees it: its control port and how its task ended. */
export interface HostedActor {
  control: MessagePort;
  /** The main thread's end of the host channel. */
  host: MessagePort;
  /** The run's exit, or a rejection when the thread hosting it died (or the pool was destroyed). */
  exit: Promise<RunExit>;
}

/** Threads live while there is work; with thread isolation an idle one waits this long for the next actor. */
const IDLE_THREAD_MS = 10_000;

/** What piscina asks where a task goes: a worker of those given, or none (it starts a thread, if it may, and the task waits). */
type Balancer = NonNullable<NonNullable<ConstructorParameters<typeof Piscina>[0]>['loadBalancer']>;

/**
 * The threads actors run on. With shared isolation the pool starts with one thread and grows
 * on demand to `threads`: an actor goes to an idle thread, else to a new one while there are
 * fewer than `threads` (it waits for that thread's start), else to the least busy; each
 * thread hosts as many actors as come (admission is the supervisor's durable queue, not the
 * pool's), and a thread started stays until the pool is destroyed. So a lone agent costs one
 * thread, and a wide tree spreads over all of them. Once a thread has failed (one that could
 * not start, say) the pool grows no more: every actor goes to the threads it has. With thread isolation each live actor has
 * a thread of its own and an idle thread waits `idleThreadMs` for the next one.
 */
export class ActorPool implements ActorHost {
  readonly isolation: PoolIsolation;
  readonly threads: number;
  readonly #idleThreadMs: number;
  #pool: Piscina | null = null;
  /**
   * Set when a thread failed (a new one that could not start, say: out of memory, a thread
   * limit): the pool stops growing and places every actor on the threads it has, so none
   * waits in piscina's queue for a thread that will not come.
   */
  #growthStopped = false;

  constructor(options: ActorPoolOptions) {
    this.isolation = options.isolation;
    this.threads = options.threads ?? Math.max(1, availableParallelism());
    this.#idleThreadMs = options.idleThreadMs ?? IDLE_THREAD_MS;
  }

  #piscina(): Piscina {
    if (this.#pool) return this.#pool;
    const shared = this.isolation === 'shared';
    this.#pool = new Piscina({
      ...poolEntry(AGENT_WORKER_URL),
      minThreads: shared ? 1 : 0,
      // One per live actor with thread isolation: the supervisor's caps bound how many are live.
      maxThreads: shared ? this.threads : 100_000,
      concurrentTasksPerWorker: shared ? 1_000_000 : 1,
      ...(shared ? { loadBalancer: this.#spread } : {}),
      idleTimeout: shared ? Number.POSITIVE_INFINITY : this.#idleThreadMs,
      // An actor's task awaits I/O for its whole life: a thread must never block between tasks.
      atomics: 'disabled',
    });
    // A thread that fails with no actor on it has nobody to tell; one with actors rejects their tasks.
    // Either way the pool grows no more, and a task that finishes at once makes piscina hand
    // out the actors it held for that thread to the threads there are.
    const pool = this.#pool;
    const stopGrowing = () => {
      if (!shared || this.#growthStopped || this.#pool !== pool) return;
      this.#growthStopped = true;
      // After piscina has let the thread go (it tells us while the thread is still listed).
      setImmediate(() => void pool.run({ warm: true } satisfies WarmTask).catch(() => undefined));
    };
    pool.on('error', stopGrowing);
    // A shared thread never idles out: one that goes while the pool lives failed (to start, or later).
    pool.on('workerDestroy', stopGrowing);
    return pool;
  }

  /** See the class: an idle thread, else a new one while the pool may grow, else the least busy. */
  readonly #spread: Balancer = (_task, workers) => {
    let least: (typeof workers)[number] | null = null;
    for (const worker of workers) {
      if (worker.currentUsage === 0) return worker;
      if (least === null || worker.currentUsage < least.currentUsage) least = worker;
    }
    return this.liveThreads < this.threads && !(this.#growthStopped && least !== null) ? null : least;
  };

  /** Starts the pool now, without waiting for it: with shared isolation its first thread boots while the caller goes on. */
  start(): void {
    this.#piscina();
  }

  /** Hosts one actor reading the store at `target`: its ports are made here, the store's end is handed to `attachStore`. */
  host(start: AgentStart, target: StoreTarget, attachStore: (port: MessagePort) => void): HostedActor {
    const { task, control, host } = actorChannels(start, target, attachStore);
    const exit = this.#piscina().run(task, {
      transferList: [task.storePort, task.hostPort, task.controlPort],
    }) as Promise<RunExit>;
    return { control, host, exit };
  }

  /**
   * Starts threads ahead of need and resolves once each has loaded what an agent loads
   * on its first run: all of them with shared isolation, `count` with thread isolation.
   */
  async warm(count: number): Promise<void> {
    const pool = this.#piscina();
    const tasks = this.isolation === 'shared' ? this.threads : count;
    const warm: WarmTask = { warm: true };
    // An idle thread takes a task first and the pool grows while none is: as many tasks at once as threads start every thread.
    await Promise.all(Array.from({ length: tasks }, () => pool.run(warm)));
  }

  /** The threads started and not yet exited. */
  get liveThreads(): number {
    return this.#pool?.threads.length ?? 0;
  }

  /** Ends every thread; tasks still running reject. */
  async destroy(): Promise<void> {
    const pool = this.#pool;
    this.#pool = null;
    await pool?.destroy();
  }
}
