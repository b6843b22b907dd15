/**
 * Verification gates: what decides that a run's work is done. A command gate runs the
 * project's own criterion in the workspace; a review gate has a second model read the
 * change against a rubric. Each evaluation is passed, failed, or errored — a criterion
 * that could not run at all, which is a different problem from one that ran and said no.
 */
import type { VerificationData } from '../contract/contract.js';
import type { EventData, GateVerdict } from '../events.js';
import type { ContainedReport } from '../exec/containment/contained.js';
import type { Executor } from '../exec/executor.js';
import { type Completion, type ProviderSpec, specModel } from '../provider.js';
import type { HostModelChannel } from '../providers/host-model.js';
import { loadProvider } from '../providers/registry.js';

/** Accounting rows of a reviewer's calls carry this before the provider's name. */
export const REVIEW_PREFIX = 'review:';

/** The models that worked on a tree's change, from its accounting rows: every model but a reviewer's. */
export function writingModels(calls: readonly { provider: string; model: string }[]): string[] {
  return [...new Set(calls.filter((call) => !call.provider.startsWith(REVIEW_PREFIX)).map((call) => call.model))];
}

export interface GateEvaluation {
  criterion: 'command' | 'review';
  verdict: GateVerdict;
  exitStatus: number | null;
  reasons: string[];
  /** What a command gate printed, bounded; null for a review. */
  output: Extract<EventData, { type: 'gate-output' }> | null;
  /** The reviewer's model call, for the accounting table. */
  reviewCall: Completion | null;
  /**
   * The rung a command gate ran on (`full-access` where the contract asked for none), as
   * its executor reports it; null for a review, which starts no process, and for an
   * executor that reports none.
   */
  containment: ContainedReport['rung'] | null;
}

/**
 * Runs a command gate in `root` with `executor`: the run's, or on a retry one the executor
 * factory made from the run's stored contract and policy. The gate often runs code the run
 * wrote (its tests), so it is contained as the run's commands are and gets the environment
 * they get, without the variables that hold the tree's keys.
 */
export async function evaluateCommandGate(
  gate: Extract<VerificationData, { kind: 'command' }>,
  root: string,
  executor: Executor,
  options: { signal?: AbortSignal | undefined; env?: NodeJS.ProcessEnv | undefined } = {},
): Promise<GateEvaluation> {
  const { signal, env } = options;
  const containment = executor.contained?.().rung ?? null;
  const result = await executor.run({
    argv: gate.argv,
    purpose: 'gate',
    cwd: root,
    timeoutMs: gate.timeoutMs,
    outputLimit: gate.outputLimit,
    ...(signal ? { signal } : {}),
    ...(env ? { env } : {}),
  });
  if (!result.started) {
    return {
      criterion: 'command',
      verdict: 'errored',
      exitStatus: null,
      reasons: [`the gate could not run: ${result.error}`],
      output: null,
      reviewCall: null,
      containment,
    };
  }
  const passed = !result.timedOut && result.signal === null && result.exitStatus === gate.expectExit;
  const reasons = passed
    ? [`${gate.argv.join(' ')} exited with ${result.exitStatus}`]
    : [
        result.timedOut
          ? `${gate.argv.join(' ')} did not finish within ${gate.timeoutMs / 1000}s and was killed`
          : result.signal
            ? `${gate.argv.join(' ')} was killed by ${result.signal}`
            : `${gate.argv.join(' ')} exited with ${result.exitStatus}, not ${gate.expectExit}`,
      ];
  return {
    criterion: 'command',
    verdict: passed ? 'passed' : 'failed',
    exitStatus: result.exitStatus,
    reasons,
    output: passed
      ? null
      : {
          type: 'gate-output',
          argv: [...gate.argv],
          exitStatus: result.exitStatus,
          signal: result.signal,
          stdout: result.stdout,
          stderr: result.stderr,
          truncated: result.droppedStdout > 0 || result.droppedStderr > 0,
        },
    reviewCall: null,
    containment,
  };
}

/** What the reviewer reads. */
export interface ReviewSubject {
  goal: string;
  /** The run's change as a patch series. */
  patch: string;
  /** The run's final answer. */
  reply: string;
  /** Every model that worked on the change: the reviewer may be none of them. */
  writerModels: string[];
}

