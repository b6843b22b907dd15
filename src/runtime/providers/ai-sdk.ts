/**
 * An AI SDK language model as a provider: the package an {@link AiSdkProviderSpec} names
 * is imported in the thread that uses it (never by a program that names none), its
 * export made into a `LanguageModelV3` (or V2), and each model call made with the
 * model's own `doStream`. What comes back is read into the same completion, usage and
 * failures as the harness's own wires, so accounting, budgets, retries and fallback work
 * unchanged: a failure is classified from what the AI SDK reports (its `APICallError`'s
 * status and headers, a cut stream, an undecodable chunk), never from the message.
 *
 * Only types come from `@ai-sdk/provider`; its error classes are recognised by the
 * markers the AI SDK sets on them, so nothing of it is loaded here.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type {
  LanguageModelV2,
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3Message,
  LanguageModelV3StreamPart,
  LanguageModelV3ToolResultOutput,
} from '@ai-sdk/provider';
import { ErrorCode, HarnessError } from '../../errors.js';
import { keptPackageDir, packageName } from '../exec/containment/harness-code.js';
import { shownImages } from '../images.js';
import type {
  AiSdkProviderSpec,
  Completion,
  CompletionHooks,
  ModelRequest,
  RetryOptions,
  ToolCall,
  TranscriptEntry,
} from '../provider.js';
import { holdSecrets, providerSecrets } from '../secrets.js';
import { IdleWatch } from './answer-body.js';
import { completeWithFallback, retryPolicy, type TriedProvider, vendorMessage } from './client.js';
import { checkIdleTimeout, DEFAULT_IDLE_TIMEOUT_MS } from './idle.js';
import { checkedKey } from './keys.js';
import { parseRateLimits, parseRetryAfter } from './rate-limits.js';
import { type CallUsage, estimatedUsage, ProviderError, type RateLimits } from './types.js';
import { parseArguments, vendorError } from './wire-decode.js';
import { toolText } from './wire-request.js';

type LanguageModel = LanguageModelV3 | LanguageModelV2;
type FunctionTool = Extract<NonNullable<LanguageModelV3CallOptions['tools']>[number], { type: 'function' }>;

/** Whether `error` is one of the AI SDK's errors of this name (its classes mark their instances). */
function isAiSdkError(error: unknown, name: string): error is Error & Record<string, unknown> {
  const marker = Symbol.for(`vercel.ai.error.${name}`);
  return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[marker] === true;
}

const HERE = dirname(fileURLToPath(import.meta.url));

/** Imports the package: from here first, then from the project the process runs in. */
async function importPackage(spec: AiSdkProviderSpec, name: string): Promise<Record<string, unknown>> {
  const given = spec.package;
  if (given.startsWith('/') || /^[a-z]+:/i.test(given)) {
    const url = given.startsWith('/') ? pathToFileURL(given).href : given;
    return tryImport(url, name, given);
  }
  // Looked for as Node will find it from here, then from the working directory; one whose
  // real path is outside the directories kept from runs (the working directory's are not,
  // unless io-harness is installed there) is refused (CODE_NOT_KEPT), never imported.
  if (keptPackageDir(packageName(given), HERE) !== null) return tryImport(given, name, given);
  if (keptPackageDir(packageName(given), process.cwd()) === null) throw notInstalled(name, given);
  let resolved: string;
  try {
    resolved = createRequire(join(process.cwd(), 'package.json')).resolve(given);
  } catch (cause) {
    throw notInstalled(name, given, cause);
  }
  return tryImport(pathToFileURL(resolved).href, name, given);
}

function notInstalled(name: string, given: string, cause?: unknown): HarnessError {
  return new HarnessError(
    ErrorCode.ProviderLoadFailed,
    `${name}: the AI SDK provider package ${given} is not installed here or in ${process.cwd()}; install it in your project (npm install ${given}).`,
    cause === undefined ? {} : { cause },
  );
}

async function tryImport(url: string, name: string, given: string): Promise<Record<string, unknown>> {
  try {
    return (await import(url)) as Record<string, unknown>;
  } catch (error) {
    throw loadFailure(name, given, error);
  }
}

function loadFailure(name: string, given: string, cause: unknown): HarnessError {
  return new HarnessError(
    ErrorCode.ProviderLoadFailed,
    `${name}: cannot import the AI SDK provider package ${given}: ${(cause as Error).message}`,
    { cause },
  );
}

