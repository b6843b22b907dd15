/**
 * One step of a run, as a function of the prepared run: `runStep(run)` → what the step
 * came to (see {@link StepOutcome}). It is the stages below, in order, and nothing else:
 *
 * 1. check before — a cancel, the budget for one more step, the step's deadline (./check.ts)
 * 2. ask — the model, its request fitted to the window first (./ask.ts, ./check-window.ts)
 * 3. check the answer — its calls screened, its draw, a reply that ends a turn (./check.ts)
 * 4. act — the calls, until a pause, a stop, a cancel or the deadline (./act.ts)
 * 5. check after — gates, a stop mid-step, stale reads (./check-step.ts)
 * 6. commit — the step, its draw and its effects in one transaction (./commit.ts)
 *
 * Each stage either hands the next what it needs or returns the outcome that ends the
 * step there. A new capability of the step is a new stage here, or a hook on one stage
 * (a check in check-step.ts's list, a stream hook in ask.ts), never more lines in a loop.
 */
import { act } from './act.js';
import { ask } from './ask.js';
import { admitAnswer, admitStep } from './check.js';
import { checkStep } from './check-step.js';
import { commit } from './commit.js';
import type { PreparedRun } from './prepare.js';
import { isOutcome, type StepOutcome } from './stage.js';

export async function runStep(run: PreparedRun): Promise<StepOutcome> {
  const admitted = await admitStep(run);
  if (isOutcome(admitted)) return admitted;
  const asked = await ask(run, admitted);
  if (isOutcome(asked)) return asked;
  const step = await admitAnswer(run, asked);
  if (isOutcome(step)) return step;
  const paused = await act(run, step);
  if (paused) return paused;
  await checkStep(run, step);
  return commit(run, step);
}
