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
import type { ContractData } from '../runtime/contract/contract.js';
import type { EventData, RunStatus } from '../runtime/events.js';
import type { ApprovalAnswer } from '../runtime/policy/approval.js';
import { type Act, type Decision, Policy, type PolicyData } from '../runtime/policy/policy.js';
import {
  type CallAttempt,
  type Completion,
  loadProvider,
  type ProviderSpec,
  type ToolCall,
  type TranscriptEntry,
} from '../runtime/provider.js';
import { ProviderError } from '../runtime/providers/types.js';
import type { ToolRegistry, ToolResult } from '../runtime/tools.js';
import {
  evaluateCommandGate,
  evaluateReviewGate,
  type GateEvaluation,
  gateEvent,
  gateFeedback,
} from '../runtime/verify/gate.js';
import {
  READ_ONLY_TOOLS,
  type WorkspaceEffects,
  WorkspaceSession,
  type WorkspaceToolName,
  workspaceTools,
} from '../runtime/workspace/session.js';
import { type RunRecord, TraceReader } from '../store/reader.js';
import type { FileDiff, ModelCallRecord, Observation, SentMessage } from '../store/writer.js';
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
}

/** Observations that answer no tool call: what the runtime tells the model (a re-prompt), as a user turn. */
const FEEDBACK = { schema: '@schema', gate: '@gate' } as const;

type Effects = AgentEffects & WorkspaceEffects;

/** One registry per kind of run, built once per thread: definitions stay byte-identical run to run. */
const registries = new Map<string, ToolRegistry<Effects>>();
function registryFor(mode: 'agent' | 'workspace' | 'file'): ToolRegistry<Effects> {
  let registry = registries.get(mode);
  if (!registry) {
    registry = agentToolRegistry() as unknown as ToolRegistry<Effects>;
    if (mode !== 'agent') for (const tool of workspaceTools(mode)) registry.register(tool);
    registries.set(mode, registry);
  }
  return registry;
}