/** The key to hand the factory: given, or read from the named variable; null when neither is named. */
function keyOf(spec: AiSdkProviderSpec, name: string): { key: string; source: string } | null {
  if (spec.apiKey !== undefined)
    return {
      key: checkedKey(spec.apiKey, 'the apiKey the provider was given', name),
      source: 'the apiKey the provider was given',
    };
  if (spec.apiKeyRedacted)
    throw new HarnessError(
      ErrorCode.ProviderLoadFailed,
      `${name}: no API key: this run's key (or a credential in its options) was handed in directly and is never stored with a run. Pass the provider again: supervisor.resume(rootId, { provider }).`,
    );
  if (spec.apiKeyEnv === undefined) return null;
  const value = process.env[spec.apiKeyEnv];
  const source = `the environment variable ${spec.apiKeyEnv}`;
  if (!value)
    throw new HarnessError(
      ErrorCode.ProviderLoadFailed,
      `${name}: no API key: ${source} is not set. Set it, or pass apiKey; keys are never stored with a run.`,
    );
  return { key: checkedKey(value, source, name), source };
}

/** The function exports of a module, for an error that says which one was meant. */
function functionExports(mod: Record<string, unknown>): string[] {
  return Object.keys(mod).filter((key) => typeof mod[key] === 'function');
}

/** The language model the spec describes, made from the package's export. */
function languageModelOf(
  mod: Record<string, unknown>,
  spec: AiSdkProviderSpec,
  key: string | null,
  name: string,
): LanguageModel {
  const exported =
    mod[spec.factory] ?? (mod.default as Record<string, unknown> | undefined)?.[spec.factory] ?? undefined;
  if (typeof exported !== 'function') {
    const offered = functionExports(mod);
    throw new HarnessError(
      ErrorCode.ProviderLoadFailed,
      `${name}: ${spec.package} has no function export ${JSON.stringify(spec.factory)}${offered.length > 0 ? `; it exports ${offered.slice(0, 12).join(', ')}` : ''}. Name its provider (google) or its factory (createGoogleGenerativeAI).`,
    );
  }
  const ready = typeof (exported as { languageModel?: unknown }).languageModel === 'function';
  const settings = { ...(spec.options ?? {}), ...(key === null ? {} : { apiKey: key }) };
  if (ready && (spec.options !== undefined || key !== null))
    throw new HarnessError(
      ErrorCode.ProviderLoadFailed,
      `${name}: ${spec.factory} is a provider made with its default settings, so it takes no options or key; name the package's factory (create...) to give them.`,
    );
  let provider: unknown;
  try {
    provider = ready ? exported : (exported as (settings: unknown) => unknown)(settings);
  } catch (cause) {
    throw new HarnessError(
      ErrorCode.ProviderLoadFailed,
      `${name}: ${spec.package}'s ${spec.factory} refused its options: ${(cause as Error).message}`,
      { cause },
    );
  }
  let model: unknown;
  try {
    const made = provider as { languageModel?: (id: string) => unknown } & ((id: string) => unknown);
    model =
      typeof made?.languageModel === 'function'
        ? made.languageModel(spec.model)
        : typeof made === 'function'
          ? made(spec.model)
          : null;
  } catch (cause) {
    throw new HarnessError(
      ErrorCode.ProviderLoadFailed,
      `${name}: ${spec.package} has no language model ${JSON.stringify(spec.model)}: ${(cause as Error).message}`,
      { cause },
    );
  }
  const version = (model as { specificationVersion?: unknown } | null)?.specificationVersion;
  if (
    typeof (model as { doStream?: unknown } | null)?.doStream !== 'function' ||
    (version !== 'v3' && version !== 'v2')
  )
    throw new HarnessError(
      ErrorCode.ProviderLoadFailed,
      `${name}: ${spec.package}'s ${spec.factory} did not give a language model of the AI SDK's specification v2 or v3 (got ${JSON.stringify(version ?? typeof model)}); use a provider package made for AI SDK 5 or 6.`,
    );
  return model as LanguageModel;
}

/** Builds the provider a spec describes, in this thread. */
export async function buildAiSdkProvider(spec: AiSdkProviderSpec): Promise<AiSdkProvider> {
  const name = spec.name ?? `ai-sdk:${spec.package}`;
  const key = keyOf(spec, name);
  // From here on this thread scrubs the key and the options' credentials from every error it raises.
  holdSecrets(providerSecrets(key === null ? spec : { ...spec, apiKey: key.key }));
  const mod = await importPackage(spec, name);
  const model = languageModelOf(mod, spec, key?.key ?? null, name);
  const idleTimeoutMs =
    spec.idleTimeoutMs === undefined
      ? DEFAULT_IDLE_TIMEOUT_MS
      : checkIdleTimeout(spec.idleTimeoutMs, `${name}: idleTimeoutMs`);
  return new AiSdkProvider(model, spec, name, key?.source ?? null, idleTimeoutMs);
}

