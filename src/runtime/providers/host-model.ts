/**
 * Host models: a model the embedder serves from its own thread, as a function. An agent
 * names one by a `{ kind: 'host', name }` spec; its requests go over the agent's host
 * channel to the tree host (../../supervisor/tree-host.ts), which calls the function the
 * run or the supervisor was given under that name and hands back a completion. The
 * request and the answer take the path every model call takes in the agent (the same
 * budget draw, trace rows and checks), so a host model has no way of its own around the
 * boundary; only the vendor's wire is left out.
 *
 * This module holds both sides: what an agent's thread builds from the spec
 * ({@link HostModelProvider}), and what the main thread makes of the function's answer
 * ({@link answerHostModel}).
 */
import { ErrorCode, HarnessError } from '../../errors.js';
import { requestChars } from '../context/assembler.js';
import type {
  CallAttempt,
  Completion,
  CompletionHooks,
  ModelRequest,
  Provider,
  RequestOptions,
  ToolDefinition,
  TranscriptEntry,
  Usage,
} from '../provider.js';
import { estimatedUsage, ProviderError } from './types.js';
import { uniqueId } from './wire-decode.js';

/** What a host model is asked: the agent's request, and which run and model asked it. */
export interface HostModelRequest {
  /** The name the model was given under. */
  model: string;
  rootId: string;
  runId: string;
  /** The agent's address in its tree (`root`, `root/1`, …). */
  address: string;
  system: string;
  transcript: readonly TranscriptEntry[];
  tools: readonly ToolDefinition[];
  options?: RequestOptions;
}

/** What a host model answers: text, tool calls, and its usage when it counts tokens. */
export interface HostModelAnswer {
  text: string;
  /** Calls of the request's tools; an id is made for a call given none. */
  toolCalls?: { id?: string; name: string; args: Record<string, unknown> }[];
  /**
   * Its tokens, when it counts them. Left out, the runtime's estimate is drawn (a quarter
   * of the characters asked and answered) and the step says the usage was not reported.
   */
  usage?: Usage;
  /** Why it stopped, as the trace keeps it. Default `tool_calls` with calls, else `stop`. */
  finishReason?: string;
}

/**
 * A model served by the embedder's own code. `signal` fires when the agent's step stops
 * (a cancel, the deadline, the tree's end). A throw fails the call as a provider failure
 * that is not retried, unless it is a {@link ProviderError} that says otherwise.
 */
export type HostModel = (request: HostModelRequest, signal: AbortSignal) => HostModelAnswer | Promise<HostModelAnswer>;

/** One model call, as it crosses the host channel to the main thread. */
export interface HostModelCall {
  runId: string;
  /** Unique within the run's calls of the host: what abortTool stops. */
  callId: string;
  name: string;
  request: ModelRequest;
}

/** What an agent's thread reaches host models by: its host channel. */
export interface HostModelChannel {
  complete(call: HostModelCall): Promise<Completion>;
  abortTool(request: { runId: string; callId: string }): Promise<void>;
  /** The run these calls are made for. */
  readonly runId: string;
}

/** The channel of run `runId`, over its host. */
export function hostModelChannel(
  host: Pick<HostModelChannel, 'complete' | 'abortTool'>,
  runId: string,
): HostModelChannel {
  return { runId, complete: (call) => host.complete(call), abortTool: (request) => host.abortTool(request) };
}

let calls = 0;

/** A host model as an agent's thread calls it: over the channel of the run that built it. */
export class HostModelProvider implements Provider {
  readonly name: string;
  readonly #channel: HostModelChannel | null;

  constructor(name: string, channel: HostModelChannel | null) {
    this.name = name;
    this.#channel = channel;
  }

  async complete(request: ModelRequest, signal?: AbortSignal, hooks?: CompletionHooks): Promise<Completion> {
    const channel = this.#channel;
    if (channel === null) {
      throw new HarnessError(
        ErrorCode.ProviderLoadFailed,
        `the host model ${JSON.stringify(this.name)} is served only to an agent's run, over its host channel; this call has none (a gate retried from the main thread, say). Give the gate an HTTP or module provider.`,
      );
    }
    if (signal?.aborted) throw aborted(this.name);
    const callId = `model-${++calls}`;
    const answer = channel.complete({ runId: channel.runId, callId, name: this.name, request });
    const completion = await (signal
      ? new Promise<Completion>((resolve, reject) => {
          const stop = () => {
            void channel.abortTool({ runId: channel.runId, callId }).catch(() => undefined);
            reject(aborted(this.name));
          };
          signal.addEventListener('abort', stop, { once: true });
          answer.then(resolve, reject).finally(() => signal.removeEventListener('abort', stop));
        })
      : answer);
    // No usage given: estimated here, on the agent's thread, not on the embedder's, from the
    // request's characters as the runtime measures them (there is no wire body to count).
    if (completion.usageReported === false) {
      const chars = requestChars(request.system, request.tools, request.transcript);
      completion.usage = estimatedUsage(chars, completion.text, completion.toolCalls);
    }
    if (completion.text !== '') hooks?.onText?.(completion.text);
    for (const [index, call] of completion.toolCalls.entries()) hooks?.onToolCall?.(call, index);
    return completion;
  }
}

