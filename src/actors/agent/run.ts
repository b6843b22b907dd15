/**
 * One run in progress, as everything in its step sees it: its ports, its phase, what it
 * was equipped with when it was prepared (its record, contract, policy, workspace and
 * executor), the step under way and the step's deadline. It holds no thread and no module
 * state: a worker hosts it and a test runs it in the test's own thread alike.
 */
import { ErrorCode, HarnessError } from '../../errors.js';
import type { AgentDefinition } from '../../runtime/agents.js';
import type { ContractData } from '../../runtime/contract/contract.js';
import type { Executor } from '../../runtime/exec/executor.js';
import type { Policy, PolicyData } from '../../runtime/policy/policy.js';
import { type HostModelChannel, hostModelChannel } from '../../runtime/providers/host-model.js';
import type { SkillData } from '../../runtime/skills.js';
import type { Phase, RunContext } from '../../runtime/tools/context.js';
import type { ToolTiers } from '../../runtime/tools/families/tiers.js';
import { MailWake } from '../../runtime/tools/families/tree.js';
import type { WorkspaceSession } from '../../runtime/workspace/session.js';
import type { RunRecord } from '../../store/records.js';
import type { AgentInput } from '../agent.js';
import { Deadline, type FirstWall } from './budget.js';
import type { AgentPorts } from './ports.js';
import { StepState } from './step.js';

export type AgentStart = Extract<AgentInput, { type: 'start' }>;

/** What a run is equipped with once it is restored from the trace (see prepareRun); set once, before its first step. */
export interface Equipment {
  run: RunRecord;
  contract: ContractData | null;
  /** The run's policy as stored (a child's is its parent's, narrowed). */
  policyData: PolicyData | null;
  /**
   * What decides the run's acts, built once from its data: its policy, or for a workspace
   * run without one the default policy; null (everything allowed) otherwise.
   */
  policy: Policy | null;
  workspace: WorkspaceSession | null;
  /**
   * What starts the run's commands: the executor the ports give (used as it is: whoever
   * gives one contains it), else the factory's for the run's contract and policy. None for
   * a run without a contract, which starts no process.
   */
  executor: Executor | null;
  skills: readonly SkillData[];
  agents: readonly AgentDefinition[];
  tiers: ToolTiers | null;
  /** The phase it starts its steps in: `planning` until a plan gate approves a plan. */
  phase: 'planning' | 'working';
}

/** The run: its context for the parts that ask (people, tree tools, gates), and the handle the host controls it by. */
export class AgentRun implements RunContext {
  readonly start: AgentStart;
  readonly ports: AgentPorts;
  /** An inbox wait, woken when mail for this agent is committed or the run is cancelled. */
  readonly mail = new MailWake();
  readonly step = new StepState();
  /** The step in progress; a stage moves it on as it commits. */
  seq = 0;
  #phase: Phase = 'preparing';
  /** Fires at a cancel: the base of every step's signal. */
  readonly #abort = new AbortController();
  /** What ended the run when it is cancelled: the supervisor, or what asked it to (a hook, by name). */
  #cancelReason = 'cancelled by the supervisor';
  #deadline: Deadline;
  #equipment: Equipment | null = null;

  constructor(start: AgentStart, ports: AgentPorts) {
    this.start = start;
    this.ports = ports;
    this.#deadline = new Deadline(this.#abort.signal, ports.clock, null);
  }

  get store() {
    return this.ports.store;
  }
  get host() {
    return this.ports.host;
  }
  /** The tree's host models, as this run reaches them: over its host channel. */
  get hostModels(): HostModelChannel {
    return hostModelChannel(this.ports.host, this.start.runId);
  }
  get clock() {
    return this.ports.clock;
  }
  get phase(): Phase {
    return this.#phase;
  }
  get fence() {
    return { runId: this.start.runId, generation: this.start.generation, owner: this.start.owner };
  }
  get approver(): boolean {
    return this.start.approver !== false;
  }
  get cancelled(): boolean {
    return this.#phase === 'cancelling';
  }
  get cancelReason(): string {
    return this.#cancelReason;
  }
  get planning(): boolean {
    return this.#phase === 'planning';
  }
  get signal(): AbortSignal {
    return this.#deadline.signal;
  }
  /** The deadline of the step under way (see {@link arm}). */
  get deadline(): Deadline {
    return this.#deadline;
  }

  get run(): RunRecord {
    return this.#equipped.run;
  }
  get contract(): ContractData | null {
    return this.#equipment?.contract ?? null;
  }
  get policyData(): PolicyData | null {
    return this.#equipment?.policyData ?? null;
  }
  get policy(): Policy | null {
    return this.#equipment?.policy ?? null;
  }
  get workspace(): WorkspaceSession | null {
    return this.#equipment?.workspace ?? null;
  }
  get executor(): Executor | null {
    return this.#equipment?.executor ?? null;
  }
  get skills(): readonly SkillData[] {
    return this.#equipment?.skills ?? [];
  }
  get agents(): readonly AgentDefinition[] {
    return this.#equipment?.agents ?? [];
  }
  get tiers(): ToolTiers | null {
    return this.#equipment?.tiers ?? null;
  }

  get #equipped(): Equipment {
    if (!this.#equipment) throw new HarnessError(ErrorCode.Internal, 'the run was read before it was prepared');
    return this.#equipment;
  }

  /** Equips the run as prepareRun found it; a cancel that came meanwhile stands. */
  equip(equipment: Equipment): void {
    this.#equipment = equipment;
    if (this.#phase === 'preparing') this.#phase = equipment.phase;
  }

  approvePlan(): void {
    if (this.#phase === 'planning') this.#phase = 'working';
  }

  /** Mail was committed to this agent's address. */
  wakeMail(): void {
    this.mail.wake();
  }

  /** Stop at the next step boundary (and stop what the step started) and end the run as cancelled. */
  cancel(reason?: string): void {
    if (this.#phase !== 'cancelling' && this.#phase !== 'ended') {
      if (reason) this.#cancelReason = reason;
      this.#phase = 'cancelling';
    }
    this.#abort.abort();
    this.mail.wake();
  }

  /** Arms the next step's deadline at the wall-clock ceiling that comes first (none: only a cancel stops it). */
  arm(first: FirstWall | null): void {
    this.#deadline.disarm();
    this.#deadline = new Deadline(this.#abort.signal, this.clock, first);
  }

  /** The run has left: its deadline is disarmed and whatever shell_start began dies with it. */
  async close(): Promise<void> {
    this.#phase = 'ended';
    this.#deadline.disarm();
    await this.#equipment?.workspace?.close();
  }
}
