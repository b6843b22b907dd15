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
import { ConflictError, ErrorCode, HarnessError, InvalidArgumentError } from '../errors.js';
import type { McpServerSpec } from '../mcp/spec.js';
import { TaskContract } from '../runtime/contract/contract.js';
import type { Tool } from '../runtime/custom-tool.js';
import type { Approver } from '../runtime/policy/approval.js';
import { Policy } from '../runtime/policy/policy.js';
import type { ProviderSpec, TranscriptEntry } from '../runtime/provider.js';
import type { SessionRecord, TurnRecord } from '../store/reader.js';
import type { Store } from '../store/store.js';
import type { LiveObserver } from './event-bus.js';
import { outcomeOf, type RunResult, type RunWithOptions, runOn, runWith } from './run-with.js';
import { Supervisor } from './supervisor.js';

/** What a turn is run with: the model, and the run's policy, approver and tools. */
export interface TurnOptions {
  /** The model (for resumeTurn, optional: without it the stored spec is used, its key read from the variable it names). */
  provider: ProviderSpec;
  policy?: Policy;
  approver?: Approver;
  tools?: readonly Tool<never>[];
  /** MCP servers for the turn, started before it and stopped after (see RunWithOptions.mcp). */
  mcp?: McpServerSpec[];
  /** Directories holding skills for the turn (see RunOptions.skills). */
  skills?: string[];
  /** The turn as a contract of its own (verification, budget, plan gate, output schema); its goal is the turn's. */
  contract?: TaskContract;
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
   * A supervisor you started on the same store, and close yourself: every turn runs on it,
   * so a turn pays for no thread start-up (without it, each turn starts and closes a
   * supervisor of its own). A contract's leaseTtlMs does not apply to a supervisor given.
   */
  supervisor?: Supervisor;
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

/** What a turn's answering agent does as it happens: its text as the model streams it, and its tool calls. */
export type TurnEvent =
  | { type: 'text'; text: string }
  | { type: 'tool-call-start'; callId: string; name: string }
  | { type: 'tool-call-end'; callId: string; name: string; isError: boolean };

/**
 * A turn under way: await it for its result, or iterate it for its text and tool calls as
 * they happen (every event from the turn's start, in order, however late the iteration
 * begins). Stopping the iteration stops nothing but the iteration.
 */
export class TurnHandle implements PromiseLike<TurnResult>, AsyncIterable<TurnEvent> {
  readonly result: Promise<TurnResult>;
  readonly #events: TurnEvent[] = [];
  readonly #waiting = new Set<() => void>();
  #done = false;

  /** The turn's id, known from the start (a second process steers it by this id through Session.steer). */
  readonly turnId: string;
  readonly #deliver: Deliver;
  readonly #byTurn: (turnId: string, kind: 'steer' | 'interrupt', text: string | null) => void;
  #runId: string | null = null;
  readonly #before: { kind: 'steer' | 'interrupt'; text: string | null }[] = [];
  /** Corrections held before the run existed that could not be written when it did. */
  readonly #lost: string[] = [];