/** The request as the AI SDK's prompt: the system message, then the transcript, a run of tool results one message. */
export function promptOf(
  request: ModelRequest,
  images: boolean,
  version: 'v2' | 'v3',
): LanguageModelV3CallOptions['prompt'] {
  const shown = images ? shownImages(request.transcript) : new Set<TranscriptEntry>();
  const prompt: LanguageModelV3Message[] = [{ role: 'system', content: request.system }];
  for (const entry of request.transcript) {
    if (entry.role === 'user') prompt.push({ role: 'user', content: [{ type: 'text', text: entry.text }] });
    else if (entry.role === 'assistant') {
      const content: Extract<LanguageModelV3Message, { role: 'assistant' }>['content'] = [];
      if (entry.text !== '') content.push({ type: 'text', text: entry.text });
      for (const call of entry.toolCalls)
        content.push({ type: 'tool-call', toolCallId: call.id, toolName: call.name, input: call.args });
      prompt.push({ role: 'assistant', content });
    } else {
      const part = {
        type: 'tool-result' as const,
        toolCallId: entry.callId,
        toolName: entry.name,
        output: resultOutput(entry, shown, images, version),
      };
      const last = prompt.at(-1);
      if (last?.role === 'tool') last.content.push(part);
      else prompt.push({ role: 'tool', content: [part] });
    }
  }
  return prompt;
}

function resultOutput(
  entry: Extract<TranscriptEntry, { role: 'tool' }>,
  shown: Set<TranscriptEntry>,
  images: boolean,
  version: 'v2' | 'v3',
): LanguageModelV3ToolResultOutput {
  if (shown.has(entry) && entry.images && entry.images.length > 0) {
    // V2 calls an image part `media`; V3 `image-data`.
    const pictures = entry.images.map((image) =>
      version === 'v2'
        ? ({ type: 'media', data: image.data, mediaType: image.mimeType } as unknown as { type: 'text'; text: string })
        : { type: 'image-data' as const, data: image.data, mediaType: image.mimeType },
    );
    return { type: 'content', value: [{ type: 'text', text: entry.content }, ...pictures] };
  }
  const text = toolText(entry, shown, images);
  return entry.isError ? { type: 'error-text', value: text } : { type: 'text', value: text };
}

/** A model call's options: the prompt, the run's tools, the answer's shape and length, the signal that ends it. */
function callOptions(
  request: ModelRequest,
  prompt: LanguageModelV3CallOptions['prompt'],
  spec: AiSdkProviderSpec,
  signal: AbortSignal,
): LanguageModelV3CallOptions {
  const format = request.options?.responseFormat;
  return {
    prompt,
    abortSignal: signal,
    ...(request.tools.length > 0
      ? {
          tools: request.tools.map((tool) => ({
            type: 'function' as const,
            name: tool.name,
            description: tool.description,
            inputSchema: tool.parameters as FunctionTool['inputSchema'],
          })),
          toolChoice: { type: 'auto' as const },
        }
      : {}),
    ...(spec.maxTokens !== undefined ? { maxOutputTokens: spec.maxTokens } : {}),
    ...(format ? { responseFormat: { type: 'json' as const, name: format.name, schema: format.schema } } : {}),
  };
}

/** Tokens as a V3 (nested) or V2 (flat) usage reports them; null when it reports none. */
export function usageOf(given: unknown): CallUsage | null {
  if (given === null || typeof given !== 'object') return null;
  const usage = given as Record<string, unknown>;
  const nested = (field: unknown, part: string): number | undefined =>
    field !== null && typeof field === 'object'
      ? ((field as Record<string, number | undefined>)[part] ?? undefined)
      : undefined;
  const flat = (field: unknown): number | undefined => (typeof field === 'number' ? field : undefined);
  const input = flat(usage.inputTokens) ?? nested(usage.inputTokens, 'total');
  const output = flat(usage.outputTokens) ?? nested(usage.outputTokens, 'total');
  if (input === undefined && output === undefined) return null;
  return {
    inputTokens: input ?? 0,
    outputTokens: output ?? 0,
    cacheReadTokens: nested(usage.inputTokens, 'cacheRead') ?? flat(usage.cachedInputTokens) ?? 0,
    cacheWriteTokens: nested(usage.inputTokens, 'cacheWrite') ?? 0,
    reasoningTokens: nested(usage.outputTokens, 'reasoning') ?? flat(usage.reasoningTokens) ?? 0,
  };
}

