/**
 * The supervisor: the part of the runtime that lives on the embedder's main thread, a thin
 * lifecycle over three parts. It starts the store actor and hosts one agent actor per live
 * agent (./actor-hosting.ts); each tree it drives admits queued children first in first out
 * under the concurrency cap and settles only when no run of it is left running (./tree.ts),
 * with what its actors ask of this thread served by its tree host (./tree-host.ts); it holds
 * and renews the leases of the runs it drives, and on PostgreSQL claims work beside other
 * hosts (./leases.ts). It owns the event bus, and fans committed events out to observers.
 */

import { randomUUID } from 'node:crypto';
import type { Isolation } from '../actors/host.js';
import { type StoreActorHandle, StoreClient, type StoreControl, type StoreOutput } from '../actors/store.js';
import { type Clock, systemClock } from '../clock.js';
import { ActorExitedError, ErrorCode, HarnessError, InvalidArgumentError } from '../errors.js';
import { checkSpecs, type McpServerSpec } from '../mcp/spec.js';
import { checkAgents } from '../runtime/agents.js';
import { type HarnessEvent, isTerminal } from '../runtime/events.js';
import { liveChannelsWanted } from '../runtime/live.js';
import type { Approver, Operator, PlanGate } from '../runtime/policy/approval.js';
import { Policy } from '../runtime/policy/policy.js';
import type { ProviderSpec } from '../runtime/provider.js';
import { checkProviderSpec } from '../runtime/providers/builders.js';
import type { HostModel } from '../runtime/providers/host-model.js';
import { heldSecrets, onSecretsHeld } from '../runtime/secrets.js';
import { discoverSkills } from '../runtime/skills.js';
import { checkTools, type HostTool as Tool } from '../runtime/tools/host-tool.js';
import { checkWebToolNames } from '../runtime/web/web.js';
import { perform } from '../store/either.js';
import { HOST } from '../store/liveness.js';
import type { PostgresStore } from '../store/postgres/index.js';
import { TraceQueries } from '../store/queries.js';
import type { Notifications, RunRecord, RunSpec } from '../store/records.js';
import type { Q } from '../store/sql.js';
import type { Store } from '../store/sqlite/store.js';
import { ActorHosting } from './actor-hosting.js';
import { EventBus, type EventFilter, type LiveObserver, type Observer, scoped } from './event-bus.js';
import { checkChanges, RELEASE } from './fingerprint.js';
import { retryGate as retryRunGate } from './gate-retry.js';
import type { RetriedGate, RunHandle, SupervisorState } from './handles.js';
import { checkLeaseTtl, Leases, type TakenRun } from './leases.js';
import {
  checkOptions,
  type ResumeOptions,
  type RunOptions,
  resumeOptionsSchema,
  runOptionsSchema,
  type SupervisorOptions,
  supervisorOptionsSchema,
} from './options.js';
import { type RewoundFile, rewindRunFiles } from './rewind.js';
import { checkRoot, contractProviders, holdProviderSecrets, rootSpec } from './root-spec.js';
import { runHandle } from './run-handle.js';
import type { Observe } from './run-stream.js';
import { post, Tree, type TreePorts } from './tree.js';
import { checkModelsGiven, checkToolsGiven, serverOptions, treeModels, treeServers, treeTools } from './tree-host.js';
import { followStore, observeTree, rootWhenStored, type TailPorts, TreeTail } from './tree-tail.js';

export type { ResumeOptions, RunOptions, SupervisorOptions } from './options.js';

/** The reads the supervisor makes, run on whichever backend holds the store. */
const reads = new TraceQueries();

export type { RetriedGate, RunHandle, SupervisorState, TreeResult } from './handles.js';

const DEFAULTS = { maxConcurrentAgents: 16, maxTotalAgents: 1000, leaseTtlMs: 30_000, maxWaitSecs: 30, pollMs: 1_000 };

/** How long close() gives halted actors to stop what they started before their threads are ended. */
const HALT_BOUND_MS = 2_000;

function positiveInteger(value: unknown, name: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw new InvalidArgumentError(`${name} must be a whole number of at least 1, got ${JSON.stringify(value)}.`);
  }
  return value;
}

