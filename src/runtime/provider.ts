/**
 * The model seam. An agent actor talks to a model only through {@link Provider}.
 * A provider never crosses a thread: the supervisor hands the actor a serialisable
 * {@link ProviderSpec} and the actor rebuilds the provider inside its own worker.
 */
import type { ImageAttachment } from './images.js';
import { CREDENTIAL_OPTION, isHarmlessHeader, maskedUrl, URL_OPTION } from './secrets.js';

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

export interface ToolCall {
  /** Unique within the completion; results answer it by this id. */
  id: string;
  name: string;
  /** Parsed JSON arguments. */
  args: Record<string, unknown>;
  /**
   * Set when the arguments as sent cannot be used: not JSON, JSON that is not an object,
   * or far over the tool's limits. `args` is then `{}`, the call is not run, the model is
   * told `reason`, and the trace keeps `sent`: the start of what the model sent.
   */
  invalid?: { reason: string; sent: string };
}

/** How much of unusable arguments the trace keeps. */
const SENT_KEPT_CHARS = 1024;

/** The start of what a model sent, bounded, for the trace. */
export function keptOfSent(text: string): string {
  return text.length <= SENT_KEPT_CHARS
    ? text
    : `${text.slice(0, SENT_KEPT_CHARS)}… [cut: ${text.length} characters in all]`;
}

/** One turn of the ordered transcript a request carries. */
export type TranscriptEntry =
  | { role: 'user'; text: string }
  | { role: 'assistant'; text: string; toolCalls: ToolCall[] }
  | { role: 'tool'; callId: string; name: string; content: string; isError: boolean; images?: ImageAttachment[] };

export interface ToolDefinition {
  name: string;
  description: string;
  /** JSON Schema of the arguments object. */
  parameters: Record<string, unknown>;
}

/**
 * Tokens of a model call. `inputTokens` counts the whole prompt, cached parts
 * included; the cache and reasoning counts say how much of it was what, where the
 * vendor reports it.
 */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens?: number;
  cacheWriteTokens?: number;
  reasoningTokens?: number;
}

/** What the runtime knows about the agent making the call; real wires ignore it. */
export interface RequestMetadata {
  runId: string;
  rootId: string;
  address: string;
  parentAddress: string | null;
  depth: number;
  seq: number;
}

export interface RequestOptions {
  /** An opaque per-session digest sent for cache affinity (`prompt_cache_key`, `x-session-affinity`). */
  cacheKey?: string;
  /** The JSON Schema the final answer must satisfy: sent as `response_format` on OpenAI-shaped wires. */
  responseFormat?: { name: string; schema: Record<string, unknown> };
  /**
   * A cache breakpoint after this transcript entry, where the vendor sells explicit ones
   * (Anthropic, OpenRouter): the end of the prefix a fold froze, once it has been sent.
   */
  cacheBreakpoint?: number;
  /** The vendor's web search and fetch tools, as the contract asks (`withWeb`); each wire writes them its vendor's way. */
  web?: import('./web/web.js').WebData;
}

/** Hooks into a completion as it streams. */
export interface CompletionHooks {
  /** A tool call the stream has finished, before the completion has (used to start reads early). */
  onToolCall?(call: ToolCall, index: number): void;
  /** A piece of the completion's text, as it streams (a retry's text streams again from its start). */
  onText?(delta: string): void;
}

export interface ModelRequest {
  system: string;
  transcript: readonly TranscriptEntry[];
  tools: readonly ToolDefinition[];
  metadata: RequestMetadata;
  options?: RequestOptions;
}

/** One try at a model call that did not answer, and what came after it. */
export interface CallAttempt {
  provider: string;
  model: string;
  /** The failure: `http`, `connection`, `truncated`, `stalled`, `undecodable`. */
  kind: string;
  statusCode: number | null;
  message: string;
  /** What followed: another try after `delayMs`, the next provider, or nothing. */
  next: 'retry' | 'fallback' | 'none';
  delayMs: number;
  latencyMs: number;
}

