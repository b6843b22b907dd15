/**
 * The tools that reach a person: `ask_operator` (a question of intent) and `submit_plan`
 * (a run's plan put to the tree's plan gate). Each asks the host, or reads an answer a
 * person stored while the run was paused; what cannot go on without a person is returned
 * as a halt (a pause, or a stop), never thrown.
 */

import type { ArgumentSchema } from '../../arguments.js';
import type { EventData, PlanStep } from '../../events.js';
import type { PlanDecision } from '../../policy/approval.js';
import type { AgentCall, RunContext } from '../context.js';
import { answered, isCancelled, questionId, unlessCancelled } from '../decisions.js';
import { CANCELLED, halted, type Tool, type ToolResult } from '../tool.js';

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
