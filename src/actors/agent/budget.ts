/**
 * The budget checks of a step: the draw the next step would make against every ceiling up
 * the chain (steps, tokens, cost, the wall clock), and the step's own deadline, which stops
 * what the step started when the earliest wall-clock ceiling is reached.
 */
import { type Clock, setTimer } from '../../clock.js';
import { ErrorCode, HarnessError } from '../../errors.js';
import { drawCrossing } from '../../runtime/budget.js';
import type { ContractData } from '../../runtime/contract/contract.js';
import type { DrawAmount, EventData } from '../../runtime/events.js';
import type { Completion } from '../../runtime/provider.js';
import type { ToolResult } from '../../runtime/tools/tool.js';
import type { StoreReads } from '../../store/port.js';
import type { LedgerAccount, RunRecord } from '../../store/records.js';

export type Crossing = Extract<EventData, { type: 'budget-exhausted' }>;

/**
 * How long a call still running when the wall clock runs out is given to stop (its signal
 * has fired, so a command is being killed) and report what it did, before the step ends
 * without it. Real time whatever the run's clock: it is a wait on a process, not a
 * reading of the budget.
 */
const DEADLINE_GRACE_MS = 2_000;

/** The longest delay a timer takes; a deadline further off than this is not armed (see Deadline). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The steps or tokens ceiling of one account a draw would cross, as the event that says so. */
export function ceilingCrossed(account: LedgerAccount, draw: DrawAmount): Crossing | null {
  const crossed = drawCrossing(account.ceilings, account.spent, draw);
  if (crossed === null) return null;
  const { ceiling, spent, limit } = crossed;
  return { type: 'budget-exhausted', draw, ceiling, account: account.runId, spent, limit };
}

/** One run's budget: the chain of accounts it draws on, read from the store. */
export class Budget {
  readonly #store: StoreReads;
  readonly #clock: Clock;
  readonly #run: RunRecord;
  readonly #contract: ContractData | null;

  constructor(store: StoreReads, clock: Clock, run: RunRecord, contract: ContractData | null) {
    this.#store = store;
    this.#clock = clock;
    this.#run = run;
    this.#contract = contract;
  }

  /**
   * Whether some account of the chain has a ceiling of steps, tokens or wall time, once an
   * answer has shown it. Ceilings are fixed when an account is made and never change, so a
   * chain found without any needs no read of its accounts again: nothing it spends can
   * cross what it does not have (on PostgreSQL, two round trips a step fewer).
   */
  #limited: boolean | null = null;

  /** The run and its ancestors, root first: every account a step draws on. */
  get chain(): string[] {
    return [...this.#run.ancestry, this.#run.runId];
  }

  /** The chain's accounts as they stand, or none when it has no ceiling to check them against. */
  async #accounts(): Promise<LedgerAccount[]> {
    if (this.#limited === false) return [];
    const accounts = await this.#store.accounts(this.chain);
    this.#limited = accounts.some(({ ceilings }) =>
      [ceilings.steps, ceilings.tokens, ceilings.wallMs].some((ceiling) => ceiling !== null),
    );
    return accounts;
  }

  /**
   * The draw the next step would make (one step) against every ceiling up the chain, and
   * the wall clock (as {@link Deadline} arms it). With no crossing, it also says which wall-clock ceiling comes first:
   * the one the step's deadline is armed at (read from the same accounts).
   */
  async precheck(): Promise<{ crossing: Crossing } | { crossing: null; firstWall: FirstWall | null }> {
    const now = this.#clock.now();
    const cost = this.#contract?.budget.cost;
    if (cost) {
      // Cost is derived from the accounting rows and the embedder's prices, never stored as a number.
      const report = await this.#store.cost(this.#run.rootId, cost.prices);
      const spent = report.total;
      if (report.unpriced.length > 0) {
        throw new HarnessError(
          ErrorCode.InvalidArgument,
          `the cost ceiling cannot be enforced: the price table has no price for ${report.unpriced.join(', ')}. Add ${report.unpriced.length === 1 ? 'that model' : 'those models'} to withBudget({ cost: { prices } }).`,
        );
      }
      if (spent >= cost.limit) {
        return {
          crossing: {
            type: 'budget-exhausted',
            draw: { steps: 1, tokens: 0 },
            ceiling: 'cost',
            account: this.#run.rootId,
            spent,
            limit: cost.limit,
          },
        };
      }
    }
    let firstWall: FirstWall | null = null;
    for (const account of await this.#accounts()) {
      const id = account.runId;
      const crossed = ceilingCrossed(account, { steps: 1, tokens: 0 });
      if (crossed) return { crossing: crossed };
      const wall = await this.#wallEnd(account);
      if (wall && now >= wall.at) return { crossing: wallCrossing(id, wall, now) };
      if (wall && (firstWall === null || wall.at < firstWall.wall.at)) firstWall = { account: id, wall };
    }
    return { crossing: null, firstWall };
  }

  /** The draw a completion makes (one step, its tokens) against every ceiling up the chain. */
  async wouldCross(completion: Completion): Promise<Crossing | null> {
    const draw = { steps: 1, tokens: completion.usage.inputTokens + completion.usage.outputTokens };
    for (const account of await this.#accounts()) {
      const crossed = ceilingCrossed(account, draw);
      if (crossed) return crossed;
    }
    return null;
  }

