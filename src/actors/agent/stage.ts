/**
 * What the stages of a step share: the step in progress, what a step comes to, and the
 * ways a run ends outside a step's commit (at a ceiling the next step would cross, or with
 * a reason and no step: a refusal to start, a cancel, a model call that failed).
 */
import type { EventData, RunStatus } from '../../runtime/events.js';
import type { Completion, RequestMetadata } from '../../runtime/provider.js';
import type { ToolResult } from '../../runtime/tools/tool.js';
import type { ModelCallRecord, Observation } from '../../store/records.js';
import type { Crossing } from './budget.js';
import type { PreparedRun } from './prepare.js';
import type { AgentRun } from './run.js';
import type { RestoredRun } from './step.js';

/** The completion a paused step kept and what it had done: the step acts on it again instead of asking. */
export type Replay = NonNullable<RestoredRun['draft']>;

/** How the run ends with a step. */
export interface Final {
  status: RunStatus;
  reply: string | null;
  reason?: string;
}

/** One step in progress, from the answer it acts on to its commit. */
export interface Step {
  readonly replay: Replay | null;
  readonly completion: Completion;
  /** The refusal of a call to a tool the run withholds (masked, or of a tier this request did not offer); null when it may run. */
  readonly withheld: (name: string) => ToolResult | null;
  /** The estimate, in tokens, of the request the completion answered: what collapse measures against. */
  readonly requestTokens: number;
  /** The step's model calls: the failed tries and the answer, then a review's. */
  readonly calls: ModelCallRecord[];
  /** What the model reads next: the calls' results, then feedback and refreshes. */
  readonly observations: Observation[];
  /** Why the step stopped before its calls were done (a person, a halt), or null while it goes on. */
  stop: string | null;
  /** How the run ends with this step, or null when it goes on. */
  final: Final | null;
}

/**
 * What one step comes to: the run goes on to its `next` step, has `ended` (its status is
 * in the store), or has `paused` on a question a person answers before it resumes.
 */
export type StepOutcome =
  | { kind: 'next' }
  | { kind: 'ended'; status: RunStatus }
  | { kind: 'paused'; questionId: string };

export type Ended = Extract<StepOutcome, { kind: 'ended' }>;

/** What a stage hands back is an outcome (the step stops there) rather than what the next stage takes. */
export function isOutcome<T extends object>(value: T | StepOutcome): value is StepOutcome {
  return 'kind' in value;
}

export function ended(status: RunStatus): Ended {
  return { kind: 'ended', status };
}

/** Ends the run with no step of its own: what it had streamed reaches its listeners first. */
export async function endRun(
  agent: AgentRun,
  status: RunStatus,
  reason: string,
  events: EventData[] = [],
  calls: ModelCallRecord[] = [],
): Promise<Ended> {
  await agent.ports.live?.flush();
  await agent.store.call('endRun', {
    ...agent.fence,
    status,
    reply: null,
    reason,
    events,
    ...(calls.length > 0 ? { calls } : {}),
    now: agent.clock.now(),
  });
  return ended(status);
}

/** Ends the run on a ceiling its next step would cross, with what that step had (its model calls, their events). */
export function exhaust(
  agent: AgentRun,
  crossing: Crossing,
  events: EventData[],
  calls: ModelCallRecord[],
): Promise<Ended> {
  const reason = `the ${crossing.ceiling} ceiling of run ${crossing.account} would be crossed`;
  return endRun(agent, 'budget-exhausted', reason, [...events, crossing], calls);
}

/** What a request says of the run that sends it, for the vendor's logs and the embedder's hooks. */
export function metadataOf(run: PreparedRun): RequestMetadata {
  const { agent, parentAddress } = run;
  const record = agent.run;
  return {
    runId: record.runId,
    rootId: record.rootId,
    address: record.address,
    parentAddress,
    depth: record.depth,
    seq: agent.seq,
  };
}
