/**
 * The agent loop: observe, reason, act, check, stop. One {@link AgentRun} drives one run
 * from where the trace leaves it to its end, a pause, or a lost lease, against the ports
 * it is given (see ./ports.ts): it holds no thread and no module state, so a worker hosts
 * it and a test runs it in-process alike.
 */
import { createHash } from 'node:crypto';
import { ErrorCode, HarnessError, serializeError } from '../../errors.js';
import { type AgentDefinition, rosterCatalogue } from '../../runtime/agents.js';
import { DEFAULT_SHARE } from '../../runtime/context/assembler.js';
import {
  DEFAULT_MEMORY_SHARE,
  GLOBAL_SCOPE,
  memoryBlock,
  runTerms,
  visibleNotes,
  workspaceScope,
} from '../../runtime/context/memory.js';
import { type ContractData, contractSecrets, guidanceBlock } from '../../runtime/contract/contract.js';
import type { EventData, RunStatus } from '../../runtime/events.js';
import { containmentLine } from '../../runtime/exec/containment/contained.js';
import { keepAll, withKept } from '../../runtime/exec/containment/kept.js';
import type { Executor } from '../../runtime/exec/executor.js';
import { executorFor } from '../../runtime/exec/factory.js';
import type { CommandCheck } from '../../runtime/policy/commands.js';
import { type Act, Policy, type PolicyData } from '../../runtime/policy/policy.js';
import {
  type CallAttempt,
  type Completion,
  type CompletionHooks,
  loadProvider,
  type Provider,
  type ProviderSpec,
  type ToolCall,
  type TranscriptEntry,
} from '../../runtime/provider.js';
import { ProviderError } from '../../runtime/providers/types.js';
import { type SkillData, skillCatalogue } from '../../runtime/skills.js';
import type { Halt, ToolRegistry, ToolResult } from '../../runtime/tools.js';
import { type DecisionHost, settleCommand, settleDecision, WorkspaceSession } from '../../runtime/workspace/session.js';
import type { RunRecord } from '../../store/reader.js';
import type { ModelCallRecord, Observation, RunSpec } from '../../store/records.js';
import type { AgentInput, RunExit } from '../agent.js';
import { Assembly, findWindow, namedPaths } from './assembly.js';
import { Budget, type Crossing, Deadline } from './budget.js';
import type { AgentCall, RunContext } from './context.js';
import { egressGate } from './egress.js';
import { Freshness } from './freshness.js';
import { judge } from './gates.js';
import * as people from './people.js';
import type { AgentPorts } from './ports.js';
import {
  answeredCall,
  appendStep,
  attemptEvents,
  failedCall,
  observedName,
  providerLabel,
  sameArguments,
} from './records.js';
import { type RestoredRun, restoreRun, StepState, steerTurn } from './step.js';
import { ToolTiers } from './tiers.js';
import { defaultSystem, registryFor, workspaceSystem } from './toolset.js';
import * as tree from './tree-tools.js';

export type AgentStart = Extract<AgentInput, { type: 'start' }>;

/** The stored spec, as this loop reads it: the provider is a spec. */
type RunSpecData = RunSpec & { provider: ProviderSpec };

/** Drives one run; {@link AgentRun.run} resolves with how it left. */
export class AgentRun implements RunContext {
  readonly #start: AgentStart;
  readonly #ports: AgentPorts;
  readonly #abort = new AbortController();
  readonly #mail = new tree.MailWake();
  readonly step = new StepState();
  #run: RunRecord | null = null;
  #seq = 0;
  #cancelled = false;
  /** What ended the run when it is cancelled: the supervisor, or what asked it to (a hook, by name). */
  #cancelReason = 'cancelled by the supervisor';
  #contract: ContractData | null = null;
  #policyData: PolicyData | null = null;
  /**
   * What decides the run's acts, built once from its data: its policy, or for a
   * workspace run without one the default policy; null (everything allowed) otherwise.
   */
  #policy: Policy | null = null;
  #workspace: WorkspaceSession | null = null;
  #deadline: Deadline;
  planning = false;
  skills: readonly SkillData[] = [];
  agents: readonly AgentDefinition[] = [];
  tiers: ToolTiers | null = null;

  constructor(start: AgentStart, ports: AgentPorts) {
    this.#start = start;
    this.#ports = ports;
    this.#deadline = new Deadline(this.#abort.signal, ports.clock, null);
  }