/** The chunks the AI SDK says it could not read: the vendor sent something that is not its format. */
const UNDECODABLE = [
  'AI_JSONParseError',
  'AI_TypeValidationError',
  'AI_InvalidResponseDataError',
  'AI_EmptyResponseBodyError',
];

export class AiSdkProvider implements TriedProvider {
  readonly name: string;
  readonly model: string;
  readonly retry: Required<RetryOptions>;
  readonly #model: LanguageModel;
  readonly #spec: AiSdkProviderSpec;
  readonly #keySource: string | null;
  readonly #idleTimeoutMs: number;

  constructor(
    model: LanguageModel,
    spec: AiSdkProviderSpec,
    name: string,
    keySource: string | null,
    idleTimeoutMs: number,
  ) {
    this.#model = model;
    this.#spec = spec;
    this.name = name;
    this.model = spec.model;
    this.retry = retryPolicy(spec.retry);
    this.#keySource = keySource;
    this.#idleTimeoutMs = idleTimeoutMs;
  }

  complete(request: ModelRequest, signal?: AbortSignal, hooks?: CompletionHooks): Promise<Completion> {
    return completeWithFallback([this], request, signal, hooks);
  }

  /** One try: the model's stream read into a completion. */
  async once(request: ModelRequest, signal?: AbortSignal, hooks?: CompletionHooks): Promise<Completion> {
    const started = performance.now();
    const version = this.#model.specificationVersion === 'v2' ? 'v2' : 'v3';
    const prompt = promptOf(request, this.#spec.images !== false, version);
    const local = new AbortController();
    const forward = () => local.abort(signal?.reason);
    if (signal?.aborted) forward();
    else signal?.addEventListener('abort', forward, { once: true });
    const watch = new IdleWatch(this.#idleTimeoutMs, () => local.abort(new Error('stalled')));
    const options = callOptions(request, prompt, this.#spec, local.signal);
    const requestChars = JSON.stringify(prompt).length + JSON.stringify(request.tools).length;
    let firstToken: number | null = null;
    const text: string[] = [];
    const calls: ToolCall[] = [];
    let usage: CallUsage | null = null;
    let finishReason: string | null = null;
    let finished = false;
    let rateLimits: RateLimits | null = null;
    let streaming = false;
    const take = (part: LanguageModelV3StreamPart): void => {
      switch (part.type) {
        case 'text-delta': {
          firstToken ??= performance.now();
          // V2 and V3 call the piece `delta`; an older V2 provider `textDelta`.
          const delta = part.delta ?? (part as unknown as { textDelta?: string }).textDelta ?? '';
          text.push(delta);
          hooks?.onText?.(delta);
          return;
        }
        case 'tool-input-start':
          firstToken ??= performance.now();
          return;
        case 'tool-call': {
          if (part.providerExecuted) return;
          firstToken ??= performance.now();
          const input = typeof part.input === 'string' ? part.input : JSON.stringify(part.input ?? {});
          const { args, invalid } = parseArguments(input, part.toolName);
          const call: ToolCall = { id: part.toolCallId, name: part.toolName, args, ...(invalid ? { invalid } : {}) };
          calls.push(call);
          if (!invalid) hooks?.onToolCall?.({ id: call.id, name: call.name, args }, calls.length - 1);
          return;
        }
        case 'finish': {
          finished = true;
          usage = usageOf(part.usage);
          const reason = part.finishReason as unknown;
          finishReason =
            typeof reason === 'string'
              ? reason
              : ((reason as { unified?: string; raw?: string } | null)?.raw ??
                (reason as { unified?: string } | null)?.unified ??
                null);
          return;
        }
        case 'error':
          throw this.#streamError(part.error);
        default:
          return;
      }
    };
    try {
      const result = await (this.#model as LanguageModelV3).doStream(options);
      watch.moved();
      streaming = true;
      rateLimits = parseRateLimits(headerPairs(result.response?.headers));
      const reader = result.stream.getReader();
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          watch.moved();
          take(value);
        }
      } finally {
        reader.releaseLock();
      }
      if (!finished)
        throw new ProviderError({
          kind: 'truncated',
          provider: this.name,
          message: `${this.name}: the answer ended before the model said it was done.`,
        });
    } catch (error) {
      throw this.#classify(error, streaming, signal, watch);
    } finally {
      watch.stop();
      signal?.removeEventListener('abort', forward);
      // A call that failed or stopped early is ended, its body with it: no socket is left open for a retry to pile on.
      if (!finished) local.abort(new Error('the model call ended'));
    }
    const ended = performance.now();
    const answer = text.join('');
    return {
      text: answer,
      toolCalls: calls,
      usage: usage ?? estimatedUsage(requestChars, answer, calls),
      ...(usage === null ? { usageReported: false } : {}),
      model: this.model,
      provider: this.name,
      finishReason,
      latencyMs: ended - started,
      timeToFirstTokenMs: firstToken === null ? null : firstToken - started,
      rateLimits,
    };
  }

  /** An error part in the stream: a chunk the AI SDK could not read, or the vendor's own error. */
  #streamError(error: unknown): ProviderError {
    if (UNDECODABLE.some((name) => isAiSdkError(error, name)))
      return new ProviderError({
        kind: 'undecodable',
        provider: this.name,
        message: `${this.name}: the model sent something that is not its format: ${(error as Error).message}`,
        cause: error,
      });
    // An API call's failure sent as a part is classified as if thrown; a vendor's error
    // object by its code or type, as the harness's own wires read one (overloaded, 5xx: retried).
    if (isAiSdkError(error, 'AI_APICallError')) return this.#classify(error, true, undefined, null) as ProviderError;
    return vendorError(this.name, error instanceof Error ? { message: error.message } : error, null);
  }

  /** A thrown failure as the harness's own wires would classify it; an error of no known kind is passed on as it is. */
  #classify(error: unknown, streaming: boolean, signal: AbortSignal | undefined, watch: IdleWatch | null): unknown {
    if (error instanceof ProviderError && error.kind !== 'http') return error;
    if (watch?.fired && !signal?.aborted)
      return new ProviderError({
        kind: 'stalled',
        provider: this.name,
        message: `${this.name}: the answer produced nothing for ${this.#idleTimeoutMs} ms (the idle deadline); it was ended to be tried again.`,
        cause: error,
      });
    if (signal?.aborted)
      return new ProviderError({
        kind: 'aborted',
        provider: this.name,
        message: `${this.name}: cancelled`,
        cause: error,
      });
    if (error instanceof ProviderError) return error;
    if (isAiSdkError(error, 'AI_APICallError')) {
      const status = typeof error.statusCode === 'number' ? error.statusCode : null;
      const headers = headerPairs(error.responseHeaders);
      // A success status whose body could not be read: cut off, or not the vendor's format.
      if (status !== null && status < 300) {
        if (UNDECODABLE.some((name) => isAiSdkError(error.cause, name))) return this.#streamError(error.cause);
        return new ProviderError({
          kind: 'truncated',
          provider: this.name,
          message: `${this.name}: the answer was cut off: ${error.message}${error.cause instanceof Error ? ` (${error.cause.message})` : ''}`,
          cause: error,
        });
      }
      if (status === null)
        return new ProviderError({
          kind: streaming ? 'truncated' : 'connection',
          provider: this.name,
          message: `${this.name}: ${error.message}`,
          cause: error,
        });
      const body = typeof error.responseBody === 'string' ? error.responseBody : '';
      return new ProviderError({
        kind: 'http',
        provider: this.name,
        statusCode: status,
        responseBody: body,
        retryAfterMs: parseRetryAfter(headers),
        rateLimits: parseRateLimits(headers),
        message: `${this.name}: HTTP ${status}: ${body === '' ? error.message : vendorMessage(body)}${status === 401 ? ` (the key came from ${this.#keySource ?? `${this.#spec.package}'s own default variable`}: check that it is the vendor's current key)` : ''}`,
        cause: error,
      });
    }
    if (UNDECODABLE.some((name) => isAiSdkError(error, name))) return this.#streamError(error);
    // A body cut off mid-answer (undici's "terminated"), or a socket that failed before one came.
    if (streaming)
      return new ProviderError({
        kind: 'truncated',
        provider: this.name,
        message: `${this.name}: the answer was cut off: ${(error as Error)?.message ?? String(error)}`,
        cause: error,
      });
    if (error instanceof TypeError && (error as { cause?: unknown }).cause !== undefined)
      return new ProviderError({
        kind: 'connection',
        provider: this.name,
        message: `${this.name}: ${error.message}: ${((error as { cause?: Error }).cause as Error)?.message ?? ''}`,
        cause: error,
      });
    return error;
  }
}

/** Response headers as pairs, whatever shape the provider gave them in. */
function headerPairs(headers: unknown): [string, string][] {
  if (headers === null || typeof headers !== 'object') return [];
  return Object.entries(headers as Record<string, unknown>).flatMap(([name, value]) =>
    typeof value === 'string' ? [[name.toLowerCase(), value] as [string, string]] : [],
  );
}
