/**
 * The checks on a final answer: the planning phase, the output schema, then the gate (a
 * command, or a review by another model). Each may send feedback to the model, bounded by
 * the contract's retries, instead of ending the run.
 */
import { ErrorCode, HarnessError } from '../../errors.js';
import type { ContractData } from '../../runtime/contract/contract.js';
import { DEFAULT_RETRIES } from '../../runtime/contract/retries.js';
import type { RunStatus } from '../../runtime/events.js';
import type { Executor } from '../../runtime/exec/executor.js';
import type { Completion, ProviderSpec } from '../../runtime/provider.js';
import { hostModelChannel } from '../../runtime/providers/host-model.js';
import type { RunContext } from '../../runtime/tools/context.js';
import {
  evaluateCommandGate,
  evaluateReviewGate,
  type GateEvaluation,
  gateEvent,
  gateFeedback,
  REVIEW_PREFIX,
  writingModels,
} from '../../runtime/verify/gate.js';
import type { WorkspaceSession } from '../../runtime/workspace/session.js';
import type { ModelCallRecord, Observation } from '../../store/records.js';
import { answeredCall } from './records.js';
import { FEEDBACK, type Spent } from './step.js';

export type Verdict =
  | { final: { status: RunStatus; reply: string | null; reason?: string }; feedback?: undefined }
  | { feedback: Observation; final?: undefined };

/**
 * What judges a root's final answer: its contract (a plan gate, a shape, a gate), or, for a
 * plain run that declared one, the answer's shape alone.
 */
export type Judged = ContractData | ShapeOnly;

/** A plain run's judge: its `outputSchema`, with the contract's default retries; no gate, no plan. */
export interface ShapeOnly {
  outputSchema: NonNullable<ContractData['outputSchema']>;
  retries: number;
  planGate: false;
}

/** The judge a plain root with an answer shape has. */
export function shapeOnly(outputSchema: ShapeOnly['outputSchema']): ShapeOnly {
  return { outputSchema, retries: DEFAULT_RETRIES, planGate: false };
}

/** What judging needs besides the run: the workspace and the reviewer's provider (with its key). */
export interface JudgeParts {
  workspace: WorkspaceSession | null;
  reviewer: ProviderSpec | undefined;
  /** What runs a command gate: the run's executor; null for a run without a contract, which has no gate. */
  executor: Executor | null;
}

/** The final answer, judged. `spent` counts the re-prompts and is updated; `calls` gains the review's call. */
export async function judge(
  context: RunContext,
  parts: JudgeParts,
  contract: Judged,
  completion: Completion,
  spent: Spent,
  calls: ModelCallRecord[],
): Promise<Verdict> {
  const events = context.step.events;
  if (context.planning) {
    // The only way out of the planning phase is an approved plan.
    if (spent.plan < contract.retries) {
      spent.plan++;
      return {
        feedback: {
          callId: '',
          name: FEEDBACK.plan,
          content: 'This run is in its planning phase: submit an ordered plan with submit_plan before answering.',
          isError: true,
        },
      };
    }
    return {
      final: { status: 'failed', reply: completion.text, reason: 'the run ended its planning phase without a plan' },
    };
  }
  if (contract.outputSchema) {
    const { checkOutput } = await import('../../runtime/contract/output-check.js');
    const check = checkOutput(contract.outputSchema.schema, completion.text);
    if (!check.ok) {
      const reprompt = spent.schema < contract.retries;
      events.push({ type: 'schema-invalid', errors: check.errors, reprompted: reprompt });
      if (reprompt) {
        spent.schema++;
        return {
          feedback: {
            callId: '',
            name: FEEDBACK.schema,
            content: `Your final answer does not satisfy the required output schema:\n${check.errors.join('\n')}\nAnswer again with a single JSON value that does (${contract.retries - spent.schema} ${contract.retries - spent.schema === 1 ? 'retry' : 'retries'} left).`,
            isError: true,
          },
        };
      }
      return {
        final: {
          status: 'schema-unsatisfied',
          reply: completion.text,
          reason: `the final answer does not satisfy the output schema after ${contract.retries} ${contract.retries === 1 ? 'retry' : 'retries'}: ${check.errors.join('; ')}`,
        },
      };
    }
  }
  // A plain run's shape is all there is to judge.
  if (!('verification' in contract)) return { final: { status: 'finished', reply: completion.text } };
  const evaluation = await evaluateGate(context, parts, contract, completion);
  if (evaluation === null) return { final: { status: 'finished', reply: completion.text } };
  if (evaluation.reviewCall) {
    // Marked as a review, so the reviewer's own model is not counted among the writers.
    const review = answeredCall(evaluation.reviewCall, 'reviewer');
    calls.push({ ...review, provider: `${REVIEW_PREFIX}${review.provider}` });
  }
  events.push(gateEvent(evaluation, false));
  if (evaluation.output) events.push(evaluation.output);
  if (evaluation.verdict === 'passed') return { final: { status: 'finished', reply: completion.text } };
  if (evaluation.verdict === 'failed' && spent.gate < contract.retries) {
    spent.gate++;
    return {
      feedback: {
        callId: '',
        name: FEEDBACK.gate,
        content: gateFeedback(evaluation, contract.retries - spent.gate),
        isError: true,
      },
    };
  }
  const reason =
    evaluation.verdict === 'errored'
      ? `the gate could not run: ${evaluation.reasons.join('; ')} (retryGate re-runs it against the workspace as left)`
      : `the gate failed${contract.retries > 0 ? ` after ${contract.retries} ${contract.retries === 1 ? 'retry' : 'retries'}` : ''}: ${evaluation.reasons.join('; ')}`;
  return { final: { status: 'gate-failed', reply: completion.text, reason } };
}

async function evaluateGate(
  context: RunContext,
  parts: JudgeParts,
  contract: ContractData,
  completion: Completion,
): Promise<GateEvaluation | null> {
  const gate = contract.verification;
  if (gate.kind === 'command') {
    await parts.workspace?.noteContainment((event) => context.step.events.push(event));
    if (!parts.executor)
      throw new HarnessError(ErrorCode.Internal, 'a command gate was to run with no executor: the run has no contract');
    return evaluateCommandGate(gate, contract.root, parts.executor, {
      signal: context.signal,
      env: parts.workspace?.commandEnv,
    });
  }
  if (gate.kind === 'review') {
    const { run, store, step } = context;
    const committed = await store.patch(run.runId);
    const pending = step.changes.map((change) => change.diff).join('');
    const writers = writingModels(await store.modelCalls({ rootId: run.rootId }));
    return evaluateReviewGate(
      gate,
      parts.reviewer ?? gate.provider,
      {
        goal: contract.goal,
        patch: committed + pending,
        reply: completion.text,
        writerModels: [...new Set([completion.model, ...writers])],
      },
      context.signal,
      hostModelChannel(context.host, context.run.runId),
    );
  }
  return null;
}
