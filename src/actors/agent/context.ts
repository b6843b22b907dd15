/** What the parts of an agent's loop (people, tree tools, gates) see of the run in progress. */

import type { Clock } from '../../clock.js';
import type { AgentDefinition } from '../../runtime/agents.js';
import type { ContractData } from '../../runtime/contract/contract.js';
import type { PolicyData } from '../../runtime/policy/policy.js';
import type { SkillData } from '../../runtime/skills.js';
import type { WorkspaceCall } from '../../runtime/workspace/session.js';
import type { StorePort } from '../../store/port.js';
import type { RunRecord } from '../../store/reader.js';
import type { Fence } from '../../store/records.js';
import type { AgentHost } from './ports.js';
import type { StepState } from './step.js';
import type { ToolTiers } from './tiers.js';

/**
 * Where a run stands, as the parts of it that ask see it:
 * - `preparing`: restored from the trace, before its first step;
 * - `planning`: a root opened with a plan gate, before a plan is approved: it may read, and
 *   leaves this phase only through an approved plan;
 * - `working`: its steps act;
 * - `cancelling`: asked to stop: the step in flight stops at its next call and commits what
 *   it did, and the run ends as cancelled;
 * - `ended`: it has left (ended, paused, lost its lease or failed): nothing more is done.
 */
export type Phase = 'preparing' | 'planning' | 'working' | 'cancelling' | 'ended';

export interface RunContext {
  readonly store: StorePort;
  readonly host: AgentHost;
  readonly clock: Clock;
  readonly run: RunRecord;
  /** The lease every write of this run is fenced by. */
  readonly fence: Fence;
  /** The step in progress. */
  readonly seq: number;
  readonly step: StepState;
  /** Fires at a cancel and at the step's deadline. */
  readonly signal: AbortSignal;
  readonly phase: Phase;
  /** The run is asked to stop (its phase is `cancelling`). */
  readonly cancelled: boolean;
  readonly contract: ContractData | null;
  /** The run's policy as stored (a child's is its parent's, narrowed). */
  readonly policyData: PolicyData | null;
  /** A run opened with a plan gate is planning until a plan is approved (its phase is `planning`). */
  readonly planning: boolean;
  /** A plan was approved: the run leaves its planning phase. */
  approvePlan(): void;
  /** The skills the run's spec carries (a root's: a child is offered none), sorted by name. */
  readonly skills: readonly SkillData[];
  /** Whether the tree has an approver to put an ask to (without one an ask is refused, saying so). */
  readonly approver: boolean;
  /** The named agents a spawn may ask for (the tree's roster), sorted by name. */
  readonly agents: readonly AgentDefinition[];
  /** The run's tool tiers (a contract's `withToolTiers()`), or null when every tool is offered from the start. */
  readonly tiers: ToolTiers | null;
}

/**
 * The step context every tool of an agent is called with: the step's own (see
 * {@link StepContext}), the run's workspace session (null outside a workspace run), and
 * the run in progress, for the tools that act on the tree.
 */
export interface AgentCall extends WorkspaceCall {
  readonly agent: RunContext;
  /** An inbox wait, woken when mail for this agent is committed. */
  readonly mail: MailWait;
}

/** Waits up to `ms` for mail to this agent, or a cancel, whichever is first. */
export interface MailWait {
  wait(ms: number): Promise<void>;
}
