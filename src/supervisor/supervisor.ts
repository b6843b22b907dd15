/**
 * The supervisor: the part of the runtime that lives on the embedder's main thread.
 * It starts the store actor, hosts one agent actor per live agent on a pool of worker
 * threads (many actors to a thread, or one each), admits queued children first in first out under the concurrency cap,
 * holds and renews the leases of the runs it drives, fans committed events out to
 * observers, and settles a tree only when no run of it is left running.
 */
import { randomUUID } from 'node:crypto';
import type { AgentInput, AgentOutput, HostedActor, RunExit, WaitChildResult } from '../actors/agent.js';
import { type ActorHost, actorHost, type Isolation } from '../actors/host.js';
import { serveHost } from '../actors/host-channel.js';
import {
  type StoreActorHandle,
  StoreClient,
  type StoreControl,
  type StoreOutput,
  startStoreActor,
} from '../actors/store.js';
import { type Clock, systemClock } from '../clock.js';
import {
  ActorExitedError,
  deserializeError,
  ErrorCode,
  HarnessError,
  InvalidArgumentError,
  LeaseLostError,
} from '../errors.js';
import type { McpConnectOptions } from '../mcp/client.js';
import { checkSpecs, type McpServerSpec } from '../mcp/spec.js';
import { type AgentDefinition, checkAgents } from '../runtime/agents.js';
import { type Budget, validateBudget } from '../runtime/budget.js';
import { type ContractData, contractSecrets, TaskContract } from '../runtime/contract/contract.js';
import { type EventData, type GateVerdict, type HarnessEvent, isTerminal, type RunStatus } from '../runtime/events.js';
import { keptPaths } from '../runtime/exec/containment/kept.js';
import { executorFor } from '../runtime/exec/factory.js';
import { commandEnvironment } from '../runtime/exec/run-command.js';
import { type LiveEvent, liveChannelsWanted, publishLive } from '../runtime/live.js';
import type {
  ApprovalAnswer,
  ApprovalRequest,
  Approver,
  Operator,
  OperatorQuestion,
  PlanDecision,
  PlanGate,
  PlanReview,
} from '../runtime/policy/approval.js';
import { Policy, type PolicyData } from '../runtime/policy/policy.js';
import { keyVariables, type ProviderSpec, redactSpec, type TranscriptEntry } from '../runtime/provider.js';
import { checkProviderSpec } from '../runtime/providers/builders.js';
import { heldSecrets, holdSecrets, onSecretsHeld, providerSecrets, scrubError } from '../runtime/secrets.js';
import { discoverSkills, type SkillRoot } from '../runtime/skills.js';
import { checkTools, type HostTool as Tool, type ToolDefinitionData } from '../runtime/tools/host-tool.js';
import type { HostToolCall } from '../runtime/tools/ports.js';
import { evaluateCommandGate, evaluateReviewGate, gateEvent, writingModels } from '../runtime/verify/gate.js';
import { briefingFor } from '../runtime/workspace/session.js';
import { perform } from '../store/either.js';
import { HOST } from '../store/liveness.js';
import type { PostgresStore } from '../store/postgres/index.js';
import type { WorkHint } from '../store/postgres/notify.js';
import { TraceQueries } from '../store/queries.js';
import type { Notifications, RunRecord, RunSpec } from '../store/records.js';
import type { Q } from '../store/sql.js';
import type { Store } from '../store/sqlite/store.js';
import { EventBus, type EventFilter, type LiveObserver, type Observer } from './event-bus.js';
import {
  checkOptions,
  type ResumeOptionsShape,
  type RunOptionsShape,
  resumeOptionsSchema,
  runOptionsSchema,
  type SupervisorOptionsShape,
  supervisorOptionsSchema,
} from './options.js';
import { outputQuery } from './output.js';
import { type RewoundFile, rewindRunFiles } from './rewind.js';

/** The reads the supervisor makes, run on whichever backend holds the store. */
const reads = new TraceQueries();

/** The supervisor's lifecycle, state by state. */
export type SupervisorState =
  /** starting the store actor */
  | 'starting'
  /** accepting runs */
  | 'running'
  /** close() was called; actors are being stopped */
  | 'draining'
  /** closed cleanly */
  | 'stopped'
  /** the store actor died; nothing more can be committed */
  | 'failed';

export interface SupervisorOptions {
  /** At most this many spawned agents of one tree run at once; the rest wait in the durable queue. Default 16. */
  maxConcurrentAgents?: number;
  /** A tree may spawn at most this many agents in all; the spawn that would cross it is refused. Default 1000. */
  maxTotalAgents?: number;
  /** How long a lease lasts without renewal. Renewed every third of it while the run is driven. Default 30 000 ms. */
  leaseTtlMs?: number;
  /** The clock leases are computed with. */
  clock?: Clock;
  /**
   * How agent actors are hosted on threads. `'shared'` (the default): on a pool of
   * `threads` worker threads, many actors to a thread — an agent mostly waits on its
   * model, and a thread costs ~24 MB and tens of milliseconds to start. `'thread'`: each
   * live actor on a thread of its own, as isolated as worker threads get (its own heap and
   * event loop; a thread that dies takes only its actor), at a thread's cost per agent.
   * `'in-process'`: every actor, and the store actor, on the calling thread over message
   * channels, with no worker thread started at all — for stepping through a run with a
   * debugger's breakpoints, and for tests of tree logic. An actor that blocks the event
   * loop blocks the supervisor with it.
   */
  isolation?: Isolation;
  /** With shared isolation, how many threads host the actors. Default: the cores available. */
  threads?: number;
  /** With thread isolation, how long an idle thread is kept for the next actor. Default 10 000 ms. */
  idleThreadMs?: number;
  /** Agent threads to start (and wait for) in `start()`, so the first agents do not pay the thread start. Default 0. */
  warmWorkers?: number;
  /** Test hook: `op:n:phase` SIGKILLs the whole process inside the store actor at that point. */
  killAt?: string | null;
  /** The embedder's own tools (made with `tool()`), for every tree this supervisor runs or resumes. */
  tools?: readonly Tool<never>[];
  /**
   * MCP servers every tree of this supervisor has: started (stdio) or dialled (HTTP) for
   * each tree it runs or resumes, under that tree's policy and inside its containment, their
   * tools named `<server>__<tool>`, stopped when the tree ends (see docs/guides/mcp.md).
   */
  mcp?: McpServerSpec[];
  /**
   * The name this supervisor's leases give its host. Default: the machine's name, tagged with
   * its boot and pid namespace. A lease held on this host whose process is gone is taken at
   * once; one held on another host only when its ttl lapses. Give two supervisors on one
   * machine different names to have them treat each other as separate hosts; never give one
   * name to two machines (each would take the other's live runs as dead).
   */
  host?: string;
  /**
   * On PostgreSQL, where several hosts share trees: the most agents this supervisor drives at
   * once across every tree (each tree's own cap holds across all hosts regardless). 0: a host
   * that drives the roots it starts (and resumes) and leaves their spawned agents to the
   * others. Default: no limit of the host's own.
   */
  maxHostAgents?: number;
  /**
   * On PostgreSQL: how often it looks at the store for work another host's hint may have
   * missed (a queued agent, a lapsed lease, a child that ended, mail). Default 1 000 ms.
   */
  pollMs?: number;
}

export interface ResumeOptions {
  /**
   * The provider again, for a tree whose provider was given a key directly: keys are
   * never stored, so another process must hand it back. Without it the stored spec is
   * used, reading its key from the environment variable it names.
   */
  provider?: ProviderSpec;
  /** Answers the policy's asks for the resumed tree. Without one, every ask is denied. */
  approver?: Approver;
  /** A review gate's provider again, for a reviewer whose key was given directly. */
  reviewer?: ProviderSpec;
  /** Reviews plans of the resumed tree's runs opened with a plan gate. */
  planGate?: PlanGate;
  /** Answers the resumed tree's questions to the operator. */
  operator?: Operator;
  /**
   * The tree's own tools again (tools live in the process, not the store): a tree that was
   * started with tools is refused, naming them, until they are all given back.
   */
  tools?: readonly Tool<never>[];
  /**
   * The tree's own MCP servers again (servers, like tools, live in the process): started or
   * dialled under the tree's stored policy before any run goes on. A tree whose servers'
   * tools are not all given back is refused, naming the servers.
   */
  mcp?: McpServerSpec[];
}

