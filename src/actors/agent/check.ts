/**
 * The checks at the two ends of asking: before a step (a cancel ends the run; the budget
 * must admit one more step; the step's deadline is armed at the first wall-clock ceiling)
 * and on the answer (a call far over its tool's limits is cut to its start; the draw it
 * makes must fit every ceiling; a turn's first answer in text is a reply, not a step).
 */
import type { Asked } from './ask.js';
import type { PreparedRun } from './prepare.js';
import { answeredCall, attemptEvents, failedCall } from './records.js';
import { endRun, exhaust, type Replay, type Step, type StepOutcome } from './stage.js';

/** The finish reason of a turn the vendor paused while its server-side tools (web search, fetch) worked. */
const PAUSE_TURN = 'pause_turn';

/** What the model is told after such a pause, as the runtime's own words. */
const GO_ON = {
  callId: '',
  name: '@paused',
  content: 'Your turn was paused while the web tools worked; go on from where you stopped.',
  isError: false,
} as const;

/** A step the budget admits: a fresh one, or the paused step it picks up. */
export interface Admitted {
  replay: Replay | null;
}

/** Before a step: a cancel, the budget, and the step's deadline. */
export async function admitStep(run: PreparedRun): Promise<StepOutcome | Admitted> {
  const { agent } = run;
  if (agent.cancelled) return endRun(agent, 'cancelled', agent.cancelReason);
  // A step whose effects had begun (a journaled command, a pause) acts on the completion it had;
  // it was admitted when it began, so the time it spent paused is not charged.
  const replay = run.draft && run.draft.seq === agent.seq ? run.draft : null;
  run.draft = null;
  const checked = replay ? null : await run.budget.precheck();
  if (checked?.crossing) return exhaust(agent, checked.crossing, [], []);
  // The wall clock holds inside the step too. A replayed step is not held to it, as it is
  // not checked against it above; the next step's check is.
  agent.arm(checked ? checked.firstWall : null);
  return { replay };
}

/**
 * The answer, before any of its calls runs: screened, charged against the ceilings, and
 * taken as a reply when it ends a turn. Otherwise the step begins on it.
 */
export async function admitAnswer(run: PreparedRun, asked: Asked): Promise<StepOutcome | Step> {
  const { agent } = run;
  const { replay, model, escalated } = asked;
  // Before anything of the step is stored: a call far over its tool's limits keeps only its start.
  const completion = {
    ...asked.completion,
    toolCalls: asked.completion.toolCalls.map((call) => run.registry.screen(call)),
  };
  const attempts = replay ? [] : (completion.attempts ?? []);
  const tries = [...(escalated ? [escalated] : []), ...attemptEvents(attempts, completion.provider ?? model.name)];
  const answered = [...attempts.map(failedCall), answeredCall(completion, model.name)];
  // The draw is known now: a step that cannot be charged runs none of its tools.
  const over = replay ? null : await run.budget.wouldCross(completion);
  if (over) return exhaust(agent, over, tries, answered);
  // The vendor stopped a long turn of its own tools' work (Anthropic's pause_turn): not an answer; the model is asked to go on.
  const paused = completion.finishReason === PAUSE_TURN && completion.toolCalls.length === 0;
  if (!replay && completion.toolCalls.length === 0 && !paused && isReply(run)) {
    await agent.ports.live?.flush();
    const reply = await agent.store.call('endReply', {
      ...agent.fence,
      completion,
      calls: answered,
      events: tries,
      now: agent.clock.now(),
    });
    return { kind: 'ended', status: reply.status === 'finished' ? 'finished' : 'budget-exhausted' };
  }
  const draft = replay?.partial ?? null;
  agent.step.begin(completion, draft, [...asked.assembled, ...tries]);
  return {
    replay,
    completion,
    withheld: asked.withheld,
    requestTokens: asked.requestTokens,
    calls: draft ? [...draft.calls] : answered,
    observations: draft ? [...draft.observations] : paused ? [{ ...GO_ON }] : [],
    stop: null,
    final: completion.toolCalls.length === 0 && !paused ? { status: 'finished', reply: completion.text } : null,
  };
}

/**
 * A turn's first completion decides what the turn is: stopped on text, it is a reply, and
 * ends here with no step (its tokens drawn, its call recorded); a tool call makes it work.
 */
function isReply(run: PreparedRun): boolean {
  const { agent, spec } = run;
  const contract = agent.contract;
  return (
    spec.reply === true &&
    agent.run.parentId === null &&
    // A contract that judges the answer (a gate, a plan gate, a shape) is never skipped by a reply.
    (contract === null
      ? spec.outputSchema === undefined
      : contract.verification.kind === 'none' && !contract.planGate && contract.outputSchema === null) &&
    agent.seq === 1 &&
    !agent.cancelled &&
    !agent.deadline.overdue
  );
}