  get store() {
    return this.#ports.store;
  }
  /**
   * What starts the run's commands: the executor the ports give (used as it is: whoever
   * gives one contains it), else the factory's for the run's contract and policy. None for
   * a run without a contract, which starts no process.
   */
  #executor: Executor | null = null;
  get host() {
    return this.#ports.host;
  }
  get clock() {
    return this.#ports.clock;
  }
  get run(): RunRecord {
    return this.#run as RunRecord;
  }
  get fence() {
    return { runId: this.#start.runId, generation: this.#start.generation, owner: this.#start.owner };
  }
  get seq(): number {
    return this.#seq;
  }
  get signal(): AbortSignal {
    return this.#deadline.signal;
  }
  get cancelled(): boolean {
    return this.#cancelled;
  }
  get approver(): boolean {
    return this.#start.approver !== false;
  }
  get contract(): ContractData | null {
    return this.#contract;
  }
  get policyData(): PolicyData | null {
    return this.#policyData;
  }

  /** Mail was committed to this agent's address. */
  wakeMail(): void {
    this.#mail.wake();
  }

  /** Stop at the next step boundary (and stop what the step started) and end the run as cancelled. */
  cancel(reason?: string): void {
    if (!this.#cancelled && reason) this.#cancelReason = reason;
    this.#cancelled = true;
    this.#abort.abort();
    this.#mail.wake();
  }

  async start(): Promise<RunExit> {
    try {
      const status = await this.#loop();
      return { kind: 'ended', status };
    } catch (error) {
      if (HarnessError.isInstance(error) && error.code === ErrorCode.LeaseLost) return { kind: 'lease-lost' };
      // A failure the run can record ends it as failed; one it cannot (the store is gone) leaves it resumable.
      // A store that is gone, a lease that moved, or a provider this process cannot build (a key it
      // does not have) are not the run's doing: the run is left as it was, to resume elsewhere.
      const leaveResumable =
        HarnessError.isInstance(error) &&
        (error.code === ErrorCode.StoreActorExited ||
          error.code === ErrorCode.Conflict ||
          error.code === ErrorCode.ProviderLoadFailed);
      if (!leaveResumable) {
        try {
          await this.store.call('endRun', {
            ...this.fence,
            status: 'failed',
            reply: null,
            reason: error instanceof Error ? error.message : String(error),
            events: [],
            now: this.clock.now(),
          });
          return { kind: 'ended', status: 'failed' };
        } catch {
          // fall through: report the original error
        }
      }
      return { kind: 'error', error: serializeError(error) };
    } finally {
      this.#deadline.disarm();
      // Whatever shell_start began dies with the run.
      await this.#workspace?.close();
    }
  }

  async #loop(): Promise<RunStatus> {
    const { store, clock } = this;
    const restored = await restoreRun(store, this.#start.runId);
    if (!restored) throw new HarnessError(ErrorCode.RunNotFound, `run ${this.#start.runId} is not in the store`);
    const run = restored.run;
    this.#run = run;
    const spec = restored.spec as RunSpecData;
    this.#seq = restored.seq;
    const contract = spec.contract ?? null;
    this.#contract = contract;
    this.#policyData = spec.policy ?? null;
    // What the harness trusts is out of its own file tools' reach too (not stored: the thread's list, each time).
    this.#policy = withKept(
      spec.policy ? Policy.from(spec.policy) : contract ? Policy.default() : null,
      contract?.root ?? '.',
    );
    let briefing: string | null = null;
    if (contract) {
      let executor: Executor;
      if (this.#ports.executor) executor = this.#ports.executor;
      else {
        try {
          executor = executorFor({
            purpose: 'run',
            contract,
            policy: this.#policy,
            egress: egressGate(this, this.#policy, contract.root, (event) => this.step.events.push(event)),
          });
        } catch (error) {
          if (!HarnessError.isInstance(error) || error.code !== ErrorCode.ContainmentUnavailable) throw error;
          // Asked for by name and not to be had: refused before the first step, never run with less.
          return this.#end('failed', error.message);
        }
      }
      this.#executor = executor;
      const secrets = contractSecrets(contract, this.#start.provider ?? spec.provider);
      this.#workspace = new WorkspaceSession(contract, this.#policy as Policy, secrets, executor);
      briefing = spec.briefing ?? this.#workspace.briefing();
    }
    const registry = registryFor(
      contract === null ? 'agent' : contract.mode,
      contract?.planGate === true,
      this.#start.tools,
      spec.spawn !== false,
      (spec.skills ?? []).length > 0,
      contract?.toolTiers === true,
      contract?.memory !== undefined,
    );
    this.skills = spec.skills ?? [];
    this.agents = spec.agents ?? [];
    this.tiers = contract?.toolTiers ? new ToolTiers(registry, restored.expanded) : null;
    // Planning until a plan is approved; a decision is in the trace of a committed step.
    if (contract?.planGate && run.parentId === null) this.planning = !restored.planApproved;
    // A session's earlier turns on this branch, then this run's own opening and steps; after
    // a fold, the opening, the fold's notes (the earlier turns are in them) and what came after.
    const earlier = run.parentId === null && !restored.folded ? (spec.history ?? []) : [];
    const transcript: TranscriptEntry[] = [
      ...earlier,
      { role: 'user', text: this.#opening(run.task, briefing) },
      ...restored.history,
    ];
    const spent = restored.spent;
    await store.call('recordEvents', {
      ...this.fence,
      events: [
        {
          type: 'run-start',
          task: run.task,
          address: run.address,
          parentId: run.parentId,
          resumed: this.#start.resumed,
        },
        // What the configuration dropped or refused of its bundles, in the root's trace once.
        ...(run.parentId === null && run.lastSeq === 0 && !this.#start.resumed
          ? (contract?.bundleProblems ?? []).map((problem) => ({ type: 'bundle-problem' as const, ...problem }))
          : []),
      ],
      now: clock.now(),
    });
    // A turn's root takes what a person sent it before it started (or while it was down): a
    // run resuming a paused step takes it once that step is committed, so the words come after it.
    const steered = run.parentId === null && spec.session !== undefined && restored.draft === null;
    if (steered) {
      const waiting = await store.call('takeSteers', { ...this.fence, now: clock.now() });
      if (waiting.interrupt) return 'interrupted';
      for (const text of waiting.steers) transcript.push(steerTurn(text));
    }
    const providerSpec = this.#start.provider ?? spec.provider;
    const provider = await loadProvider(providerSpec);
    // Cache affinity: an opaque digest of the tree, never its id or a path.
    const cacheKey = createHash('sha256')
      .update(`io-harness session ${spec.session ?? run.rootId}`)
      .digest('hex')
      .slice(0, 32);
    if (run.lastSeq === 0 && !this.#start.resumed) {
      const refused = await this.#refuseIfPrimaryUnreachable(providerSpec, provider);
      if (refused) return 'failed';
    }
    const base = spec.system ?? (contract ? workspaceSystem(contract) : defaultSystem(run));
    // One line a skill, in the spec's sorted order: the same bytes every request, so the cached prefix holds.
    const tiered = this.tiers && this.tiers.families.size > 0 ? this.tiers : null;
    const systemBase = [
      base,
      ...(contract?.instructions && contract.instructions.length > 0 ? [guidanceBlock(contract.instructions)] : []),
      ...(this.skills.length > 0 ? [skillCatalogue(this.skills)] : []),
      ...(this.agents.length > 0 && spec.spawn !== false ? [rosterCatalogue(this.agents)] : []),
      // What tiers keep back, named once: the same bytes every request of the run.
      ...(tiered ? [tiered.line()] : []),
    ].join('\n\n');
    const parentAddress = run.parentId === null ? null : ((await store.run(run.parentId))?.address ?? null);
    // Gates and the answer's shape are the root's business; children report to their parent.
    const judged = contract !== null && run.parentId === null;
    const mask = new Set(contract?.toolMask ?? []);
    const options = {
      cacheKey,
      ...(judged && contract.outputSchema ? { responseFormat: contract.outputSchema } : {}),
    };
    const budget = new Budget(store, clock, run, contract);
    // The window every request is fitted to: found once, recorded, read back on a resume.
    const window = await findWindow(this, providerSpec, this.#policy, restored.window);
    if (typeof window === 'string') return this.#end('failed', window);
    const assembly = new Assembly(
      window,
      contract?.context?.share ?? DEFAULT_SHARE,
      restored,
      earlier.length,
      contract?.context,
      systemBase,
    );
    if (contract?.memory) await this.#memory(contract, assembly, restored, transcript);
    // The system block: the run's own and its memory block, until a reduce cuts the block.
    let system = assembly.system;
    // The files the run has read whole, so one that changes after is read again for the model.
    const workspace = this.#workspace;
    const freshness = workspace
      ? new Freshness((path) => {
          const resolved = workspace.workspace.resolve(path);
          return resolved.ok ? { relative: resolved.relative, absolute: resolved.absolute } : null;
        })
      : null;
    const changedIn = (events: readonly EventData[]) =>
      events.flatMap((event) => (event.type === 'file-changed' ? [{ callId: event.callId, path: event.path }] : []));
    for (const step of restored.steps)
      freshness?.note(step.seq, step.completion.toolCalls, step.observations, changedIn(restored.stepEvents(step.seq)));
    let roomChecked = false;

    // A step a crash interrupted after it had written files (and that did not pause) is
    // re-run from the committed state: put those files back first.
    if (this.#workspace) {
      // (A pause clears the images of what its step had done: those calls are not made again.)
      const images = await store.stepImages(run.runId, this.#seq);
      if (images.length > 0) {
        const paths = this.#workspace.rollBack(images);
        await store.call('clearStepImages', { ...this.fence, seq: this.#seq, paths, now: clock.now() });
      }
    }

    // Escalation: once the gate has failed often enough, a stronger model answers. Counted
    // from the trace like the re-prompts, so a resumed run stays escalated.
    const escalation = judged ? (contract.escalation ?? null) : null;
    let stronger: Provider | null = null;
    let announced = escalation !== null && restored.escalated;
    let pending: RestoredRun['draft'] = restored.draft;

    for (;;) {
      if (this.#cancelled) return this.#end('cancelled', this.#cancelReason);
      // A step whose effects had begun (a journaled command, a pause) acts on the completion it had;
      // it was admitted when it began, so the time it spent paused is not charged.
      const replay = pending && pending.seq === this.#seq ? pending : null;
      pending = null;
      const checked = replay ? null : await budget.precheck();
      if (checked?.crossing) return this.#exhaust(checked.crossing, [], []);
      // The wall clock holds inside the step too. A replayed step is not held to it, as it is
      // not checked against it above; the next step's check is.
      this.#deadline.disarm();
      this.#deadline = new Deadline(this.#abort.signal, clock, checked ? checked.firstWall : null);
      let model = provider;
      let escalated: EventData | null = null;
      if (escalation && spent.gate >= escalation.afterGateFailures) {
        // Built only for a call it will make: a replayed step makes none.
        if (!replay) {
          stronger ??= await loadProvider(escalation.provider);
          model = stronger;
        }
        if (!announced) {
          announced = true;
          escalated = {
            type: 'model-escalated',
            from: providerLabel(providerSpec),
            to: providerLabel(escalation.provider),
            gateFailures: spent.gate,
          };
        }
      }
      this.step.early = new Map();
      // The tiers this request offers: a family opened during the step is offered from the next.
      const offered = tiered?.offered();
      // A paused step's own expand_tools call is not made again on its replay: what it opened
      // is offered from the next step, as it would have been.
      if (replay && tiered) tiered.open(restored.draftExpanded);
      const withheld = (name: string) => withheldBy(mask, offered, registry, name);
      const draft = replay?.partial ?? null;
      let completion: Completion;
      const live = this.#ports.live;
      const assembled: EventData[] = [];
      let requestTokens = 0;
      try {
        if (replay) completion = replay.completion;
        else {
          const tools = registry.definitions(offered);
          if (!roomChecked) {
            roomChecked = true;
            const refused = assembly.noRoom(system, tools, transcript);
            if (refused) return this.#end('failed', refused);
          }
          const metadata = () => ({
            runId: run.runId,
            rootId: run.rootId,
            address: run.address,
            parentAddress,
            depth: run.depth,
            seq: this.#seq,
          });
          // Over its share: the rungs the contract turns on, then a fold, each stored as a step of its own.
          const folded = await assembly.fit(this, model, { system, tools, options, metadata: metadata() }, transcript);
          if (folded.kind === 'ended') return folded.status;
          if (folded.kind === 'folded') this.#seq += folded.steps;
          system = assembly.system;
          const broke = assembly.checkPrefix(system, tools, transcript);
          if (broke) assembled.push(broke);
          const measured = assembly.measure(system, tools, transcript);
          requestTokens = measured.tokens;
          live?.publish({ type: 'model-call-start', seq: this.#seq });
          const breakpoint = assembly.breakpoint();
          completion = await model.complete(
            {
              system,
              transcript,
              tools,
              options: breakpoint === null ? options : { ...options, cacheBreakpoint: breakpoint },
              metadata: metadata(),
            },
            this.signal,
            this.#hooks(withheld, registry),
          );
          completion = { ...completion, requestChars: measured.chars };
          const missed = assembly.answered(completion, measured.chars);
          if (missed) assembled.push(missed);
        }
      } catch (error) {
        if (this.#cancelled) return this.#end('cancelled', this.#cancelReason);
        const overdue = this.#deadline.overdue;
        if (overdue) {
          // The deadline aborted the call: the step is not committed, as when a call fails; earlier tries are in the trace.
          const tried =
            (HarnessError.isInstance(error) ? (error.details.attempts as CallAttempt[] | undefined) : []) ?? [];
          return this.#exhaust(
            overdue,
            [...(escalated ? [escalated] : []), ...attemptEvents(tried, null)],
            tried.map(failedCall),
          );
        }
        if (!HarnessError.isInstance(error) || error.code !== ErrorCode.ProviderFailed) throw error;
        // Every try failed: the step is not committed; the tries are the trace of why.
        const attempts = (error.details.attempts as CallAttempt[] | undefined) ?? [];
        await live?.flush();
        await store.call('endRun', {
          ...this.fence,
          status: 'failed',
          reply: null,
          reason: `the model call failed: ${error.message}`,
          events: [...(escalated ? [escalated] : []), ...attemptEvents(attempts, null)],
          calls: attempts.map(failedCall),
          now: clock.now(),
        });
        return 'failed';
      }
      // Before anything of the step is stored: a call far over its tool's limits keeps only its start.
      completion = { ...completion, toolCalls: completion.toolCalls.map((call) => registry.screen(call)) };
      const attempts = replay ? [] : (completion.attempts ?? []);
      // The draw is known now: a step that cannot be charged runs none of its tools.
      const over = replay ? null : await budget.wouldCross(completion);
      if (over) {
        return this.#exhaust(
          over,
          [...(escalated ? [escalated] : []), ...attemptEvents(attempts, completion.provider ?? model.name)],
          [...attempts.map(failedCall), answeredCall(completion, model.name)],
        );
      }
      // A turn's first completion decides what the turn is: stopped on text, it is a reply, and
      // ends here with no step (its tokens drawn, its call recorded); a tool call makes it work.
      if (
        spec.reply === true &&
        run.parentId === null &&
        // A contract that judges the answer (a gate, a plan gate, a shape) is never skipped by a reply.
        (contract === null ||
          (contract.verification.kind === 'none' && !contract.planGate && contract.outputSchema === null)) &&
        this.#seq === 1 &&
        !replay &&
        !this.#cancelled &&
        !this.#deadline.overdue &&
        completion.toolCalls.length === 0
      ) {
        await live?.flush();
        const ended = await store.call('endReply', {
          ...this.fence,
          completion,
          calls: [...attempts.map(failedCall), answeredCall(completion, model.name)],
          events: [...(escalated ? [escalated] : []), ...attemptEvents(attempts, completion.provider ?? model.name)],
          now: clock.now(),
        });
        return ended.status === 'finished' ? 'finished' : 'budget-exhausted';
      }
      this.step.begin(completion, draft, [
        ...assembled,
        ...(escalated ? [escalated] : []),
        ...attemptEvents(attempts, completion.provider ?? model.name),
      ]);
      const calls = draft ? [...draft.calls] : [...attempts.map(failedCall), answeredCall(completion, model.name)];
      const observations: Observation[] = draft ? [...draft.observations] : [];
      let stopReason: string | null = null;
      for (const [index, call] of completion.toolCalls.entries()) {
        // Calls a paused step had already made are not made again.
        if (index < observations.length) continue;
        this.#deadline.fireIfDue();
        if (this.#cancelled || this.#deadline.overdue) break;
        const mark = this.step.events.length;
        this.step.events.push({
          type: 'tool-call',
          callId: call.id,
          name: call.name,
          args: call.args,
          ...(call.invalid ? { invalid: call.invalid } : {}),
        });
        let result: ToolResult;
        const refused = withheld(call.name);
        if (refused) {
          result = refused;
        } else if (call.invalid) {
          result = { content: call.invalid.reason, isError: true };
        } else {
          const seq = this.#seq;
          // A run of spawns without wait is reserved together, each call taking its own reply.
          tree.reserveAhead(this, completion.toolCalls, index, (at) => {
            const next = completion.toolCalls[at] as ToolCall;
            return withheld(next.name) === null && !next.invalid && registry.accepts(next.name, next.args);
          });
          live?.publish({ type: 'tool-call-start', seq, callId: call.id, name: call.name, index });
          result = await this.#deadline.hold(registry.dispatch(call.name, call.args, this.#call(index, call)));
          if (!result.halt) {
            live?.publish({
              type: 'tool-call-end',
              seq,
              callId: call.id,
              name: call.name,
              index,
              isError: result.isError,
            });
          }
        }
        const halt: Halt | undefined = result.halt;
        if (halt?.kind === 'pause' && this.#cancelled) {
          stopReason = this.#cancelReason;
          break;
        }
        if (halt?.kind === 'pause') {
          await live?.flush();
          await store.call('pause', {
            ...this.fence,
            seq: this.#seq,
            completion,
            partial: this.step.draft(observations, calls, mark),
            question: halt.question,
            events: halt.events,
            now: clock.now(),
          });
          return 'paused';
        }
        if (halt?.kind === 'stop') {
          // Ended by a person (a cancel, a cancelled plan, an aborted command): the step commits what it did.
          stopReason = halt === people.CANCELLED ? this.#cancelReason : halt.reason;
          break;
        }
        if (result.refusal) {
          this.step.events.push({
            type: 'refusal',
            callId: call.id,
            tool: call.name,
            rule: result.refusal.rule,
            layer: result.refusal.layer ?? 'runtime',
            reason: result.refusal.reason,
          });
        }
        observations.push({
          callId: call.id,
          name: observedName(call.name),
          content: result.content,
          isError: result.isError,
          ...(result.images ? { images: result.images } : {}),
        });
      }
      let final: { status: RunStatus; reply: string | null; reason?: string } | null =
        completion.toolCalls.length === 0 ? { status: 'finished' as const, reply: completion.text } : null;
      if (final && judged && !this.#cancelled && stopReason === null && !this.#deadline.overdue) {
        // A gate the deadline stopped (its command killed, its review call aborted) ends the run on the ceiling below.
        const verdict = await judge(
          this,
          { workspace: this.#workspace, reviewer: this.#start.reviewer, executor: this.#executor },
          contract,
          completion,
          spent,
          calls,
        ).catch((error: unknown) => {
          if (this.#deadline.overdue) return null;
          throw error;
        });
        if (verdict?.feedback) {
          observations.push(verdict.feedback);
          final = null;
        } else if (verdict) {
          final = verdict.final;
        }
      }
      const overdue = this.#cancelled || stopReason !== null ? null : this.#deadline.overdue;
      if (this.#cancelled || stopReason !== null || overdue) {
        // A cancel, or the wall clock running out, mid-step commits what the step did (its
        // writes are in the files, so their diffs belong in the trace); the calls it did not
        // reach say so.
        const reason =
          stopReason ??
          (overdue ? `the wallMs ceiling of run ${overdue.account} was reached during a step` : this.#cancelReason);
        for (const call of completion.toolCalls.slice(observations.filter((o) => !o.name.startsWith('@')).length)) {
          observations.push({
            callId: call.id,
            name: observedName(call.name),
            content: `not run: ${reason}`,
            isError: true,
          });
        }
        final = { status: overdue ? 'budget-exhausted' : 'cancelled', reply: null, reason };
        if (overdue) this.step.events.push(overdue);
      }
      // A file read earlier that has changed since is read again, after the step's results.
      if (freshness && workspace && final === null)
        observations.push(
          ...freshness.stale(
            this.#seq,
            // A refresh is a read like any other: decided by the policy first.
            (path) =>
              this.#policy?.decide({ kind: 'read', path }, workspace.workspace.root).effect === 'allow'
                ? workspace.readNow({ path }, path)
                : { content: `the policy does not let ${path} be read`, isError: true },
            new Set(this.step.changes.map((change) => change.path)),
          ),
        );
      const step = this.step;
      // A result too long for its part of a request is sent shortened (collapse), from its first sending.
      const collapsed = assembly.collapse(observations, requestTokens);
      if (collapsed) step.events.push(collapsed);
      // What the step streamed reaches its listeners before the step's committed events do.
      await live?.flush();
      const result = await store.call('commitStep', {
        ...this.fence,
        seq: this.#seq,
        completion,
        observations,
        usage: completion.usage,
        consumed: step.consumed,
        sent: step.sent,
        spawned: step.spawned,
        changes: step.changes,
        events: step.events,
        calls,
        final,
        now: clock.now(),
      });
      if (result.status === 'exhausted') return 'budget-exhausted';
      if (result.status === 'interrupted') return 'interrupted';
      appendStep(transcript, completion, observations);
      assembly.stepShown(this.#seq);
      freshness?.note(this.#seq, completion.toolCalls, observations, changedIn(step.events));
      if (result.status === 'committed') for (const text of result.steers ?? []) transcript.push(steerTurn(text));
      this.#seq++;
      if (final) return final.status;
    }
  }

  /** What the model call reports as it streams: reads to start early, and text for the live channel. */
  #hooks(
    withheld: (name: string) => ToolResult | null,
    registry: ToolRegistry<AgentCall>,
  ): CompletionHooks | undefined {
    const live = this.#ports.live;
    const seq = this.#seq;
    const early = this.#workspace !== null || (this.#start.tools ?? []).some((tool) => tool.effect === 'reads');
    if (!early && !live) return undefined;
    return {
      ...(early ? { onToolCall: (call, index) => this.#startEarly(call, index, withheld, registry) } : {}),
      ...(live ? { onText: (text) => live.publish({ type: 'text-delta', seq, text }) } : {}),
    };
  }

  /**
   * The memory block the run's requests carry: read back from the trace on a resume (the
   * same bytes, whatever the memory holds by now); at the start, the workspace's notes
   * and the global ones fitted to the block's share, recorded with the notes it carried
   * as drawn on by this run.
   */
  async #memory(contract: ContractData, assembly: Assembly, restored: RestoredRun, transcript: TranscriptEntry[]) {
    const store = this.store;
    if (restored.memory !== null) {
      assembly.useMemory({ ...restored.memory, goal: contract.goal });
      return;
    }
    const notes = visibleNotes(await store.notes([GLOBAL_SCOPE, workspaceScope(contract.root)]));
    const share = contract.memory?.share ?? DEFAULT_MEMORY_SHARE;
    const block = memoryBlock(notes, runTerms(contract.goal, namedPaths(transcript)), assembly.memoryRoom(share));
    assembly.useMemory({ text: block.text, notes: block.kept, goal: contract.goal });
    await store.call('recordEvents', {
      ...this.fence,
      events: [
        {
          type: 'memory-block',
          notes: block.kept.map((note) => note.key),
          held: notes.length,
          chars: block.text.length,
          text: block.text,
          kept: block.kept,
        },
      ],
      now: this.clock.now(),
    });
    if (block.kept.length > 0)
      await store.call('drawNotes', {
        by: this.fence,
        noteIds: block.kept.map((note) => note.id),
        how: 'block',
        now: this.clock.now(),
      });
  }

  /** A fallback chain that asks for it refuses to start when its primary cannot be reached. */
  async #refuseIfPrimaryUnreachable(providerSpec: ProviderSpec, provider: Provider): Promise<boolean> {
    if (providerSpec.kind !== 'fallback' || !providerSpec.refuseIfPrimaryUnreachable || !provider.probe) return false;
    const refusal = await provider.probe(this.#abort.signal).then(
      () => null,
      (error: unknown) => error,
    );
    if (!(refusal instanceof ProviderError) || refusal.kind !== 'connection') return false;
    const primary = providerSpec.providers[0];
    const name =
      primary && primary.kind !== 'module' && primary.kind !== 'fallback'
        ? (primary.name ?? primary.preset ?? primary.kind)
        : refusal.provider;
    const reason = `refused to start: the primary provider ${name} is unreachable (${refusal.message})`;
    await this.store.call('endRun', {
      ...this.fence,
      status: 'failed',
      reply: null,
      reason,
      events: [{ type: 'provider-unreachable', provider: name, message: refusal.message }],
      now: this.clock.now(),
    });
    return true;
  }

  /** The first user turn: the task, and for a workspace run where it is and what is withheld. */
  #opening(task: string, briefing: string | null): string {
    if (!this.#contract || !this.#workspace) return task;
    const parts = [task, briefing ?? this.#workspace.briefing()];
    const contained = this.#executor?.contained?.();
    if (contained) parts.push(containmentLine(contained));
    // The mask is stated here, past the cache breakpoint, so the tool definitions never change.
    if (this.#contract.toolMask.length > 0) {
      parts.push(
        `These tools are withheld for this run; a call to one is refused: ${this.#contract.toolMask.join(', ')}.`,
      );
    }
    return parts.join('\n\n');
  }

  /**
   * A call the stream has finished, at the head of the completion, that its tool can start
   * now (it only reads, and the policy allows it outright): started. Its result is used
   * only if the finished completion asks for the same call with the same arguments;
   * otherwise it is dropped unrecorded.
   */
  #startEarly(
    call: ToolCall,
    index: number,
    withheld: (name: string) => ToolResult | null,
    registry: ToolRegistry<AgentCall>,
  ): void {
    const early = this.step.early;
    // A new attempt (a retry, a fallback) starts its calls from index 0: nothing of an earlier attempt is reused.
    if (index === 0) early.clear();
    if (index !== early.size || withheld(call.name) !== null) return;
    let result: ToolResult | Promise<ToolResult> | null;
    try {
      result = registry.startEarly(call.name, call.args, this.#call(index, call, false));
    } catch {
      // A start that throws is simply not started early.
      return;
    }
    if (result === null) return;
    // Awaited only when the finished completion makes this call; otherwise its outcome is dropped.
    if (result instanceof Promise) result.catch(() => undefined);
    early.set(index, { call, result });
  }

  /**
   * The step context of the call at `index`: what its tool may do beyond computing its
   * result. `dispatched` is false for a call started while its completion streams, which
   * has no result of its own to pick up.
   */
  #call(index: number, call: ToolCall, dispatched = true): AgentCall {
    const self = this;
    const decisions: DecisionHost = {
      ask: (act, decision, callIndex) => people.ask(self, act, decision, callIndex),
      event: (event) => self.step.events.push(event),
    };
    const root = this.#contract?.root ?? '/';
    const early = dispatched ? this.step.early.get(index) : undefined;
    const started =
      early && early.call.name === call.name && sameArguments(early.call.args, call.args) ? early.result : undefined;
    return {
      callIndex: index,
      callId: call.id,
      get signal() {
        return self.signal;
      },
      get planning() {
        return self.planning;
      },
      started,
      agent: self,
      workspace: this.#workspace,
      mail: this.#mail,
      decide: (act: Act) => (self.#policy ? self.#policy.decide(act, root).effect : 'allow'),
      authorize: async (act: Act) =>
        self.#policy ? settleDecision(decisions, act, self.#policy.decide(act, root), [], index) : null,
      authorizeCommand: (act: Act, check: CommandCheck) => settleCommand(decisions, act, check, index),
      intent: (kind: string, detail: string, run: () => Promise<ToolResult>) =>
        people.intent(self, index, kind, detail, run),
      restorePoint: async (path: string, content: Uint8Array | null) => {
        await self.store.call('recordRestorePoint', {
          ...self.fence,
          seq: self.#seq,
          workspace: (self.#contract as ContractData).root,
          path,
          content,
          now: self.clock.now(),
        });
      },
      record: (event: EventData) => self.step.events.push(event),
      change: (change: { path: string; diff: string }) => self.step.changes.push(change),
    };
  }

  /** Ends the run on a ceiling its next step would cross, with what that step had (its model calls, their events). */
  async #exhaust(crossing: Crossing, events: EventData[], calls: ModelCallRecord[]): Promise<'budget-exhausted'> {
    await this.#ports.live?.flush();
    await this.store.call('endRun', {
      ...this.fence,
      status: 'budget-exhausted',
      reply: null,
      reason: `the ${crossing.ceiling} ceiling of run ${crossing.account} would be crossed`,
      events: [...events, crossing],
      ...(calls.length > 0 ? { calls } : {}),
      now: this.clock.now(),
    });
    return 'budget-exhausted';
  }

  async #end(status: RunStatus, reason: string, events: EventData[] = []): Promise<RunStatus> {
    await this.#ports.live?.flush();
    await this.store.call('endRun', { ...this.fence, status, reply: null, reason, events, now: this.clock.now() });
    return status;
  }
}

/** Runs one agent from where its trace leaves it, against the given ports. */
export function runAgent(start: AgentStart, ports: AgentPorts): { exit: Promise<RunExit>; agent: AgentRun } {
  keepAll(start.kept);
  const agent = new AgentRun(start, ports);
  return { agent, exit: agent.start() };
}

/**
 * The refusal of a call to a tool the run withholds: one its contract masks, or one of a
 * tier not offered in this step's request. Null when the call may be dispatched.
 */
function withheldBy(
  mask: ReadonlySet<string>,
  offered: ReadonlySet<string> | undefined,
  registry: ToolRegistry<AgentCall>,
  name: string,
): ToolResult | null {
  if (mask.has(name)) {
    const reason = `${name} is withheld for this run (tool mask); use another tool.`;
    return { content: reason, isError: true, refusal: { rule: 'tool-mask', reason } };
  }
  const family = offered ? registry.family(name) : undefined;
  if (family !== undefined && !offered?.has(family)) {
    const reason = `${name} is in the ${family} tools, which this step was not offered; call expand_tools with family "${family}" first, and it is offered from the next step.`;
    return { content: reason, isError: true, refusal: { rule: 'tool-tier', reason } };
  }
  return null;
}