export interface RunOptions<Output = unknown> {
  /** What the root agent is to do (a contract's goal when a contract is given). */
  task?: string;
  /** The model, as data; rebuilt inside each actor's thread. */
  provider: ProviderSpec;
  /** Replaces the default system prompt. */
  system?: string;
  /** The tree's ceilings; no child can raise them. */
  budget?: Budget;
  /**
   * Names the session for the vendors' prompt caches: the key sent (`prompt_cache_key`,
   * `x-session-affinity`) is a digest of it, never the name itself. Default: the tree's id.
   */
  session?: string;
  /** Turns the root's transcript begins with, before its opening turn: a session's earlier turns (see Session). */
  history?: TranscriptEntry[];
  /** False: the tree's agents are not offered spawn_agent, so the root works alone. Default true. */
  spawn?: boolean;
  /**
   * Directories holding skills (a folder with a SKILL.md whose front matter has `name` and
   * `description`; the directory itself, or the folders directly in it). The root is
   * offered read_skill and a catalogue line for each; its read policy decides each file.
   */
  skills?: SkillRoot[];
  /**
   * Named agents a spawn may ask for with `agent` (config.agents() gives a bundle's): each
   * a system prompt, deny rules and ceilings for the child. Stored with the tree, so a
   * resume keeps them.
   */
  agents?: AgentDefinition[];
  /**
   * True: the root's first completion decides what the run is. One that stops on text ends
   * the run there as a reply, with no step row, no gate and no checkpoint (its tokens drawn,
   * its call recorded); one with a tool call goes on from that same completion. What a
   * session's turns do; no gate is skipped for a contract that has one (see Session).
   */
  reply?: boolean;
  /** The longest inbox wait any agent of the tree may ask for. Default 30. */
  maxWaitSecs?: number;
  /** Overrides the supervisor's caps for this tree. */
  maxConcurrentAgents?: number;
  maxTotalAgents?: number;
  /**
   * Makes the tree a workspace run: the root works under this contract (its goal is the
   * task when `task` is left out), with the file tools, exec, gates and output schema.
   */
  contract?: TaskContract<Output>;
  /** What the tree's agents may read, write, run and dial. Default for a workspace run: {@link Policy.default}. */
  policy?: Policy;
  /** Answers the policy's asks. Without one, every ask is denied. */
  approver?: Approver;
  /** Reviews the plan of a contract opened with a plan gate. Without one, the plan is stored and the run pauses. */
  planGate?: PlanGate;
  /** Answers an agent's questions about intent. Without one, the question is stored and the run pauses. */
  operator?: Operator;
  /** The embedder's own tools for this tree, besides the supervisor's (see `tool()`). */
  tools?: readonly Tool<never>[];
  /**
   * MCP servers for this tree, besides the supervisor's: each decided by the tree's policy
   * (a stdio server's command as an exec, an HTTP server's host as a dial), started or
   * dialled before the root's first step (stdio ones inside the run's containment), their
   * tools joining the tree's as `<server>__<tool>`, stopped when the tree ends. A server
   * that cannot be reached or is refused fails the tree before any run is stored.
   */
  mcp?: McpServerSpec[];
}

/** What {@link Supervisor.retryGate} found, and the run's status after it. */
export interface RetriedGate {
  verdict: GateVerdict;
  exitStatus: number | null;
  reasons: string[];
  status: RunStatus;
}

/** What a finished tree hands back. */
export interface TreeResult<Output = unknown> {
  rootId: string;
  status: RunStatus;
  reason: string | null;
  reply: string | null;
  /**
   * The root's answer as data, when its contract declared an OutputSchema and it finished:
   * the reply parsed and checked, typed by a zod schema's type. `null` otherwise.
   */
  output: Output | null;
  /** What the whole tree spent. */
  spent: { steps: number; tokens: number };
  /** How many runs the tree holds, root included. */
  runs: number;
}

export interface RunHandle<Output = unknown> {
  readonly rootId: string;
  /** Settles when the root and every run it started are terminal. */
  readonly result: Promise<TreeResult<Output>>;
  /** Stops every agent of the tree at its next step boundary and cancels what is queued. */
  cancel(): Promise<void>;
}

interface Slot {
  tree: Tree;
  runId: string;
  address: string;
  generation: number;
  /** Counts against the concurrency cap (every spawned agent; not the root). */
  counted: boolean;
  /** Parked on a child and not holding a slot. */
  parked: boolean;
  /** The actor driving the run: its control port, its host channel, its exit. */
  actor: HostedActor;
  /** Halted (its tree stopped here): nothing it says is acted on any more. */
  halted: boolean;
}

interface Tree {
  rootId: string;
  maxConcurrent: number;
  active: number;
  slots: Map<string, Slot>;
  byAddress: Map<string, Slot>;
  admitting: Set<string>;
  /** The queue is being read for admission: the tree may not settle under it. */
  pumping: boolean;
  /** Another admission pass was asked for while one read the queue. */
  pumpAgain: boolean;
  /** A settle check is reading the store, or was put off while the queue was read. */
  settling: boolean;
  settleWanted: boolean;
  resumeQueue: (() => void)[];
  waiters: Map<string, (() => void)[]>;
  settled: boolean;
  /** cancel() was called: admit nothing more, cancel every actor as it starts. */
  cancelled: boolean;
  /** What the cancel said, handed to every actor it ends. */
  cancelReason: string | null;
  /** The provider as handed in, keys included; null when resumed without one (the stored spec is used). */
  provider: ProviderSpec | null;
  /** Answers the policy's asks for every agent of the tree; null denies them. */
  approver: Approver | null;
  /** A review gate's provider as handed in, keys included. */
  reviewer: ProviderSpec | null;
  /** The embedder's tools this tree has, by name; they run on this thread. */
  tools: Map<string, Tool<never>>;
  /** Their definitions as the actors get them, sorted by name. */
  toolDefinitions: ToolDefinitionData[];
  /** The tools that came from the tree's MCP servers: the server of each, by tool name. */
  serverTools: Map<string, string>;
  /** Fires when the tree is cancelled or settles: what a tool's call is told to stop by. */
  abort: AbortController;
  planGate: PlanGate | null;
  operator: Operator | null;
  resolve(result: TreeResult): void;
  reject(error: Error): void;
  result: Promise<TreeResult>;
}

const DEFAULTS = { maxConcurrentAgents: 16, maxTotalAgents: 1000, leaseTtlMs: 30_000, maxWaitSecs: 30, pollMs: 1_000 };

/** The most runs one claim takes: a pass that takes this many claims again. */
const CLAIM_BATCH = 16;

