/**
 * Sessions: a conversation with an agent over one workspace, durable in the store. Each
 * turn is a run of its own (budgeted, policy-bounded, checkpointed, leased, resumable)
 * whose transcript begins with the turns before it on its branch: what the user said,
 * what the agent did and found (its steps' calls and their results), and its reply. The
 * session's head is the turn the next one follows; a turn moves it when it ends, by
 * compare-and-swap, so two processes racing a turn on one head cannot both win. A branch
 * moves the head back to any earlier turn.
 */
import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import { appendSteered } from '../actors/agent/step.js';
import { type Clock, systemClock } from '../clock.js';
import { ConflictError, ErrorCode, HarnessError, InvalidArgumentError } from '../errors.js';
import type { McpServerSpec } from '../mcp/spec.js';
import { TaskContract } from '../runtime/contract/contract.js';
import type { OutputSchemaInput } from '../runtime/contract/output-schema.js';
import type { Approver } from '../runtime/policy/approval.js';
import { Policy } from '../runtime/policy/policy.js';
import type { ProviderSpec, TranscriptEntry } from '../runtime/provider.js';
import type { HostModel } from '../runtime/providers/host-model.js';
import type { HostTool as Tool } from '../runtime/tools/host-tool.js';
import {
  type Answer,
  type AnyStore,
  type Effects,
  isPostgres,
  perform,
  read,
  whereIs,
  write,
} from '../store/either.js';
import type { PostgresStore } from '../store/postgres/index.js';
import { TraceQueries } from '../store/queries.js';
import type { SessionRecord, TurnRecord } from '../store/records.js';
import type { Store } from '../store/sqlite/store.js';
import { type UIMessage, uiMessagesOf } from '../ui/messages.js';
import type { LiveObserver } from './event-bus.js';
import { outcomeQuery, type RunResult, type RunTarget, type RunWithOptions, runOn } from './run-with.js';
import { onSharedSupervisor } from './shared.js';
import { StoreFollower } from './store-follow.js';
import { Supervisor } from './supervisor.js';
import { type TurnEvent, TurnHandle, turnEnded } from './turn-handle.js';

export { type TurnEvent, TurnHandle } from './turn-handle.js';

/** What a turn is run with: the model, and the run's policy, approver and tools. */
export interface TurnOptions {
  /** The model (for resumeTurn, optional: without it the stored spec is used, its key read from the variable it names). */
  provider: ProviderSpec;
  policy?: Policy;
  approver?: Approver;
  tools?: readonly Tool<never>[];
  /** Host models for the turn: what a `{ kind: 'host', name }` provider asks (see RunOptions.models). */
  models?: Record<string, HostModel>;
  /** MCP servers for the turn, started before it and stopped after (see RunWithOptions.mcp). */
  mcp?: McpServerSpec[];
  /** Directories holding skills for the turn (see RunOptions.skills). */
  skills?: string[];
  /** The turn as a contract of its own (verification, budget, plan gate, output schema); its goal is the turn's. */
  contract?: TaskContract;
  /**
   * The shape the turn's answer must have (a zod schema, an OutputSchema or a JSON Schema):
   * checked, re-prompted twice at most, and parsed into the result's `output`. For a turn
   * given a contract, the contract says it instead.
   */
  outputSchema?: OutputSchemaInput;
  /** Hears every event of the turn's tree, committed and live (text deltas, model and tool calls). */
  observer?: LiveObserver;
  /**
   * Lets the answering agent hand parts of the work to sub-agents: it is offered
   * spawn_agent, its children run under the turn's policy (narrowed only) and draw from
   * the turn's one ledger, and the whole fan-out is one turn. Without it, a turn's agent
   * works alone and is not offered spawn_agent.
   */
  contained?: Containment;
}

/** How a session runs its turns. */
export interface SessionOptions {
  /**
   * A supervisor you started on the same store, and close yourself: every turn runs on it.
   * Without it the turns run on the store's shared supervisor, as runWith's do (started by
   * the first turn, kept for the next). A contract's leaseTtlMs does not apply to a supervisor given.
   */
  supervisor?: Supervisor<Store> | Supervisor<PostgresStore> | Supervisor<AnyStore>;
}

/** How far a turn may fan out: the most agents its tree may spawn (the root not counted), and how many run at once. */
export interface Containment {
  maxTotalAgents: number;
  maxConcurrentAgents?: number;
}

