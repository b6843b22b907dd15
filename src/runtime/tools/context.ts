/**
 * What an agent's tools see of the run they are called in: the run in progress
 * ({@link RunContext}: its store, host channel and clock, its record and lease, the step
 * under way), and the step context each call is given ({@link AgentCall}), built here
 * from the run so every tool reaches the policy, the approver, the intent journal and
 * the trace the same way. The agent actor's run implements {@link RunContext}.
 */

import type { Clock } from '../../clock.js';
import type { StorePort } from '../../store/port.js';
import type { Fence, FileDiff, RunRecord, SentMessage } from '../../store/records.js';
import type { AgentDefinition } from '../agents.js';
import type { ContractData } from '../contract/contract.js';
import type { EventData } from '../events.js';
import type { CommandCheck } from '../policy/commands/index.js';
import type { Act, Policy, PolicyData } from '../policy/policy.js';
import type { Completion, ToolCall } from '../provider.js';
import type { SkillData } from '../skills.js';
import type { WorkspaceSession } from '../workspace/session.js';
import { type CallAt, decisionHost, settleCommand, settleDecision } from './decisions.js';
import type { ToolTiers } from './families/tiers.js';
import { intent } from './intents.js';
import type { AgentHost } from './ports.js';
import type { StepContext, ToolResult } from './tool.js';

/** The step in progress, as far as its tools change it: what it has done, committed with it. */
export interface StepEffects {
  /** Messages read in this step (consumed when it commits). */
  consumed: string[];
  /** Messages sent in this step (delivered when it commits). */
  sent: SentMessage[];
  /** Children spawned without a wait, started when the step commits. */
  spawned: string[];
  events: EventData[];
  changes: FileDiff[];
  /** The calls of the completion being dispatched. */
  calls: ToolCall[];
  /** The completion the step acts on. */
  completion: Completion | null;
  /** Spawns without `wait` reserved ahead, by call index (see families/tree.ts `reserveAhead`). */
  reservations: Map<number, Promise<unknown>>;
}

/** What the parts of an agent's loop (people, tree tools, gates) see of the run in progress. */
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
  readonly step: StepEffects;
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
 * The step context a workspace tool is called with: the step's own (policy, approver,
 * intents, restore points, trace) and the run's workspace session, which is null outside
 * a workspace run.
 */
export interface WorkspaceCall extends StepContext {
  readonly workspace: WorkspaceSession | null;
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
  /** How a program this call runs makes its acts (`run_program`'s); absent for any other call, and for an act. */
  readonly acts?: ProgramActs;
}

/**
 * The acts of the program one call runs (see ../codeact/): the tools it may call, and each
 * call it makes, dispatched as the model's own calls are, under the program's call.
 */
export interface ProgramActs {
  /** The tools a program may call in this step, each with its parameters in the order positional arguments fill them. */
  tools(): Record<string, string[]>;
  /** Makes act `act` (from 0) of the program: its tool's answer, refusal or halt. */
  call(act: number, name: string, args: Record<string, unknown>): Promise<ToolResult>;
}

/** Waits up to `ms` for mail to this agent, or a cancel, whichever is first. */
export interface MailWait {
  /** Resolves `woken` at mail or a cancel, `elapsed` when `ms` passed first. */
  wait(ms: number): Promise<'woken' | 'elapsed'>;
}

/** What a call's step context is built from besides the run. */
export interface CallParts {
  /** Where the call is in its completion, and its id. */
  index: number;
  callId: string;
  /** The result the same call already has from being started early, or undefined (see {@link StepContext.started}). */
  started: ToolResult | Promise<ToolResult> | undefined;
  workspace: WorkspaceSession | null;
  mail: MailWait;
  /** What decides the run's acts; null when everything is allowed (a run without a contract or policy). */
  policy: Policy | null;
  /**
   * For an act of a program: its number in the program and a fingerprint of what it asks
   * (its tool and whole arguments). A question is keyed by both, so a person's answer covers
   * that act only; an intent by its place, its detail carrying the fingerprint (see {@link CallAt}).
   */
  act?: { number: number; fingerprint: string };
  /** For a call that runs a program: how its acts are made. */
  acts?: ProgramActs;
}

/**
 * The step context of one call: what its tool may do beyond computing its result. Its
 * decisions are settled against the run's policy and recorded in the step under way, an
 * ask goes to the tree's approver, an effect is journaled as the run's intent, and a
 * restore point is stored fenced by the run's lease.
 */
export function callContext(agent: RunContext, parts: CallParts): AgentCall {
  const { index, policy } = parts;
  const act = parts.act;
  const at: CallAt = act === undefined ? index : `${index}.${act.number}#${act.fingerprint}`;
  const decisions = decisionHost(agent);
  const root = agent.contract?.root ?? '/';
  return {
    callIndex: index,
    callId: parts.callId,
    get signal() {
      return agent.signal;
    },
    get planning() {
      return agent.planning;
    },
    ...(act === undefined ? {} : { act: act.number }),
    started: parts.started,
    agent,
    ...(parts.acts ? { acts: parts.acts } : {}),
    workspace: parts.workspace,
    mail: parts.mail,
    decide: (act: Act) => (policy ? policy.decide(act, root).effect : 'allow'),
    authorize: async (act: Act) => (policy ? settleDecision(decisions, act, policy.decide(act, root), [], at) : null),
    authorizeCommand: (act: Act, check: CommandCheck) => settleCommand(decisions, act, check, at),
    intent: (kind: string, detail: string, run: () => Promise<ToolResult>) =>
      intent(agent, at, kind, act === undefined ? detail : `${detail} [act ${act.fingerprint}]`, run),
    restorePoint: async (path: string, content: Uint8Array | null) => {
      await agent.store.call('recordRestorePoint', {
        ...agent.fence,
        seq: agent.seq,
        workspace: (agent.contract as ContractData).root,
        path,
        content,
        now: agent.clock.now(),
      });
    },
    record: (event: EventData) => agent.step.events.push(event),
    change: (change: { path: string; diff: string }) => agent.step.changes.push(change),
  };
}
