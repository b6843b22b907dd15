/** The agent actor's thread: the loop. See ./agent.ts for the protocol. */
import { createHash, randomUUID } from 'node:crypto';
import { parentPort, workerData } from 'node:worker_threads';
import { ErrorCode, HarnessError, serializeError } from '../errors.js';
import {
  type AgentEffects,
  agentToolRegistry,
  type ReadArgs,
  type SendArgs,
  type SpawnArgs,
} from '../runtime/agent-tools.js';
import { type ContractData, contractSecrets } from '../runtime/contract/contract.js';
import type { DrawAmount, EventData, PlanStep, QuestionKind, RunStatus } from '../runtime/events.js';
import type { ApprovalAnswer, PlanDecision } from '../runtime/policy/approval.js';
import { type Act, type Decision, Policy, type PolicyData } from '../runtime/policy/policy.js';
import {
  type CallAttempt,
  type Completion,
  loadProvider,
  type Provider,
  type ProviderSpec,
  type ToolCall,
  type TranscriptEntry,
} from '../runtime/provider.js';
import { ProviderError } from '../runtime/providers/types.js';
import { MAX_ARGUMENT_DEPTH, nestedDeeperThan, type ToolRegistry, type ToolResult } from '../runtime/tools.js';
import {
  evaluateCommandGate,
  evaluateReviewGate,
  type GateEvaluation,
  gateEvent,
  gateFeedback,
  REVIEW_PREFIX,
  writingModels,
} from '../runtime/verify/gate.js';
import { type PersonEffects, personTools } from '../runtime/workspace/person-tools.js';
import {
  READ_ONLY_TOOLS,
  type WorkspaceEffects,
  WorkspaceSession,
  type WorkspaceToolName,
  workspaceTools,
} from '../runtime/workspace/session.js';
import { type LedgerAccount, type RunRecord, TraceReader } from '../store/reader.js';
import type { FileDiff, ModelCallRecord, Observation, QuestionInput, SentMessage } from '../store/writer.js';
import type { AgentInput, AgentOutput, AgentRequestBody, AgentWorkerData, RunExit, WaitChildResult } from './agent.js';
import { type Endpoint, RequestClient } from './protocol.js';
import { StoreClient } from './store.js';

const data = workerData as AgentWorkerData;
const main = parentPort as NonNullable<typeof parentPort>;
// A small page cache: a thread per agent, and each agent reads little.
const reader = new TraceReader(data.storePath, { cacheKiB: 1024 });
data.storePort.on('close', () => store.fail('the store actor closed its port'));
const store = new StoreClient(data.storePort as unknown as Endpoint);

let current: Drive | null = null;

const supervisor = new RequestClient<AgentRequestBody>(main as unknown as Endpoint, (message) => {
  const input = message as AgentInput;
  if (input.type === 'start') {
    current = new Drive(input);
    void current.run().then((exit) => {
      const runId = input.runId;
      current = null;
      const out: AgentOutput = { type: 'run-exit', runId, exit };
      main.postMessage(out);
    });
  } else if (input.type === 'mail') {
    current?.wakeMail();
  } else if (input.type === 'cancel') {
    current?.cancel();
  }
});

interface RunSpecData {
  provider: ProviderSpec;
  system?: string;
  session?: string;
  contract?: ContractData;
  policy?: PolicyData;
  /** The workspace part of the first turn, computed when the run was created. */
  briefing?: string;
}

/** Observations that answer no tool call: what the runtime tells the model (a re-prompt), as a user turn. */
const FEEDBACK = { schema: '@schema', gate: '@gate', plan: '@plan' } as const;

type Effects = AgentEffects & WorkspaceEffects & PersonEffects;

/** One registry per kind of run, built once per thread: definitions stay byte-identical run to run. */
const registries = new Map<string, ToolRegistry<Effects>>();
function registryFor(mode: 'agent' | 'workspace' | 'file', planGate: boolean): ToolRegistry<Effects> {
  const key = `${mode}${planGate ? '+plan' : ''}`;
  let registry = registries.get(key);
  if (!registry) {
    registry = agentToolRegistry() as unknown as ToolRegistry<Effects>;
    if (mode !== 'agent') {
      for (const tool of workspaceTools(mode)) registry.register(tool);
      for (const tool of personTools(planGate)) registry.register(tool);
    }
    registries.set(key, registry);
  }
  return registry;
}

function workspaceSystem(contract: ContractData): string {
  return (
    'You are a coding agent working in a repository. Use the tools to read, search, change and run the project. ' +
    'Change files with edit_file (an exact, unique replacement), patch_file (a unified diff) or write_file. ' +
    'When something about the intent of the task is unclear, ask with ask_operator rather than guess. ' +
    'When the work is done, answer without a tool call, saying what you did.' +
    (contract.planGate
      ? ' This run starts in a planning phase: read what you need, then submit an ordered plan with submit_plan; changes and commands wait until it is approved.'
      : '') +
    (contract.outputSchema ? ' Your final answer must be a single JSON value matching the schema you were given.' : '')
  );
}

/** Thrown inside a step to stop the run until a person answers; the step is kept as a draft. */
class Pause {
  constructor(
    readonly question: QuestionInput,
    readonly events: EventData[],
  ) {}
}

/** Thrown inside a step when a person's answer ends the run (a cancelled plan, an aborted command). */
class Stop {
  constructor(readonly reason: string) {}
}

/**
 * How long a call still running when the wall clock runs out is given to stop (its signal
 * has fired, so a command is being killed) and report what it did, before the step ends
 * without it.
 */
const DEADLINE_GRACE_MS = 2_000;

/** The longest delay a timer takes; a deadline further off than this is not armed (see Drive.#arm). */
const MAX_TIMER_MS = 2 ** 31 - 1;

type Crossing = Extract<EventData, { type: 'budget-exhausted' }>;

/** What a paused step had done, so the resume picks it up instead of doing it again. */
interface Partial {
  observations: Observation[];
  events: EventData[];
  changes: FileDiff[];
  consumed: string[];
  sent: SentMessage[];
  spawned: string[];
  calls: ModelCallRecord[];
}

function defaultSystem(run: RunRecord): string {
  return (
    `You are agent "${run.address}" in a tree of agents. ` +
    'Use spawn_agent to hand work to sub-agents, send_message and read_messages to talk to agents of this tree by address, ' +
    'and answer without a tool call when your task is done.'
  );
}