/** A turn's end: its row, and the run that answered it. */
export interface TurnResult extends RunResult {
  turnId: string;
  /** `reply`: the first completion stopped on text and the turn ended there, with no step; `work` otherwise. */
  kind: TurnKind;
  /** Corrections sent while the turn ran that it ended before taking, in the order they were sent. */
  undelivered: string[];
}

export type TurnKind = NonNullable<TurnRecord['kind']>;

/** Another turn took the session's head first; this turn's row is kept, as `conflicted`. */
export class TurnConflictError extends ConflictError {
  constructor(sessionId: string, turnId: string, head: string | null) {
    super(turnId, { owner: `turn ${head ?? '(none)'}`, pid: null, host: null, expiresAt: 0 });
    this.message =
      `session ${sessionId}: turn ${turnId} ended after another turn moved the head (now ${head ?? 'none'}); ` +
      'its row is kept as conflicted and readable with session.turns(). Branch from the turn you want to follow and ask again.';
    Object.assign(this.details, { sessionId, turnId, head });
  }
}

/** The turn statuses a turn can be resumed from: its process was killed, or it paused for a person. */
const RESUMABLE: ReadonlySet<string> = new Set(['running', 'paused']);

const QUERIES = new TraceQueries();

/**
 * A session on either backend. On a SQLite store its reads and its small writes (the head,
 * the turns, a branch, a steer) answer at once; on a PostgreSQL store each is a promise.
 * A turn is awaited on both.
 */
export class Session<S extends AnyStore = Store> {
  readonly id: string;
  /** The workspace the turns work in; null for a conversation with no repository. */
  readonly root: string | null;
  readonly #store: S;
  /** The embedder's running supervisor the turns run on; without one, the store's shared supervisor (see runWith). */
  readonly #supervisor: Supervisor<S> | null;
  /** What the session's own rows are stamped with: the clock of the supervisor it was given, else the system's. */
  readonly #clock: Clock;

  private constructor(store: S, record: SessionRecord, supervisor: Supervisor<S> | null) {
    this.#store = store;
    this.#supervisor = supervisor;
    this.#clock = clockOf(supervisor);
    this.id = record.sessionId;
    this.root = record.root;
  }

  /**
   * Opens a new session over the workspace at `root`: each turn a workspace run there.
   *
   * @example
   * const session = await Session.open(store, repoDir);
   * const first = await session.turn('the test suite is failing; why?', { provider });
   */
  static async open<S extends AnyStore = Store>(
    store: S,
    root: string,
    options?: SessionOptions & { id?: string },
  ): Promise<Session<S>>;
  /**
   * Opens a new conversation with no repository: each turn a plain run, offered no file
   * tools or commands and none of their instructions (the embedder's tools, given with the
   * turn, are), its answer typed where the turn gives `outputSchema`.
   *
   * @example
   * const chat = await Session.open(store);
   * const first = await chat.turn('Which of our plans suits a team of five?', { provider, tools: [lookupPlan] });
   */
  static async open<S extends AnyStore = Store>(
    store: S,
    options?: SessionOptions & { id?: string },
  ): Promise<Session<S>>;
  static async open<S extends AnyStore = Store>(
    store: S,
    second?: string | (SessionOptions & { id?: string }),
    third: SessionOptions & { id?: string } = {},
  ): Promise<Session<S>> {
    if (second !== undefined && typeof second !== 'string' && (typeof second !== 'object' || second === null))
      throw new InvalidArgumentError(
        'Session.open(store, root?, options?): root is the workspace directory the turns work in (leave it out for a conversation with no repository).',
      );
    if (second === '')
      throw new InvalidArgumentError(
        'Session.open: the workspace directory is an empty string; give one, or leave it out for a conversation with no repository.',
      );
    const root = typeof second === 'string' ? second : null;
    const options = typeof second === 'string' ? third : (second ?? {});
    const supervisor = checkSupervisor(store, options.supervisor, 'Session.open');
    const sessionId = options.id ?? randomUUID();
    if (typeof sessionId !== 'string' || sessionId.trim() === '')
      throw new InvalidArgumentError('Session.open: id must be a non-empty string when given.');
    const absolute = root === null ? null : resolve(root);
    const clock = clockOf(supervisor);
    await perform(store, write('openSession', { sessionId, root: absolute, now: clock.now() }));
    return new Session(store, { sessionId, root: absolute, head: null, createdAt: clock.now() }, supervisor);
  }

