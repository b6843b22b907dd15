/**
 * The host channel as the runtime's tools see it: everything an agent's tools ask of the
 * main thread (the tree's approver, plan gate and operator, the waits on children, the
 * embedder's tools and host models). The agent actor is given one over its thread's ports (see
 * src/actors/agent/ports.ts); a test builds one in-process.
 */
import type { RunStatus } from '../events.js';
import type { ImageAttachment } from '../images.js';
import type {
  ApprovalAnswer,
  ApprovalRequest,
  OperatorQuestion,
  PlanDecision,
  PlanReview,
} from '../policy/approval.js';
import type { Completion } from '../provider.js';
import type { HostModelCall } from '../providers/host-model.js';
import type { ToolFailure } from './tool.js';

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
  callTool(request: HostToolCall): Promise<{
    content: string;
    isError: boolean;
    images?: ImageAttachment[];
    error?: ToolFailure;
  }>;
  /** The observation a call with bad arguments gets, or null when they are good: checked before a person is asked. */
  checkTool(request: { runId: string; name: string; args: Record<string, unknown> }): Promise<string | null>;
  /** The call's step was cancelled or ran out of time: the tool's (or the host model's) `signal` fires. */
  abortTool(request: { runId: string; callId: string }): Promise<void>;
  /** Asks one of the tree's host models (see ../providers/host-model.ts). */
  complete(call: HostModelCall): Promise<Completion>;
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

/** How a wait on a spawned child ended: the child's end, or the wait's own timeout (the child carries on in the background). */
export type WaitChildResult =
  | {
      status: 'ended';
      childStatus: RunStatus;
      reply: string | null;
      steps: number;
      tokens: number;
      reason: string | null;
    }
  | { status: 'background' };
