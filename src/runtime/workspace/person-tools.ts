/**
 * The tools that reach a person: `submit_plan` (a run opened with a plan gate leaves its
 * planning phase only through an approved plan) and `ask_operator` (a question about
 * intent, rather than a guess). Either may pause the run until a person answers.
 */
import type { ArgumentSchema } from '../arguments.js';
import type { PlanStep } from '../events.js';
import type { Tool, ToolResult } from '../tools.js';

export interface PersonEffects {
  submitPlan(args: { steps: PlanStep[] }, callIndex: number): Promise<ToolResult>;
  askOperator(args: { question: string }, callIndex: number): Promise<ToolResult>;
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

export function personTools(planGate: boolean): Tool<PersonEffects>[] {
  const tools: Tool<PersonEffects>[] = [
    {
      name: 'ask_operator',
      description:
        'Ask the operator a question about the intent of the task when guessing would be worse than waiting. The run may pause until they answer.',
      parameters: QUESTION_PARAMETERS,
      kind: 'asks',
      handler: (args, effects, callIndex) => effects.askOperator(args as { question: string }, callIndex),
    },
  ];
  if (planGate) {
    tools.push({
      name: 'submit_plan',
      description:
        'Submit your ordered plan for review. Until a plan is approved you may only read; the answer approves, corrects or cancels it.',
      parameters: PLAN_PARAMETERS,
      kind: 'asks',
      handler: (args, effects, callIndex) => effects.submitPlan(args as { steps: PlanStep[] }, callIndex),
    });
  }
  return tools;
}