class Drive implements Effects {
  readonly #start: Extract<AgentInput, { type: 'start' }>;
  readonly #abort = new AbortController();
  #run!: RunRecord;
  #seq = 0;
  #cancelled = false;
  #mailWaiter: (() => void) | null = null;
  // What the step in progress has done, committed with it.
  #consumed: string[] = [];
  #sent: SentMessage[] = [];
  #spawned: string[] = [];
  #events: EventData[] = [];
  #changes: FileDiff[] = [];
  #contract: ContractData | null = null;
  #workspace: WorkspaceSession | null = null;
  #calls: ToolCall[] = [];
  /** Reads started while the completion streamed, by call index. */
  #early = new Map<number, { call: ToolCall; result: ToolResult }>();
  /** What the first turn says about the workspace, as stored with the run. */
  #briefing: string | null = null;
  /** The run's policy as stored (a child's is its parent's, narrowed). */
  #policyData: PolicyData | null = null;
  /** The completion the step in progress acts on. */
  #completion: Completion | null = null;
  /** A run opened with a plan gate is planning until a plan is approved. */
  #planning = false;
  /**
   * What the step in progress passes to what it starts (the model call, commands, searches,
   * waits): fires at a cancel and, for a step held to a wall-clock ceiling, at its deadline.
   */
  #signal: AbortSignal = this.#abort.signal;
  /** The step's deadline alone, when it has one. */
  #deadline: AbortSignal | null = null;
  /** Set when the step's deadline passed: the ceiling it crossed, as the event that says so. */
  #overdue: Crossing | null = null;
  #disarm: (() => void) | null = null;
  /** Fires the deadline now if the clock has passed it: a call that ran without yielding kept its timer from firing. */
  #fireIfDue: (() => void) | null = null;

  constructor(start: Extract<AgentInput, { type: 'start' }>) {
    this.#start = start;
  }

  wakeMail(): void {
    this.#mailWaiter?.();
  }

  cancel(): void {
    this.#cancelled = true;
    this.#abort.abort();
    this.#mailWaiter?.();
  }

  get #fence() {
    return { runId: this.#start.runId, generation: this.#start.generation, owner: this.#start.owner };
  }

