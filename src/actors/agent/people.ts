/**
 * The people-facing parts of a run: approvals, plans, questions of intent, and the
 * journaled intents a crash can interrupt. Each asks the host, or reads an answer a person
 * stored while the run was paused; what cannot go on without a person is returned as a
 * {@link Halt} (a pause, or a stop), never thrown.
 */

import type { ArgumentSchema } from '../../runtime/arguments.js';
import type { EventData, PlanStep, QuestionKind } from '../../runtime/events.js';
import type { PlanDecision } from '../../runtime/policy/approval.js';
import type { Act, Decision } from '../../runtime/policy/policy.js';
import type { Completion } from '../../runtime/provider.js';
import { type Halt, halted, type Tool, type ToolResult } from '../../runtime/tools.js';
import type { AgentCall, RunContext } from './context.js';

/** The halt of a step whose run the supervisor cancelled. */
export const CANCELLED: Halt = { kind: 'stop', reason: 'cancelled by the supervisor' };

/** Set in place of an answer when the step's signal fired first. */
function isCancelled(value: unknown): value is typeof CANCELLED {
  return value === CANCELLED;
}

/** A question's id: the same call of the same step asks the same question after a resume. */
function questionId(context: RunContext, kind: QuestionKind, callIndex: number): string {
  return `${kind}:${context.run.runId}:${context.seq}:${callIndex}`;
}

/** An answer a person already gave while the run was paused, if any. */
async function answered(context: RunContext, id: string): Promise<unknown> {
  const question = await context.store.question(id);
  return question?.status === 'answered' ? question.answer : undefined;
}

