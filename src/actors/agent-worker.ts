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
import type { EventData, RunStatus } from '../runtime/events.js';
import {
  type CallAttempt,
  type Completion,
  loadProvider,
  type ProviderSpec,
  type TranscriptEntry,
} from '../runtime/provider.js';
import { ProviderError } from '../runtime/providers/types.js';
import type { ToolResult } from '../runtime/tools.js';
import { type RunRecord, TraceReader } from '../store/reader.js';
import type { ModelCallRecord, Observation, SentMessage } from '../store/writer.js';
import type { AgentInput, AgentOutput, AgentRequestBody, AgentWorkerData, RunExit, WaitChildResult } from './agent.js';
import { type Endpoint, RequestClient } from './protocol.js';
import { StoreClient } from './store.js';

const data = workerData as AgentWorkerData;
const main = parentPort as NonNullable<typeof parentPort>;
// A small page cache: a thread per agent, and each agent reads little.
const reader = new TraceReader(data.storePath, { cacheKiB: 1024 });
data.storePort.on('close', () => store.fail('the store actor closed its port'));
const store = new StoreClient(data.storePort as unknown as Endpoint);
const registry = agentToolRegistry();

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
}

function defaultSystem(run: RunRecord): string {
  return (
    `You are agent "${run.address}" in a tree of agents. ` +
    'Use spawn_agent to hand work to sub-agents, send_message and read_messages to talk to agents of this tree by address, ' +
    'and answer without a tool call when your task is done.'
  );
}

class Drive implements AgentEffects {
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
    const transcript: TranscriptEntry[] = [{ role: 'user', text: run.task }];
    for (const step of steps) appendStep(transcript, step.completion, step.observations);
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
    const system = spec.system ?? defaultSystem(run);
    const chain = [...run.ancestry, run.runId];
    const parentAddress = run.parentId === null ? null : (reader.run(run.parentId)?.address ?? null);

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
      let completion: Completion;
      try {
        completion = await provider.complete(
          {
            system,
            transcript,
            tools: registry.definitions(),
            options: { cacheKey },
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
      this.#events = attemptEvents(attempts, completion.provider ?? provider.name);
      const observations: Observation[] = [];
      for (const [index, call] of completion.toolCalls.entries()) {
        if (this.#cancelled) return this.#end('cancelled', 'cancelled by the supervisor');
        this.#events.push({ type: 'tool-call', callId: call.id, name: call.name, args: call.args });
        const result = await registry.dispatch(call.name, call.args, this, index);
        if (result.refusal) {
          this.#events.push({ type: 'refusal', callId: call.id, tool: call.name, ...result.refusal });
        }
        observations.push({ callId: call.id, name: call.name, content: result.content, isError: result.isError });
      }
      const final = completion.toolCalls.length === 0 ? { status: 'finished' as const, reply: completion.text } : null;
      const result = await store.call('commitStep', {
        ...this.#fence,
        seq: this.#seq,
        completion,
        observations,
        usage: completion.usage,
        consumed: this.#consumed,
        sent: this.#sent,
        spawned: this.#spawned,
        events: this.#events,
        calls: [...attempts.map(failedCall), answeredCall(completion, provider.name)],
        final,
        now: Date.now(),
      });
      if (result.status === 'exhausted') return 'budget-exhausted';
      appendStep(transcript, completion, observations);
      this.#seq++;
      if (final) return 'finished';
    }
  }

  /** The draw the next step would make (one step) against every ceiling up the chain, and the wall clock. */
  #precheck(chain: string[]): Extract<EventData, { type: 'budget-exhausted' }> | null {
    const now = Date.now();
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
    transcript.push({
      role: 'tool',
      callId: observation.callId,
      name: observation.name,
      content: observation.content,
      isError: observation.isError,
    });
  }
}

const ready: AgentOutput = { type: 'ready' };
main.postMessage(ready);