  async run(): Promise<RunExit> {
    try {
      const status = await this.#loop();
      return { kind: 'ended', status };
    } catch (error) {
      if (error instanceof Stop) {
        await this.#end('cancelled', error.reason);
        return { kind: 'ended', status: 'cancelled' };
      }
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
          await store.call('endRun', {
            ...this.#fence,
            status: 'failed',
            reply: null,
            reason: error instanceof Error ? error.message : String(error),
            events: [],
            now: Date.now(),
          });
          return { kind: 'ended', status: 'failed' };
        } catch {
          // fall through: report the original error
        }
      }
      return { kind: 'error', error: serializeError(error) };
    } finally {
      this.#disarm?.();
      // Whatever shell_start began dies with the run.
      await this.#workspace?.close();
    }
  }

  async #loop(): Promise<RunStatus> {
    const run = reader.run(this.#start.runId);
    if (!run) throw new HarnessError(ErrorCode.RunNotFound, `run ${this.#start.runId} is not in the store`);
    this.#run = run;
    const spec = reader.spec(run.runId) as RunSpecData;
    const steps = reader.steps(run.runId);
    this.#seq = run.lastSeq + 1;
    const contract = spec.contract ?? null;
    this.#contract = contract;
    this.#policyData = spec.policy ?? null;
    if (contract) {
      const policy = spec.policy ? Policy.from(spec.policy) : Policy.default();
      const secrets = contractSecrets(contract, this.#start.provider ?? spec.provider);
      this.#workspace = new WorkspaceSession(contract, policy, this.#workspaceHost(), secrets);
      this.#briefing = spec.briefing ?? this.#workspace.briefing();
    }
    const registry = registryFor(contract === null ? 'agent' : contract.mode, contract?.planGate === true);
    if (contract?.planGate && run.parentId === null) {
      // Planning until a plan is approved; a decision is in the trace of a committed step.
      this.#planning = !reader
        .events(run.runId)
        .some((event) => event.type === 'plan-decided' && event.decision !== 'cancel');
    }
    const transcript: TranscriptEntry[] = [{ role: 'user', text: this.#opening(run.task) }];
    for (const step of steps) appendStep(transcript, step.completion, step.observations);
    // Re-prompts already spent, counted from the trace so a resumed run keeps its count.
    const spent = { schema: 0, gate: 0, plan: 0 };
    for (const step of steps) {
      for (const observation of step.observations) {
        if (observation.name === FEEDBACK.schema) spent.schema++;
        else if (observation.name === FEEDBACK.gate) spent.gate++;
        else if (observation.name === FEEDBACK.plan) spent.plan++;
      }
    }
    await store.call('recordEvents', {
      ...this.#fence,
      events: [
        {
          type: 'run-start',
          task: run.task,
          address: run.address,
          parentId: run.parentId,
          resumed: this.#start.resumed,
        },
      ],
      now: Date.now(),
    });
    const providerSpec = this.#start.provider ?? spec.provider;
    const provider = await loadProvider(providerSpec);
    // Cache affinity: an opaque digest of the tree, never its id or a path.
    const cacheKey = createHash('sha256')
      .update(`io-harness session ${spec.session ?? run.rootId}`)
      .digest('hex')
      .slice(0, 32);
    if (
      run.lastSeq === 0 &&
      !this.#start.resumed &&
      providerSpec.kind === 'fallback' &&
      providerSpec.refuseIfPrimaryUnreachable &&
      provider.probe
    ) {
      const refusal = await provider.probe(this.#abort.signal).then(
        () => null,
        (error: unknown) => error,
      );
      if (refusal instanceof ProviderError && refusal.kind === 'connection') {
        const primary = providerSpec.providers[0];
        const name =
          primary && primary.kind !== 'module' && primary.kind !== 'fallback'
            ? (primary.name ?? primary.preset ?? primary.kind)
            : refusal.provider;
        const reason = `refused to start: the primary provider ${name} is unreachable (${refusal.message})`;
        await store.call('endRun', {
          ...this.#fence,
          status: 'failed',
          reply: null,
          reason,
          events: [{ type: 'provider-unreachable', provider: name, message: refusal.message }],
          now: Date.now(),
        });
        return 'failed';
      }
    }
    const system = spec.system ?? (contract ? workspaceSystem(contract) : defaultSystem(run));
    const chain = [...run.ancestry, run.runId];
    const parentAddress = run.parentId === null ? null : (reader.run(run.parentId)?.address ?? null);
    // Gates and the answer's shape are the root's business; children report to their parent.
    const judged = contract !== null && run.parentId === null;
    const mask = new Set(contract?.toolMask ?? []);
    const options = {
      cacheKey,
      ...(judged && contract.outputSchema ? { responseFormat: contract.outputSchema } : {}),
    };

    // A step a crash interrupted after it had written files (and that did not pause) is
    // re-run from the committed state: put those files back first.
    if (this.#workspace) {
      // (A pause clears the images of what its step had done: those calls are not made again.)
      const images = reader.stepImages(run.runId, this.#seq);
      if (images.length > 0) {
        const paths = this.#workspace.rollBack(images);
        await store.call('clearStepImages', { ...this.#fence, seq: this.#seq, paths, now: Date.now() });
      }
    }

    // Escalation: once the gate has failed often enough, a stronger model answers. Counted
    // from the trace like the re-prompts, so a resumed run stays escalated.
    const escalation = judged ? (contract.escalation ?? null) : null;
    let stronger: Provider | null = null;
    let announced = escalation !== null && reader.events(run.runId).some((event) => event.type === 'model-escalated');

    for (;;) {
      if (this.#cancelled) return this.#end('cancelled', 'cancelled by the supervisor');
      // A step whose effects had begun (a journaled command, a pause) acts on the completion it had;
      // it was admitted when it began, so the time it spent paused is not charged.
      const draft = reader.draft(run.runId);
      const replay = draft && draft.seq === this.#seq ? draft : null;
      const exhausted = replay ? null : this.#precheck(chain);
      if (exhausted) return this.#exhaust(exhausted, [], []);
      // The wall clock holds inside the step too. A replayed step is not held to it, as it is
      // not checked against it above; the next step's check is.
      this.#arm(replay ? [] : chain);
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
      this.#early = new Map();
      const partial = (replay?.partial ?? null) as Partial | null;
      let completion: Completion;
      try {
        if (replay) completion = replay.completion;
        else
          completion = await model.complete(
            {
              system,
              transcript,
              tools: registry.definitions(),
              options,
              metadata: {
                runId: run.runId,
                rootId: run.rootId,
                address: run.address,
                parentAddress,
                depth: run.depth,
                seq: this.#seq,
              },
            },
            this.#signal,
            this.#workspace
              ? { onToolCall: (call, index) => this.#startEarly(call, index, mask, registry) }
              : undefined,
          );
      } catch (error) {
        if (this.#cancelled) return this.#end('cancelled', 'cancelled by the supervisor');
        if (this.#overdue) {
          // The deadline aborted the call: the step is not committed, as when a call fails; earlier tries are in the trace.
          const tried =
            (HarnessError.isInstance(error) ? (error.details.attempts as CallAttempt[] | undefined) : []) ?? [];
          return this.#exhaust(
            this.#overdue,
            [...(escalated ? [escalated] : []), ...attemptEvents(tried, null)],
            tried.map(failedCall),
          );
        }
        if (!HarnessError.isInstance(error) || error.code !== ErrorCode.ProviderFailed) throw error;
        // Every try failed: the step is not committed; the tries are the trace of why.
        const attempts = (error.details.attempts as CallAttempt[] | undefined) ?? [];
        await store.call('endRun', {
          ...this.#fence,
          status: 'failed',
          reply: null,
          reason: `the model call failed: ${error.message}`,
          events: [...(escalated ? [escalated] : []), ...attemptEvents(attempts, null)],
          calls: attempts.map(failedCall),
          now: Date.now(),
        });
        return 'failed';
      }
      // Before anything of the step is stored: a call far over its tool's limits keeps only its start.
      completion = { ...completion, toolCalls: completion.toolCalls.map((call) => registry.screen(call)) };
      const attempts = replay ? [] : (completion.attempts ?? []);
      // The draw is known now: a step that cannot be charged runs none of its tools.
      const over = replay ? null : this.#wouldCross(chain, completion);
      if (over) {
        return this.#exhaust(
          over,
          [...(escalated ? [escalated] : []), ...attemptEvents(attempts, completion.provider ?? model.name)],
          [...attempts.map(failedCall), answeredCall(completion, model.name)],
        );
      }
      this.#completion = completion;
      this.#consumed = partial ? [...partial.consumed] : [];
      this.#sent = partial ? [...partial.sent] : [];
      this.#spawned = partial ? [...partial.spawned] : [];
      this.#changes = partial ? [...partial.changes] : [];
      this.#calls = completion.toolCalls;
      this.#events = partial
        ? [...partial.events]
        : [...(escalated ? [escalated] : []), ...attemptEvents(attempts, completion.provider ?? model.name)];
      const calls = partial ? [...partial.calls] : [...attempts.map(failedCall), answeredCall(completion, model.name)];
      const observations: Observation[] = partial ? [...partial.observations] : [];
      let stopReason: string | null = null;
      for (const [index, call] of completion.toolCalls.entries()) {
        // Calls a paused step had already made are not made again.
        if (index < observations.length) continue;
        this.#fireIfDue?.();
        if (this.#cancelled || this.#overdue) break;
        const mark = this.#events.length;
        this.#events.push({
          type: 'tool-call',
          callId: call.id,
          name: call.name,
          args: call.args,
          ...(call.invalid ? { invalid: call.invalid } : {}),
        });
        let result: ToolResult;
        try {
          if (mask.has(call.name)) {
            const reason = `${call.name} is withheld for this run (tool mask); use another tool.`;
            result = { content: reason, isError: true, refusal: { rule: 'tool-mask', reason } };
          } else if (call.invalid) {
            result = { content: call.invalid.reason, isError: true };
          } else {
            result = await this.#beforeDeadline(registry.dispatch(call.name, call.args, this, index));
          }
        } catch (signal) {
          if (signal instanceof Pause && this.#cancelled) {
            stopReason = 'cancelled by the supervisor';
            break;
          }
          if (signal instanceof Pause) {
            const partialNow: Partial = {
              observations,
              events: this.#events.slice(0, mark),
              changes: this.#changes,
              consumed: this.#consumed,
              sent: this.#sent,
              spawned: this.#spawned,
              calls,
            };
            await store.call('pause', {
              ...this.#fence,
              seq: this.#seq,
              completion,
              partial: partialNow,
              question: signal.question,
              events: signal.events,
              now: Date.now(),
            });
            return 'paused';
          }
          if (signal instanceof Stop) {
            // Ended by a person (a cancel, a cancelled plan, an aborted command): the step commits what it did.
            stopReason = signal.reason;
            break;
          }
          throw signal;
        }
        if (result.refusal) {
          this.#events.push({
            type: 'refusal',
            callId: call.id,
            tool: call.name,
            rule: result.refusal.rule,
            layer: result.refusal.layer ?? 'runtime',
            reason: result.refusal.reason,
          });
        }
        observations.push({ callId: call.id, name: call.name, content: result.content, isError: result.isError });
      }
      let final: { status: RunStatus; reply: string | null; reason?: string } | null =
        completion.toolCalls.length === 0 ? { status: 'finished' as const, reply: completion.text } : null;
      if (final && judged && !this.#cancelled && stopReason === null && !this.#overdue) {
        // A gate the deadline stopped (its command killed, its review call aborted) ends the run on the ceiling below.
        const verdict = await this.#judge(contract, completion, spent, calls).catch((error: unknown) => {
          if (this.#overdue) return null;
          throw error;
        });
        if (verdict?.feedback) {
          observations.push(verdict.feedback);
          final = null;
        } else if (verdict) {
          final = verdict.final;
        }
      }
      const overdue = this.#cancelled || stopReason !== null ? null : this.#overdue;
      if (this.#cancelled || stopReason !== null || overdue) {
        // A cancel, or the wall clock running out, mid-step commits what the step did (its
        // writes are in the files, so their diffs belong in the trace); the calls it did not
        // reach say so.
        const reason =
          stopReason ??
          (overdue
            ? `the wallMs ceiling of run ${overdue.account} was reached during a step`
            : 'cancelled by the supervisor');
        for (const call of completion.toolCalls.slice(observations.filter((o) => !o.name.startsWith('@')).length)) {
          observations.push({ callId: call.id, name: call.name, content: `not run: ${reason}`, isError: true });
        }
        final = { status: overdue ? 'budget-exhausted' : 'cancelled', reply: null, reason };
        if (overdue) this.#events.push(overdue);
      }
      const result = await store.call('commitStep', {
        ...this.#fence,
        seq: this.#seq,
        completion,
        observations,
        usage: completion.usage,
        consumed: this.#consumed,
        sent: this.#sent,
        spawned: this.#spawned,
        changes: this.#changes,
        events: this.#events,
        calls,
        final,
        now: Date.now(),
      });
      if (result.status === 'exhausted') return 'budget-exhausted';
      appendStep(transcript, completion, observations);
      this.#seq++;
      if (final) return final.status;
    }
  }

  /** The first user turn: the task, and for a workspace run where it is and what is withheld. */
  #opening(task: string): string {
    if (!this.#contract || !this.#workspace) return task;
    const parts = [task, this.#briefing ?? this.#workspace.briefing()];
    // The mask is stated here, past the cache breakpoint, so the tool definitions never change.
    if (this.#contract.toolMask.length > 0) {
      parts.push(
        `These tools are withheld for this run; a call to one is refused: ${this.#contract.toolMask.join(', ')}.`,
      );
    }
    return parts.join('\n\n');
  }

  /**
   * The final answer, judged: the output schema first, then the gate. Either may send
   * feedback to the model (bounded by the contract's retries) instead of ending the run.
   */
  async #judge(
    contract: ContractData,
    completion: Completion,
    spent: { schema: number; gate: number; plan: number },
    calls: ModelCallRecord[],
  ): Promise<
    | { final: { status: RunStatus; reply: string | null; reason?: string }; feedback?: undefined }
    | { feedback: Observation; final?: undefined }
  > {
    if (this.#planning) {
      // The only way out of the planning phase is an approved plan.
      if (spent.plan < contract.retries) {
        spent.plan++;
        return {
          feedback: {
            callId: '',
            name: FEEDBACK.plan,
            content: 'This run is in its planning phase: submit an ordered plan with submit_plan before answering.',
            isError: true,
          },
        };
      }
      return {
        final: { status: 'failed', reply: completion.text, reason: 'the run ended its planning phase without a plan' },
      };
    }
    if (contract.outputSchema) {
      const { checkOutput } = await import('../runtime/contract/output-check.js');
      const check = checkOutput(contract.outputSchema.schema, completion.text);
      if (!check.ok) {
        const reprompt = spent.schema < contract.retries;
        this.#events.push({ type: 'schema-invalid', errors: check.errors, reprompted: reprompt });
        if (reprompt) {
          spent.schema++;
          return {
            feedback: {
              callId: '',
              name: FEEDBACK.schema,
              content: `Your final answer does not satisfy the required output schema:\n${check.errors.join('\n')}\nAnswer again with a single JSON value that does (${contract.retries - spent.schema} ${contract.retries - spent.schema === 1 ? 'retry' : 'retries'} left).`,
              isError: true,
            },
          };
        }
        return {
          final: {
            status: 'schema-unsatisfied',
            reply: completion.text,
            reason: `the final answer does not satisfy the output schema after ${contract.retries} ${contract.retries === 1 ? 'retry' : 'retries'}: ${check.errors.join('; ')}`,
          },
        };
      }
    }
    const evaluation = await this.#evaluateGate(contract, completion);
    if (evaluation === null) return { final: { status: 'finished', reply: completion.text } };
    if (evaluation.reviewCall) {
      // Marked as a review, so the reviewer's own model is not counted among the writers.
      const review = answeredCall(evaluation.reviewCall, 'reviewer');
      calls.push({ ...review, provider: `${REVIEW_PREFIX}${review.provider}` });
    }
    this.#events.push(gateEvent(evaluation, false));
    if (evaluation.output) this.#events.push(evaluation.output);
    if (evaluation.verdict === 'passed') return { final: { status: 'finished', reply: completion.text } };
    if (evaluation.verdict === 'failed' && spent.gate < contract.retries) {
      spent.gate++;
      return {
        feedback: {
          callId: '',
          name: FEEDBACK.gate,
          content: gateFeedback(evaluation, contract.retries - spent.gate),
          isError: true,
        },
      };
    }
    const reason =
      evaluation.verdict === 'errored'
        ? `the gate could not run: ${evaluation.reasons.join('; ')} (retryGate re-runs it against the workspace as left)`
        : `the gate failed${contract.retries > 0 ? ` after ${contract.retries} ${contract.retries === 1 ? 'retry' : 'retries'}` : ''}: ${evaluation.reasons.join('; ')}`;
    return { final: { status: 'gate-failed', reply: completion.text, reason } };
  }

  async #evaluateGate(contract: ContractData, completion: Completion): Promise<GateEvaluation | null> {
    const gate = contract.verification;
    if (gate.kind === 'command') {
      this.#workspace?.noteContainment();
      return evaluateCommandGate(gate, contract.root, this.#signal, this.#workspace?.commandEnv);
    }
    if (gate.kind === 'review') {
      const committed = reader.patch(this.#run.runId);
      const pending = this.#changes.map((change) => change.diff).join('');
      return evaluateReviewGate(
        gate,
        this.#start.reviewer ?? gate.provider,
        {
          goal: contract.goal,
          patch: committed + pending,
          reply: completion.text,
          writerModels: [
            ...new Set([completion.model, ...writingModels(reader.modelCalls({ rootId: this.#run.rootId }))]),
          ],
        },
        this.#signal,
      );
    }
    return null;
  }

  /**
   * A read-only call the stream has finished, at the head of the completion, allowed
   * outright: run it now. Its result is used only if the finished completion asks for
   * the same call with the same arguments; otherwise it is dropped unrecorded.
   */
  #startEarly(call: ToolCall, index: number, mask: Set<string>, registry: ToolRegistry<Effects>): void {
    const workspace = this.#workspace;
    // A new attempt (a retry, a fallback) starts its calls from index 0: nothing of an earlier attempt is reused.
    if (index === 0) this.#early.clear();
    if (!workspace || index !== this.#early.size || !READ_ONLY_TOOLS.has(call.name) || mask.has(call.name)) return;
    if (!registry.accepts(call.name, call.args) || !workspace.readAllowedOutright(call.args)) return;
    try {
      const result = workspace.readNow(call.name as 'read_file', call.args);
      this.#early.set(index, { call, result });
    } catch {
      // A read that throws is simply not started early.
    }
  }

  #workspaceHost() {
    const self = this;
    return {
      restorePoint: async (path: string, content: Uint8Array | null) => {
        await store.call('recordRestorePoint', {
          ...self.#fence,
          seq: self.#seq,
          workspace: (self.#contract as ContractData).root,
          path,
          content,
          now: Date.now(),
        });
      },
      ask: (act: Act, decision: Extract<Decision, { effect: 'ask' }>, callIndex: number) =>
        self.#ask(act, decision, callIndex),
      intent: (callIndex: number, kind: string, detail: string, run: () => Promise<ToolResult>) =>
        self.#intent(callIndex, kind, detail, run),
      planning: () => self.#planning,
      event: (event: EventData) => self.#events.push(event),
      change: (change: FileDiff) => self.#changes.push(change),
      callId: (index: number) => self.#calls[index]?.id ?? `call-${index}`,
      get signal() {
        return self.#signal;
      },
    };
  }

  /** A person's answer, unless the run is cancelled first: a cancel does not wait on an approver. */
  #unlessCancelled<T>(answer: Promise<T>): Promise<T> {
    // The step's signal: the deadline does not wait on an approver either (see #beforeDeadline).
    const signal = this.#signal;
    if (signal.aborted) return Promise.reject(new Stop('cancelled by the supervisor'));
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => reject(new Stop('cancelled by the supervisor'));
      signal.addEventListener('abort', onAbort, { once: true });
      answer.then(
        (value) => {
          signal.removeEventListener('abort', onAbort);
          resolve(value);
        },
        (error) => {
          signal.removeEventListener('abort', onAbort);
          reject(error);
        },
      );
    });
  }

  /**
   * Arms the step's deadline: the earliest wall-clock ceiling of the chain (the run's and
   * its ancestors', as #precheck reads them). At it the step's signal fires, so the model
   * call, a command, a search or a wait in flight is stopped. An empty chain disarms.
   */
  #arm(chain: string[]): void {
    this.#disarm?.();
    this.#disarm = null;
    this.#overdue = null;
    this.#deadline = null;
    this.#signal = this.#abort.signal;
    let first: { account: string; wall: { at: number; started: number; limit: number } } | null = null;
    for (const id of chain) {
      const account = reader.account(id);
      const wall = account ? this.#wallEnd(account) : null;
      if (wall && (first === null || wall.at < first.wall.at)) first = { account: id, wall };
    }
    if (first === null) return;
    const { account, wall } = first;
    const delay = Math.max(0, wall.at - Date.now());
    // A timer cannot wait longer than this (it would fire at once); a step that long is left to the next check.
    if (delay > MAX_TIMER_MS) return;
    const deadline = new AbortController();
    const fire = () => {
      if (deadline.signal.aborted) return;
      this.#overdue = this.#wallCrossing(account, wall, Date.now());
      deadline.abort(new Error(`the wallMs ceiling of run ${account} was reached`));
    };
    const timer = setTimeout(fire, delay);
    this.#fireIfDue = () => {
      if (Date.now() >= wall.at) fire();
    };
    this.#disarm = () => {
      clearTimeout(timer);
      this.#fireIfDue = null;
    };
    this.#deadline = deadline.signal;
    this.#signal = AbortSignal.any([this.#abort.signal, deadline.signal]);
  }

  /**
   * A tool call, unless the step's deadline comes first. At the deadline the call's signal
   * has fired; it is given a moment to stop and say what it did (a killed command, a
   * write), and otherwise left behind with an observation saying so. Any tool handler is
   * held to the deadline this way, whether or not it listens to the signal.
   */
  async #beforeDeadline(work: Promise<ToolResult>): Promise<ToolResult> {
    const deadline = this.#deadline;
    if (!deadline) return work;
    const settled = work.then(
      (result) => ({ result }),
      (error: unknown) => ({ error }),
    );
    const reached = new Promise<'deadline'>((resolve) => {
      if (deadline.aborted) resolve('deadline');
      else deadline.addEventListener('abort', () => resolve('deadline'), { once: true });
    });
    const first = await Promise.race([settled, reached]);
    // A call that failed because the deadline stopped it (an approver's wait, a pause) is stopped, not failed.
    if (first !== 'deadline' && 'result' in first) return first.result;
    if (first !== 'deadline' && !this.#overdue) throw first.error;
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<null>((resolve) => {
      timer = setTimeout(resolve, DEADLINE_GRACE_MS, null);
    });
    const late = await Promise.race([settled, grace]);
    clearTimeout(timer);
    const crossing = this.#overdue as Crossing;
    const note = `the wallMs ceiling of run ${crossing.account} (${crossing.limit} ms) was reached while this call ran, so it was stopped`;
    if (late && 'result' in late)
      return { ...late.result, content: `${late.result.content}\n(${note}.)`, isError: true };
    return { content: `stopped: ${note}; what it had done by then stands.`, isError: true };
  }

  /** A question's id: the same call of the same step asks the same question after a resume. */
  #questionId(kind: QuestionKind, callIndex: number): string {
    return `${kind}:${this.#run.runId}:${this.#seq}:${callIndex}`;
  }

  /** An answer a person already gave while the run was paused, if any. */
  #answered(questionId: string): unknown {
    const question = reader.question(questionId);
    return question?.status === 'answered' ? question.answer : undefined;
  }

  async #ask(act: Act, decision: Extract<Decision, { effect: 'ask' }>, callIndex: number): Promise<'approve' | 'deny'> {
    const questionId = this.#questionId('approval', callIndex);
    const stored = this.#answered(questionId);
    if (stored === 'approve' || stored === 'deny') return stored;
    const answer = await this.#unlessCancelled(
      supervisor.request<ApprovalAnswer>({
        op: 'approve',
        request: {
          rootId: this.#run.rootId,
          runId: this.#run.runId,
          address: this.#run.address,
          act,
          subject: decision.subject,
          rule: decision.rule,
          layer: decision.layer,
        },
      }),
    );
    if (answer !== 'defer') return answer;
    throw new Pause(
      {
        questionId,
        kind: 'approval',
        payload: { act, subject: decision.subject, rule: decision.rule, layer: decision.layer },
        summary: `approve ${act.kind} ${decision.subject}? (${decision.rule}, layer ${decision.layer})`,
      },
      [
        {
          type: 'policy-decision',
          act: act.kind,
          subject: decision.subject,
          effect: 'ask',
          rule: decision.rule,
          layer: decision.layer,
          answer: 'defer',
        },
      ],
    );
  }

  /**
   * An effect the runtime cannot undo, journaled before it starts. One that ran to the
   * end keeps its recorded result (it is not run twice); one a crash interrupted pauses
   * the run for the operator to retry, skip or abort.
   */
  async #intent(callIndex: number, kind: string, detail: string, run: () => Promise<ToolResult>): Promise<ToolResult> {
    const key = `${this.#run.runId}:${this.#seq}:${callIndex}`;
    const base = { ...this.#fence, seq: this.#seq, key };
    const existing = reader.intent(key);
    let again = false;
    if (existing && existing.result === null) {
      // Interrupted. The question names this start of it, so an answer covers that start
      // only: a retry that is itself interrupted asks again rather than running a third time.
      const questionId = `${this.#questionId('intent', callIndex)}@${existing.startedAt}`;
      const decided = this.#answered(questionId);
      if (decided === undefined) {
        throw new Pause(
          {
            questionId,
            kind: 'intent',
            payload: { key, kind, detail, startedAt: existing.startedAt },
            summary: `${kind} "${detail}" was running when the process died; retry, skip or abort?`,
          },
          [],
        );
      }
      if (decided === 'abort') throw new Stop(`the operator aborted the run after an interrupted ${kind}: ${detail}`);
      if (decided === 'skip') {
        const skipped: ToolResult = {
          content: `${detail} was interrupted by a crash and the operator chose to skip it; it was not run again.`,
          isError: true,
        };
        await store.call('finishIntent', {
          ...base,
          result: JSON.stringify(skipped),
          outcome: 'skipped',
          now: Date.now(),
        });
        return skipped;
      }
      again = true;
    }
    const begun = await store.call('beginIntent', {
      ...base,
      kind,
      detail,
      completion: this.#completion as Completion,
      again,
      now: Date.now(),
    });
    if (begun.status === 'done') return JSON.parse(begun.result) as ToolResult;
    if (begun.status === 'in-flight') {
      // Started by another attempt at this step since this one looked: ask about that start.
      throw new Pause(
        {
          questionId: `${this.#questionId('intent', callIndex)}@${begun.startedAt}`,
          kind: 'intent',
          payload: { key, kind, detail, startedAt: begun.startedAt },
          summary: `${kind} "${detail}" was running when the process died; retry, skip or abort?`,
        },
        [],
      );
    }
    const result = await run();
    await store.call('finishIntent', {
      ...base,
      result: JSON.stringify(result),
      outcome: result.isError ? 'error' : 'ok',
      now: Date.now(),
    });
    return result;
  }

  async submitPlan(args: { steps: PlanStep[] }, callIndex: number): Promise<ToolResult> {
    if (!this.#contract?.planGate || this.#run.parentId !== null) {
      return { content: 'this run has no plan gate: carry out the task directly.', isError: true };
    }
    if (!this.#planning) return { content: 'the plan is already approved: carry it out.', isError: true };
    const steps = args.steps.map((step) => ({
      description: step.description,
      ...(step.owner ? { owner: step.owner } : {}),
    }));
    const questionId = this.#questionId('plan', callIndex);
    const stored = this.#answered(questionId) as PlanDecision | undefined;
    const submitted: EventData = { type: 'plan-submitted', steps };
    const decision =
      stored ??
      (await this.#unlessCancelled(
        supervisor.request<PlanDecision>({
          op: 'review-plan',
          plan: { rootId: this.#run.rootId, runId: this.#run.runId, address: this.#run.address, steps },
        }),
      ));
    if (decision.decision === 'defer') {
      throw new Pause(
        { questionId, kind: 'plan', payload: { steps }, summary: `review the plan of ${steps.length} steps` },
        [submitted],
      );
    }
    // A stored decision answers a plan whose submission is already in the trace (with the pause).
    if (!stored) this.#events.push(submitted);
    const note = 'note' in decision && decision.note ? decision.note : null;
    if (decision.decision === 'cancel') {
      this.#events.push({ type: 'plan-decided', decision: 'cancel', steps, note });
      throw new Stop(`the plan gate cancelled the run${note ? `: ${note}` : ''}`);
    }
    const approved = decision.decision === 'correct' ? decision.steps : steps;
    this.#events.push({ type: 'plan-decided', decision: decision.decision, steps: approved, note });
    this.#planning = false;
    const listing = approved
      .map((step, index) => `${index + 1}. ${step.description}${step.owner ? ` (owner: ${step.owner})` : ''}`)
      .join('\n');
    const head = decision.decision === 'correct' ? 'The plan was corrected and approved' : 'The plan is approved';
    return { content: `${head}${note ? ` (${note})` : ''}. Carry it out:\n${listing}`, isError: false };
  }

  async askOperator(args: { question: string }, callIndex: number): Promise<ToolResult> {
    const questionId = this.#questionId('question', callIndex);
    const stored = this.#answered(questionId);
    const answer =
      typeof stored === 'string'
        ? stored
        : await this.#unlessCancelled(
            supervisor.request<string | { defer: true }>({
              op: 'ask-operator',
              question: {
                rootId: this.#run.rootId,
                runId: this.#run.runId,
                address: this.#run.address,
                question: args.question,
              },
            }),
          );
    if (typeof answer !== 'string') {
      throw new Pause(
        { questionId, kind: 'question', payload: { question: args.question }, summary: args.question },
        [],
      );
    }
    return { content: `The operator answered: ${answer}`, isError: false };
  }

  async workspaceTool(name: WorkspaceToolName, args: Record<string, unknown>, callIndex: number): Promise<ToolResult> {
    const workspace = this.#workspace;
    if (!workspace) return { content: `${name} is not available outside a workspace run.`, isError: true };
    const early = this.#early.get(callIndex);
    if (early && early.call.name === name && sameArguments(early.call.args, args)) {
      // The same decision the ordinary path records, then the result the early read already has.
      const located = workspace.locate(args);
      if (!located.ok) return located.result;
      const refused = await workspace.authorize({ kind: 'read', path: located.path }, callIndex);
      return refused ?? early.result;
    }
    return workspace.run(name, args, callIndex);
  }

  /** The draw a completion makes (one step, its tokens) against every ceiling up the chain. */
  /** Ends the run on a ceiling its next step would cross, with what that step had (its model calls, their events). */
  async #exhaust(
    crossing: Extract<EventData, { type: 'budget-exhausted' }>,
    events: EventData[],
    calls: ModelCallRecord[],
  ): Promise<'budget-exhausted'> {
    await store.call('endRun', {
      ...this.#fence,
      status: 'budget-exhausted',
      reply: null,
      reason: `the ${crossing.ceiling} ceiling of run ${crossing.account} would be crossed`,
      events: [...events, crossing],
      ...(calls.length > 0 ? { calls } : {}),
      now: Date.now(),
    });
    return 'budget-exhausted';
  }

  #wouldCross(chain: string[], completion: Completion): Extract<EventData, { type: 'budget-exhausted' }> | null {
    const draw = { steps: 1, tokens: completion.usage.inputTokens + completion.usage.outputTokens };
    for (const id of chain) {
      const account = reader.account(id);
      const crossed = account ? ceilingCrossed(account, draw) : null;
      if (crossed) return crossed;
    }
    return null;
  }

  /** The draw the next step would make (one step) against every ceiling up the chain, and the wall clock. */
  #precheck(chain: string[]): Extract<EventData, { type: 'budget-exhausted' }> | null {
    const now = Date.now();
    const cost = this.#contract?.budget.cost;
    if (cost) {
      // Cost is derived from the accounting rows and the embedder's prices, never stored as a number.
      const report = reader.cost(this.#run.rootId, cost.prices);
      const spent = report.total;
      if (report.unpriced.length > 0) {
        throw new HarnessError(
          ErrorCode.InvalidArgument,
          `the cost ceiling cannot be enforced: the price table has no price for ${report.unpriced.join(', ')}. Add ${report.unpriced.length === 1 ? 'that model' : 'those models'} to withBudget({ cost: { prices } }).`,
        );
      }
      if (spent >= cost.limit) {
        return {
          type: 'budget-exhausted',
          draw: { steps: 1, tokens: 0 },
          ceiling: 'cost',
          account: this.#run.rootId,
          spent,
          limit: cost.limit,
        };
      }
    }
    for (const id of chain) {
      const account = reader.account(id);
      if (!account) continue;
      const crossed = ceilingCrossed(account, { steps: 1, tokens: 0 });
      if (crossed) return crossed;
      const wall = this.#wallEnd(account);
      if (wall && now >= wall.at) return this.#wallCrossing(id, wall, now);
    }
    return null;
  }

  /** When an account's wall-clock ceiling is reached: its run's start plus its wallMs. The one definition of the deadline. */
  #wallEnd(account: LedgerAccount): { at: number; started: number; limit: number } | null {
    const { wallMs } = account.ceilings;
    if (wallMs === null) return null;
    const id = account.runId;
    const started = id === this.#run.runId ? this.#run.createdAt : (reader.run(id)?.createdAt ?? Date.now());
    return { at: started + wallMs, started, limit: wallMs };
  }

  #wallCrossing(account: string, wall: { started: number; limit: number }, now: number): Crossing {
    return {
      type: 'budget-exhausted',
      draw: { steps: 1, tokens: 0 },
      ceiling: 'wallMs',
      account,
      spent: now - wall.started,
      limit: wall.limit,
    };
  }

  async #end(status: RunStatus, reason: string, events: EventData[] = []): Promise<RunStatus> {
    await store.call('endRun', { ...this.#fence, status, reply: null, reason, events, now: Date.now() });
    return status;
  }

  async spawn(args: SpawnArgs, callIndex: number): Promise<ToolResult> {
    if (this.#planning) {
      const reason = 'spawn_agent waits for an approved plan: this run is in its planning phase; call submit_plan.';
      return { content: reason, isError: true, refusal: { rule: 'plan-gate', reason } };
    }
    // Inherit and narrow: a child gets this agent's policy plus deny-only layers, never more.
    const widened = Object.entries(args.policy?.allow ?? {}).filter(([, list]) => (list ?? []).length > 0);
    if (widened.length > 0) {
      const reason = `a child inherits your policy and can only narrow it; the spawn asked to allow ${widened
        .map(([act, list]) => `${act} ${(list ?? []).join(', ')}`)
        .join('; ')}, which you cannot grant.`;
      return {
        content: `spawn refused (policy.narrow-only): ${reason}`,
        isError: true,
        refusal: { rule: 'policy.narrow-only', reason },
      };
    }
    let policy: PolicyData | undefined;
    const deny = args.policy?.deny;
    if (deny && Object.values(deny).some((list) => (list ?? []).length > 0)) {
      let narrowed = (this.#policyData ? Policy.from(this.#policyData) : Policy.default()).layer(
        `narrowed for ${args.as ?? 'a child'} by ${this.#run.address}`,
      );
      for (const pattern of deny.read ?? []) narrowed = narrowed.denyRead(pattern);
      for (const pattern of deny.write ?? []) narrowed = narrowed.denyWrite(pattern);
      for (const pattern of deny.exec ?? []) narrowed = narrowed.denyExec(pattern);
      for (const pattern of deny.net ?? []) narrowed = narrowed.denyNet(pattern);
      policy = narrowed.toJSON();
    }
    const asked = {
      steps: args.budget?.steps ?? null,
      tokens: args.budget?.tokens ?? null,
      wallMs: args.budget?.wall_secs === undefined ? null : Math.round(args.budget.wall_secs * 1000),
    };
    const result = await store.call('spawn', {
      ...this.#fence,
      key: `${this.#run.runId}:${this.#seq}:${callIndex}`,
      task: args.task,
      as: args.as ?? null,
      asked,
      maxWaitSecs: args.max_wait_secs ?? null,
      newRunId: randomUUID(),
      queueNow: args.wait !== false,
      ...(policy ? { policy } : {}),
      now: Date.now(),
    });
    if (result.status === 'refused') {
      return {
        content: `spawn refused (${result.rule}): ${result.reason}`,
        isError: true,
        refusal: { rule: result.rule, reason: result.reason },
      };
    }
    const clampNote =
      result.clamps.length === 0
        ? ''
        : ` Its budget was narrowed to what you have left: ${result.clamps.map((c) => `${c.field} ${c.asked} -> ${c.granted}`).join(', ')}.`;
    if (args.wait === false) {
      if (result.childStatus === 'pending') this.#spawned.push(result.childId);
      return {
        content: `spawned agent ${result.address}; it starts once this step commits and reports to your inbox when it ends.${clampNote}`,
        isError: false,
      };
    }
    const timeoutMs = args.background_after_secs === undefined ? null : Math.round(args.background_after_secs * 1000);
    const body: AgentRequestBody = { op: 'wait-child', runId: this.#run.runId, childId: result.childId, timeoutMs };
    const waited = await supervisor.request<WaitChildResult>(body);
    if (waited.status === 'background') {
      return {
        content: `agent ${result.address} is still working after ${args.background_after_secs}s; it carries on in the background and will report to your inbox.${clampNote}`,
        isError: false,
      };
    }
    return {
      content: JSON.stringify({
        agent: result.address,
        status: waited.childStatus,
        reply: waited.reply,
        reason: waited.childStatus === 'finished' ? undefined : waited.reason,
        cost: { steps: waited.steps, tokens: waited.tokens },
        narrowed: result.clamps.length === 0 ? undefined : clampNote.trim(),
      }),
      isError: waited.childStatus !== 'finished',
    };
  }

  async send(args: SendArgs): Promise<ToolResult> {
    if (!reader.hasAddress(this.#run.rootId, args.to)) {
      const reason = `no agent has the address ${JSON.stringify(args.to)} in this tree; an address reaches only inside its own tree.`;
      return { content: reason, isError: true, refusal: { rule: 'mailbox.tree', reason } };
    }
    this.#sent.push({ to: args.to, body: args.body });
    return { content: `sent to ${args.to}; it is delivered when this step commits.`, isError: false };
  }

  async read(args: ReadArgs): Promise<ToolResult> {
    const account = reader.account(this.#run.runId);
    const cap = account?.maxWaitSecs ?? 30;
    const asked = args.wait_secs ?? 0;
    const waitSecs = Math.min(asked, cap);
    const deadline = Date.now() + waitSecs * 1000;
    const taken = new Set(this.#consumed);
    for (;;) {
      const fresh = reader
        .inbox(this.#run.rootId, this.#run.address)
        .filter((message) => !taken.has(message.msgId))
        .slice(0, args.limit ?? Number.POSITIVE_INFINITY);
      if (fresh.length > 0) {
        for (const message of fresh) this.#consumed.push(message.msgId);
        return {
          content: JSON.stringify(
            fresh.map((message) => ({ id: message.msgId, from: message.fromAddress, body: message.body })),
          ),
          isError: false,
        };
      }
      const left = deadline - Date.now();
      if (left <= 0 || this.#cancelled) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, left);
        const self = this;
        function done(): void {
          clearTimeout(timer);
          self.#mailWaiter = null;
          resolve();
        }
        this.#mailWaiter = done;
      });
    }
    const capped = asked > cap ? ` (the wait asked for ${asked}s was capped at ${cap}s)` : '';
    return { content: `no messages${waitSecs > 0 ? ` after waiting ${waitSecs}s` : ''}${capped}.`, isError: false };
  }
}

/** The trace of the tries a model call took: each retry, each fallback, and a final failure. */
function attemptEvents(attempts: CallAttempt[], answeredBy: string | null): EventData[] {
  return attempts.map((attempt, index): EventData => {
    if (attempt.next === 'retry') {
      return {
        type: 'model-retry',
        provider: attempt.provider,
        model: attempt.model,
        kind: attempt.kind,
        statusCode: attempt.statusCode,
        delayMs: attempt.delayMs,
        message: attempt.message,
      };
    }
    if (attempt.next === 'fallback') {
      return {
        type: 'model-fallback',
        from: attempt.provider,
        to: attempts[index + 1]?.provider ?? answeredBy,
        kind: attempt.kind,
        statusCode: attempt.statusCode,
        message: attempt.message,
      };
    }
    return {
      type: 'model-failed',
      provider: attempt.provider,
      model: attempt.model,
      kind: attempt.kind,
      statusCode: attempt.statusCode,
      message: attempt.message,
    };
  });
}

function failedCall(attempt: CallAttempt): ModelCallRecord {
  return {
    provider: attempt.provider,
    model: attempt.model,
    outcome: attempt.kind,
    statusCode: attempt.statusCode,
    inputTokens: 0,
    outputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    reasoningTokens: 0,
    latencyMs: attempt.latencyMs,
    ttftMs: null,
  };
}

function answeredCall(completion: Completion, fallbackName: string): ModelCallRecord {
  return {
    provider: completion.provider ?? fallbackName,
    model: completion.model,
    outcome: 'ok',
    statusCode: null,
    inputTokens: completion.usage.inputTokens,
    outputTokens: completion.usage.outputTokens,
    cacheReadTokens: completion.usage.cacheReadTokens ?? 0,
    cacheWriteTokens: completion.usage.cacheWriteTokens ?? 0,
    reasoningTokens: completion.usage.reasoningTokens ?? 0,
    latencyMs: completion.latencyMs ?? null,
    ttftMs: completion.timeToFirstTokenMs ?? null,
    ...(completion.usageReported === false ? { usageReported: false } : {}),
  };
}

function appendStep(transcript: TranscriptEntry[], completion: Completion, observations: Observation[]): void {
  transcript.push({ role: 'assistant', text: completion.text, toolCalls: completion.toolCalls });
  for (const observation of observations) {
    if (observation.name.startsWith('@')) {
      transcript.push({ role: 'user', text: observation.content });
      continue;
    }
    transcript.push({
      role: 'tool',
      callId: observation.callId,
      name: observation.name,
      content: observation.content,
      isError: observation.isError,
    });
  }
}

/** Arguments compared as JSON with sorted keys. */
function sameArguments(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  // Arguments nested past the limit are refused as a call, and never compared by recursion.
  if (nestedDeeperThan(a, MAX_ARGUMENT_DEPTH) || nestedDeeperThan(b, MAX_ARGUMENT_DEPTH)) return false;
  return canonical(a) === canonical(b);
}

/** The steps or tokens ceiling of one account a draw would cross, as the event that says so. */
function ceilingCrossed(
  account: LedgerAccount,
  draw: DrawAmount,
): Extract<EventData, { type: 'budget-exhausted' }> | null {
  const { steps, tokens } = account.ceilings;
  if (steps !== null && account.spent.steps + draw.steps > steps) {
    return {
      type: 'budget-exhausted',
      draw,
      ceiling: 'steps',
      account: account.runId,
      spent: account.spent.steps,
      limit: steps,
    };
  }
  if (tokens !== null && draw.tokens > 0 && account.spent.tokens + draw.tokens > tokens) {
    return {
      type: 'budget-exhausted',
      draw,
      ceiling: 'tokens',
      account: account.runId,
      spent: account.spent.tokens,
      limit: tokens,
    };
  }
  return null;
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    return `{${Object.keys(record)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical(record[key])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

const ready: AgentOutput = { type: 'ready' };
main.postMessage(ready);

/** A provider spec as the trace names it: kind (or name) and model. */
function providerLabel(spec: ProviderSpec): string {
  if (spec.kind === 'fallback') return spec.providers.map(providerLabel).join(' then ');
  if (spec.kind === 'module') return spec.module;
  return `${spec.name ?? spec.preset ?? spec.kind}:${spec.model}`;
}