  /** The session `sessionId` in `store`, from any process. */
  static async resume<S extends AnyStore = Store>(
    store: S,
    sessionId: string,
    options: SessionOptions = {},
  ): Promise<Session<S>> {
    const supervisor = checkSupervisor(store, options.supervisor, 'Session.resume');
    const record = await perform(store, read(QUERIES.session(sessionId)));
    if (!record) {
      throw new HarnessError(
        ErrorCode.SessionNotFound,
        `no session ${sessionId} in ${whereIs(store)}; list them with store.sessions(), or open one with Session.open(store, root).`,
        { details: { sessionId } },
      );
    }
    return new Session(store, record, supervisor);
  }

  /** Runs reads and writes on the session's store: at once on SQLite, a promise on PostgreSQL. */
  #do<T>(body: Effects<T>): Answer<S, T> {
    return perform(this.#store, body);
  }

  /** The turn the next one follows (null before the first). */
  get head(): Answer<S, string | null> {
    return this.#do(this.#head());
  }

  *#head(): Effects<string | null> {
    return (yield* read(QUERIES.session(this.id)))?.head ?? null;
  }

  /** Every turn of the session, every branch's, in the order they began. */
  turns(): Answer<S, TurnRecord[]> {
    return this.#do(read(QUERIES.turns(this.id)));
  }

  /** Makes `fromTurnId` the head: the next turn follows it, and sees it and the turns before it, no later ones. */
  branch(fromTurnId: string): Answer<S, void> {
    const session = this;
    return this.#do(
      (function* () {
        const turn = yield* session.#turn(fromTurnId);
        if (turn.status === 'running')
          throw new InvalidArgumentError(`turn ${fromTurnId} has not ended; branch from a turn that has.`);
        yield* write('moveHead', { sessionId: session.id, turnId: fromTurnId });
      })(),
    );
  }

  /**
   * Runs one turn: `text` is what the user says; its run begins with the turns before it on
   * this branch. Await the handle for the result, or iterate it for the text as it streams.
   */
  turn(text: string, options: TurnOptions): TurnHandle<S> {
    const turnId = randomUUID();
    return new TurnHandle<S>(
      turnId,
      isPostgres(this.#store),
      (runId, kind, text) => this.#send(runId, kind, text),
      (id, kind, text) => this.#do(this.#sendTo(id, kind, text)),
      (push, started) => this.#run(turnId, text, options, push, started),
    );
  }

  /**
   * Corrects a running turn from any process (see TurnHandle.steer): the words reach its
   * root at its next step boundary. TURN_ENDED, writing nothing, for a turn that has ended.
   */
  steer(turnId: string, text: string): Answer<S, void> {
    const session = this;
    return this.#do(
      (function* () {
        if (typeof text !== 'string' || text.trim() === '')
          throw new InvalidArgumentError('session.steer needs the correction, a non-empty string.');
        yield* session.#sendTo(turnId, 'steer', text);
      })(),
    );
  }

  /** Interrupts a running turn from any process (see TurnHandle.interrupt). */
  interrupt(turnId: string): Answer<S, void> {
    return this.#do(this.#sendTo(turnId, 'interrupt', null));
  }

  /** Writes a steer or an interrupt for a turn's root run. */
  #send(runId: string, kind: 'steer' | 'interrupt', text: string | null): Answer<S, void> {
    return this.#do(this.#steerRun(runId, kind, text));
  }

  *#steerRun(runId: string, kind: 'steer' | 'interrupt', text: string | null): Effects<void> {
    yield* write('steer', { runId, kind, text, by: 'the user', now: this.#clock.now() });
  }

  /** Writes a steer or an interrupt for the root run of a turn that can still be steered. */
  *#sendTo(turnId: string, kind: 'steer' | 'interrupt', text: string | null): Effects<void> {
    const turn = yield* this.#turn(turnId);
    if (!RESUMABLE.has(turn.status)) turnEnded(kind, turnId, turn.status);
    if (!turn.runId)
      throw new InvalidArgumentError(
        `turn ${turnId} has not started its run yet; steer it through the handle session.turn() gave, which holds it until then.`,
      );
    yield* this.#steerRun(turn.runId, kind, text);
  }

  async #run(
    turnId: string,
    text: string,
    options: TurnOptions,
    push: (event: TurnEvent) => void,
    started: (runId: string, supervisor: Supervisor<AnyStore>) => void | Promise<void>,
  ): Promise<TurnResult> {
    if (typeof text !== 'string' || text.trim() === '')
      throw new InvalidArgumentError('session.turn needs what the user says, a non-empty string.');
    if (!options || typeof options !== 'object' || !options.provider)
      throw new InvalidArgumentError(
        'session.turn needs { provider } (and optionally policy, approver, tools, contract).',
      );
    const target = turnTarget(text, this.root, options);
    const contained = checkContainment(options.contained);
    // A turn whose contract judges its answer (a gate, a plan gate, an answer's shape) is work from the start.
    const data = target instanceof TaskContract ? target.toJSON() : null;
    const judged = data
      ? data.verification.kind !== 'none' || data.planGate || data.outputSchema !== null
      : options.outputSchema !== undefined;
    const session = this;
    const history = await this.#do(
      (function* () {
        const parent = yield* session.#head();
        const history = yield* session.#history(parent);
        yield* write('beginTurn', { sessionId: session.id, turnId, parent, text, now: session.#clock.now() });
        return history;
      })(),
    );
    let result: RunResult;
    let unsubscribe: () => void = () => undefined;
    try {
      const turnOptions: RunWithOptions = {
        history,
        session: this.id,
        reply: !judged,
        ...(contained
          ? {
              maxTotalAgents: contained.maxTotalAgents,
              ...(contained.maxConcurrentAgents === undefined
                ? {}
                : { maxConcurrentAgents: contained.maxConcurrentAgents }),
            }
          : { spawn: false }),
        ...(options.tools ? { tools: options.tools } : {}),
        ...(options.models ? { models: options.models } : {}),
        ...(options.mcp ? { mcp: options.mcp } : {}),
        ...(options.skills ? { skills: options.skills } : {}),
        onStart: async (supervisor, rootId) => {
          // Heard from the first event on: the subscription is made before anything is awaited.
          unsubscribe = supervisor.observe(
            (event) => {
              options.observer?.(event);
              if (!('live' in event) || event.runId !== rootId) return;
              if (event.type === 'text-delta') push({ type: 'text', text: event.text });
              else if (event.type === 'tool-call-start')
                push({ type: 'tool-call-start', callId: event.callId, name: event.name });
              else if (event.type === 'tool-call-end')
                push({ type: 'tool-call-end', callId: event.callId, name: event.name, isError: event.isError });
            },
            { rootId, live: true },
          );
          // The turn names its run before anything is sent to it: a steer is taken only by a turn's root.
          await this.#do(write('startedTurn', { turnId, runId: rootId }));
          await started(rootId, supervisor as Supervisor<AnyStore>);
        },
      };
      // A workspace turn's policy defaults as a workspace run's; a plain turn's is the one given, if any.
      const policy = options.policy ?? (data ? Policy.default() : null);
      const run = (supervisor: Supervisor<AnyStore>) =>
        runOn(supervisor, target, options.provider, policy, options.approver, turnOptions);
      result = this.#supervisor
        ? await run(this.#supervisor as Supervisor<AnyStore>)
        : await onSharedSupervisor(this.#store, data?.leaseTtlMs ? { leaseTtlMs: data.leaseTtlMs } : {}, run);
    } catch (error) {
      // No run to follow: the turn is kept as failed, and the head stays where it was.
      await this.#do(
        write('endTurn', { turnId, status: 'failed', reply: null, now: this.#clock.now(), advance: false }),
      );
      throw error;
    } finally {
      unsubscribe();
    }
    return this.#end(turnId, result);
  }

  /** Ends a turn as its run ended, moving the head to it by compare-and-swap; a turn that lost the race is a conflict. */
  async #end(turnId: string, result: RunResult): Promise<TurnResult> {
    const session = this;
    return await this.#do(
      (function* (): Effects<TurnResult> {
        const ended = yield* write('endTurn', {
          turnId,
          status: result.outcome.kind,
          reply: result.reply,
          now: session.#clock.now(),
        });
        if (!ended.advanced) throw new TurnConflictError(session.id, turnId, ended.head);
        return {
          ...result,
          turnId,
          kind: (yield* read(QUERIES.turn(turnId)))?.kind ?? 'work',
          // A paused turn takes what waits for it when it is resumed: nothing is undelivered yet.
          undelivered: result.outcome.kind === 'paused' ? [] : yield* read(QUERIES.undeliveredSteers(result.runId)),
        };
      })(),
    );
  }

  /**
   * The conversation as the AI SDK's `UIMessage`s, for a chat page that opens it: the
   * current branch's turns (each the user's words and the agent's message), then the user's
   * words of a turn still running, whose answer `reconnect()` streams.
   */
  uiMessages(): Answer<S, UIMessage[]> {
    const session = this;
    return this.#do(
      (function* () {
        const head = yield* session.#head();
        const branch = head === null ? [] : yield* read(QUERIES.branch(head));
        const running = (yield* read(QUERIES.turns(session.id))).filter(
          (turn) => turn.status === 'running' && turn.parent === head,
        );
        return uiMessagesOf(branch, running.at(-1) ?? null);
      })(),
    );
  }

  /** The session's latest turn still running (in this process or one that died), or null. */
  runningTurn(): Answer<S, TurnRecord | null> {
    const session = this;
    return this.#do(
      (function* () {
        return (yield* read(QUERIES.turns(session.id))).filter((turn) => turn.status === 'running').at(-1) ?? null;
      })(),
    );
  }

  /**
   * A turn as a handle to stream to a page that lost its connection: its UI message stream
   * replays what the store has of the turn, then follows it to its end (the AI SDK's resume
   * convention; a turn that has ended is replayed whole). Where the process that ran it is
   * gone (a restarted server), the turn is resumed here from its last committed step, with
   * what `resumeTurn` takes; where a live process drives it, it is only followed.
   *
   * @example
   * const running = await session.runningTurn();
   * if (!running) response.writeHead(204).end();
   * else await session.reconnect(running.turnId, { provider }).pipeUIMessageStreamToResponse(response);
   */
  reconnect(
    turnId: string,
    options: Partial<Pick<TurnOptions, 'provider' | 'approver' | 'tools' | 'models'>> = {},
  ): TurnHandle<S> {
    return new TurnHandle<S>(
      turnId,
      isPostgres(this.#store),
      (runId, kind, text) => this.#send(runId, kind, text),
      (id, kind, text) => this.#do(this.#sendTo(id, kind, text)),
      async (_push, started) => {
        const turn = await this.#do(this.#turn(turnId));
        if (!turn.runId)
          throw new InvalidArgumentError(`turn ${turnId} never started its run; there is nothing to stream.`);
        const runId = turn.runId;
        const go = async (supervisor: Supervisor<AnyStore>): Promise<TurnResult> => {
          if (!RESUMABLE.has(turn.status)) {
            await started(runId, supervisor);
            const result = await supervisor.read(outcomeQuery(runId));
            return { ...result, turnId, kind: turn.kind ?? 'work', undelivered: [] };
          }
          const { provider, approver, tools, models } = options;
          const given = {
            ...(provider ? { provider } : {}),
            ...(approver ? { approver } : {}),
            ...(tools ? { tools } : {}),
            ...(models ? { models } : {}),
          };
          // Driven by a live process (this one, or another host): followed, not taken.
          const here = (await supervisor.read(QUERIES.run(runId)))?.lease.owner === supervisor.owner;
          const resumed = here
            ? null
            : await supervisor.resume(runId, given).catch(async (error: unknown) => {
                if (error instanceof ConflictError) return null;
                // Another reconnect here resumed it first (two asks at once): this one follows it.
                const owner = (await supervisor.read(QUERIES.run(runId)))?.lease.owner;
                if (error instanceof InvalidArgumentError && owner === supervisor.owner) return null;
                throw error;
              });
          // Driven by another process on a SQLite file, whose commits this process's bus never
          // hears: followed from the store (on PostgreSQL the bus follows the store already).
          const follower =
            !resumed &&
            !here &&
            !isPostgres(this.#store) &&
            (await supervisor.read(QUERIES.run(runId)))?.lease.owner !== supervisor.owner
              ? new StoreFollower(this.#store as Store, runId, runId)
              : null;
          await started(runId, supervisor, follower?.observe);
          // Where the process driving it dies meanwhile, its lease lapses: the turn is taken over
          // here (unless another process takes it first: then that one is followed).
          let taken = resumed;
          while (follower && !taken && (await follower.settled(() => supervisor.clock.now())) === 'lapsed')
            taken = await supervisor.resume(runId, given).catch((error: unknown) => {
              if (error instanceof ConflictError) return null;
              throw error;
            });
          if (taken) {
            await taken.result;
            return this.#end(turn.turnId, await supervisor.read(outcomeQuery(runId)));
          }
          if (!follower) await runEnded(supervisor, runId);
          const ended = await this.#do(this.#turn(turn.turnId));
          const result = await supervisor.read(outcomeQuery(runId));
          return { ...result, turnId: turn.turnId, kind: ended.kind ?? 'work', undelivered: [] };
        };
        return this.#supervisor
          ? go(this.#supervisor as Supervisor<AnyStore>)
          : onSharedSupervisor(this.#store as AnyStore, {}, go);
      },
    );
  }

  /**
   * Completes a turn whose process ended before it did (killed mid-turn), or one that
   * paused for a person once the question is answered: its run is resumed from its last
   * committed step (no committed step runs again), and the turn ends as it would have,
   * moving the head by the same compare-and-swap. Without an id, the session's latest
   * turn still running or paused.
   */
  async resumeTurn(
    turnId?: string,
    options: Partial<Pick<TurnOptions, 'provider' | 'approver' | 'tools' | 'models'>> & {
      /** Go on although the turn's tree changed under this process (see ResumeOptions.acceptChanges). */
      acceptChanges?: boolean;
    } = {},
  ): Promise<TurnResult> {
    const turn =
      turnId === undefined
        ? (await this.#do(read(QUERIES.turns(this.id)))).filter((item) => RESUMABLE.has(item.status)).at(-1)
        : await this.#do(this.#turn(turnId));
    if (!turn) {
      throw new HarnessError(ErrorCode.TurnNotFound, `session ${this.id} has no turn running or paused to resume.`, {
        details: { sessionId: this.id },
      });
    }
    if (!RESUMABLE.has(turn.status))
      throw new InvalidArgumentError(`turn ${turn.turnId} has ended (${turn.status}); there is nothing to resume.`);
    if (!turn.runId)
      throw new InvalidArgumentError(
        `turn ${turn.turnId} never started its run; ask again with session.turn(). Its row is kept as it is.`,
      );
    const runId = turn.runId;
    const resume = async (supervisor: Supervisor<AnyStore>): Promise<RunResult> => {
      const handle = await supervisor.resume(runId, {
        ...(options.provider ? { provider: options.provider } : {}),
        ...(options.approver ? { approver: options.approver } : {}),
        ...(options.tools ? { tools: options.tools } : {}),
        ...(options.models ? { models: options.models } : {}),
        ...(options.acceptChanges === true ? { acceptChanges: true } : {}),
      });
      await handle.result;
      return supervisor.read(outcomeQuery(runId));
    };
    const result = this.#supervisor
      ? await resume(this.#supervisor as Supervisor<AnyStore>)
      : await onSharedSupervisor(this.#store, {}, resume);
    return this.#end(turn.turnId, result);
  }

  *#turn(turnId: string): Effects<TurnRecord> {
    const turn = typeof turnId === 'string' ? yield* read(QUERIES.turn(turnId)) : null;
    if (!turn) {
      throw new HarnessError(
        ErrorCode.TurnNotFound,
        `no turn ${String(turnId)} in ${whereIs(this.#store)}; list this session's with session.turns().`,
        { details: { turnId } },
      );
    }
    if (turn.sessionId !== this.id) {
      throw new InvalidArgumentError(
        `turn ${turnId} belongs to session ${turn.sessionId}, not ${this.id}; branch from one of this session's turns.`,
      );
    }
    return turn;
  }

  /**
   * What the next turn's transcript begins with: the branch that ends at `turnId` (the
   * head by default), oldest turn first, each turn's words, its steps' calls and results,
   * the corrections it took, and its reply.
   */
  history(turnId?: string | null): Answer<S, TranscriptEntry[]> {
    const session = this;
    return this.#do(
      (function* () {
        const head = turnId === undefined ? yield* session.#head() : turnId;
        if (head !== null) yield* session.#turn(head);
        return yield* session.#history(head);
      })(),
    );
  }

  /** The transcript of the branch that ends at `head`, oldest turn first. */
  *#history(head: string | null): Effects<TranscriptEntry[]> {
    const history: TranscriptEntry[] = [];
    if (head === null) return history;
    for (const { turn, steps, steers } of yield* read(QUERIES.branch(head))) {
      history.push({ role: 'user', text: turn.text });
      const before = history.length;
      const appended = appendSteered(history, steps, steers, (steps.at(-1)?.seq ?? 0) + 1);
      // A fold in the turn leaves its notes in place of everything before them.
      const last = history.length > before || appended.folded ? history[history.length - 1] : undefined;
      if (turn.reply && !(last?.role === 'assistant' && last.text === turn.reply && last.toolCalls.length === 0))
        history.push({ role: 'assistant', text: turn.reply, toolCalls: [] });
    }
    return history;
  }
}

/**
 * What a turn runs: the contract it was given; else a workspace run in the session's
 * workspace (its answer shaped by `outputSchema`); else, in a session with no repository, a
 * plain run.
 */
function turnTarget(text: string, root: string | null, options: TurnOptions): TaskContract | RunTarget<unknown> {
  if (options.contract !== undefined) {
    if (!(options.contract instanceof TaskContract))
      throw new InvalidArgumentError('session.turn: contract must be a TaskContract.');
    if (options.outputSchema !== undefined)
      throw new InvalidArgumentError(
        "session.turn: a turn's contract says its answer's shape (contract.withOutputSchema(schema)); drop outputSchema, or the contract.",
      );
    return options.contract;
  }
  if (root === null)
    return { task: text, plain: options.outputSchema === undefined ? {} : { outputSchema: options.outputSchema } };
  const contract = TaskContract.workspace(text, root);
  return options.outputSchema === undefined
    ? contract
    : contract.withOutputSchema(options.outputSchema as Record<string, unknown>);
}

/** The `contained` option checked: whole numbers of at least one, or a clear error naming what was wrong. */
function checkContainment(value: unknown): Containment | null {
  if (value === undefined) return null;
  const shape = 'contained takes { maxTotalAgents, maxConcurrentAgents? }, whole numbers of at least 1';
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new InvalidArgumentError(`session.turn: ${shape}.`);
  const { maxTotalAgents, maxConcurrentAgents, ...rest } = value as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length > 0)
    throw new InvalidArgumentError(
      `session.turn: ${shape}; there is no ${unknown.map((key) => `"${key}"`).join(', ')}.`,
    );
  const whole = (name: string, item: unknown, optional: boolean) => {
    if (item === undefined && optional) return;
    if (typeof item !== 'number' || !Number.isInteger(item) || item < 1)
      throw new InvalidArgumentError(
        `session.turn: contained.${name} must be a whole number of at least 1, got ${String(item)}.`,
      );
  };
  whole('maxTotalAgents', maxTotalAgents, false);
  whole('maxConcurrentAgents', maxConcurrentAgents, true);
  return value as Containment;
}

/** Resolves once the run `runId` is no longer running (ended, or paused for a person). */
function runEnded(supervisor: Supervisor<AnyStore>, runId: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const stop = supervisor.observe(
      (event) => {
        if (event.runId !== runId || (event.type !== 'run-end' && event.type !== 'run-paused')) return;
        stop();
        resolve();
      },
      { runId },
    );
    // Looked at after subscribing, so an end committed in between is not missed.
    supervisor.read(QUERIES.run(runId)).then((run) => {
      if (run && run.status !== 'running' && run.status !== 'queued') {
        stop();
        resolve();
      }
    }, reject);
  });
}

/** The clock a session reads: its supervisor's (the one Supervisor.start was given), else the system's. */
function clockOf(supervisor: Supervisor<AnyStore> | null): Clock {
  return supervisor?.clock ?? systemClock;
}

/** A supervisor given to a session: one of this library's, on the session's store. */
function checkSupervisor<S extends AnyStore>(store: S, supervisor: unknown, where: string): Supervisor<S> | null {
  if (supervisor === undefined) return null;
  if (!(supervisor instanceof Supervisor))
    throw new InvalidArgumentError(`${where}: supervisor must be a Supervisor (await Supervisor.start(store)).`);
  const given = supervisor.store as AnyStore;
  const same =
    given.kind === 'sqlite'
      ? store.kind === 'sqlite' && resolve(given.path) === resolve(store.path)
      : store.kind === 'postgres' && given.url === store.url && given.schema === store.schema;
  if (!same)
    throw new InvalidArgumentError(
      `${where}: the supervisor runs on ${whereIs(given)}, not the session's store ${whereIs(store)}; start it on the same store.`,
    );
  return supervisor as Supervisor<S>;
}