export interface Completion {
  text: string;
  toolCalls: ToolCall[];
  usage: Usage;
  model: string;
  /** Which provider answered. */
  provider?: string;
  finishReason?: string | null;
  latencyMs?: number;
  timeToFirstTokenMs?: number | null;
  /** What the vendor said of its rate limits on this answer. */
  rateLimits?: import('./providers/types.js').RateLimits | null;
  /** The failed tries before this answer (retries, fallbacks), oldest first. */
  attempts?: CallAttempt[];
  /**
   * False when the vendor reported no token counts for this answer (a compatible server
   * that ignores `stream_options.include_usage`, say). `usage` then holds the runtime's
   * estimate — a quarter of the request's and the answer's characters — so budgets
   * still draw; it is never a zero reported as fact. Absent means reported.
   */
  usageReported?: boolean;
  /**
   * The characters of the request this answered, as the runtime measured them (see
   * runtime/context/assembler.ts): with `usage.inputTokens`, what the next request's size
   * is estimated by. Set by the agent loop, stored with the step.
   */
  requestChars?: number;
  /** What the vendor searched and fetched for this answer, and the pages it cited (absent when nothing). */
  web?: import('./web/web.js').WebActivity;
}

export interface Provider {
  readonly name: string;
  complete(request: ModelRequest, signal?: AbortSignal, hooks?: CompletionHooks): Promise<Completion>;
  /** Resolves when the vendor can be reached at all; rejects with a connection failure when it cannot. */
  probe?(signal?: AbortSignal): Promise<void>;
  /** The vendor's catalogue of models (an HTTP provider's `/models`), for a model's context window. */
  models?(signal?: AbortSignal): Promise<import('./providers/types.js').ModelInfo[]>;
  /** Where an HTTP provider sends its requests (its catalogue is there too). */
  readonly baseUrl?: string;
}

/**
 * A provider described by a module: `module` names an ES module (a path or a URL)
 * whose export (`export`, default `"default"`) is a factory `(options) => Provider`;
 * the actor imports it inside its worker thread.
 */
export interface ModuleProviderSpec {
  kind: 'module';
  module: string;
  export?: string;
  options?: JsonValue;
}

export interface RetryOptions {
  /** Tries per provider, the first included. Default 3. */
  maxAttempts?: number;
  /** The first back-off; each retry doubles it. Default 250 ms. */
  baseDelayMs?: number;
  /** The longest back-off, Retry-After included. Default 20 s. */
  maxDelayMs?: number;
}

/** A vendor over HTTP, described as data (build one with OpenAI, Anthropic, OpenRouter or Compatible). */
export interface HttpProviderSpec {
  kind: 'openai' | 'anthropic' | 'openrouter' | 'compatible';
  model: string;
  baseUrl?: string;
  /** The environment variable holding the key, read in the thread that builds the provider. */
  apiKeyEnv?: string;
  /** The key itself. Held in memory only: a run's stored spec never carries it. */
  apiKey?: string;
  /** Set on a stored spec whose key (or credential header) was removed: it cannot be used without the provider handed back. */
  apiKeyRedacted?: boolean;
  /** How the key is sent. Default: `x-api-key` for Anthropic, `bearer` for the rest. */
  auth?: 'bearer' | 'x-api-key' | 'none' | { header: string };
  headers?: Record<string, string>;
  maxTokens?: number;
  /** For `compatible`: the preset this spec came from, for the trace. */
  preset?: string;
  retry?: RetryOptions;
  /**
   * How long an answer may go without producing an event — no bytes, or only SSE
   * comments and keep-alives — before it is ended as a retryable `stalled` failure; the
   * wait for the response's headers counts too. Default 300 000 ms (5 minutes).
   */
  idleTimeoutMs?: number;
  /** Record every exchange to a file, or answer from one with no socket at all. */
  /**
   * `record`: every exchange appended to the file; `replay`: answered from such a file,
   * with no socket and no key; `served` (with `replay`): each request answered appended
   * there as a JSON line (`{ key, path, body }`), so what a replayed run sent can be read.
   */
  transport?: { record: string } | { replay: string; served?: string };
  /** The provider's name in the trace. Default: the kind or preset. */
  name?: string;
  /**
   * A header to send the asking agent's address in with each model request (`x-agent`,
   * say): for a gateway that routes or reports by agent, or the scripted model server's
   * `call.agent`. Not sent unless named: a vendor otherwise learns nothing of the tree.
   */
  agentHeader?: string;
  /**
   * False: images tools attach are not sent (a model that takes text only refuses a
   * request with one); each tool result says its image was left out. Default true.
   */
  images?: boolean;
}