  /** @internal */
  constructor(
    turnId: string,
    deliver: Deliver,
    byTurn: (turnId: string, kind: 'steer' | 'interrupt', text: string | null) => void,
    run: (push: (event: TurnEvent) => void, started: (runId: string) => void) => Promise<TurnResult>,
  ) {
    this.#deliver = deliver;
    this.#byTurn = byTurn;
    this.turnId = turnId;
    const wake = () => {
      for (const resolve of this.#waiting) resolve();
      this.#waiting.clear();
    };
    this.result = run(
      (event) => {
        this.#events.push(event);
        wake();
      },
      (runId) => {
        // What was sent before the run existed goes to it now, in order, before its first step.
        this.#runId = runId;
        for (const item of this.#before.splice(0)) {
          try {
            this.#deliver(runId, item.kind, item.text);
          } catch {
            // Reported with the result, as a correction the turn never took.
            if (item.text !== null) this.#lost.push(item.text);
          }
        }
      },
    )
      .then((result) =>
        this.#lost.length > 0 ? { ...result, undelivered: [...this.#lost, ...result.undelivered] } : result,
      )
      .finally(() => {
        this.#done = true;
        wake();
      });
    // Awaited or not, a failed turn is the caller's to see through `result`, never an unhandled rejection.
    this.result.catch(() => undefined);
  }

  // biome-ignore lint/suspicious/noThenProperty: a turn is awaited like the promise of its result.
  then<A = TurnResult, B = never>(
    onFulfilled?: ((value: TurnResult) => A | PromiseLike<A>) | null,
    onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    return this.result.then(onFulfilled, onRejected);
  }

  /**
   * Corrects the turn while it runs: `text` reaches the answering agent (the root, never a
   * child) at its next step boundary, as the user's words. Throws TURN_ENDED, writing
   * nothing, once the turn has ended.
   */
  steer(text: string): void {
    if (typeof text !== 'string' || text.trim() === '')
      throw new InvalidArgumentError('turn.steer needs the correction, a non-empty string.');
    this.#send('steer', text);
  }

  /** Ends the turn at its next step boundary as `interrupted`, its committed steps kept. Throws TURN_ENDED once it has ended. */
  interrupt(): void {
    this.#send('interrupt', null);
  }

  #send(kind: 'steer' | 'interrupt', text: string | null): void {
    // Once the handle's result is in, the turn is reached by its id: a paused turn still can be.
    if (this.#done) this.#byTurn(this.turnId, kind, text);
    else if (this.#runId === null) this.#before.push({ kind, text });
    else this.#deliver(this.#runId, kind, text);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<TurnEvent> {
    let at = 0;
    for (;;) {
      while (at < this.#events.length) yield this.#events[at++] as TurnEvent;
      if (this.#done) return;
      await new Promise<void>((resolve) => this.#waiting.add(resolve));
    }
  }
}

/** Writes a steer or an interrupt for a turn's root run. */
type Deliver = (runId: string, kind: 'steer' | 'interrupt', text: string | null) => void;

/** The error for steering or interrupting a turn that has ended. */
function turnEnded(kind: 'steer' | 'interrupt', turnId?: string, status?: string): never {
  throw new HarnessError(
    ErrorCode.TurnEnded,
    `${turnId ? `turn ${turnId}` : 'the turn'} has ended${status ? ` (${status})` : ''}; there is nothing to ${kind}. Say it in a new turn.`,
    { details: { ...(turnId ? { turnId } : {}), ...(status ? { status } : {}) } },
  );
}

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

export class Session {
  readonly id: string;
  readonly root: string;
  readonly #store: Store;
  /** The embedder's running supervisor the turns run on; without one, each turn starts and closes its own. */
  readonly #supervisor: Supervisor | null;

  private constructor(store: Store, record: SessionRecord, supervisor: Supervisor | null) {
    this.#store = store;
    this.#supervisor = supervisor;
    this.id = record.sessionId;
    this.root = record.root;
  }

  /**
   * Opens a new session over the workspace at `root`.
   *
   * @example
   * const session = await Session.open(store, repoDir);
   * const first = await session.turn('the test suite is failing; why?', { provider });
   */
  static async open(store: Store, root: string, options: SessionOptions & { id?: string } = {}): Promise<Session> {
    if (typeof root !== 'string' || root === '')
      throw new InvalidArgumentError('Session.open needs the workspace directory the turns work in.');
    const supervisor = checkSupervisor(store, options.supervisor, 'Session.open');
    const sessionId = options.id ?? randomUUID();
    if (typeof sessionId !== 'string' || sessionId.trim() === '')
      throw new InvalidArgumentError('Session.open: id must be a non-empty string when given.');
    const absolute = resolve(root);
    store.write('openSession', { sessionId, root: absolute, now: Date.now() });
    return new Session(store, { sessionId, root: absolute, head: null, createdAt: Date.now() }, supervisor);
  }

  /** The session `sessionId` in `store`, from any process. */
  static async resume(store: Store, sessionId: string, options: SessionOptions = {}): Promise<Session> {
    const supervisor = checkSupervisor(store, options.supervisor, 'Session.resume');
    const record = store.session(sessionId);
    if (!record) {
      throw new HarnessError(
        ErrorCode.SessionNotFound,
        `no session ${sessionId} in ${store.path}; list them with store.sessions(), or open one with Session.open(store, root).`,
        { details: { sessionId } },
      );
    }
    return new Session(store, record, supervisor);
  }

  /** The turn the next one follows (null before the first). */
  get head(): string | null {
    return this.#store.session(this.id)?.head ?? null;
  }

  /** Every turn of the session, every branch's, in the order they began. */
  turns(): TurnRecord[] {
    return this.#store.turns(this.id);
  }

  /** Makes `fromTurnId` the head: the next turn follows it, and sees it and the turns before it, no later ones. */
  branch(fromTurnId: string): void {
    const turn = this.#turn(fromTurnId);
    if (turn.status === 'running')
      throw new InvalidArgumentError(`turn ${fromTurnId} has not ended; branch from a turn that has.`);
    this.#store.write('moveHead', { sessionId: this.id, turnId: fromTurnId });
  }

  /**
   * Runs one turn: `text` is what the user says; its run begins with the turns before it on
   * this branch. Await the handle for the result, or iterate it for the text as it streams.
   */
  turn(text: string, options: TurnOptions): TurnHandle {
    const turnId = randomUUID();
    return new TurnHandle(
      turnId,
      (runId, kind, text) => this.#send(runId, kind, text),
      (id, kind, text) => this.#send(this.#running(id, kind), kind, text),
      (push, started) => this.#run(turnId, text, options, push, started),
    );
  }

  /**
   * Corrects a running turn from any process (see TurnHandle.steer): the words reach its
   * root at its next step boundary. TURN_ENDED, writing nothing, for a turn that has ended.
   */
  steer(turnId: string, text: string): void {
    if (typeof text !== 'string' || text.trim() === '')
      throw new InvalidArgumentError('session.steer needs the correction, a non-empty string.');
    this.#send(this.#running(turnId, 'steer'), 'steer', text);
  }

  /** Interrupts a running turn from any process (see TurnHandle.interrupt). */
  interrupt(turnId: string): void {
    this.#send(this.#running(turnId, 'interrupt'), 'interrupt', null);
  }

  /** Writes a steer or an interrupt for a turn's root run. */
  #send(runId: string, kind: 'steer' | 'interrupt', text: string | null): void {
    this.#store.write('steer', { runId, kind, text, by: 'the user', now: Date.now() });
  }

  /** The root run of a turn that can still be steered. */
  #running(turnId: string, kind: 'steer' | 'interrupt'): string {
    const turn = this.#turn(turnId);
    if (!RESUMABLE.has(turn.status)) turnEnded(kind, turnId, turn.status);
    if (!turn.runId)
      throw new InvalidArgumentError(
        `turn ${turnId} has not started its run yet; steer it through the handle session.turn() gave, which holds it until then.`,
      );
    return turn.runId;
  }

  async #run(
    turnId: string,
    text: string,
    options: TurnOptions,
    push: (event: TurnEvent) => void,
    started: (runId: string) => void,
  ): Promise<TurnResult> {
    if (typeof text !== 'string' || text.trim() === '')
      throw new InvalidArgumentError('session.turn needs what the user says, a non-empty string.');
    if (!options || typeof options !== 'object' || !options.provider)
      throw new InvalidArgumentError(
        'session.turn needs { provider } (and optionally policy, approver, tools, contract).',
      );
    const contract = options.contract ?? TaskContract.workspace(text, this.root);
    if (!(contract instanceof TaskContract))
      throw new InvalidArgumentError('session.turn: contract must be a TaskContract.');
    const contained = checkContainment(options.contained);
    // A turn whose contract judges its answer (a gate, a plan gate, an answer's shape) is work from the start.
    const data = contract.toJSON();
    const judged = data.verification.kind !== 'none' || data.planGate || data.outputSchema !== null;
    const parent = this.head;
    const history = this.#history(parent);
    this.#store.write('beginTurn', { sessionId: this.id, turnId, parent, text, now: Date.now() });
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
        ...(options.mcp ? { mcp: options.mcp } : {}),
        ...(options.skills ? { skills: options.skills } : {}),
        onStart: (supervisor, rootId) => {
          this.#store.write('startedTurn', { turnId, runId: rootId });
          started(rootId);
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
        },
      };
      result = this.#supervisor
        ? await runOn(
            this.#supervisor,
            contract,
            options.provider,
            options.policy ?? Policy.default(),
            options.approver,
            turnOptions,
          )
        : await runWith(contract, options.provider, this.#store, options.policy, options.approver, turnOptions);
    } catch (error) {
      // No run to follow: the turn is kept as failed, and the head stays where it was.
      this.#store.write('endTurn', {
        turnId,
        status: 'failed',
        reply: null,
        now: Date.now(),
        advance: false,
      });
      throw error;
    } finally {
      unsubscribe();
    }
    return this.#end(turnId, result);
  }

