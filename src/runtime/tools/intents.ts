/**
 * The intent journal: an effect the runtime can neither inspect nor undo (a command, an
 * embedder's tool that acts) is journaled before it starts, so a crash during it pauses
 * the resumed run for a person to retry, skip or abort instead of running it twice.
 */

import type { Completion } from '../provider.js';
import type { RunContext } from './context.js';
import { answered, type CallAt, questionId } from './decisions.js';
import { halted, type ToolResult } from './tool.js';

/** An intent's key: the run, the step and the call's place in it (for an act, its place in its program). */
export function intentKey(context: RunContext, callIndex: CallAt): string {
  return `${context.run.runId}:${context.seq}:${String(callIndex).split('#')[0]}`;
}

/** The pause of a step whose effect a crash interrupted: a question naming that start of it. */
function interrupted(
  context: RunContext,
  callIndex: CallAt,
  key: string,
  kind: string,
  detail: string,
  startedAt: number,
): ToolResult {
  // The question names this start of the effect, so an answer covers that start only: a
  // retry that is itself interrupted asks again rather than running a third time.
  return halted({
    kind: 'pause',
    question: {
      questionId: `${questionId(context, 'intent', callIndex)}@${startedAt}`,
      kind: 'intent',
      payload: { key, kind, detail, startedAt },
      summary: `${kind} "${detail}" was running when the process died; retry, skip or abort?`,
    },
    events: [],
  });
}

/**
 * An effect the runtime cannot undo, journaled before it starts. One that ran to the
 * end keeps its recorded result (it is not run twice); one a crash interrupted pauses
 * the run for the operator to retry, skip or abort.
 */
export async function intent(
  context: RunContext,
  callIndex: CallAt,
  kind: string,
  detail: string,
  run: () => Promise<ToolResult>,
): Promise<ToolResult> {
  const { store, clock } = context;
  const key = intentKey(context, callIndex);
  const base = { ...context.fence, seq: context.seq, key };
  // (A program's act is held to what was journaled at its place before it is dispatched: see actors/agent/program-acts.ts.)
  const existing = await store.intent(key);
  let again = false;
  if (existing && existing.result === null) {
    const decided = await answered(context, `${questionId(context, 'intent', callIndex)}@${existing.startedAt}`);
    if (decided === undefined) return interrupted(context, callIndex, key, kind, detail, existing.startedAt);
    if (decided === 'abort') {
      return halted({ kind: 'stop', reason: `the operator aborted the run after an interrupted ${kind}: ${detail}` });
    }
    if (decided === 'skip') {
      const skipped: ToolResult = {
        content: `${detail} was interrupted by a crash and the operator chose to skip it; it was not run again.`,
        isError: true,
      };
      await store.call('finishIntent', {
        ...base,
        result: JSON.stringify(skipped),
        outcome: 'skipped',
        now: clock.now(),
      });
      return skipped;
    }
    again = true;
  }
  const begun = await store.call('beginIntent', {
    ...base,
    kind,
    detail,
    completion: context.step.completion as Completion,
    again,
    now: clock.now(),
  });
  if (begun.status === 'done') return JSON.parse(begun.result) as ToolResult;
  // Started by another attempt at this step since this one looked: ask about that start.
  if (begun.status === 'in-flight') return interrupted(context, callIndex, key, kind, detail, begun.startedAt);
  const result = await run();
  await store.call('finishIntent', {
    ...base,
    result: JSON.stringify(result),
    outcome: result.isError ? 'error' : 'ok',
    now: clock.now(),
  });
  return result;
}