/** Providers tried in order: the next one when the one before could not answer. */
export interface FallbackProviderSpec {
  kind: 'fallback';
  providers: ProviderSpec[];
  /** Refuse to start a run (before its first step) when the first provider cannot be reached. */
  refuseIfPrimaryUnreachable?: boolean;
}

/**
 * A model the embedder serves from its own thread: `name` is one of the host models the
 * supervisor or the run was given (`models: { [name]: HostModel }`, see
 * ./providers/host-model.ts). The agent asks it over the host channel, so nothing of it
 * crosses into a worker but its name; like tools, it lives in the process, not the store,
 * and a resume elsewhere must be given it again.
 */
export interface HostProviderSpec {
  kind: 'host';
  name: string;
}

/**
 * A language model from one of the AI SDK's provider packages (`@ai-sdk/google`,
 * `@ai-sdk/mistral`, `@ai-sdk/openai-compatible`, ...), rebuilt in each agent's thread
 * from this description (see ./providers/ai-sdk.ts). The package is the embedder's to
 * install; a program that names none loads none.
 */
export interface AiSdkProviderSpec {
  kind: 'ai-sdk';
  /** The package (`@ai-sdk/google`), or an absolute path to a module, that exports the provider. */
  package: string;
  /**
   * Its export: a ready provider (`google`, `mistral`) or a factory (`createGoogleGenerativeAI`,
   * `createOpenAICompatible`), which is called with `options` (and the key, when one is named here).
   */
  factory: string;
  /** The model id the provider takes (`gemini-2.5-pro`); also the id accounting rows and price tables know it by. */
  model: string;
  /** The factory's settings (`baseURL`, `name`, `headers`, ...): JSON only; a key goes in apiKey or apiKeyEnv. */
  options?: { [key: string]: JsonValue };
  /** The environment variable holding the key, read in the thread that builds the provider and passed as `apiKey`. */
  apiKeyEnv?: string;
  /** The key itself, passed as `apiKey`. Held in memory only: a run's stored spec never carries it. */
  apiKey?: string;
  /** Set on a stored spec whose key or credentials were removed: it cannot be used without the provider handed back. */
  apiKeyRedacted?: boolean;
  /** The largest answer asked for (`maxOutputTokens`). */
  maxTokens?: number;
  retry?: RetryOptions;
  /** How long the answer may go without a part before it is ended as `stalled`. Default 300 000 ms. */
  idleTimeoutMs?: number;
  /** The provider's name in the trace. Default: `ai-sdk:` and the package. */
  name?: string;
  /** False for a model that takes text only: images tools attach are left out. Default true. */
  images?: boolean;
}

export type ProviderSpec =
  | ModuleProviderSpec
  | HttpProviderSpec
  | FallbackProviderSpec
  | HostProviderSpec
  | AiSdkProviderSpec;

/** Whether a spec is one HTTP vendor on one of the harness's own wires (not a module, a fallback, a host model or an AI SDK model). */
export function isHttpSpec(spec: ProviderSpec): spec is HttpProviderSpec {
  return (
    spec.kind === 'openai' || spec.kind === 'anthropic' || spec.kind === 'openrouter' || spec.kind === 'compatible'
  );
}

/** The model a spec names (an HTTP vendor's or an AI SDK model's), or null (a module, a fallback, a host model). */
export function specModel(spec: ProviderSpec): string | null {
  return isHttpSpec(spec) || spec.kind === 'ai-sdk' ? (spec.model ?? null) : null;
}