const REVIEW_SYSTEM =
  'You review a change another agent made to a repository. Judge it against the rubric only. ' +
  'Answer with one JSON object and nothing else: {"verdict": "pass" | "fail", "reasons": ["..."]}.';

/** Has a second model read the change against the rubric. */
export async function evaluateReviewGate(
  gate: Extract<VerificationData, { kind: 'review' }>,
  provider: ProviderSpec,
  subject: ReviewSubject,
  signal?: AbortSignal,
  channel: HostModelChannel | null = null,
): Promise<GateEvaluation> {
  const errored = (reason: string, call: Completion | null = null): GateEvaluation => ({
    criterion: 'review',
    verdict: 'errored',
    exitStatus: null,
    reasons: [reason],
    output: null,
    reviewCall: call,
    containment: null,
  });
  // Asked before the call when the spec names its model: a refused review is not paid for.
  const named = specModel(provider);
  if (named !== null && subject.writerModels.includes(named)) {
    return errored(
      `the review gate refuses to run on a model that wrote the change (${named}); give Verification.review another model.`,
    );
  }
  let completion: Completion;
  try {
    const reviewer = await loadProvider(provider, channel);
    completion = await reviewer.complete(
      {
        system: REVIEW_SYSTEM,
        transcript: [
          {
            role: 'user',
            text: `Rubric:\n${gate.rubric}\n\nGoal of the run:\n${subject.goal}\n\nThe change:\n${subject.patch || '(no files changed)'}\n\nThe agent's final answer:\n${subject.reply}`,
          },
        ],
        tools: [],
        metadata: { runId: 'review', rootId: 'review', address: 'reviewer', parentAddress: null, depth: 0, seq: 0 },
      },
      signal,
    );
  } catch (error) {
    return errored(`the reviewer could not be asked: ${(error as Error).message}`);
  }
  if (subject.writerModels.includes(completion.model)) {
    return errored(
      `the review gate refuses to run on a model that wrote the change (${completion.model}); give Verification.review another model.`,
      completion,
    );
  }
  const verdict = parseVerdict(completion.text);
  if (!verdict) return errored(`the reviewer's answer is not a verdict: ${completion.text.slice(0, 200)}`, completion);
  return {
    criterion: 'review',
    verdict: verdict.pass ? 'passed' : 'failed',
    exitStatus: null,
    reasons: verdict.reasons,
    output: null,
    reviewCall: completion,
    containment: null,
  };
}

function parseVerdict(text: string): { pass: boolean; reasons: string[] } | null {
  const start = text.indexOf('{');
  const end = text.lastIndexOf('}');
  if (start < 0 || end < start) return null;
  try {
    const value = JSON.parse(text.slice(start, end + 1)) as { verdict?: unknown; reasons?: unknown };
    if (value.verdict !== 'pass' && value.verdict !== 'fail') return null;
    const reasons = Array.isArray(value.reasons) ? value.reasons.map(String) : [];
    return { pass: value.verdict === 'pass', reasons };
  } catch {
    return null;
  }
}

/** The trace's record of one evaluation. */
export function gateEvent(evaluation: GateEvaluation, retried: boolean): EventData {
  return {
    type: 'gate-evaluated',
    criterion: evaluation.criterion,
    verdict: evaluation.verdict,
    exitStatus: evaluation.exitStatus,
    reasons: evaluation.reasons,
    retried,
    containment: evaluation.containment,
  };
}

/** What the model is told after a failing gate, so it can try again. */
export function gateFeedback(evaluation: GateEvaluation, left: number): string {
  const head = `The verification gate (${evaluation.criterion}) failed: ${evaluation.reasons.join('; ')}.`;
  const output = evaluation.output
    ? `\n--- stdout:\n${evaluation.output.stdout}\n--- stderr:\n${evaluation.output.stderr}${evaluation.output.truncated ? '\n(output cut)' : ''}`
    : '';
  return `${head}${output}\nFix the problem and answer again when done (${left} ${left === 1 ? 'retry' : 'retries'} left).`;
}
