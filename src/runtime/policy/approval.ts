/**
 * Approvers answer the policy's `ask`. They live on the embedder's thread: an agent's
 * thread asks the supervisor, which calls the approver of that tree and sends the
 * answer back. An answer is a word, never a boolean, so a deferral can be told apart
 * from a refusal.
 */
import type { PlanStep } from '../events.js';
import type { Act } from './policy.js';

export type ApprovalAnswer = 'approve' | 'deny' | 'defer';

/** What an approver is asked. */
export interface ApprovalRequest {
  rootId: string;
  runId: string;
  /** The agent's address in its tree. */
  address: string;
  act: Act;
  /** The act as the policy matched it (a resolved path, the argv as one line, host:port). */
  subject: string;
  /** The ask rule and its layer. */
  rule: string;
  layer: string;
}

export interface Approver {
  decide(request: ApprovalRequest): ApprovalAnswer | Promise<ApprovalAnswer>;
}

/** Approves everything it is asked. */
export class ApproveAll implements Approver {
  decide(): ApprovalAnswer {
    return 'approve';
  }
}

/** Denies everything it is asked. */
export class DenyAll implements Approver {
  decide(): ApprovalAnswer {
    return 'deny';
  }
}

/**
 * Asks a function of yours.
 *
 * @example
 * const approver = new CallbackApprover(({ subject }) => (subject.startsWith('npm test') ? 'approve' : 'deny'));
 */
export class CallbackApprover implements Approver {
  readonly #callback: (request: ApprovalRequest) => ApprovalAnswer | Promise<ApprovalAnswer>;

  constructor(callback: (request: ApprovalRequest) => ApprovalAnswer | Promise<ApprovalAnswer>) {
    this.#callback = callback;
  }

  decide(request: ApprovalRequest): ApprovalAnswer | Promise<ApprovalAnswer> {
    return this.#callback(request);
  }
}

/** What a plan gate is shown: the plan a run in its planning phase submitted. */
export interface PlanReview {
  rootId: string;
  runId: string;
  address: string;
  steps: PlanStep[];
}

/** A plan gate's answer: approve it, correct it (the corrected steps become the plan), cancel the run, or defer. */
export type PlanDecision =
  | { decision: 'approve'; note?: string }
  | { decision: 'correct'; steps: PlanStep[]; note?: string }
  | { decision: 'cancel'; note?: string }
  | { decision: 'defer' };

/** Reviews the plan of a run opened with a plan gate. Deferring pauses the run with the plan stored. */
export interface PlanGate {
  review(plan: PlanReview): PlanDecision | Promise<PlanDecision>;
}

/** A question an agent asks the operator about intent. */
export interface OperatorQuestion {
  rootId: string;
  runId: string;
  address: string;
  question: string;
}

/** Answers an agent's question, or defers it (the run pauses with the question stored). */
export interface Operator {
  answer(question: OperatorQuestion): string | { defer: true } | Promise<string | { defer: true }>;
}
