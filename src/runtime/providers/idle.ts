/**
 * The idle deadline of a model call: how long an answer may go without producing
 * anything, by default, and its bounds (a spec is checked against them where it is made
 * and again where the provider is built). The watch that fires it is in answer-body.ts.
 */
import { InvalidArgumentError } from '../../errors.js';

/** The idle deadline when a spec names none: long enough for a local runtime's slow first token. */
export const DEFAULT_IDLE_TIMEOUT_MS = 300_000;

/** An idle deadline: a positive number of milliseconds that a timer can hold. */
export function checkIdleTimeout(value: unknown, where: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > MAX_TIMER_MS) {
    throw new InvalidArgumentError(
      `${where}: ${JSON.stringify(value)} is not an idle timeout; give a number of milliseconds above 0 and at most ${MAX_TIMER_MS} (about 24 days), such as 120000.`,
    );
  }
  return value;
}

/** The longest delay a Node timer holds (2^31 - 1 ms). */
const MAX_TIMER_MS = 2_147_483_647;