/** The environment variables a provider spec reads keys from (fallback members included). */
export function keyVariables(spec: ProviderSpec): string[] {
  if (spec.kind === 'fallback') return spec.providers.flatMap(keyVariables);
  if (!isHttpSpec(spec) && spec.kind !== 'ai-sdk') return [];
  return spec.apiKeyEnv ? [spec.apiKeyEnv] : [];
}

/** The headers a stored spec may keep: the harmless ones; whether any other was dropped. */
function harmlessHeaders(headers: Record<string, unknown>): { kept: Record<string, string>; dropped: boolean } {
  const kept: Record<string, string> = {};
  let dropped = false;
  for (const [name, value] of Object.entries(headers)) {
    if (isHarmlessHeader(name) && typeof value === 'string') kept[name] = value;
    else dropped = true;
  }
  return { kept, dropped };
}

/**
 * A factory's settings as a stored spec may keep them: at any depth, an option named like
 * a credential is dropped, a `headers` object keeps its harmless headers only, and a URL
 * has its credentials masked. `dropped` says whether anything was.
 */
function keptOptions(value: JsonValue, name: string, depth: number): { kept: JsonValue | undefined; dropped: boolean } {
  if (CREDENTIAL_OPTION.test(name) || depth > 16) return { kept: undefined, dropped: true };
  if (typeof value === 'string' && URL_OPTION.test(name)) {
    const masked = maskedUrl(value);
    return { kept: masked, dropped: masked !== value };
  }
  if (value === null || typeof value !== 'object') return { kept: value, dropped: false };
  if (Array.isArray(value)) {
    let dropped = false;
    const kept = value.map((item) => {
      const inner = keptOptions(item, name, depth + 1);
      dropped ||= inner.dropped;
      return inner.kept ?? null;
    });
    return { kept, dropped };
  }
  if (/^headers$/i.test(name)) {
    const harmless = harmlessHeaders(value);
    return { kept: harmless.kept, dropped: harmless.dropped };
  }
  const kept: { [key: string]: JsonValue } = {};
  let dropped = false;
  for (const [key, inner] of Object.entries(value)) {
    const made = keptOptions(inner, key, depth + 1);
    dropped ||= made.dropped;
    if (made.kept !== undefined) kept[key] = made.kept;
  }
  return { kept, dropped };
}

/** An AI SDK spec with its key and every credential of its factory's settings removed (see keptOptions). */
function redactAiSdkSpec(spec: AiSdkProviderSpec): AiSdkProviderSpec {
  const { apiKey, options, ...rest } = spec;
  const redacted: AiSdkProviderSpec = { ...rest };
  let dropped = apiKey !== undefined;
  if (options !== undefined) {
    const made = keptOptions(options, '', 0);
    redacted.options = made.kept as { [key: string]: JsonValue };
    dropped ||= made.dropped;
  }
  if (dropped) redacted.apiKeyRedacted = true;
  return redacted;
}

/**
 * The spec with every secret removed: what may be written to the store. The key goes;
 * of the headers only the harmless ones stay (content type, user agent, the vendor's
 * version and beta headers: see HARMLESS_HEADERS in secrets.ts), whatever the others are
 * called; the base URL keeps its host and path, its user name, password and key-like
 * query parameters masked.
 */
export function redactSpec(spec: ProviderSpec): ProviderSpec {
  if (spec.kind === 'fallback') return { ...spec, providers: spec.providers.map(redactSpec) };
  if (spec.kind === 'ai-sdk') return redactAiSdkSpec(spec);
  if (!isHttpSpec(spec)) return spec;
  const { apiKey, headers, ...rest } = spec;
  const harmless = harmlessHeaders(headers ?? {});
  let dropped = harmless.dropped;
  const redacted: HttpProviderSpec = { ...rest };
  if (headers !== undefined) redacted.headers = harmless.kept;
  if (spec.baseUrl !== undefined) {
    const masked = maskedUrl(spec.baseUrl);
    if (masked !== spec.baseUrl) {
      redacted.baseUrl = masked;
      dropped = true;
    }
  }
  // The marker stops a later process from quietly sending some other key (from the
  // environment) to this spec's host: it must be handed the provider again.
  if (apiKey !== undefined || dropped) redacted.apiKeyRedacted = true;
  return redacted;
}