/** A person's answer, unless the step's signal fires first: a cancel or the deadline does not wait on an approver. */
function unlessCancelled<T>(signal: AbortSignal, answer: Promise<T>): Promise<T | typeof CANCELLED> {
  if (signal.aborted) return Promise.resolve(CANCELLED);
  return new Promise<T | typeof CANCELLED>((resolve, reject) => {
    const onAbort = () => resolve(CANCELLED);
    signal.addEventListener('abort', onAbort, { once: true });
    answer.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** The approver's answer about an act the policy marked ask; a deferral pauses the run. */
export async function ask(
  context: RunContext,
  act: Act,
  decision: Extract<Decision, { effect: 'ask' }>,
  callIndex: number,
): Promise<'approve' | 'deny' | 'no-approver' | Halt> {
  const id = questionId(context, 'approval', callIndex);
  const stored = await answered(context, id);
  if (stored === 'approve' || stored === 'deny') return stored;
  // Nobody to ask: refused, and the refusal says that no approver was given rather than that one denied it.
  if (!context.approver) return 'no-approver';
  const answer = await putToApprover(context, act, decision);
  if (isCancelled(answer)) return CANCELLED;
  if (answer !== 'defer') return answer;
  return {
    kind: 'pause',
    question: {
      questionId: id,
      kind: 'approval',
      payload: { act, subject: decision.subject, rule: decision.rule, layer: decision.layer },
      summary: `approve ${act.kind} ${decision.subject}? (${decision.rule}, layer ${decision.layer})`,
    },
    events: [
      {
        type: 'policy-decision',
        act: act.kind,
        subject: decision.subject,
        effect: 'ask',
        rule: decision.rule,
        layer: decision.layer,
        answer: 'defer',
      },
    ],
  };
}

function interrupted(
  context: RunContext,
  callIndex: number,
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
  callIndex: number,
  kind: string,
  detail: string,
  run: () => Promise<ToolResult>,
): Promise<ToolResult> {
  const { store, clock } = context;
  const key = `${context.run.runId}:${context.seq}:${callIndex}`;
  const base = { ...context.fence, seq: context.seq, key };
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

/** submit_plan: the tree's plan gate approves, corrects, cancels or defers the plan. */
export async function submitPlan(
  context: RunContext,
  args: { steps: PlanStep[] },
  callIndex: number,
): Promise<ToolResult> {
  const { run, step } = context;
  if (!context.contract?.planGate || run.parentId !== null) {
    return { content: 'this run has no plan gate: carry out the task directly.', isError: true };
  }
  if (!context.planning) return { content: 'the plan is already approved: carry it out.', isError: true };
  const steps = args.steps.map((item) => ({
    description: item.description,
    ...(item.owner ? { owner: item.owner } : {}),
  }));
  const id = questionId(context, 'plan', callIndex);
  const stored = (await answered(context, id)) as PlanDecision | undefined;
  const submitted: EventData = { type: 'plan-submitted', steps };
  const decision =
    stored ??
    (await unlessCancelled(
      context.signal,
      context.host.reviewPlan({ rootId: run.rootId, runId: run.runId, address: run.address, steps }),
    ));
  if (isCancelled(decision)) return halted(CANCELLED);
  if (decision.decision === 'defer') {
    return halted({
      kind: 'pause',
      question: {
        questionId: id,
        kind: 'plan',
        payload: { steps },
        summary: `review the plan of ${steps.length} steps`,
      },
      events: [submitted],
    });
  }
  // A stored decision answers a plan whose submission is already in the trace (with the pause).
  if (!stored) step.events.push(submitted);
  const note = 'note' in decision && decision.note ? decision.note : null;
  if (decision.decision === 'cancel') {
    step.events.push({ type: 'plan-decided', decision: 'cancel', steps, note });
    return halted({ kind: 'stop', reason: `the plan gate cancelled the run${note ? `: ${note}` : ''}` });
  }
  const approved = decision.decision === 'correct' ? decision.steps : steps;
  step.events.push({ type: 'plan-decided', decision: decision.decision, steps: approved, note });
  context.approvePlan();
  const listing = approved
    .map((item, index) => `${index + 1}. ${item.description}${item.owner ? ` (owner: ${item.owner})` : ''}`)
    .join('\n');
  const head = decision.decision === 'correct' ? 'The plan was corrected and approved' : 'The plan is approved';
  return { content: `${head}${note ? ` (${note})` : ''}. Carry it out:\n${listing}`, isError: false };
}

/** ask_operator: a question of intent; the operator's answer is the observation. */
export async function askOperator(
  context: RunContext,
  args: { question: string },
  callIndex: number,
): Promise<ToolResult> {
  const { run } = context;
  const id = questionId(context, 'question', callIndex);
  const stored = await answered(context, id);
  const answer =
    typeof stored === 'string'
      ? stored
      : await unlessCancelled(
          context.signal,
          context.host.askOperator({
            rootId: run.rootId,
            runId: run.runId,
            address: run.address,
            question: args.question,
          }),
        );
  if (isCancelled(answer)) return halted(CANCELLED);
  if (typeof answer !== 'string') {
    return halted({
      kind: 'pause',
      question: { questionId: id, kind: 'question', payload: { question: args.question }, summary: args.question },
      events: [],
    });
  }
  return { content: `The operator answered: ${answer}`, isError: false };
}

const PLAN_PARAMETERS: ArgumentSchema = {
  type: 'object',
  properties: {
    steps: {
      type: 'array',
      minItems: 1,
      description: 'The plan, in order.',
      items: {
        type: 'object',
        properties: {
          description: { type: 'string', minLength: 1, description: 'What this step does.' },
          owner: { type: 'string', minLength: 1, description: 'The agent that owns this step (an address), if any.' },
        },
        required: ['description'],
        additionalProperties: false,
      },
    },
  },
  required: ['steps'],
  additionalProperties: false,
};

const QUESTION_PARAMETERS: ArgumentSchema = {
  type: 'object',
  properties: {
    question: { type: 'string', minLength: 1, description: 'What you need the operator to decide about the intent.' },
  },
  required: ['question'],
  additionalProperties: false,
};

/**
 * The tools that reach a person: `ask_operator` (a question about intent, rather than a
 * guess) and, for a run opened with a plan gate, `submit_plan` (it leaves its planning
 * phase only through an approved plan). Either may pause the run until a person answers.
 */
export function personTools(planGate: boolean): Tool<AgentCall>[] {
  const tools: Tool<AgentCall>[] = [
    {
      name: 'ask_operator',
      description:
        'Ask the operator a question about the intent of the task when guessing would be worse than waiting. The run may pause until they answer.',
      parameters: QUESTION_PARAMETERS,
      kind: 'asks',
      execute: (args, call) => askOperator(call.agent, args as { question: string }, call.callIndex),
    },
  ];
  if (planGate) {
    tools.push({
      name: 'submit_plan',
      description:
        'Submit your ordered plan for review. Until a plan is approved you may only read; the answer approves, corrects or cancels it.',
      parameters: PLAN_PARAMETERS,
      kind: 'asks',
      execute: (args, call) => submitPlan(call.agent, args as { steps: PlanStep[] }, call.callIndex),
    });
  }
  return tools;
}

/**
 * The approver's answer about a connection a command is making now, through the egress
 * proxy: asked there and then, since a command cannot pause mid-connection. A deferral or
 * a cancel is a refusal.
 */
export async function approveNow(
  context: RunContext,
  act: Act,
  decision: Extract<Decision, { effect: 'ask' }>,
): Promise<'approve' | 'deny' | 'defer'> {
  const answer = await putToApprover(context, act, decision);
  return isCancelled(answer) ? 'deny' : answer;
}

/** The tree's approver asked about `act`, unless the run is cancelled first. */
function putToApprover(
  context: RunContext,
  act: Act,
  decision: Extract<Decision, { effect: 'ask' }>,
): Promise<'approve' | 'deny' | 'defer' | typeof CANCELLED> {
  const { run } = context;
  return unlessCancelled(
    context.signal,
    context.host.approve({
      rootId: run.rootId,
      runId: run.runId,
      address: run.address,
      act,
      subject: decision.subject,
      rule: decision.rule,
      layer: decision.layer,
    }),
  );
}
