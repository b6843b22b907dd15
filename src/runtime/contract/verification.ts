/**
 * A contract's criterion: how a run's work is checked before it may finish. No gate, the
 * project's own command, or a second model's review against a rubric; each is data, stored
 * with the contract.
 */
import { InvalidArgumentError } from '../../errors.js';
import type { ProviderSpec } from '../provider.js';
import { checkProviderSpec } from '../providers/builders.js';

/** How a run's work is checked before it may finish. */
export type VerificationData =
  | { kind: 'none' }
  | { kind: 'command'; argv: string[]; expectExit: number; timeoutMs: number; outputLimit: number }
  | { kind: 'review'; provider: ProviderSpec; rubric: string };

/** Builders for a contract's criterion. */
export const Verification = {
  /** No gate: the run is done when the model says it is ("work out why the deploy fails" is a run, not a gate). */
  none(): VerificationData {
    return { kind: 'none' };
  },
  /**
   * The project's own command, run in the workspace after the final answer; it passes
   * when it exits with `expectExit` (default 0). A fixed argv, never a shell string.
   *
   * @example
   * Verification.command(['node', '--test'])
   */
  command(
    argv: readonly string[],
    options: { expectExit?: number; timeoutSecs?: number; outputLimitBytes?: number } = {},
  ): VerificationData {
    if (!Array.isArray(argv) || argv.length === 0 || argv.some((part) => typeof part !== 'string' || part === '')) {
      throw new InvalidArgumentError(
        `Verification.command needs an argv: a non-empty array of non-empty strings, such as ['npm', 'test']; got ${JSON.stringify(argv)}.`,
      );
    }
    const expectExit = options.expectExit ?? 0;
    if (!Number.isInteger(expectExit) || expectExit < 0 || expectExit > 255) {
      throw new InvalidArgumentError(
        `Verification.command: expectExit must be an exit status 0-255, got ${expectExit}.`,
      );
    }
    const timeoutSecs = options.timeoutSecs ?? 600;
    if (typeof timeoutSecs !== 'number' || !(timeoutSecs > 0)) {
      throw new InvalidArgumentError(`Verification.command: timeoutSecs must be above 0, got ${timeoutSecs}.`);
    }
    const outputLimit = options.outputLimitBytes ?? 16 * 1024;
    if (!Number.isInteger(outputLimit) || outputLimit < 256) {
      throw new InvalidArgumentError(
        `Verification.command: outputLimitBytes must be a whole number of at least 256, got ${outputLimit}.`,
      );
    }
    return { kind: 'command', argv: [...argv], expectExit, timeoutMs: Math.round(timeoutSecs * 1000), outputLimit };
  },
  /**
   * A second model reads the run's change against `rubric` and returns a verdict with
   * reasons. It refuses to review the model that wrote the change.
   */
  review(provider: ProviderSpec, rubric: string): VerificationData {
    const spec = checkProviderSpec(provider, 'Verification.review');
    if (typeof rubric !== 'string' || rubric.trim() === '') {
      throw new InvalidArgumentError(
        'Verification.review needs a rubric: what the reviewer is to check the change against.',
      );
    }
    return { kind: 'review', provider: spec, rubric };
  },
};