export class Supervisor<S extends Store | PostgresStore = Store> {
  readonly owner: string;
  /** The store it drives: a SQLite file, or a PostgreSQL store (`io-harness/postgres`). */
  readonly store: S;
  /** The same store, for the code that tells the backends apart. */
  readonly #backend: Store | PostgresStore;
  readonly #options: Required<
    Pick<SupervisorOptions, 'maxConcurrentAgents' | 'maxTotalAgents' | 'leaseTtlMs' | 'host' | 'pollMs'>
  > & {
    clock: Clock;
    maxHostAgents: number;
  };
  /**
   * On PostgreSQL admission is shared with every other host on the store: runs are claimed
   * from the rows (see the claim rule, store/rules/leases.ts), counted against each tree's cap whichever host
   * holds them, and a lost lease costs this host the run, not the tree.
   */
  readonly #shared: boolean;
  /** The embedder's tools every tree of this supervisor has. */
  readonly #tools: readonly Tool<never>[];
  /** The host models every tree of this supervisor may ask. */
  readonly #models: ReadonlyMap<string, HostModel>;
  /** The MCP servers every tree of this supervisor has (started for each tree). */
  readonly #mcp: readonly McpServerSpec[];
  /** Each tree's MCP servers from connecting to stopped: what close() waits for. */
  readonly #serverLifetimes = new Set<Promise<void>>();
  readonly #bus = new EventBus((wanted) => this.#broadcastLive(wanted));
  readonly #trees = new Map<string, Tree>();
  /** The store actor's thread and the agent actors' pool. */
  readonly #actors: ActorHosting;
  #storeWorker!: StoreActorHandle;
  /** Store requests of this thread waiting for their reply. */
  #storePending = 0;
  #storeClient!: StoreClient;
  #leases!: Leases;
  /** What every tree of this supervisor reaches of it. */
  #treePorts!: TreePorts;
  #state: SupervisorState = 'starting';
  #failure: Error | null = null;
  #storeExited!: Promise<void>;
  /** Stops handing the store actor the secrets this thread comes to hold. */
  #forgetSecrets: () => void = () => undefined;