/** How long close() gives halted actors to stop what they started before their threads are ended. */
const HALT_BOUND_MS = 2_000;

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
    killAt: string | null;
    maxHostAgents: number;
  };
  /**
   * On PostgreSQL admission is shared with every other host on the store: runs are claimed
   * from the rows (see the claim rule, store/rules/leases.ts), counted against each tree's cap whichever host
   * holds them, and a lost lease costs this host the run, not the tree.
   */
  readonly #shared: boolean;
  /** A claim is on its way to the store; another asked for meanwhile runs after it. */
  #claiming = false;
  #claimAgain = false;
  #pollTimer: NodeJS.Timeout | null = null;
  /** The embedder's tools every tree of this supervisor has. */
  readonly #tools: readonly Tool<never>[];
  /** The MCP servers every tree of this supervisor has (started for each tree). */
  readonly #mcp: readonly McpServerSpec[];
  /** Each tree's MCP servers from connecting to stopped: what close() waits for. */
  readonly #serverLifetimes = new Set<Promise<void>>();
  /** Tool calls running on this thread, by run and call id: what `abortTool` stops. */
  readonly #toolCalls = new Map<string, AbortController>();
  readonly #bus = new EventBus((wanted) => this.#broadcastLive(wanted));
  readonly #trees = new Map<string, Tree>();
  readonly #pool: ActorHost;
  /** Every actor hosted and not yet exited, halted ones included: what close() waits for. */
  readonly #actors = new Set<HostedActor>();
  #storeWorker!: StoreActorHandle;
  /** Store requests of this thread waiting for their reply. */
  #storePending = 0;
  #storeClient!: StoreClient;
  #state: SupervisorState = 'starting';
  #renewTimer: NodeJS.Timeout | null = null;
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
      killAt: options.killAt ?? null,
      host: options.host ?? HOST,
      pollMs: options.pollMs ?? DEFAULTS.pollMs,
      maxHostAgents: options.maxHostAgents ?? Number.POSITIVE_INFINITY,
    };
    this.#shared = store.kind === 'postgres';
    this.#tools = checkTools(options.tools, 'Supervisor.start');
    this.#mcp = options.mcp === undefined ? [] : checkSpecs(options.mcp, 'Supervisor.start');
    this.#pool = actorHost({
      isolation: options.isolation ?? 'shared',
      ...(options.threads === undefined ? {} : { threads: options.threads }),
      ...(options.idleThreadMs === undefined ? {} : { idleThreadMs: options.idleThreadMs }),
    });
  }

  /** The tools a tree has: the supervisor's and its own, no two with one name. */
  #treeTools(own: unknown, where: string): Tool<never>[] {
    const tools = [...this.#tools, ...checkTools(own, where)];
    const names = new Set<string>();
    for (const item of tools) {
      if (names.has(item.name)) {
        throw new InvalidArgumentError(
          `${where}: the tool ${item.name} is given twice (by the supervisor and by this call); give it once.`,
        );
      }
      names.add(item.name);
    }
    return tools;
  }

  /** The MCP servers a tree has: the supervisor's and its own, checked, no two with one name. */
  #treeServers(own: unknown, where: string): McpServerSpec[] {
    if (own === undefined) return [...this.#mcp];
    const given = checkSpecs(own, where);
    const twice = given.find((spec) => this.#mcp.some((mine) => mine.name === spec.name));
    if (twice) {
      throw new InvalidArgumentError(
        `${where}: the MCP server ${twice.name} is given twice (by the supervisor and by this call); give it once.`,
      );
    }
    return [...this.#mcp, ...given];
  }

  /**
   * Starts or dials a tree's MCP servers and adds their tools to the tree's. The servers
   * stop when the tree's result settles, and close() waits for that. Loaded only here: the
   * protocol's SDK stays out of a program whose trees have no servers.
   */
  async #connectServers(tree: Tree, specs: McpServerSpec[], options: McpConnectOptions, where: string): Promise<void> {
    const { McpServers } = await import('../mcp/client.js');
    const connecting = McpServers.connect(specs, options);
    const lifetime = connecting.then(
      async (servers) => {
        await tree.result.catch(() => undefined);
        await servers.close();
      },
      () => undefined,
    );
    this.#serverLifetimes.add(lifetime);
    void lifetime.finally(() => this.#serverLifetimes.delete(lifetime));
    const servers = await connecting;
    const names = specs.map((spec) => spec.name);
    for (const item of servers.tools()) {
      if (tree.tools.has(item.name)) {
        throw new InvalidArgumentError(
          `${where}: the MCP server ${serverOf(item.name, names)} offers ${item.name}, and the tree has a tool of that name already; rename the server or the tool.`,
        );
      }
      tree.tools.set(item.name, item);
      tree.serverTools.set(item.name, serverOf(item.name, names));
    }
    tree.toolDefinitions = [...tree.tools.values()].map((item) => item.definition).sort(byName);
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

  async #boot(): Promise<void> {
    // The agent threads boot while the store actor opens the file: the first agent does not wait for either in turn.
    if (this.#pool.isolation === 'shared') this.#pool.start();
    this.#storeWorker = await startStoreActor(
      { target: this.#backend.target, killAt: this.#options.killAt },
      // In-process actors have their store actor in-process too: that isolation starts no thread at all.
      this.#pool.isolation === 'in-process' ? 'in-process' : 'thread',
    );
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
    const period = Math.max(10, Math.floor(this.#options.leaseTtlMs / 3));
    this.#renewTimer = setInterval(() => void this.#renewLeases(), period);
    this.#renewTimer.unref();
    if (this.#shared) {
      this.#pollTimer = setInterval(() => this.#poll(), this.#options.pollMs);
      this.#pollTimer.unref();
    }
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

  /** The SQLite store, for what reads a file synchronously; on PostgreSQL, a clear refusal. */
  #sqlite(what: string): Store {
    if (this.#backend.kind === 'sqlite') return this.#backend;
    throw new InvalidArgumentError(
      `${what} works on a SQLite store in this release; on PostgreSQL it is not there yet (docs/guides/postgres.md).`,
    );
  }

  /**
   * Starts agent threads ahead of need and resolves when each has loaded what an agent
   * loads on its first run, so agents admitted later do not wait for it. With shared
   * isolation every thread of the pool is started (`count` is not needed beyond that);
   * with thread isolation, `count` threads, kept while idle for `idleThreadMs`.
   */
  async warm(count: number): Promise<void> {
    this.#assertRunning();
    await this.#pool.warm(positiveInteger(count, 'warm(count)'));
  }

  /** How actors are hosted, and the agent threads running now. */
  get threads(): { isolation: Isolation; live: number } {
    return { isolation: this.#pool.isolation, live: this.#pool.liveThreads };
  }

  /**
   * Re-runs only a run's gate against the workspace the run left, so a gate that could
   * not run (or failed on something since fixed) does not cost the steps that did the
   * work. The evaluation is recorded; a run that ended on its gate and now passes
   * becomes `finished`.
   */
  async retryGate(runId: string, options: { reviewer?: ProviderSpec } = {}): Promise<RetriedGate> {
    this.#assertRunning();
    const run = await this.read(reads.run(runId));
    if (!run) {
      throw new HarnessError(ErrorCode.RunNotFound, `no run ${runId} in ${this.#where}; list runs with store.runs().`);
    }
    const contract = ((await this.read(reads.spec(runId))) as { contract?: ContractData } | null)?.contract;
    if (!contract || contract.verification.kind === 'none') {
      throw new InvalidArgumentError(
        `run ${runId} has no gate to retry: it was not started with a verification criterion.`,
      );
    }
    if (run.status !== 'gate-failed' && run.status !== 'finished') {
      throw new HarnessError(
        ErrorCode.RunStillLive,
        `run ${runId} is ${run.status}; a gate can be retried once the run has ended on it (gate-failed) or finished.`,
        { details: { runId, status: run.status } },
      );
    }
    const gate = contract.verification;
    const stored = (await this.read(reads.spec(runId))) as { provider?: ProviderSpec; policy?: PolicyData } | null;
    const patch = gate.kind === 'command' ? '' : await this.read(reads.patch(runId));
    const calls = gate.kind === 'command' ? [] : await this.read(reads.modelCalls({ rootId: run.rootId }));
    holdProviderSecrets([stored?.provider, options.reviewer, ...contractProviders(contract)]);
    const secrets = stored?.provider ? contractSecrets(contract, stored.provider) : [];
    // What the containment recorded: the rung it chose again here, and the egress proxy's decisions.
    const recorded: EventData[] = [];
    const evaluation =
      gate.kind === 'command'
        ? await this.#retryCommandGate(gate, contract, stored?.policy, secrets, recorded)
        : await evaluateReviewGate(
            gate,
            options.reviewer ? checkProviderSpec(options.reviewer, 'retryGate()') : gate.provider,
            {
              goal: contract.goal,
              patch,
              reply: run.reply ?? '',
              writerModels: writingModels(calls),
            },
          );
    const events = [...recorded, gateEvent(evaluation, true), ...(evaluation.output ? [evaluation.output] : [])];
    const { status } = await this.#storeClient.call('regate', {
      runId,
      events,
      passed: evaluation.verdict === 'passed',
      reply: run.reply,
      now: Date.now(),
    });
    return { verdict: evaluation.verdict, exitStatus: evaluation.exitStatus, reasons: evaluation.reasons, status };
  }

  /**
   * A command gate run again, contained as its run was: the executor factory's, from the
   * run's stored contract (its sandbox and workspace) and policy (its egress rules), so the
   * code the run wrote runs on the same terms it did in the run. Refused with
   * CONTAINMENT_UNAVAILABLE where the contract names a rung this host cannot give.
   */
  async #retryCommandGate(
    gate: Extract<ContractData['verification'], { kind: 'command' }>,
    contract: ContractData,
    policyData: PolicyData | undefined,
    secrets: string[],
    recorded: EventData[],
  ) {
    // As the run itself: its stored policy, else the default one a workspace run gets.
    const policy = policyData ? Policy.from(policyData) : Policy.default();
    const executor = executorFor({
      purpose: 'gate-retry',
      contract,
      policy,
      record: (event) => recorded.push(event),
    });
    try {
      recorded.push({ type: 'contained', ...executor.contained() });
      return await evaluateCommandGate(gate, contract.root, executor, {
        env: commandEnvironment(process.env, secrets, contract.inheritedEnv ?? []),
      });
    } finally {
      await executor.close();
    }
  }

  /**
   * Calls `observer` with every committed event, in commit order. Returns an unsubscribe
   * function. With `{ live: true }` the observer also gets live events (marked `live: true`,
   * with no id): text as the model streams it, model and tool calls starting and ending.
   * They are not committed and nothing durable depends on them.
   */
  observe(observer: Observer, filter?: EventFilter & { live?: false }): () => void;
  observe(observer: LiveObserver, filter: EventFilter & { live: true }): () => void;
  observe(observer: Observer | LiveObserver, filter?: EventFilter): () => void {
    const unsubscribe = this.#bus.subscribe(observer, filter);
    // An observer that acts (config.hooks()'s) is handed the store to catch up from and a way to end a tree.
    if ((observer as Observer).attach && this.#backend.kind !== 'sqlite') {
      unsubscribe();
      this.#sqlite('An observer that catches up from the store (config.hooks())');
    }
    (observer as Observer).attach?.({
      store: this.#backend as Store,
      cancel: (rootId, reason) => this.cancel(rootId, { reason }),
      ...(filter ? { filter } : {}),
    });
    return unsubscribe;
  }

  /**
   * Stops every agent of the tree `rootId` at its next step boundary and cancels what is
   * queued, as its handle's cancel() does; `reason` is what each run's end records (the
   * default names the supervisor). A tree this supervisor is not driving, or one that has
   * settled, is left as it is.
   */
  async cancel(rootId: string, options: { reason?: string } = {}): Promise<void> {
    this.#assertRunning();
    const tree = this.#trees.get(rootId);
    if (!tree || tree.settled || tree.cancelled) return;
    const reason = typeof options.reason === 'string' && options.reason.trim() !== '' ? options.reason : undefined;
    tree.cancelled = true;
    tree.cancelReason = reason ?? null;
    tree.abort.abort();
    for (const slot of tree.slots.values()) this.#post(slot, { type: 'cancel', ...(reason ? { reason } : {}) });
    await this.#cancelQueued(tree);
  }

  /** Whether anyone listens to live events: an observer that asked, or a diagnostics channel subscriber. */
  #liveWanted(): boolean {
    return this.#bus.wantsLive || liveChannelsWanted();
  }

  /** Tells every actor with a run whether to publish live events. */
  #broadcastLive(on: boolean): void {
    for (const tree of this.#trees.values())
      for (const slot of tree.slots.values()) this.#post(slot, { type: 'live', on: on || liveChannelsWanted() });
  }

  /** A live event from an actor: to the diagnostics channels and the observers that asked. */
  #onLive(slot: Slot, message: Extract<AgentOutput, { type: 'live' }>): void {
    if (slot.halted || slot.runId !== message.runId) return;
    const event = {
      ...message.data,
      live: true as const,
      rootId: slot.tree.rootId,
      runId: slot.runId,
      address: slot.address,
      at: message.at,
    } as LiveEvent;
    publishLive(event);
    this.#bus.publishLive(event);
  }

  /**
   * Every committed event from now on, in commit order, as an async iterator. One scoped to
   * a tree (`rootId`) or a run (`runId`) ends once that tree settles here (every run of it
   * terminal), after its last events; at once when it had settled already. An unscoped one
   * ends at close().
   */
  events(filter?: EventFilter): AsyncIterableIterator<HarnessEvent> {
    const stream = this.#bus.stream(filter);
    void (async () => {
      const rootId = filter?.rootId ?? (filter?.runId ? (await this.read(reads.run(filter.runId)))?.rootId : undefined);
      if (rootId !== undefined && !this.#trees.has(rootId) && (await this.#settledInStore(rootId)))
        this.#bus.endTree(rootId, new Set((await this.read(reads.runs(rootId))).map((run) => run.runId)));
    })().catch(() => undefined);
    return stream;
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

  #claim() {
    return {
      owner: this.owner,
      pid: process.pid,
      host: this.#options.host,
      ttlMs: this.#options.leaseTtlMs,
      now: this.#options.clock.now(),
    };
  }

  /** Starts a new tree at its root agent. */
  run<Output = unknown>(given: RunOptions<Output>): RunHandle<Output> {
    this.#assertRunning();
    const options = checkOptions(runOptionsSchema, given, 'run()') as RunOptions;
    const contract = options?.contract ?? null;
    if (contract !== null && !(contract instanceof TaskContract)) {
      throw new InvalidArgumentError(
        'run(): contract must be a TaskContract, e.g. TaskContract.workspace(goal, root).',
      );
    }
    const task = options?.task ?? contract?.goal;
    if (typeof task !== 'string' || task.length === 0) {
      throw new InvalidArgumentError('run() needs a task: a non-empty string saying what the root agent is to do.');
    }
    if (options.policy !== undefined && !(options.policy instanceof Policy)) {
      throw new InvalidArgumentError(
        'run(): policy must be a Policy, e.g. Policy.default().layer("app").allowExec("npm test*").',
      );
    }
    const provider = checkProviderSpec(options.provider, 'run()');
    const data = contract?.toJSON() ?? null;
    if (data?.verification.kind === 'review') checkReviewer(data.verification.provider, provider);
    if (data?.escalation) checkEscalation(data);
    const ceilings = validateBudget(
      data
        ? {
            ...options.budget,
            ...(data.budget.steps === undefined ? {} : { steps: data.budget.steps }),
            ...(data.budget.tokens === undefined ? {} : { tokens: data.budget.tokens }),
            ...(data.budget.wallSecs === undefined ? {} : { wallMs: Math.round(data.budget.wallSecs * 1000) }),
          }
        : options.budget,
      'run()',
    );
    const policy = options.policy ?? (contract ? Policy.default() : null);
    const maxWaitSecs = options.maxWaitSecs ?? DEFAULTS.maxWaitSecs;
    const maxConcurrent = options.maxConcurrentAgents ?? this.#options.maxConcurrentAgents;
    const maxTotal = options.maxTotalAgents ?? this.#options.maxTotalAgents;
    const rootId = randomUUID();
    const reviewer = data?.verification.kind === 'review' ? data.verification.provider : null;
    const tools = this.#treeTools(options.tools, 'run()');
    const servers = this.#treeServers(options.mcp, 'run()');
    const skills = options.skills === undefined ? [] : discoverSkills(options.skills);
    const agents = options.agents === undefined ? [] : checkAgents(options.agents, 'run()');
    holdProviderSecrets([provider, ...contractProviders(data)]);
    const tree = this.#newTree(rootId, maxConcurrent, provider, options.approver ?? null, reviewer, options, tools);
    // Until its root is stored and started the tree is being admitted: nothing settles it meanwhile
    // (a poll or another host's hint that looked now would find no run of it, and end it).
    tree.admitting.add(rootId);
    void (async () => {
      try {
        if (servers.length > 0) {
          await this.#connectServers(tree, servers, serverOptions(policy, data, options.approver), 'run()');
          // Closed or cancelled while the servers started: nothing is stored, and they stop with the tree.
          if (tree.settled) return;
        }
        const { generation } = await this.#storeClient.call('createRoot', {
          runId: rootId,
          task,
          // Keys stay in memory: the stored spec names the variable, never the key.
          spec: {
            provider: redactSpec(provider),
            system: options.system ?? data?.system ?? undefined,
            session: options.session,
            ...(options.history && options.history.length > 0 ? { history: options.history } : {}),
            ...(options.spawn === false ? { spawn: false } : {}),
            ...(skills.length > 0 ? { skills } : {}),
            ...(agents.length > 0 ? { agents } : {}),
            ...(options.reply === true ? { reply: true } : {}),
            ...(data ? { contract: redactContract(data), briefing: briefingFor(data) } : {}),
            ...(policy ? { policy: policy.toJSON() } : {}),
            ...(tree.toolDefinitions.length > 0
              ? { tools: tree.toolDefinitions.map((item) => storedTool(item, tree.serverTools.get(item.name))) }
              : {}),
          },
          ceilings,
          maxTotalAgents: maxTotal,
          maxConcurrentAgents: maxConcurrent,
          maxWaitSecs,
          claim: this.#claim(),
        });
        tree.admitting.delete(rootId);
        this.#startActor(tree, rootId, 'root', generation, false, false);
      } catch (error) {
        tree.admitting.delete(rootId);
        this.#failTree(tree, error as Error);
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
    const { tree, runs } = await this.#adopt(rootId, options, 'resume()');
    const running = runs.filter((run) => run.status === 'running');
    const paused = runs.filter((run) => run.status === 'paused');
    const taken: { runId: string; generation: number; address: string }[] = [];
    // Until its runs are taken the tree is being admitted: a poll meanwhile would find nothing
    // of it running (a paused root not yet resumed) and settle it as it was.
    tree.admitting.add(rootId);
    try {
      for (const run of running) {
        const { generation } = await this.#storeClient.call('acquireLease', { runId: run.runId, ...this.#claim() });
        taken.push({ runId: run.runId, generation, address: run.address });
      }
      // A paused run goes on once every question it waits on is answered; otherwise it stays paused.
      for (const run of paused) {
        const resumed = await this.#storeClient.call('resumePaused', { runId: run.runId, ...this.#claim() });
        if (resumed.status === 'resumed')
          taken.push({ runId: run.runId, generation: resumed.generation, address: run.address });
      }
    } catch (error) {
      tree.admitting.delete(rootId);
      for (const lease of taken) {
        await this.#storeClient.call('releaseLease', { ...lease, owner: this.owner }).catch(() => undefined);
      }
      this.#failTree(tree, error as Error);
      throw error;
    }
    tree.admitting.delete(rootId);
    for (const lease of taken) {
      const counted = lease.runId !== rootId;
      if (counted) tree.active++;
      this.#startActor(tree, lease.runId, lease.address, lease.generation, counted, true);
    }
    this.#pump(tree);
    this.#checkSettled(tree);
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
    const { tree } = await this.#adopt(rootId, options, 'join()');
    this.#pump(tree);
    this.#checkSettled(tree);
    return this.#handle(tree);
  }

  /** A stored tree made a tree of this supervisor's, with what this process gives it: not yet driving any run. */
  async #adopt(
    rootId: string,
    options: ResumeOptions,
    where: 'resume()' | 'join()',
  ): Promise<{ tree: Tree; runs: RunRecord[] }> {
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
    const tools = this.#treeTools(options.tools, where);
    const servers = this.#treeServers(options.mcp, where);
    const tree = this.#newTree(
      rootId,
      ledger?.maxConcurrentAgents ?? this.#options.maxConcurrentAgents,
      provider,
      options.approver ?? null,
      options.reviewer === undefined ? null : checkProviderSpec(options.reviewer, where),
      options,
      tools,
    );
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
        await this.#connectServers(
          tree,
          servers,
          serverOptions(policy, spec?.contract ?? null, options.approver),
          where,
        );
      }
      checkToolsGiven(rootId, spec?.tools ?? [], tree.tools);
    } catch (error) {
      // Nothing was resumed: the tree is let go here (its servers stop with it) and stays resumable.
      this.#failTree(tree, error as Error);
      throw error;
    }
    return { tree, runs };
  }

  #newTree(
    rootId: string,
    maxConcurrent: number,
    provider: ProviderSpec | null,
    approver: Approver | null,
    reviewer: ProviderSpec | null,
    people: { planGate?: PlanGate | undefined; operator?: Operator | undefined } = {},
    tools: readonly Tool<never>[] = [],
  ): Tree {
    let resolve!: (result: TreeResult) => void;
    let reject!: (error: Error) => void;
    const result = new Promise<TreeResult>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    // A tree nobody awaits must not take the embedder's process down with an unhandled rejection.
    result.catch(() => undefined);
    const tree: Tree = {
      rootId,
      maxConcurrent,
      active: 0,
      slots: new Map(),
      byAddress: new Map(),
      admitting: new Set(),
      pumping: false,
      pumpAgain: false,
      settling: false,
      settleWanted: false,
      resumeQueue: [],
      waiters: new Map(),
      settled: false,
      cancelled: false,
      cancelReason: null,
      provider,
      approver,
      reviewer,
      planGate: people.planGate ?? null,
      operator: people.operator ?? null,
      tools: new Map(tools.map((item) => [item.name, item])),
      toolDefinitions: tools.map((item) => item.definition).sort(byName),
      serverTools: new Map(),
      abort: new AbortController(),
      resolve,
      reject,
      result,
    };
    this.#trees.set(rootId, tree);
    this.#keepAlive();
    return tree;
  }

  #handle(tree: Tree): RunHandle {
    return {
      rootId: tree.rootId,
      result: tree.result,
      cancel: () => this.cancel(tree.rootId),
    };
  }

  #post(slot: Slot, message: AgentInput): void {
    if (!slot.halted) slot.actor.control.postMessage(message);
  }

  /** Serves what an actor asks of this thread over its host channel, and listens to its control port. */
  #wire(slot: Slot): void {
    serveHost(
      {
        approve: (request) => this.#approve(slot, request),
        reviewPlan: (plan) => this.#reviewPlan(slot, plan),
        askOperator: (question) => this.#askOperator(slot, question),
        waitChild: (request) => this.#waitChild(slot, request),
        callTool: (call) => this.#callTool(slot, call),
        checkTool: async (request) => {
          const found = this.#treeTool(slot, request.runId, request.name);
          return 'tool' in found ? found.tool.check(request.args) : found.missing;
        },
        abortTool: async (request) => {
          this.#toolCalls.get(`${request.runId}:${request.callId}`)?.abort();
        },
      },
      slot.actor.host,
    );
    slot.actor.control.on('message', (message: AgentOutput) => {
      if (message.type === 'live') {
        this.#onLive(slot, message);
      } else if (message.type === 'live-flush') {
        // Every live event the actor sent before this has been handed on: say so, so its step commits after them.
        this.#post(slot, { type: 'live-flushed', id: message.id });
      }
    });
  }

  #startActor(
    tree: Tree,
    runId: string,
    address: string,
    generation: number,
    counted: boolean,
    resumed: boolean,
  ): void {
    if (tree.settled || this.#state !== 'running') {
      // The tree failed (or the supervisor began closing) while this lease was being taken: give it back at once.
      this.#release(runId, generation);
      return;
    }
    const actor = this.#pool.host(
      {
        type: 'start',
        runId,
        generation,
        owner: this.owner,
        resumed,
        ...(tree.provider ? { provider: tree.provider } : {}),
        ...(tree.reviewer ? { reviewer: tree.reviewer } : {}),
        live: this.#liveWanted(),
        ...(tree.toolDefinitions.length > 0 ? { tools: tree.toolDefinitions } : {}),
        ...(tree.approver ? {} : { approver: false }),
        kept: keptPaths(),
      },
      this.#backend.target,
      (port) => this.#storeWorker.postMessage({ type: 'attach', port }, [port]),
    );
    const slot: Slot = { tree, runId, address, generation, counted, parked: false, actor, halted: false };
    tree.slots.set(runId, slot);
    tree.byAddress.set(address, slot);
    this.#actors.add(actor);
    this.#wire(slot);
    actor.exit.then(
      (exit) => this.#onRunExit(slot, exit),
      (error: Error) => this.#onActorDied(slot, error),
    );
    if (tree.cancelled)
      this.#post(slot, { type: 'cancel', ...(tree.cancelReason ? { reason: tree.cancelReason } : {}) });
  }

  /** The tool `name` of the tree whose run `runId` this actor drives, or what the model is told when there is none. */
  #treeTool(slot: Slot, runId: string, name: string): { tool: Tool<never>; tree: Tree } | { missing: string } {
    if (slot.runId !== runId)
      throw new HarnessError(ErrorCode.Internal, `a tool call for run ${runId} from another run's actor`);
    const tool = slot.tree.tools.get(name);
    return tool
      ? { tool, tree: slot.tree }
      : { missing: `there is no tool named ${JSON.stringify(name)} in this process.` };
  }

  /** Runs one of the tree's own tools for an agent: validated, bounded, and never a throw into the tree. */
  async #callTool(slot: Slot, call: HostToolCall): Promise<{ content: string; isError: boolean }> {
    const found = this.#treeTool(slot, call.runId, call.name);
    if (!('tool' in found)) return { content: found.missing, isError: true };
    const { tool, tree } = found;
    // The call's own signal: the tree's end, or the agent saying its step stopped.
    const key = `${call.runId}:${call.callId}`;
    const stop = new AbortController();
    this.#toolCalls.set(key, stop);
    try {
      return await tool.call(call.args, {
        rootId: call.rootId,
        runId: call.runId,
        address: call.address,
        callId: call.callId,
        signal: AbortSignal.any([tree.abort.signal, stop.signal]),
      });
    } finally {
      this.#toolCalls.delete(key);
    }
  }

  /** Puts an ask to the tree's approver; with no approver the answer is deny. */
  async #approve(slot: Slot, request: ApprovalRequest): Promise<ApprovalAnswer> {
    const approver = slot.tree.approver;
    if (!approver) return 'deny';
    const answer = await approver.decide(request);
    if (answer !== 'approve' && answer !== 'deny' && answer !== 'defer') {
      throw new InvalidArgumentError(
        `the approver answered ${JSON.stringify(answer)}; an approver answers 'approve', 'deny' or 'defer'.`,
      );
    }
    return answer;
  }

  /** Shows a plan to the tree's plan gate; with none in this process the answer is defer (the plan is stored). */
  async #reviewPlan(slot: Slot, plan: PlanReview): Promise<PlanDecision> {
    const gate = slot.tree.planGate;
    if (!gate) return { decision: 'defer' };
    const decision = await gate.review(plan);
    const kind = (decision as { decision?: unknown })?.decision;
    if (kind !== 'approve' && kind !== 'correct' && kind !== 'cancel' && kind !== 'defer') {
      throw new InvalidArgumentError(
        `the plan gate answered ${JSON.stringify(decision)}; it answers { decision: 'approve' | 'correct' | 'cancel' | 'defer' }.`,
      );
    }
    return decision;
  }

  /** Puts an agent's question to the tree's operator; with none in this process the question is deferred. */
  async #askOperator(slot: Slot, question: OperatorQuestion): Promise<string | { defer: true }> {
    const operator = slot.tree.operator;
    if (!operator) return { defer: true };
    const answer = await operator.answer(question);
    if (typeof answer !== 'string' && (answer as { defer?: unknown })?.defer !== true) {
      throw new InvalidArgumentError('the operator answers with a string, or { defer: true }.');
    }
    return answer;
  }

  /**
   * Answers a question a paused run waits on — an approval, a plan, a question, an
   * interrupted command — through the store actor. The first answer wins; a second is
   * refused with ALREADY_ANSWERED naming the first. Then `resume(rootId)` continues the run.
   */
  async answer(questionId: string, answer: unknown, options: { by?: string } = {}): Promise<void> {
    this.#assertRunning();
    await this.#storeClient.call('answer', { questionId, answer, by: options.by ?? this.owner, now: Date.now() });
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
      subtree.map((member) => this.#storeClient.call('dropBacklog', { runId: member, now: Date.now() })),
    );
    return { files, cancelled: dropped.flatMap((result) => result.cancelled) };
  }

  /** A parent waiting on a child gives its slot up while it waits, so waiting never starves the tree of slots. */
  async #waitChild(
    slot: Slot,
    body: { runId: string; childId: string; timeoutMs: number | null },
  ): Promise<WaitChildResult> {
    const tree = slot.tree;
    const ended = async () => {
      const child = await this.read(reads.run(body.childId));
      return child !== null && isTerminal(child.status);
    };
    let outcome: 'ended' | 'background' = 'ended';
    if (!(await ended())) {
      if (slot.counted) await this.#park(slot);
      outcome = await new Promise<'ended' | 'background'>((resolve) => {
        let timer: NodeJS.Timeout | null = null;
        const onEnd = () => {
          if (timer) clearTimeout(timer);
          resolve('ended');
        };
        const list = tree.waiters.get(body.childId) ?? [];
        list.push(onEnd);
        tree.waiters.set(body.childId, list);
        if (body.timeoutMs !== null) {
          timer = setTimeout(() => {
            const current = tree.waiters.get(body.childId);
            if (current)
              tree.waiters.set(
                body.childId,
                current.filter((fn) => fn !== onEnd),
              );
            resolve('background');
          }, body.timeoutMs);
        }
        // The child may have ended between the check and the registration.
        void ended().then(
          (yes) => {
            if (yes) onEnd();
          },
          () => undefined,
        );
      });
      if (slot.parked) await this.#unpark(slot);
    }
    if (outcome === 'background') return { status: 'background' };
    const child = await this.read(reads.run(body.childId));
    const account = await this.read(reads.account(body.childId));
    return {
      status: 'ended',
      childStatus: child?.status ?? 'failed',
      reply: child?.reply ?? null,
      reason: child?.outcome?.reason ?? null,
      steps: account?.spent.steps ?? 0,
      tokens: account?.spent.tokens ?? 0,
    };
  }

  /** A parent gives its slot up while it waits on a child: in memory, or (shared) in its row, for every host to count. */
  async #park(slot: Slot): Promise<void> {
    const tree = slot.tree;
    if (this.#shared) {
      await this.#storeClient.call('park', { ...this.#fenceOf(slot), want: 'park', now: this.#options.clock.now() });
      slot.parked = true;
    } else {
      slot.parked = true;
      tree.active--;
    }
    this.#pump(tree);
  }

  /** The child ended: the parent takes a slot back before any queued child does, once one is free. */
  async #unpark(slot: Slot): Promise<void> {
    const tree = slot.tree;
    if (!this.#shared) {
      await new Promise<void>((resolve) => {
        tree.resumeQueue.push(resolve);
        this.#pump(tree);
      });
    } else {
      // Asked again at each pass: the slot may be freed on another host.
      while (
        !(
          await this.#storeClient.call('park', {
            ...this.#fenceOf(slot),
            want: 'back',
            now: this.#options.clock.now(),
          })
        ).granted
      ) {
        await new Promise<void>((resolve) => tree.resumeQueue.push(resolve));
      }
    }
    slot.parked = false;
  }

  #fenceOf(slot: Slot): { runId: string; generation: number; owner: string } {
    return { runId: slot.runId, generation: slot.generation, owner: this.owner };
  }

  /** Fills free slots: parents coming back from a wait first, then queued children in order. */
  #pump(tree: Tree): void {
    if (tree.settled || this.#state !== 'running') return;
    if (this.#shared) {
      // Each waiting parent asks for its slot again; then this host claims what it may.
      for (const wake of tree.resumeQueue.splice(0)) wake();
      void this.#claimPass();
      return;
    }
    while (tree.active < tree.maxConcurrent && tree.resumeQueue.length > 0) {
      tree.active++;
      (tree.resumeQueue.shift() as () => void)();
    }
    void this.#admitQueued(tree);
  }

  /**
   * Admits queued children into the free slots, first in first out. The queue is read
   * from the store (awaited on PostgreSQL): one pass at a time per tree, and a pass asked
   * for while one reads runs after it, so no child is admitted twice and none is missed.
   */
  async #admitQueued(tree: Tree): Promise<void> {
    if (tree.pumping) {
      tree.pumpAgain = true;
      return;
    }
    tree.pumping = true;
    try {
      do {
        tree.pumpAgain = false;
        if (tree.settled || this.#state !== 'running') return;
        if (tree.cancelled) {
          // A cancelled tree admits nothing more: whatever reached the queue since is cancelled too.
          if ((await this.read(reads.queued(tree.rootId, 1))).length > 0) void this.#cancelQueued(tree);
          return;
        }
        if (tree.maxConcurrent - tree.active <= 0) return;
        const queued = await this.read(reads.queued(tree.rootId, tree.maxConcurrent + tree.admitting.size));
        if (tree.settled || this.#state !== 'running' || tree.cancelled) continue;
        // The slots free now, after the read.
        const free = tree.maxConcurrent - tree.active;
        for (const childId of queued.filter((id) => !tree.admitting.has(id)).slice(0, Math.max(0, free)))
          this.#admit(tree, childId);
      } while (tree.pumpAgain);
    } catch (error) {
      this.#failTree(tree, error instanceof Error ? error : new Error(String(error)));
    } finally {
      tree.pumping = false;
      if (tree.settleWanted) {
        tree.settleWanted = false;
        this.#checkSettled(tree);
      }
    }
  }

  /**
   * Shared admission (PostgreSQL): claims the runnable agents of this supervisor's trees that
   * their caps and this host's allow, and starts an actor for each. One pass at a time; one
   * asked for meanwhile runs after it. A claim the store refuses is tried at the next pass.
   */
  async #claimPass(): Promise<void> {
    if (this.#state !== 'running') return;
    if (this.#claiming) {
      this.#claimAgain = true;
      return;
    }
    this.#claiming = true;
    try {
      do {
        this.#claimAgain = false;
        const trees = [...this.#trees.values()].filter((tree) => !tree.settled);
        // A cancelled tree admits nothing more: whatever reached its queue since is cancelled too.
        for (const tree of trees) if (tree.cancelled) await this.#cancelQueued(tree);
        const roots = trees.filter((tree) => !tree.cancelled).map((tree) => tree.rootId);
        let held = 0;
        for (const tree of trees) for (const slot of tree.slots.values()) if (slot.counted && !slot.parked) held++;
        const limit = Math.min(CLAIM_BATCH, this.#options.maxHostAgents - held);
        if (roots.length === 0 || limit < 1 || this.#state !== 'running') break;
        const driving = trees.flatMap((tree) => [...tree.slots.keys()]);
        const { claimed } = await this.#storeClient.call('claim', { ...this.#claim(), roots, limit, driving });
        for (const run of claimed) {
          const tree = this.#trees.get(run.rootId);
          if (!tree || tree.settled || tree.slots.has(run.runId)) {
            this.#release(run.runId, run.generation);
            continue;
          }
          this.#startActor(tree, run.runId, run.address, run.generation, run.runId !== run.rootId, run.resumed);
        }
        if (claimed.length === limit) this.#claimAgain = true;
      } while (this.#claimAgain && this.#state === 'running');
    } catch {
      // The store refused this pass (or is closing): the next hint or poll tries again.
    } finally {
      this.#claiming = false;
      for (const tree of [...this.#trees.values()]) {
        if (tree.settleWanted) {
          tree.settleWanted = false;
          this.#checkSettled(tree);
        }
      }
    }
  }

  /**
   * Shared admission's safety net: what another host's hints would have said, looked up in
   * the store. Waiting parents whose child ended are woken, every actor re-reads its inbox
   * if it waits on it, and this host claims what is runnable and settles what has ended.
   */
  #poll(): void {
    if (this.#state !== 'running') return;
    for (const tree of [...this.#trees.values()]) {
      if (tree.waiters.size > 0) void this.#wakeEnded(tree);
      for (const slot of tree.slots.values()) this.#post(slot, { type: 'mail' });
      this.#look(tree);
    }
  }

  /** Wakes the parents waiting on children of `tree` that have ended, wherever they ran. */
  async #wakeEnded(tree: Tree): Promise<void> {
    const runs = await this.read(reads.runs(tree.rootId)).catch(() => []);
    for (const run of runs) if (isTerminal(run.status)) this.#childEnded(tree, run.runId);
  }

  #childEnded(tree: Tree, runId: string): void {
    const waiters = tree.waiters.get(runId);
    if (!waiters) return;
    tree.waiters.delete(runId);
    for (const waiter of waiters) waiter();
  }

  /** What another host's commit hinted at: mail for an actor here, a child ended, work to claim. */
  #onHint(hint: WorkHint): void {
    if (hint.all) {
      this.#poll();
      return;
    }
    for (const mail of hint.mail) {
      const slot = this.#trees.get(mail.rootId)?.byAddress.get(mail.to);
      if (slot) this.#post(slot, { type: 'mail' });
    }
    // A hint that a child ended wakes its parent only once the store says so (a hint proves nothing).
    const ends = new Set(hint.ended.map((ended) => ended.rootId));
    for (const rootId of ends) {
      const tree = this.#trees.get(rootId);
      if (tree && tree.waiters.size > 0) void this.#wakeEnded(tree);
    }
    for (const rootId of hint.roots) {
      const tree = this.#trees.get(rootId);
      if (tree) this.#look(tree);
    }
  }

  /** Claims (or admits) what the tree may run now, and settles it if nothing of it is left. */
  #look(tree: Tree): void {
    this.#guard(tree, () => {
      this.#pump(tree);
      this.#checkSettled(tree);
    });
  }

  #admit(tree: Tree, childId: string): void {
    tree.admitting.add(childId);
    tree.active++;
    this.#storeClient.call('admit', { childId, ...this.#claim() }).then(
      async (admitted) => {
        if (admitted.status === 'gone') {
          tree.admitting.delete(childId);
          tree.active--;
          this.#look(tree);
          return;
        }
        const child = await this.read(reads.run(childId)).catch((error: unknown) => error as Error);
        tree.admitting.delete(childId);
        this.#guard(tree, () => {
          if (child instanceof Error) throw child;
          if (!child) throw new HarnessError(ErrorCode.RunNotFound, `admitted run ${childId} is not in the store`);
          this.#startActor(tree, childId, child.address, admitted.generation, true, false);
        });
      },
      (error) => {
        tree.admitting.delete(childId);
        this.#failTree(tree, error as Error);
      },
    );
  }

  /** Runs supervisor bookkeeping for a tree; anything it throws fails that tree, never the embedder's process. */
  #guard(tree: Tree, work: () => void): void {
    try {
      work();
    } catch (error) {
      this.#failTree(tree, error instanceof Error ? error : new Error(String(error)));
    }
  }

  async #cancelQueued(tree: Tree): Promise<void> {
    await this.#storeClient.call('cancelQueued', { rootId: tree.rootId, now: this.#options.clock.now() }).then(
      () => undefined,
      (error: Error) => this.#failTree(tree, error),
    );
  }

  #release(runId: string, generation: number): void {
    this.#storeClient.call('releaseLease', { runId, generation, owner: this.owner }).catch(() => undefined);
  }

  #onRunExit(slot: Slot, exit: RunExit): void {
    this.#actors.delete(slot.actor);
    // A halted actor's tree has already stopped here: how it left changes nothing.
    if (slot.halted) return;
    slot.halted = true;
    const tree = slot.tree;
    if (slot.counted && !slot.parked) tree.active--;
    if (exit.kind === 'ended') {
      // The run's end was committed before the actor said so, but its events reach this
      // thread over the store actor's port, and the actor's word over another: the slot is
      // kept (so the tree cannot settle) until a round trip to the store actor has brought
      // every notification before it, and observers have seen the run's last events.
      this.#pump(tree);
      void this.#storeBarrier().then(() => {
        this.#dropSlot(slot);
        this.#look(tree);
      });
      return;
    }
    this.#dropSlot(slot);
    if (exit.kind === 'lease-lost') {
      this.#publishLocal(tree, slot.runId, slot.generation, {
        type: 'lease-lost',
        owner: this.owner,
        generation: slot.generation,
      });
      // Shared: another host took the run over; this one lets it go and goes on with the tree.
      if (this.#shared) this.#look(tree);
      else this.#failTree(tree, new LeaseLostError(slot.runId, slot.generation, null));
    } else if (exit.kind === 'error') {
      // The run stays resumable (a provider this process could not build, say): its
      // lease is given back, so a resume need not wait for the lease to lapse.
      this.#release(slot.runId, slot.generation);
      this.#failTree(tree, deserializeError(exit.error));
    }
  }

  #dropSlot(slot: Slot): void {
    const tree = slot.tree;
    if (tree.slots.get(slot.runId) === slot) tree.slots.delete(slot.runId);
    if (tree.byAddress.get(slot.address) === slot) tree.byAddress.delete(slot.address);
  }

  /** Resolves once every notification of a commit made before now has been handled here (see StoreSyncBody). */
  #storeBarrier(): Promise<void> {
    return this.#storeClient.sync().catch(() => undefined);
  }

  /** The thread hosting an actor died (or the pool was destroyed): its tree stops here, resumable. */
  #onActorDied(slot: Slot, error: Error): void {
    this.#actors.delete(slot.actor);
    if (slot.halted) return;
    const isolation = this.#pool.isolation;
    const shared =
      isolation === 'shared'
        ? ', and with it every actor that thread hosted'
        : isolation === 'in-process'
          ? ', with every actor of the in-process host'
          : '';
    this.#failTree(
      slot.tree,
      new ActorExitedError(
        ErrorCode.ActorExited,
        `the thread driving run ${slot.runId} (${slot.address}) ended mid-run (${error.message})${shared}; ` +
          `its last committed step is durable and the tree resumes with supervisor.resume("${slot.tree.rootId}").`,
      ),
    );
  }

  /** Stops an actor now, committing nothing more; its run stays as its last commit left it. */
  #halt(slot: Slot): void {
    if (slot.halted) return;
    slot.actor.control.postMessage({ type: 'halt' } satisfies AgentInput);
    slot.halted = true;
  }

  /** Stops a tree in this process without ending its runs: what was committed stays, and it can be resumed. */
  #failTree(tree: Tree, error: Error): void {
    if (tree.settled) return;
    // An error an embedder is handed says no secret this process holds, wherever it was raised.
    scrubError(error);
    tree.settled = true;
    tree.abort.abort();
    this.#trees.delete(tree.rootId);
    this.#keepAlive();
    const slots = [...tree.slots.values()];
    tree.slots.clear();
    for (const slot of slots) {
      this.#halt(slot);
      // Give the lease back so another driver can resume at once; the store ignores a stale one.
      this.#release(slot.runId, slot.generation);
    }
    tree.reject(error);
    void this.read(reads.runs(tree.rootId)).then(
      (runs) => this.#bus.endTree(tree.rootId, new Set(runs.map((run) => run.runId))),
      // The store cannot be read (it is closing): the iterators scoped to the tree's root still end.
      () => this.#bus.endTree(tree.rootId, new Set()),
    );
  }

  #checkSettled(tree: Tree): void {
    if (tree.settled || tree.slots.size > 0 || tree.admitting.size > 0) return;
    if (tree.pumping || tree.settling || this.#claiming) {
      // The queue (or the tree) is being read: look again once that read is done.
      tree.settleWanted = true;
      return;
    }
    void this.#settleIfDone(tree);
  }

  /** Settles the tree when the store has nothing of it left to run: its result, from the store. */
  async #settleIfDone(tree: Tree): Promise<void> {
    tree.settling = true;
    try {
      const live = await this.read(reads.liveCount(tree.rootId));
      if (tree.settled || tree.slots.size > 0 || tree.admitting.size > 0) return;
      if (live > 0) {
        // Runs left queued with nothing running to admit them: admit now.
        this.#pump(tree);
        return;
      }
      const [root, ledger, runs, output] = await Promise.all([
        this.read(reads.run(tree.rootId)),
        this.read(reads.ledger(tree.rootId)),
        this.read(reads.runs(tree.rootId)),
        this.read(outputQuery(tree.rootId)),
      ]);
      if (tree.settled || tree.slots.size > 0 || tree.admitting.size > 0) return;
      tree.settled = true;
      tree.abort.abort();
      this.#trees.delete(tree.rootId);
      this.#keepAlive();
      tree.resolve({
        rootId: tree.rootId,
        status: root?.status ?? 'failed',
        reason: root?.outcome?.reason ?? null,
        reply: root?.reply ?? null,
        output,
        spent: ledger?.root.spent ?? { steps: 0, tokens: 0 },
        runs: runs.length,
      });
      // Every event of the tree was delivered before it settled: its scoped iterators end after them.
      this.#bus.endTree(tree.rootId, new Set(runs.map((run) => run.runId)));
    } catch (error) {
      this.#failTree(tree, error instanceof Error ? error : new Error(String(error)));
    } finally {
      tree.settling = false;
      if (tree.settleWanted && !tree.settled) {
        tree.settleWanted = false;
        this.#checkSettled(tree);
      }
    }
  }

  #onStoreOutput(message: StoreOutput): void {
    if (message.type === 'hint') {
      if (this.#state === 'running') this.#onHint(message.hint);
      return;
    }
    if (message.type !== 'notify') return;
    const notes: Notifications = message.notifications;
    this.#bus.publish(notes.events);
    for (const mail of notes.mail) {
      const slot = this.#trees.get(mail.rootId)?.byAddress.get(mail.to);
      if (slot) this.#post(slot, { type: 'mail' });
    }
    const touched = new Set<Tree>();
    for (const spawned of notes.spawned) {
      const tree = this.#trees.get(spawned.rootId);
      if (tree) touched.add(tree);
    }
    for (const ended of notes.ended) {
      const tree = this.#trees.get(ended.rootId);
      if (!tree) continue;
      this.#childEnded(tree, ended.runId);
      // An interrupted root takes its tree with it: its children stop at their next boundary.
      if (ended.runId === tree.rootId && ended.status === 'interrupted' && !tree.cancelled)
        void this.#handle(tree)
          .cancel()
          .catch(() => undefined);
      touched.add(tree);
    }
    for (const tree of touched) {
      this.#look(tree);
    }
  }

  #publishLocal(
    tree: Tree,
    runId: string,
    generation: number,
    data: { type: 'lease-lost'; owner: string; generation: number },
  ): void {
    this.#bus.publish([
      { ...data, eventId: 0, rootId: tree.rootId, runId, seq: null, generation, at: this.#options.clock.now() },
    ]);
  }

  async #renewLeases(): Promise<void> {
    if (this.#state !== 'running') return;
    const leases: { runId: string; generation: number }[] = [];
    for (const tree of this.#trees.values()) {
      for (const slot of tree.slots.values())
        if (!slot.halted) leases.push({ runId: slot.runId, generation: slot.generation });
    }
    if (leases.length === 0) return;
    try {
      const { lost } = await this.#storeClient.call('renewLeases', {
        owner: this.owner,
        leases,
        expiresAt: this.#options.clock.now() + this.#options.leaseTtlMs,
      });
      for (const runId of lost) {
        for (const tree of this.#trees.values()) {
          const slot = tree.slots.get(runId);
          if (!slot) continue;
          this.#publishLocal(tree, runId, slot.generation, {
            type: 'lease-lost',
            owner: this.owner,
            generation: slot.generation,
          });
          if (this.#shared) {
            // Another host drives it now: stop this actor before it tries to commit, and go on with the tree.
            this.#halt(slot);
            this.#dropSlot(slot);
            this.#look(tree);
          } else this.#failTree(tree, new LeaseLostError(runId, slot.generation, null));
        }
      }
    } catch {
      // The store actor's exit is handled where it is detected.
    }
  }

  #onStoreExit(): void {
    const reason = `the store actor exited${this.#failure ? `: ${this.#failure.message}` : ''}; every pending commit was refused.`;
    // Whatever the state, nothing more will be answered: nothing may wait on it.
    this.#storeClient.fail(reason);
    if (this.#state === 'stopped' || this.#state === 'draining') return;
    this.#state = 'failed';
    for (const tree of [...this.#trees.values()]) {
      this.#failTree(tree, new ActorExitedError(ErrorCode.StoreActorExited, reason));
    }
    void this.#pool.destroy();
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
    if (this.#renewTimer) clearInterval(this.#renewTimer);
    if (this.#pollTimer) clearInterval(this.#pollTimer);
    for (const tree of [...this.#trees.values()]) {
      this.#failTree(
        tree,
        new HarnessError(
          ErrorCode.SupervisorClosed,
          `the supervisor was closed while tree ${tree.rootId} was running; resume it to finish.`,
        ),
      );
    }
    // Halted actors stop what they started (a command's process group, a model call) and
    // leave; one that does not within the bound has its thread ended under it.
    await settledWithin(
      [...this.#actors].map((actor) => actor.exit),
      HALT_BOUND_MS,
    );
    await this.#pool.destroy();
    this.#actors.clear();
    // The trees' MCP servers stop with their trees: a stdio server's process is gone before close() returns.
    await Promise.all([...this.#serverLifetimes]);
    if (!wasFailed) {
      // A request posted now is served before the close request is.
      await this.#storeBarrier();
      this.#storeWorker.postMessage({ type: 'close' });
      await this.#storeExited;
    }
    this.#bus.close();
    this.#state = wasFailed ? 'failed' : 'stopped';
  }
}

/** Sorted by name, so the tool definitions a tree sends are the same bytes whatever order they were given in. */
function byName(a: { name: string }, b: { name: string }): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

/**
 * The MCP server whose tool this is: the longest of the servers' names it starts with,
 * then `__` (a bundle's server is itself `<plugin>__<server>`).
 */
function serverOf(name: string, servers: readonly string[]): string {
  let best = '';
  for (const server of servers) if (name.startsWith(`${server}__`) && server.length > best.length) best = server;
  return best || name.slice(0, name.indexOf('__'));
}

/** What a tree's stored spec keeps of a tool: enough to refuse a resume that does not give it back as it was. */
type StoredTool = NonNullable<RunSpec['tools']>[number];

function storedTool(definition: ToolDefinitionData, server: string | undefined): StoredTool {
  return { name: definition.name, effect: definition.effect, ...(server === undefined ? {} : { server }) };
}

/**
 * How a tree's MCP servers are decided and contained: by its policy, at its workspace, inside
 * its run's containment; a tree without a contract, in the default containment at each
 * server's own cwd (see McpConnectOptions.contain).
 */
function serverOptions(
  policy: Policy | null,
  contract: ContractData | null,
  approver: Approver | undefined,
): McpConnectOptions {
  return {
    ...(policy ? { policy } : {}),
    ...(contract ? { root: contract.root, contain: contract.sandbox ? { sandbox: contract.sandbox } : {} } : {}),
    ...(approver ? { approver } : {}),
  };
}

/**
 * Tools live in the process, not the store: a tree started with tools needs them all again,
 * each with the effect it had (a tool that acted is journaled; given back as one that only
 * reads, an interrupted call would run again).
 */
function checkToolsGiven(rootId: string, stored: StoredTool[], given: Map<string, Tool<never>>): void {
  const changed = stored.filter((item) => {
    const now = given.get(item.name);
    return now !== undefined && now.definition.effect !== item.effect;
  });
  if (changed.length > 0) {
    throw new InvalidArgumentError(
      `resume(): ${changed.map((item) => `${item.name} was started as an '${item.effect}' tool`).join('; ')}, and is given back with another effect; give it back as it was. Nothing was resumed.`,
    );
  }
  const missing = stored.filter((item) => !given.has(item.name));
  if (missing.length === 0) return;
  const own = missing.filter((item) => item.server === undefined).map((item) => item.name);
  const servers = [...new Set(missing.flatMap((item) => (item.server === undefined ? [] : [item.server])))];
  const wants: string[] = [];
  if (own.length > 0)
    wants.push(
      `${own.length === 1 ? 'the tool' : 'tools'} ${own.join(', ')} (pass ${own.length === 1 ? 'it' : 'them'} again: resume(rootId, { tools: [...] }))`,
    );
  if (servers.length > 0)
    wants.push(
      `the tools of the MCP ${servers.length === 1 ? 'server' : 'servers'} ${servers.join(', ')} (pass ${servers.length === 1 ? 'it' : 'them'} again: resume(rootId, { mcp: [...] }))`,
    );
  throw new HarnessError(
    ErrorCode.ToolsMissing,
    `tree ${rootId} was started with ${wants.join(' and ')}, which this process was not given. Nothing was resumed, and the tree stays resumable.`,
    { details: { rootId, missing: missing.map((item) => item.name), ...(servers.length > 0 ? { servers } : {}) } },
  );
}

/** The providers a contract names besides the tree's: its review gate's and its escalation's. */
function contractProviders(data: ContractData | null | undefined): ProviderSpec[] {
  if (!data) return [];
  return [
    ...(data.verification.kind === 'review' ? [data.verification.provider] : []),
    ...(data.escalation ? [data.escalation.provider] : []),
  ];
}

/**
 * Holds the secrets of each spec in this thread (and, through the forwarding set up at
 * boot, in the store actor) before anything a run of them says is written: keys given or
 * read from their variables, credential headers, base URL credentials.
 */
function holdProviderSecrets(specs: readonly (ProviderSpec | null | undefined)[]): void {
  for (const spec of specs) if (spec && typeof spec === 'object') holdSecrets(providerSecrets(spec));
}

/** A contract as stored: a review gate's provider without its key. */
function redactContract(data: ContractData): ContractData {
  if (data.verification.kind !== 'review') return data;
  return { ...data, verification: { ...data.verification, provider: redactSpec(data.verification.provider) } };
}

/** An escalation needs a gate whose failures it counts, and retries left to use the stronger model. */
function checkEscalation(data: ContractData): void {
  const escalation = data.escalation;
  if (!escalation) return;
  if (data.verification.kind === 'none') {
    throw new InvalidArgumentError(
      'withEscalation moves to a stronger model after gate failures, and this contract has no gate: add withVerification(Verification.command(...)) or drop the escalation.',
    );
  }
  if (escalation.afterGateFailures > data.retries) {
    throw new InvalidArgumentError(
      `withEscalation: with ${data.retries} ${data.retries === 1 ? 'retry' : 'retries'} the run ends gate-failed before the stronger model gets a turn (it escalates after ${escalation.afterGateFailures} gate failures), so it would never escalate; raise withRetries to at least ${escalation.afterGateFailures} (the stronger model then has one try at the gate, and one more for each retry above that).`,
    );
  }
  if (data.verification.kind === 'review') checkReviewer(data.verification.provider, escalation.provider);
  // Found missing now, not after the gate failures that were paid for to get there.
  for (const name of keyVariables(escalation.provider)) {
    if (!process.env[name]) {
      throw new InvalidArgumentError(
        `withEscalation: the stronger model reads its key from ${name}, which is not set in this process; set it before run() (the agent threads take the environment when they start).`,
      );
    }
  }
}

/** A review gate refuses to review the model that wrote the change. */
function checkReviewer(reviewer: ProviderSpec, writer: ProviderSpec): void {
  const model = (spec: ProviderSpec): string | null =>
    spec.kind === 'module' || spec.kind === 'fallback' ? null : (spec.model ?? null);
  const a = model(reviewer);
  if (a !== null && a === model(writer)) {
    throw new InvalidArgumentError(
      `Verification.review: the reviewer is the model that writes the change (${a}); a review by the same model proves little. Give the review another model.`,
    );
  }
}

/** The options' names and the schemas' keys agree: a new option is added to both or fails to compile. */
type SameKeys<A, B> = [keyof A] extends [keyof B] ? ([keyof B] extends [keyof A] ? true : never) : never;
const optionKeysAgree: [
  SameKeys<SupervisorOptions, SupervisorOptionsShape>,
  SameKeys<RunOptions, RunOptionsShape>,
  SameKeys<ResumeOptions, ResumeOptionsShape>,
] = [true, true, true];
void optionKeysAgree;
