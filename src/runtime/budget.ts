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

/**
 * What the embedder pays, per million tokens, by model id. Cost is derived on read
 * from this table and the stored token counts, so a price change never leaves a wrong
 * number in the store. Cache prices default to the input price.
 */
export type PriceTable = Record<string, { input: number; output: number; cacheRead?: number; cacheWrite?: number }>;
