/**
 * What an agent's loop is given to run: the store, the host (the main thread's side of
 * the tree: its approver, plan gate, operator and the waits on children) and a clock.
 * The worker entry builds these over its thread's ports; a test builds them in-process.
 */
import type { Clock } from '../../clock.js';
import type { Executor } from '../../runtime/exec/executor.js';
import type { ImageAttachment } from '../../runtime/images.js';
import type { LivePort } from '../../runtime/live.js';
import type {
  ApprovalAnswer,
  ApprovalRequest,
  OperatorQuestion,
  PlanDecision,
  PlanReview,
} from '../../runtime/policy/approval.js';
import type { StorePort } from '../../store/port.js';
import type { WaitChildResult } from '../agent.js';

/** Everything an agent asks of the main thread. */
export interface AgentHost {
  /** The policy said ask: the tree's approver answers (or defers, to pause the run). */
  approve(request: ApprovalRequest): Promise<ApprovalAnswer>;
  /** A run in its planning phase submitted a plan: the tree's plan gate decides. */
  reviewPlan(plan: PlanReview): Promise<PlanDecision>;
  /** A question of intent for the operator; `{ defer: true }` pauses the run. */
  askOperator(question: OperatorQuestion): Promise<string | { defer: true }>;
  /** Waits for a spawned child to end, or for `timeoutMs` to pass. */
  waitChild(request: { runId: string; childId: string; timeoutMs: number | null }): Promise<WaitChildResult>;
  /** Runs one of the embedder's tools: the main thread checks the arguments, calls it and bounds its result. */
  callTool(request: HostToolCall): Promise<{ content: string; isError: boolean; images?: ImageAttachment[] }>;
  /** The observation a call with bad arguments gets, or null when they are good: checked before a person is asked. */
  checkTool(request: { runId: string; name: string; args: Record<string, unknown> }): Promise<string | null>;
  /** The call's step was cancelled or ran out of time: the tool's `signal` fires. */
  abortTool(request: { runId: string; callId: string }): Promise<void>;
}

/** A call of one of the embedder's tools, as the main thread receives it. */
export interface HostToolCall {
  rootId: string;
  runId: string;
  address: string;
  callId: string;
  name: string;
  args: Record<string, unknown>;
}

export interface AgentPorts {
  store: StorePort;
  host: AgentHost;
  clock: Clock;
  /**
   * What starts the run's commands, its gate and its checker, used as it is (whoever gives
   * one contains it: a test of the loop); absent, the executor factory's for the run's
   * contract and policy.
   */
  executor?: Executor;
  /** Where the run says what it does as it happens; absent when nobody is listening, and then nothing is published. */
  live?: LivePort;
}
