/**
 * The agent actor: one worker thread per live agent, driving one run at a time
 * through observe, reason, act, check, stop. It talks to the store actor over a
 * port of its own and to the supervisor over its parent port, and to nothing else.
 * Threads are pooled: when a run ends the thread takes the next one.
 */
import { type MessagePort, Worker } from 'node:worker_threads';
import type { SerializedError } from '../errors.js';
import type { RunStatus } from '../runtime/events.js';
import type { ApprovalRequest, OperatorQuestion, PlanReview } from '../runtime/policy/approval.js';
import type { ProviderSpec } from '../runtime/provider.js';

/** Supervisor to actor. */
export type AgentInput =
  | {
      type: 'start';
      runId: string;
      generation: number;
      owner: string;
      resumed: boolean;
      /** The tree's provider with its key, when this supervisor has it; the stored spec never carries keys. */
      provider?: ProviderSpec;
      /** A review gate's provider with its key, likewise. */
      reviewer?: ProviderSpec;
    }
  /** A message was committed to this actor's address. */
  | { type: 'mail' }
  /** Stop at the next step boundary and end the run as cancelled. */
  | { type: 'cancel' };

/** Requests the actor makes of the supervisor. */
export type AgentRequestBody =
  | { op: 'wait-child'; runId: string; childId: string; timeoutMs: number | null }
  /** The policy said ask: the supervisor puts the question to the tree's approver. */
  | { op: 'approve'; request: ApprovalRequest }
  /** A run in its planning phase submitted a plan: the supervisor shows it to the tree's plan gate. */
  | { op: 'review-plan'; plan: PlanReview }
  /** An agent asks the operator about intent. */
  | { op: 'ask-operator'; question: OperatorQuestion };

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

/** How a run left the actor. */
export type RunExit =
  | { kind: 'ended'; status: RunStatus }
  | { kind: 'lease-lost' }
  | { kind: 'error'; error: SerializedError };

/** Actor to supervisor, besides requests. */
export type AgentOutput = { type: 'ready' } | { type: 'run-exit'; runId: string; exit: RunExit };

export interface AgentWorkerData {
  storePath: string;
  storePort: MessagePort;
}

export const AGENT_WORKER_URL = new URL('./agent-worker.js', import.meta.url);

export function startAgentWorker(storePath: string, storePort: MessagePort): Worker {
  const data: AgentWorkerData = { storePath, storePort };
  return new Worker(AGENT_WORKER_URL, { workerData: data, transferList: [storePort] });
}