  /** Ends a turn as its run ended, moving the head to it by compare-and-swap; a turn that lost the race is a conflict. */
  #end(turnId: string, result: RunResult): TurnResult {
    const ended = this.#store.write('endTurn', {
      turnId,
      status: result.outcome.kind,
      reply: result.reply,
      now: Date.now(),
    });
    if (!ended.advanced) throw new TurnConflictError(this.id, turnId, ended.head);
    return {
      ...result,
      turnId,
      kind: this.#store.turn(turnId)?.kind ?? 'work',
      // A paused turn takes what waits for it when it is resumed: nothing is undelivered yet.
      undelivered: result.outcome.kind === 'paused' ? [] : this.#store.undeliveredSteers(result.runId),
    };
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
    options: Partial<Pick<TurnOptions, 'provider' | 'approver' | 'tools'>> = {},
  ): Promise<TurnResult> {
    const turn =
      turnId === undefined
        ? this.turns()
            .filter((item) => RESUMABLE.has(item.status))
            .at(-1)
        : this.#turn(turnId);
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
    const supervisor = this.#supervisor ?? (await Supervisor.start(this.#store));
    let result: RunResult;
    try {
      const handle = await supervisor.resume(turn.runId, {
        ...(options.provider ? { provider: options.provider } : {}),
        ...(options.approver ? { approver: options.approver } : {}),
        ...(options.tools ? { tools: options.tools } : {}),
      });
      await handle.result;
      result = outcomeOf(this.#store, turn.runId);
    } finally {
      if (supervisor !== this.#supervisor) await supervisor.close();
    }
    return this.#end(turn.turnId, result);
  }

  #turn(turnId: string): TurnRecord {
    const turn = typeof turnId === 'string' ? this.#store.turn(turnId) : null;
    if (!turn) {
      throw new HarnessError(
        ErrorCode.TurnNotFound,
        `no turn ${String(turnId)} in ${this.#store.path}; list this session's with session.turns().`,
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
  history(turnId: string | null = this.head): TranscriptEntry[] {
    if (turnId !== null) this.#turn(turnId);
    return this.#history(turnId);
  }

  /** The transcript of the branch that ends at `head`, oldest turn first. */
  #history(head: string | null): TranscriptEntry[] {
    const history: TranscriptEntry[] = [];
    if (head === null) return history;
    for (const { turn, steps, steers } of this.#store.branch(head)) {
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

/** A supervisor given to a session: one of this library's, on the session's store file. */
function checkSupervisor(store: Store, supervisor: unknown, where: string): Supervisor | null {
  if (supervisor === undefined) return null;
  if (!(supervisor instanceof Supervisor))
    throw new InvalidArgumentError(`${where}: supervisor must be a Supervisor (await Supervisor.start(store)).`);
  const runsOn = supervisor.store.kind === 'sqlite' ? supervisor.store.path : supervisor.store.url;
  if (supervisor.store.kind !== 'sqlite' || resolve(supervisor.store.path) !== resolve(store.path))
    throw new InvalidArgumentError(
      `${where}: the supervisor runs on ${runsOn}, not the session's store ${store.path}; start it on the same store.`,
    );
  return supervisor;
}
