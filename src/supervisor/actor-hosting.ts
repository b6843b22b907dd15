/**
 * Where a supervisor's actors run: the store actor, and the ActorHost the agent actors are
 * hosted on (../actors/host.ts: the piscina pool, or the calling thread). The one place that
 * starts, hosts, warms and ends them, and that tells either where the store is: how actors
 * are hosted changes here and nowhere else.
 */
import type { MessagePort } from 'node:worker_threads';
import type { AgentStart, HostedActor } from '../actors/agent.js';
import { type ActorHost, actorHost, type Isolation } from '../actors/host.js';
import { type StoreActorHandle, startStoreActor } from '../actors/store.js';
import type { Clock } from '../clock.js';
import { keepHarnessCode } from '../runtime/exec/containment/harness-code.js';
import type { PostgresStore } from '../store/postgres/index.js';
import type { Store } from '../store/sqlite/store.js';

export interface ActorHostingOptions {
  isolation: Isolation;
  threads?: number;
  idleThreadMs?: number;
  /** Test hook: `op:n:phase` SIGKILLs the whole process inside the store actor at that point. */
  killAt: string | null;
  /** The supervisor's clock, which in-process actors read too. */
  clock?: Clock;
}

/** Waits for every promise to settle, or for `ms` to pass. */
async function settledWithin(promises: Promise<unknown>[], ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.allSettled(promises),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
  ]);
  clearTimeout(timer);
}

export class ActorHosting {
  readonly #backend: Store | PostgresStore;
  readonly #killAt: string | null;
  readonly #host: ActorHost;
  #storeActor: StoreActorHandle | null = null;
  /** Every actor hosted and not yet exited, halted ones included: what close() waits for. */
  readonly #actors = new Set<HostedActor>();

  constructor(backend: Store | PostgresStore, options: ActorHostingOptions) {
    // Before any thread starts: the code every thread loads is kept from every run's reach.
    keepHarnessCode();
    this.#backend = backend;
    this.#killAt = options.killAt;
    this.#host = actorHost({
      isolation: options.isolation,
      ...(options.threads === undefined ? {} : { threads: options.threads }),
      ...(options.idleThreadMs === undefined ? {} : { idleThreadMs: options.idleThreadMs }),
      ...(options.clock === undefined ? {} : { clock: options.clock }),
    });
  }

  get isolation(): Isolation {
    return this.#host.isolation;
  }

  /** The agent threads running now (none in-process). */
  get liveThreads(): number {
    return this.#host.liveThreads;
  }

  /** Starts the store actor and resolves once it has opened the store; the shared pool's first thread boots meanwhile. */
  async startStore(): Promise<StoreActorHandle> {
    // The first agent thread boots while the store actor opens the file: the first agent does not wait for either in turn.
    if (this.#host.isolation === 'shared') this.#host.start();
    this.#storeActor = await startStoreActor(
      { target: this.#backend.target, killAt: this.#killAt },
      // In-process actors have their store actor in-process too: that isolation starts no thread at all.
      this.#host.isolation === 'in-process' ? 'in-process' : 'thread',
    );
    return this.#storeActor;
  }

  /** Hosts an actor for a run, with its own port to the store actor. */
  host(start: AgentStart): HostedActor {
    const storeActor = this.#storeActor as StoreActorHandle;
    const actor = this.#host.host(start, this.#backend.target, (port: MessagePort) =>
      storeActor.postMessage({ type: 'attach', port }, [port]),
    );
    this.#actors.add(actor);
    const gone = () => {
      this.#actors.delete(actor);
    };
    actor.exit.then(gone, gone);
    return actor;
  }

  /** See Supervisor.warm. */
  warm(count: number): Promise<void> {
    return this.#host.warm(count);
  }

  /**
   * Gives the actors hosted (halted ones stop what they started: a command's process group,
   * a model call) `boundMs` to leave, then ends whichever have not (and the pool's threads).
   */
  async close(boundMs: number): Promise<void> {
    await settledWithin(
      [...this.#actors].map((actor) => actor.exit),
      boundMs,
    );
    await this.#host.destroy();
    this.#actors.clear();
  }

  /** Ends every actor now (and the pool's threads); their exits reject. */
  destroy(): Promise<void> {
    return this.#host.destroy();
  }
}