  /** When an account's wall-clock ceiling is reached: its run's start plus its wallMs. The one definition of the deadline. */
  async #wallEnd(account: LedgerAccount): Promise<WallEnd | null> {
    const { wallMs } = account.ceilings;
    if (wallMs === null) return null;
    const id = account.runId;
    const started =
      id === this.#run.runId ? this.#run.createdAt : ((await this.#store.run(id))?.createdAt ?? this.#clock.now());
    return { at: started + wallMs, started, limit: wallMs };
  }
}

interface WallEnd {
  at: number;
  started: number;
  limit: number;
}

/** The wall-clock ceiling of the chain that comes first, and whose it is. */
export interface FirstWall {
  account: string;
  wall: WallEnd;
}

function wallCrossing(account: string, wall: { started: number; limit: number }, now: number): Crossing {
  return {
    type: 'budget-exhausted',
    draw: { steps: 1, tokens: 0 },
    ceiling: 'wallMs',
    account,
    spent: now - wall.started,
    limit: wall.limit,
  };
}

/**
 * One step's deadline, armed: at it the step's signal fires, so the model call, a command,
 * a search or a wait in flight is stopped. With no ceiling (or one further off than a timer
 * waits) the signal is the base one alone. Both the timer and the check between calls are
 * on the run's clock, so a test that moves the clock decides when the deadline passes.
 */
export class Deadline {
  /** What the step passes to what it starts: the base signal (a cancel) and the deadline. */
  readonly signal: AbortSignal;
  /** The deadline alone, when there is one. */
  readonly #deadline: AbortSignal | null = null;
  /** Set when the deadline passed: the ceiling it crossed, as the event that says so. */
  #overdue: Crossing | null = null;
  /** Cancels the deadline's timer. */
  #disarm: () => void = () => undefined;
  /** Fires the deadline now if the clock has passed it: a call that ran without yielding kept its timer from firing. */
  readonly #fireIfDue: () => void = () => undefined;

  constructor(base: AbortSignal, clock: Clock, first: FirstWall | null) {
    this.signal = base;
    if (first === null) return;
    const { account, wall } = first;
    const delay = Math.max(0, wall.at - clock.now());
    // A timer cannot wait longer than this (it would fire at once); a step that long is left to the next check.
    if (delay > MAX_TIMER_MS) return;
    const deadline = new AbortController();
    const fire = () => {
      if (deadline.signal.aborted) return;
      this.#overdue = wallCrossing(account, wall, clock.now());
      deadline.abort(new Error(`the wallMs ceiling of run ${account} was reached`));
    };
    this.#disarm = setTimer(clock, fire, delay);
    this.#fireIfDue = () => {
      if (clock.now() >= wall.at) fire();
    };
    this.#deadline = deadline.signal;
    this.signal = AbortSignal.any([base, deadline.signal]);
  }

  /** The crossing, once the deadline has passed. */
  get overdue(): Crossing | null {
    return this.#overdue;
  }

  /** Checks the clock now, in case a call that ran without yielding kept the timer from firing. */
  fireIfDue(): void {
    this.#fireIfDue();
  }

  disarm(): void {
    this.#disarm();
  }

  /**
   * A tool call, unless the deadline comes first. At the deadline the call's signal has
   * fired; it is given a moment to stop and say what it did (a killed command, a write),
   * and otherwise left behind with an observation saying so. Any tool handler is held to
   * the deadline this way, whether or not it listens to the signal.
   */
  async hold(work: Promise<ToolResult>): Promise<ToolResult> {
    const deadline = this.#deadline;
    if (!deadline) return work;
    const settled = work.then(
      (result) => ({ result }),
      (error: unknown) => ({ error }),
    );
    let onAbort: (() => void) | undefined;
    const reached = new Promise<'deadline'>((resolve) => {
      onAbort = () => resolve('deadline');
      if (deadline.aborted) resolve('deadline');
      else deadline.addEventListener('abort', onAbort, { once: true });
    });
    const first = await Promise.race([settled, reached]);
    // A call that settled first leaves no listener behind: a step may make many.
    if (onAbort) deadline.removeEventListener('abort', onAbort);
    // A call the deadline stopped (an approver's wait, a pause) is stopped, not failed or halted.
    const stopped = (outcome: { result: ToolResult } | { error: unknown }) =>
      this.#overdue !== null && ('error' in outcome || outcome.result.halt !== undefined);
    if (first !== 'deadline' && !stopped(first)) {
      if ('result' in first) return first.result;
      throw first.error;
    }
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<null>((resolve) => {
      timer = setTimeout(resolve, DEADLINE_GRACE_MS, null);
    });
    const late = await Promise.race([settled, grace]);
    clearTimeout(timer);
    const crossing = this.#overdue as Crossing;
    const note = `the wallMs ceiling of run ${crossing.account} (${crossing.limit} ms) was reached while this call ran, so it was stopped`;
    if (late && 'result' in late && !late.result.halt)
      return { ...late.result, content: `${late.result.content}\n(${note}.)`, isError: true };
    return { content: `stopped: ${note}; what it had done by then stands.`, isError: true };
  }
}