  private constructor(store: S, given: SupervisorOptions) {
    const options = checkOptions(supervisorOptionsSchema, given, 'Supervisor.start') as SupervisorOptions;
    this.store = store;
    this.#backend = store;
    this.owner = `supervisor-${randomUUID()}`;
    // Every value was checked against the schema above.
    this.#options = {
      maxConcurrentAgents: options.maxConcurrentAgents ?? DEFAULTS.maxConcurrentAgents,
      maxTotalAgents: options.maxTotalAgents ?? DEFAULTS.maxTotalAgents,
      leaseTtlMs: options.leaseTtlMs ?? DEFAULTS.leaseTtlMs,
      clock: options.clock ?? systemClock,
      host: options.host ?? HOST,
      pollMs: options.pollMs ?? DEFAULTS.pollMs,
      maxHostAgents: options.maxHostAgents ?? Number.POSITIVE_INFINITY,
    };
    this.#shared = store.kind === 'postgres';
    checkLeaseTtl(this.#options.leaseTtlMs, store.target, 'Supervisor.start');
    this.#tools = checkTools(options.tools, 'Supervisor.start');
    this.#models = treeModels(new Map(), options.models, 'Supervisor.start');
    this.#mcp = options.mcp === undefined ? [] : checkSpecs(options.mcp, 'Supervisor.start');
    this.#actors = new ActorHosting(store, {
      isolation: options.isolation ?? 'shared',
      ...(options.threads === undefined ? {} : { threads: options.threads }),
      ...(options.idleThreadMs === undefined ? {} : { idleThreadMs: options.idleThreadMs }),
      killAt: options.killAt ?? null,
      ...(options.clock === undefined ? {} : { clock: options.clock }),
    });
  }

  /**
   * Starts a supervisor over a store: the store actor's thread first, then agents on demand.
   *
   * @example
   * const store = await Store.open('runs.db');
   * const supervisor = await Supervisor.start(store, { maxConcurrentAgents: 16 });
   * const handle = supervisor.run({ task: 'survey the repo', provider });
   * console.log(await handle.result);
   * await supervisor.close();
   */
  static async start<S extends Store | PostgresStore = Store>(
    store: S,
    options: SupervisorOptions = {},
  ): Promise<Supervisor<S>> {
    if (
      (store as { kind?: unknown } | null)?.kind !== 'sqlite' &&
      (store as { kind?: unknown } | null)?.kind !== 'postgres'
    )
      throw new InvalidArgumentError(
        'Supervisor.start needs a store: await Store.open("runs.db"), or await PostgresStore.open(url) from "io-harness/postgres".',
      );
    const supervisor = new Supervisor(store, options);
    await supervisor.#boot();
    if (options.warmWorkers) await supervisor.warm(options.warmWorkers);
    return supervisor;
  }

  get state(): SupervisorState {
    return this.#state;
  }

  /** @internal The clock this supervisor reads (its options' `clock`): what a session given it reads too. */
  get clock(): Clock {
    return this.#options.clock;
  }

  async #boot(): Promise<void> {
    this.#storeWorker = await this.#actors.startStore();
    this.#storeClient = new StoreClient(this.#storeWorker, (message) => this.#onStoreOutput(message as StoreOutput));
    this.#storeClient.onPendingChange = (count) => {
      this.#storePending = count;
      this.#keepAlive();
    };
    this.#keepAlive();
    this.#storeExited = new Promise((resolve) => this.#storeWorker.once('exit', () => resolve()));
    // The store actor scrubs every write of each secret this thread holds: those held now, and each one
    // held later, sent on its port ahead of the writes that could carry it.
    const forward = (values: readonly string[]) => {
      const message: StoreControl = { type: 'secrets', values: [...values] };
      this.#storeWorker.postMessage(message);
    };
    forward(heldSecrets());
    this.#forgetSecrets = onSecretsHeld(forward);
    this.#storeWorker.on('exit', () => {
      this.#forgetSecrets();
      this.#onStoreExit();
    });
    this.#storeWorker.on('error', (error) => {
      this.#failure = error;
    });
    const running = () => this.#state === 'running';
    this.#leases = new Leases(
      { owner: this.owner, store: this.#storeClient, read: (body) => this.read(body), trees: this.#trees, running },
      { ...this.#options, shared: this.#shared },
    );
    this.#treePorts = {
      owner: this.owner,
      shared: this.#shared,
      clock: this.#options.clock,
      store: this.#storeClient,
      leases: this.#leases,
      actors: this.#actors,
      bus: this.#bus,
      running,
      liveWanted: () => this.#liveWanted(),
      read: (body) => this.read(body),
      track: (lifetime) => {
        this.#serverLifetimes.add(lifetime);
        void lifetime.finally(() => this.#serverLifetimes.delete(lifetime));
      },
      forget: (tree) => {
        this.#trees.delete(tree.rootId);
        this.#keepAlive();
      },
    };
    this.#leases.start();
    this.#state = 'running';
  }

  /** @internal Runs a read on the store: at once on SQLite, awaited on PostgreSQL. */
  read<T>(body: Q<T>): Promise<T> {
    try {
      return this.#backend.kind === 'sqlite' ? Promise.resolve(this.#backend.query(body)) : this.#backend.query(body);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Where the store is, for messages. */
  get #where(): string {
    return this.#backend.kind === 'sqlite' ? this.#backend.path : this.#backend.url;
  }

  /**
   * Starts agent threads ahead of need and resolves when each has loaded what an agent
   * loads on its first run, so agents admitted later do not wait for it. With shared
   * isolation every thread of the pool is started (`count` is not needed beyond that);
   * with thread isolation, `count` threads, kept while idle for `idleThreadMs`.
   */
  async warm(count: number): Promise<void> {
    this.#assertRunning();
    await this.#actors.warm(positiveInteger(count, 'warm(count)'));
  }

  /** How actors are hosted, and the agent threads running now. */
  get threads(): { isolation: Isolation; live: number } {
    return { isolation: this.#actors.isolation, live: this.#actors.liveThreads };
  }

  /**
   * Re-runs only a run's gate against the workspace the run left, so a gate that could
   * not run (or failed on something since fixed) does not cost the steps that did the
   * work. The evaluation is recorded; a run that ended on its gate and now passes
   * becomes `finished`.
   */
  async retryGate(runId: string, options: { reviewer?: ProviderSpec } = {}): Promise<RetriedGate> {
    this.#assertRunning();
    const ports = {
      read: <T>(body: Q<T>) => this.read(body),
      where: this.#where,
      store: this.#storeClient,
      clock: this.#options.clock,
    };
    return retryRunGate(ports, runId, options);
  }

  /**
   * Calls `observer` with every committed event, in commit order. Returns an unsubscribe
   * function. With `{ live: true }` the observer also gets live events (marked `live: true`,
   * with no id): text as the model streams it, model and tool calls starting and ending.
   * They are not committed and nothing durable depends on them. On PostgreSQL one scoped
   * to a tree or a run sees every host's commits to it (as events() does).
   */
  observe(observer: Observer, filter?: EventFilter & { live?: false }): () => void;
  observe(observer: LiveObserver, filter: EventFilter & { live: true }): () => void;
  observe(observer: Observer | LiveObserver, filter?: EventFilter): () => void {
    // Where other hosts commit too, an observer of one tree reads it from the store, as events() does.
    if (this.#shared && !(observer as Observer).attach && scoped(filter))
      return observeTree(this.#bus, this.#tailPorts(), observer as LiveObserver, filter as EventFilter);
    const unsubscribe = this.#bus.subscribe(observer, filter);
    // An observer that acts (config.hooks()'s) is handed the store to catch up from and a way to end a tree;
    // where other hosts commit too, a way to follow every host's commits (see tree-tail.ts).
    (observer as Observer).attach?.({
      store: this.#backend as Store,
      cancel: (rootId, reason) => this.cancel(rootId, { reason }),
      ...(filter ? { filter } : {}),
      ...(this.#shared
        ? { follow: (after, deliver) => followStore(this.#bus, this.#tailPorts(), filter ?? {}, after, deliver) }
        : {}),
    });
    return unsubscribe;
  }

  /**
   * Stops every agent of the tree `rootId` at its next step boundary and cancels what is
   * queued, as its handle's cancel() does; `reason` is what each run's end records (the
   * default names the supervisor). On a SQLite file, a tree this supervisor is not driving,
   * or one that has settled, is left as it is. On PostgreSQL the cancel is asked in the
   * store (the root's trace records `cancel-asked`): every host driving a run of the tree
   * cancels what it drives when it sees it (at once by the hint, at its next poll at the
   * latest), whichever host asked, and a host that joins the tree later claims nothing.
   */
  async cancel(rootId: string, options: { reason?: string } = {}): Promise<void> {
    this.#assertRunning();
    const tree = this.#trees.get(rootId);
    const reason = typeof options.reason === 'string' && options.reason.trim() !== '' ? options.reason : undefined;
    // What this host drives stops first, whether or not the store can be reached.
    const local = tree?.state === 'running' ? tree.cancel(reason) : Promise.resolve();
    // Asked in the store, so every host driving a run of the tree cancels it, this one or not.
    const asked = this.#shared ? this.#leases.askCancel(rootId, reason ?? null) : Promise.resolve();
    await Promise.all([local, asked]);
  }

  /** Whether anyone listens to live events: an observer that asked, or a diagnostics channel subscriber. */
  #liveWanted(): boolean {
    return this.#bus.wantsLive || liveChannelsWanted();
  }

  /** Tells every actor with a run whether to publish live events. */
  #broadcastLive(on: boolean): void {
    for (const tree of this.#trees.values())
      for (const slot of tree.slots.values()) post(slot, { type: 'live', on: on || liveChannelsWanted() });
  }

  /**
   * Every committed event from now on, in commit order, as an async iterator. One scoped to
   * a tree (`rootId`) or a run (`runId`) ends once that tree settles here (every run of it
   * terminal), after its last events; at once when it had settled already. An unscoped one
   * ends at close(). On PostgreSQL a scoped one follows every host's commits to the tree.
   */
  events(filter?: EventFilter): AsyncIterableIterator<HarnessEvent> {
    // Where other hosts commit too, a stream of one tree follows the tree in the store (see tree-tail.ts).
    const tailed = this.#shared && scoped(filter);
    const stream = this.#bus.stream(filter, tailed);
    void (async () => {
      if (tailed) {
        const ports = this.#tailPorts();
        // A run another host is storing right now is waited for.
        const root = filter?.rootId ?? (await rootWhenStored(ports.read, filter?.runId as string, stream));
        return this.#bus.follow(stream, root === undefined ? null : new TreeTail(stream, root, filter?.runId, ports));
      }
      const rootId = filter?.rootId ?? (filter?.runId ? (await this.read(reads.run(filter.runId)))?.rootId : undefined);
      if (rootId !== undefined && !this.#trees.has(rootId) && (await this.#settledInStore(rootId)))
        this.#bus.endTree(rootId, new Set((await this.read(reads.runs(rootId))).map((run) => run.runId)));
    })().catch(() => {
      // The store could not say which tree: this host's own commits feed it.
      if (tailed) this.#bus.follow(stream, null);
    });
    return stream;
  }

  /** What a tail of the store reads with: the store, and whether a tree has settled with no supervisor here driving it. */
  #tailPorts(): TailPorts {
    return {
      read: (body) => this.read(body),
      settledElsewhere: async (root) => !this.#trees.has(root) && (await this.#settledInStore(root)),
    };
  }

  /** Whether a tree no supervisor here drives has nothing left to run: its root terminal, none of it live. */
  async #settledInStore(rootId: string): Promise<boolean> {
    const root = await this.read(reads.run(rootId));
    return root !== null && isTerminal(root.status) && (await this.read(reads.liveCount(rootId))) === 0;
  }

  /**
   * Holds the process up while there is work: a tree, or a store request on its way. An idle
   * supervisor keeps nothing alive, so a program whose runs have all settled exits even
   * without close() (which stays the clean way: it stops the threads and closes the file).
   */
  #keepAlive(): void {
    if (this.#trees.size > 0 || this.#storePending > 0 || this.#state === 'draining') this.#storeWorker.ref();
    else this.#storeWorker.unref();
  }

  #assertRunning(): void {
    if (this.#state !== 'running') {
      throw new HarnessError(
        ErrorCode.SupervisorClosed,
        `the supervisor is ${this.#state}; start a new one to drive runs.`,
      );
    }
  }

  /** Starts a new tree at its root agent. */
  run<Output = unknown>(given: RunOptions<Output>): RunHandle<Output> {
    this.#assertRunning();
    const options = checkOptions(runOptionsSchema, given, 'run()') as RunOptions;
    const root = checkRoot(options);
    const { provider, data, policy } = root;
    const maxConcurrent = options.maxConcurrentAgents ?? this.#options.maxConcurrentAgents;
    const maxTotal = options.maxTotalAgents ?? this.#options.maxTotalAgents;
    const rootId = randomUUID();
    const reviewer = data?.verification.kind === 'review' ? data.verification.provider : null;
    const tools = treeTools(this.#tools, options.tools, 'run()');
    checkWebToolNames(
      tools.map((item) => item.name),
      data?.web,
      'run()',
    );
    const models = treeModels(this.#models, options.models, 'run()');
    checkModelsGiven('run()', [provider, ...contractProviders(data)], models);
    const servers = treeServers(this.#mcp, options.mcp, 'run()');
    const skills = options.skills === undefined ? [] : discoverSkills(options.skills);
    const agents = options.agents === undefined ? [] : checkAgents(options.agents, 'run()', data?.git === true);
    holdProviderSecrets([provider, ...contractProviders(data)]);
    const tree = this.#newTree(rootId, maxConcurrent, provider, options.approver ?? null, reviewer, options, {
      tools,
      models,
    });
    // Until its root is stored and started the tree is being admitted: nothing settles it meanwhile
    // (a poll or another host's hint that looked now would find no run of it, and end it).
    tree.admitting.add(rootId);
    void (async () => {
      try {
        if (servers.length > 0) {
          await tree.host.connectServers(servers, serverOptions(policy, data, options.approver), 'run()', tree.result);
          // Closed or cancelled while the servers started: nothing is stored, and they stop with the tree.
          if (tree.ended) return;
        }
        const { generation } = await this.#storeClient.call('createRoot', {
          runId: rootId,
          task: root.task,
          spec: rootSpec(options, root, { skills, agents, tools: tree.host.storedTools() }),
          ceilings: root.ceilings,
          maxTotalAgents: maxTotal,
          maxConcurrentAgents: maxConcurrent,
          maxWaitSecs: options.maxWaitSecs ?? DEFAULTS.maxWaitSecs,
          claim: this.#leases.claim(),
        });
        tree.admitting.delete(rootId);
        tree.startActor(rootId, 'root', generation, false, false);
      } catch (error) {
        tree.admitting.delete(rootId);
        tree.fail(error as Error);
      }
    })();
    // The root's answer is checked against the contract's own schema: the type holds.
    return this.#handle(tree) as RunHandle<Output>;
  }

  /**
   * Takes every unfinished run of a tree and drives it to the end from its last
   * committed step. Rejects with a ConflictError, before any step, while a live
   * owner still holds one of its leases.
   */
  async resume(rootId: string, given: ResumeOptions = {}): Promise<RunHandle> {
    this.#assertRunning();
    const options = checkOptions(resumeOptionsSchema, given, 'resume()') as ResumeOptions;
    if (this.#trees.has(rootId)) {
      throw new InvalidArgumentError(
        `tree ${rootId} is already being driven by this supervisor; use the handle run() or resume() returned.`,
      );
    }
    const { tree, runs, changes } = await this.#adopt(rootId, options, 'resume()');
    // A cancel another host asked for holds for a resume too: the tree ends, nothing is driven.
    const asked = await this.#cancelAskedFor(tree);
    if (asked) {
      tree.adopting = false;
      await tree.cancel(asked.reason ?? undefined);
      // Ends what no host drives now; a store that cannot take it is asked at the next claim pass.
      await this.#leases.askCancel(rootId, asked.reason).catch(() => undefined);
      tree.checkSettled();
      return this.#handle(tree);
    }
    const taken: TakenRun[] = [];
    // Until its runs are taken the tree is being admitted: a poll meanwhile would find nothing
    // of it running (a paused root not yet resumed) and settle it as it was.
    tree.admitting.add(rootId);
    try {
      await this.#leases.take(
        runs.filter((run) => run.status === 'running'),
        runs.filter((run) => run.status === 'paused'),
        taken,
      );
      // A resume the supervisor's close() ended meanwhile goes on under nothing: nothing to accept.
      if (!tree.ended) await this.#acceptChanges(rootId, tree, changes, 'resume()');
    } catch (error) {
      tree.admitting.delete(rootId);
      await this.#leases.giveBack(taken);
      tree.fail(error as Error);
      throw error;
    }
    tree.admitting.delete(rootId);
    tree.adopting = false;
    for (const lease of taken) {
      const counted = lease.runId !== rootId;
      if (counted) tree.active++;
      tree.startActor(lease.runId, lease.address, lease.generation, counted, true);
    }
    tree.pump();
    tree.checkSettled();
    return this.#handle(tree);
  }

  /**
   * Takes part in a tree on a PostgreSQL store that other hosts drive too: this supervisor
   * claims the tree's runnable agents (queued ones, and runs whose lease lapsed because their
   * host died or stopped) as the tree's cap across all hosts allows, and the handle's result
   * settles when the whole tree has ended, whichever hosts drove it. Unlike resume() it takes
   * no lease a live host holds, so it never conflicts; a tree already driven here returns its
   * handle. Options as resume()'s: the provider, tools and servers again, for the runs this
   * host takes; a paused run stays paused (resume() answers for it).
   */
  async join(rootId: string, given: ResumeOptions = {}): Promise<RunHandle> {
    this.#assertRunning();
    const options = checkOptions(resumeOptionsSchema, given, 'join()') as ResumeOptions;
    if (!this.#shared) {
      throw new InvalidArgumentError(
        'join() shares a tree between hosts, which needs a PostgreSQL store (io-harness/postgres); on a SQLite file use resume().',
      );
    }
    const driven = this.#trees.get(rootId);
    if (driven) return this.#handle(driven);
    const { tree, changes } = await this.#adopt(rootId, options, 'join()');
    // A cancel another host asked for holds for a host that joins after it: nothing is claimed.
    const asked = await this.#cancelAskedFor(tree);
    if (asked) await tree.cancel(asked.reason ?? undefined);
    else {
      try {
        await this.#acceptChanges(rootId, tree, changes, 'join()');
      } catch (error) {
        tree.fail(error as Error);
        throw error;
      }
    }
    tree.adopting = false;
    tree.pump();
    tree.checkSettled();
    return this.#handle(tree);
  }

  /** A stored tree made a tree of this supervisor's, with what this process gives it: not yet driving any run. */
  async #adopt(
    rootId: string,
    options: ResumeOptions,
    where: 'resume()' | 'join()',
  ): Promise<{ tree: Tree; runs: RunRecord[]; changes: string[] }> {
    const runs = await this.read(reads.runs(rootId));
    const root = runs.find((run) => run.runId === rootId);
    if (!root) {
      throw new HarnessError(
        ErrorCode.RunNotFound,
        `no tree with root ${rootId} in ${this.#where}; list the roots with store.runs().` +
          (where === 'join()'
            ? ' A tree another host has just started is there once its root is stored (a moment after run() returns its handle): join then.'
            : ''),
      );
    }
    const ledger = await this.read(reads.ledger(rootId));
    const provider = options.provider === undefined ? null : checkProviderSpec(options.provider, where);
    const tools = treeTools(this.#tools, options.tools, where);
    const models = treeModels(this.#models, options.models, where);
    const servers = treeServers(this.#mcp, options.mcp, where);
    const tree = this.#newTree(
      rootId,
      ledger?.maxConcurrentAgents ?? this.#options.maxConcurrentAgents,
      provider,
      options.approver ?? null,
      options.reviewer === undefined ? null : checkProviderSpec(options.reviewer, where),
      options,
      { tools, models },
    );
    tree.adopting = true;
    let changes: string[] = [];
    try {
      const spec = (await this.read(reads.spec(rootId))) as RunSpec | null;
      // What the tree's runs will call, given now or stored (a stored spec's key is read from its variable).
      holdProviderSecrets([
        provider,
        tree.reviewer,
        spec?.provider as ProviderSpec | undefined,
        ...contractProviders(spec?.contract),
      ]);
      if (servers.length > 0) {
        const policy = spec?.policy ? Policy.from(spec.policy) : spec?.contract ? Policy.default() : null;
        await tree.host.connectServers(
          servers,
          serverOptions(policy, spec?.contract ?? null, options.approver),
          where,
          tree.result,
        );
      }
      checkToolsGiven(rootId, spec?.tools ?? [], tree.host.tools);
      // Another release, or a tool changed or added since the tree started: refused unless
      // accepted, and written (see #acceptChanges) only once the resume or join can go on.
      changes = checkChanges(rootId, spec, tree.host.tools, options.acceptChanges === true, where);
      checkModelsGiven(
        where,
        [provider ?? (spec?.provider as ProviderSpec | undefined), tree.reviewer, ...contractProviders(spec?.contract)],
        models,
      );
      // As run() holds them: no tool of the embedder's takes the name of the vendor's web tool the tree asks for.
      checkWebToolNames([...tree.host.tools.keys()], spec?.contract?.web, where);
    } catch (error) {
      // Nothing was resumed: the tree is let go here (its servers stop with it) and stays resumable.
      tree.fail(error as Error);
      throw error;
    }
    return { tree, runs, changes };
  }

  /**
   * Whether another host asked for the cancel of a tree being adopted (PostgreSQL; null on a
   * SQLite file). A read that fails lets the tree go, as any failure of the adoption does.
   */
  async #cancelAskedFor(tree: Tree): Promise<{ reason: string | null } | null> {
    if (!this.#shared) return null;
    try {
      return await this.read(reads.cancelAsked(tree.rootId));
    } catch (error) {
      tree.fail(error as Error);
      throw error;
    }
  }

  /** The changes a resume or join goes on under, in the root's spec and trace: once it has its leases. */
  async #acceptChanges(rootId: string, tree: Tree, changes: string[], where: 'resume()' | 'join()'): Promise<void> {
    if (changes.length === 0) return;
    await this.#storeClient.call('acceptChanges', {
      rootId,
      release: RELEASE,
      tools: tree.host.storedTools(),
      changes,
      by: where,
      owner: this.owner,
      now: this.#options.clock.now(),
    });
  }

  #newTree(
    rootId: string,
    maxConcurrent: number,
    provider: ProviderSpec | null,
    approver: Approver | null,
    reviewer: ProviderSpec | null,
    people: { planGate?: PlanGate | undefined; operator?: Operator | undefined } = {},
    given: { tools: readonly Tool<never>[]; models: ReadonlyMap<string, HostModel> } = { tools: [], models: new Map() },
  ): Tree {
    const tree = new Tree(
      {
        rootId,
        maxConcurrent,
        provider,
        reviewer,
        people: { approver, planGate: people.planGate ?? null, operator: people.operator ?? null },
        tools: given.tools,
        models: given.models,
      },
      this.#treePorts,
    );
    this.#trees.set(rootId, tree);
    this.#keepAlive();
    return tree;
  }

  #handle(tree: Tree): RunHandle {
    const ports = {
      observe: this.observe.bind(this) as Observe,
      read: this.read.bind(this),
      cancel: this.cancel.bind(this),
    };
    return runHandle(ports, tree.rootId, tree.result);
  }

  /**
   * Answers a question a paused run waits on — an approval, a plan, a question, an
   * interrupted command — through the store actor. The first answer wins; a second is
   * refused with ALREADY_ANSWERED naming the first. Then `resume(rootId)` continues the run.
   */
  async answer(questionId: string, answer: unknown, options: { by?: string } = {}): Promise<void> {
    this.#assertRunning();
    await this.#storeClient.call('answer', {
      questionId,
      answer,
      by: options.by ?? this.owner,
      now: this.#options.clock.now(),
    });
  }

  /**
   * Rewinds a whole run, as the free `rewindRun` does (every file the run and the agents
   * it started touched goes back to its restore point; the children it left waiting are
   * cancelled), with the cancellations written through this supervisor's store actor, so
   * its observers see those children end. Refused, changing nothing, while any of the
   * runs is held by a live owner (this supervisor included).
   */
  async rewindRun(workspace: string, runId: string): Promise<{ files: RewoundFile[]; cancelled: string[] }> {
    this.#assertRunning();
    const { files, subtree } = await perform(this.#backend, rewindRunFiles(workspace, this.#where, runId));
    const dropped = await Promise.all(
      subtree.map((member) => this.#storeClient.call('dropBacklog', { runId: member, now: this.#options.clock.now() })),
    );
    return { files, cancelled: dropped.flatMap((result) => result.cancelled) };
  }

  /** What the store actor says besides replies: what commits announced, and (shared) what other hosts hinted at. */
  #onStoreOutput(message: StoreOutput): void {
    if (message.type === 'hint') {
      if (this.#state === 'running') this.#leases.onHint(message.hint);
      this.#bus.wakeTails(message.hint.all ? 'all' : message.hint.events);
      return;
    }
    if (message.type !== 'notify') return;
    const notes: Notifications = message.notifications;
    this.#bus.publish(notes.events);
    for (const mail of notes.mail) {
      const slot = this.#trees.get(mail.rootId)?.byAddress.get(mail.to);
      if (slot) post(slot, { type: 'mail' });
    }
    const touched = new Set<Tree>();
    for (const spawned of notes.spawned) {
      const tree = this.#trees.get(spawned.rootId);
      if (tree) touched.add(tree);
    }
    for (const ended of notes.ended) {
      const tree = this.#trees.get(ended.rootId);
      if (!tree) continue;
      tree.host.childEnded(ended.runId);
      // An interrupted root takes its tree with it: its children stop at their next boundary.
      if (ended.runId === tree.rootId && ended.status === 'interrupted' && tree.state !== 'cancelled')
        void this.#handle(tree)
          .cancel()
          .catch(() => undefined);
      touched.add(tree);
    }
    for (const tree of touched) {
      tree.look();
    }
  }

  #onStoreExit(): void {
    const reason = `the store actor exited${this.#failure ? `: ${this.#failure.message}` : ''}; every pending commit was refused.`;
    // Whatever the state, nothing more will be answered: nothing may wait on it.
    this.#storeClient.fail(reason);
    if (this.#state === 'stopped' || this.#state === 'draining') return;
    this.#state = 'failed';
    for (const tree of [...this.#trees.values()]) {
      tree.fail(new ActorExitedError(ErrorCode.StoreActorExited, reason));
    }
    void this.#actors.destroy();
    this.#bus.close();
  }

  /**
   * Stops every actor, gives back the leases it holds (so the trees can be resumed
   * at once elsewhere), closes the store actor. Trees still running reject with
   * SUPERVISOR_CLOSED; what they committed stays.
   */
  async close(): Promise<void> {
    if (this.#state === 'stopped' || this.#state === 'draining') return;
    const wasFailed = this.#state === 'failed';
    this.#state = 'draining';
    this.#keepAlive();
    this.#leases.stop();
    for (const tree of [...this.#trees.values()]) {
      tree.fail(
        new HarnessError(
          ErrorCode.SupervisorClosed,
          `the supervisor was closed while tree ${tree.rootId} was running; resume it to finish.`,
        ),
      );
    }
    // Halted actors stop what they started (a command's process group, a model call) and
    // leave; one that does not within the bound has its thread ended under it.
    await this.#actors.close(HALT_BOUND_MS);
    // The trees' MCP servers stop with their trees: a stdio server's process is gone before close() returns.
    await Promise.all([...this.#serverLifetimes]);
    if (!wasFailed) {
      // A request posted now is served before the close request is.
      await this.#storeClient.sync().catch(() => undefined);
      this.#storeWorker.postMessage({ type: 'close' });
      await this.#storeExited;
    }
    this.#bus.close();
    this.#state = wasFailed ? 'failed' : 'stopped';
  }
}
