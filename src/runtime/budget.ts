/**
 * Budgets. A tree of agents draws from one ledger: every run has ceilings on what
 * it and its descendants may spend, a draw must fit the ceiling of the run and of
 * every ancestor, and a child's ceilings are clamped to what its parent has left.
 */
import { InvalidArgumentError } from '../errors.js';

export interface Budget {
  /** Model steps. */
  steps?: number;
  /** Input plus output tokens. */
  tokens?: number;
  /** Wall clock, milliseconds from the run's start. */
  wallMs?: number;
}

export interface Ceilings {
  steps: number | null;
  tokens: number | null;
  wallMs: number | null;
}

export interface Clamp {
  field: keyof Ceilings;
  asked: number | null;
  granted: number | null;
}

export function validateBudget(budget: Budget | undefined, where: string): Ceilings {
  const out: Ceilings = { steps: null, tokens: null, wallMs: null };
  if (!budget) return out;
  for (const field of ['steps', 'tokens', 'wallMs'] as const) {
    const value = budget[field];
    if (value === undefined) continue;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
      throw new InvalidArgumentError(
        `${where}: budget.${field} must be a whole number of at least 0, got ${JSON.stringify(value)}.`,
      );
    }
    out[field] = value;
  }
  return out;
}

/**
 * A child's ceilings: what it asked for, never more than its parent has left. Each
 * field the parent bounds and the child asked more of (or left open) is a clamp.
 */
export function clampToParent(asked: Ceilings, parentRemaining: Ceilings): { ceilings: Ceilings; clamps: Clamp[] } {
  const ceilings: Ceilings = { steps: null, tokens: null, wallMs: null };
  const clamps: Clamp[] = [];
  for (const field of ['steps', 'tokens', 'wallMs'] as const) {
    const limit = parentRemaining[field];
    const want = asked[field];
    if (limit === null) {
      ceilings[field] = want;
    } else if (want === null || want > limit) {
      ceilings[field] = limit;
      if (want !== null) clamps.push({ field, asked: want, granted: limit });
    } else {
      ceilings[field] = want;
    }
  }
  return { ceilings, clamps };
}

/** Steps and tokens: what a draw charges, and what an account has spent. */
export interface Charge {
  steps: number;
  tokens: number;
}

/** The ceiling a draw would cross: which, what the account had spent of it, and its limit. */
export interface CeilingCrossing {
  ceiling: 'steps' | 'tokens';
  spent: number;
  limit: number;
}

/**
 * The rule of a draw, the one place it is written: a draw fits an account when its steps
 * and its tokens, added to what the account has spent, stay within each ceiling it has;
 * otherwise the first ceiling it would cross (steps before tokens). A draw of no tokens
 * crosses no tokens ceiling. The agent asks it before a step (may the next step be
 * drawn?) and the store before it charges one, in the transaction that charges it.
 */
export function drawCrossing(
  ceilings: Pick<Ceilings, 'steps' | 'tokens'>,
  spent: Charge,
  draw: Charge,
): CeilingCrossing | null {
  if (ceilings.steps !== null && spent.steps + draw.steps > ceilings.steps) {
    return { ceiling: 'steps', spent: spent.steps, limit: ceilings.steps };
  }
  if (ceilings.tokens !== null && draw.tokens > 0 && spent.tokens + draw.tokens > ceilings.tokens) {
    return { ceiling: 'tokens', spent: spent.tokens, limit: ceilings.tokens };
  }
  return null;
}

/**
 * What an account has left of each ceiling at `now`: its steps and tokens less what it
 * has spent, its wall clock less the time since it started; never below zero, and no
 * ceiling where it has none. What a child's ceilings are clamped to ({@link clampToParent}).
 */
export function remaining(ceilings: Ceilings, spent: Charge, startedAt: number, now: number): Ceilings {
  return {
    steps: ceilings.steps === null ? null : Math.max(0, ceilings.steps - spent.steps),
    tokens: ceilings.tokens === null ? null : Math.max(0, ceilings.tokens - spent.tokens),
    wallMs: ceilings.wallMs === null ? null : Math.max(0, startedAt + ceilings.wallMs - now),
  };
}

/**
 * What the embedder pays, per million tokens, by model id. Cost is derived on read
 * from this table and the stored token counts, so a price change never leaves a wrong
 * number in the store. Cache prices default to the input price.
 */
export type PriceTable = Record<
  string,
  {
    input: number;
    output: number;
    cacheRead?: number;
    cacheWrite?: number;
    /** Per thousand of the vendor's own web searches (withWeb); unpriced when absent. */
    webSearch?: number;
    /** Per thousand of the vendor's own page fetches (withWeb); unpriced when absent. */
    webFetch?: number;
  }
>;