function workspaceSystem(contract: ContractData): string {
  return (
    'You are a coding agent working in a repository. Use the tools to read, search, change and run the project. ' +
    'Change files with edit_file (an exact, unique replacement), patch_file (a unified diff) or write_file. ' +
    'When the work is done, answer without a tool call, saying what you did.' +
    (contract.outputSchema ? ' Your final answer must be a single JSON value matching the schema you were given.' : '')
  );
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
    if (contract) {
      const policy = spec.policy ? Policy.from(spec.policy) : Policy.default();
      this.#workspace = new WorkspaceSession(contract, policy, this.#workspaceHost());
    }
    const registry = registryFor(contract === null ? 'agent' : contract.mode);
    const transcript: TranscriptEntry[] = [{ role: 'user', text: this.#opening(run.task) }];
    for (const step of steps) appendStep(transcript, step.completion, step.observations);
    // Re-prompts already spent, counted from the trace so a resumed run keeps its count.
    const spent = { schema: 0, gate: 0 };
    for (const step of steps) {
      for (const observation of step.observations) {
        if (observation.name === FEEDBACK.schema) spent.schema++;
        else if (observation.name === FEEDBACK.gate) spent.gate++;
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

    for (;;) {
      if (this.#cancelled) return this.#end('cancelled', 'cancelled by the supervisor');
      const exhausted = this.#precheck(chain);
      if (exhausted) {
        await store.call('endRun', {
          ...this.#fence,
          status: 'budget-exhausted',
          reply: null,
          reason: `the ${exhausted.ceiling} ceiling of run ${exhausted.account} would be crossed`,
          events: [exhausted],
          now: Date.now(),
        });
        return 'budget-exhausted';
      }
      this.#early = new Map();
      let completion: Completion;
      try {
        completion = await provider.complete(
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
          this.#abort.signal,
          this.#workspace ? { onToolCall: (call, index) => this.#startEarly(call, index, mask, registry) } : undefined,
        );
      } catch (error) {
        if (this.#cancelled) return this.#end('cancelled', 'cancelled by the supervisor');
        if (!HarnessError.isInstance(error) || error.code !== ErrorCode.ProviderFailed) throw error;
        // Every try failed: the step is not committed; the tries are the trace of why.
        const attempts = (error.details.attempts as CallAttempt[] | undefined) ?? [];
        await store.call('endRun', {
          ...this.#fence,
          status: 'failed',
          reply: null,
          reason: `the model call failed: ${error.message}`,
          events: attemptEvents(attempts, null),
          calls: attempts.map(failedCall),
          now: Date.now(),
        });
        return 'failed';
      }
      const attempts = completion.attempts ?? [];
      this.#consumed = [];
      this.#sent = [];
      this.#spawned = [];
      this.#changes = [];
      this.#calls = completion.toolCalls;
      this.#events = attemptEvents(attempts, completion.provider ?? provider.name);
      const calls = [...attempts.map(failedCall), answeredCall(completion, provider.name)];
      const observations: Observation[] = [];
      for (const [index, call] of completion.toolCalls.entries()) {
        if (this.#cancelled) return this.#end('cancelled', 'cancelled by the supervisor');
        this.#events.push({ type: 'tool-call', callId: call.id, name: call.name, args: call.args });
        let result: ToolResult;
        if (mask.has(call.name)) {
          const reason = `${call.name} is withheld for this run (tool mask); use another tool.`;
          result = { content: reason, isError: true, refusal: { rule: 'tool-mask', reason } };
        } else {
          result = await registry.dispatch(call.name, call.args, this, index);
        }
        if (result.refusal) {
          this.#events.push({ type: 'refusal', callId: call.id, tool: call.name, ...result.refusal });
        }
        observations.push({ callId: call.id, name: call.name, content: result.content, isError: result.isError });
      }
      let final: { status: RunStatus; reply: string | null; reason?: string } | null =
        completion.toolCalls.length === 0 ? { status: 'finished' as const, reply: completion.text } : null;
      if (final && judged) {
        const verdict = await this.#judge(contract, completion, spent, calls);
        if (verdict.feedback) {
          observations.push(verdict.feedback);
          final = null;
        } else {
          final = verdict.final;
        }
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
    const parts = [task, this.#workspace.briefing()];
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
    spent: { schema: number; gate: number },
    calls: ModelCallRecord[],
  ): Promise<
    | { final: { status: RunStatus; reply: string | null; reason?: string }; feedback?: undefined }
    | { feedback: Observation; final?: undefined }
  > {
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
    if (evaluation.reviewCall) calls.push(answeredCall(evaluation.reviewCall, 'reviewer'));
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
    if (gate.kind === 'command') return evaluateCommandGate(gate, contract.root, this.#abort.signal);
    if (gate.kind === 'review') {
      const committed = reader.patch(this.#run.runId);
      const pending = this.#changes.map((change) => change.diff).join('');
      return evaluateReviewGate(
        gate,
        this.#start.reviewer ?? gate.provider,
        { goal: contract.goal, patch: committed + pending, reply: completion.text, writerModel: completion.model },
        this.#abort.signal,
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
    if (!workspace || index !== this.#early.size || !READ_ONLY_TOOLS.has(call.name) || mask.has(call.name)) return;
    if (!registry.accepts(call.name, call.args) || !workspace.readAllowedOutright(call.args)) return;
    try {
      const result = workspace.readNow(call.name as 'read_file' | 'grep' | 'find', call.args);
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
      ask: (act: Act, decision: Extract<Decision, { effect: 'ask' }>) =>
        supervisor.request<ApprovalAnswer>({
          op: 'approve',
          request: {
            rootId: self.#run.rootId,
            runId: self.#run.runId,
            address: self.#run.address,
            act,
            subject: decision.subject,
            rule: decision.rule,
            layer: decision.layer,
          },
        }),
      event: (event: EventData) => self.#events.push(event),
      change: (change: FileDiff) => self.#changes.push(change),
      callId: (index: number) => self.#calls[index]?.id ?? `call-${index}`,
      get signal() {
        return self.#abort.signal;
      },
    };
  }

  async workspaceTool(name: WorkspaceToolName, args: Record<string, unknown>, callIndex: number): Promise<ToolResult> {
    const workspace = this.#workspace;
    if (!workspace) return { content: `${name} is not available outside a workspace run.`, isError: true };
    const early = this.#early.get(callIndex);
    if (early && early.call.name === name && sameArguments(early.call.args, args)) {
      // The same decision the ordinary path records, then the result the early read already has.
      const refused = await workspace.authorize({ kind: 'read', path: readPath(args) });
      return refused ?? early.result;
    }
    return workspace.run(name, args, callIndex);
  }

  /** The draw the next step would make (one step) against every ceiling up the chain, and the wall clock. */
  #precheck(chain: string[]): Extract<EventData, { type: 'budget-exhausted' }> | null {
    const now = Date.now();
    const cost = this.#contract?.budget.cost;
    if (cost) {
      // Cost is derived from the accounting rows and the embedder's prices, never stored as a number.
      const spent = reader.cost(this.#run.rootId, cost.prices).total;
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
      const { steps, wallMs } = account.ceilings;
      if (steps !== null && account.spent.steps + 1 > steps) {
        return {
          type: 'budget-exhausted',
          draw: { steps: 1, tokens: 0 },
          ceiling: 'steps',
          account: id,
          spent: account.spent.steps,
          limit: steps,
        };
      }
      if (wallMs !== null) {
        const started = id === this.#run.runId ? this.#run.createdAt : (reader.run(id)?.createdAt ?? now);
        if (now - started >= wallMs) {
          return {
            type: 'budget-exhausted',
            draw: { steps: 1, tokens: 0 },
            ceiling: 'wallMs',
            account: id,
            spent: now - started,
            limit: wallMs,
          };
        }
      }
    }
    return null;
  }

  async #end(status: RunStatus, reason: string): Promise<RunStatus> {
    await store.call('endRun', { ...this.#fence, status, reply: null, reason, events: [], now: Date.now() });
    return status;
  }

  async spawn(args: SpawnArgs, callIndex: number): Promise<ToolResult> {
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

function readPath(args: Record<string, unknown>): string {
  return typeof args.path === 'string' ? args.path : '.';
}

/** Arguments compared as JSON with sorted keys. */
function sameArguments(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  return canonical(a) === canonical(b);
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