function aborted(name: string): ProviderError {
  return new ProviderError({ kind: 'aborted', provider: name, message: 'the call was cancelled' });
}

/** Calls `model` for one agent's request and makes a completion of its answer, or a clear provider failure. */
export async function answerHostModel(
  model: HostModel,
  call: HostModelCall,
  asker: { rootId: string; address: string },
  signal: AbortSignal,
): Promise<Completion> {
  const started = performance.now();
  try {
    return await answered(model, call, asker, signal, started);
  } catch (error) {
    const { name } = call;
    const failure =
      error instanceof ProviderError
        ? error
        : new ProviderError({
            kind: 'undecodable',
            provider: name,
            message: `the host model ${JSON.stringify(name)} threw: ${(error as Error)?.message ?? String(error)}`,
            cause: error,
          });
    // The one try, as the trace keeps a vendor's: a host model is not retried.
    const attempt: CallAttempt = {
      provider: `host:${name}`,
      model: name,
      kind: failure.kind,
      statusCode: failure.statusCode,
      message: failure.message,
      next: 'none',
      delayMs: 0,
      latencyMs: performance.now() - started,
    };
    failure.details.attempts = [attempt];
    throw failure;
  }
}

async function answered(
  model: HostModel,
  call: HostModelCall,
  asker: { rootId: string; address: string },
  signal: AbortSignal,
  started: number,
): Promise<Completion> {
  const { request, name } = call;
  const given: unknown = await model(
    {
      model: name,
      // Who asks is the tree host's to say (a review gate's request names no tree of its own).
      rootId: asker.rootId,
      runId: call.runId,
      address: asker.address,
      system: request.system,
      transcript: request.transcript,
      tools: request.tools,
      ...(request.options ? { options: request.options } : {}),
    },
    signal,
  );
  const answer = checkAnswer(given, name);
  // Ids answer results, so two calls of one answer never share one (as on the vendors' wires).
  const used = new Set<string>();
  const toolCalls = (answer.toolCalls ?? []).map((item, index) => ({
    id: uniqueId(used, item.id ?? `${call.callId}-${index}`, index),
    name: item.name,
    args: item.args,
  }));
  return {
    text: answer.text,
    toolCalls,
    // Without the model's count the agent's side estimates it (HostModelProvider.complete).
    usage: answer.usage ?? { inputTokens: 0, outputTokens: 0 },
    ...(answer.usage ? {} : { usageReported: false }),
    model: name,
    provider: `host:${name}`,
    finishReason: answer.finishReason ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop'),
    latencyMs: performance.now() - started,
    timeToFirstTokenMs: null,
  };
}

/** The answer as the function gave it, or a failure that names what is wrong with it. */
function checkAnswer(given: unknown, name: string): HostModelAnswer {
  const wrong = (what: string) =>
    new ProviderError({
      kind: 'undecodable',
      provider: name,
      message: `the host model ${JSON.stringify(name)} answered ${what}; it answers { text: string, toolCalls?: { name, args }[], usage? }.`,
    });
  if (typeof given !== 'object' || given === null) throw wrong(JSON.stringify(given) ?? String(given));
  const answer = given as Partial<HostModelAnswer>;
  if (typeof answer.text !== 'string') throw wrong('without a text string');
  if (answer.toolCalls !== undefined) {
    if (!Array.isArray(answer.toolCalls)) throw wrong('toolCalls that are not an array');
    for (const [index, item] of answer.toolCalls.entries()) {
      if (typeof item?.name !== 'string' || item.name === '') throw wrong(`tool call ${index} without a name`);
      if (typeof item.args !== 'object' || item.args === null || Array.isArray(item.args))
        throw wrong(`tool call ${index} (${item.name}) whose args are not an object`);
      if (item.id !== undefined && typeof item.id !== 'string')
        throw wrong(`tool call ${index} with an id that is not a string`);
    }
  }
  if (answer.usage !== undefined) {
    const usage = answer.usage as Partial<Usage> & Record<string, unknown>;
    const count = (value: unknown) => Number.isInteger(value) && (value as number) >= 0;
    if (!count(usage.inputTokens) || !count(usage.outputTokens))
      throw wrong('a usage without whole inputTokens and outputTokens');
    for (const name of ['cacheReadTokens', 'cacheWriteTokens', 'reasoningTokens'] as const)
      if (usage[name] !== undefined && !count(usage[name])) throw wrong(`a usage whose ${name} is not a whole number`);
  }
  if (answer.finishReason !== undefined && typeof answer.finishReason !== 'string')
    throw wrong('a finishReason that is not a string');
  return answer as HostModelAnswer;
}

/** The names of the host models a spec reaches (a fallback's members included). */
export function hostModelNames(spec: unknown): string[] {
  const given = spec as { kind?: unknown; name?: unknown; providers?: unknown } | null | undefined;
  if (!given || typeof given !== 'object') return [];
  if (given.kind === 'host' && typeof given.name === 'string') return [given.name];
  if (given.kind === 'fallback' && Array.isArray(given.providers)) return given.providers.flatMap(hostModelNames);
  return [];
}
