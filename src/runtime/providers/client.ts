/**
 * The HTTP provider: one wire, one transport, retries with back-off that honour
 * Retry-After, and fallback across providers. Built inside the thread that uses it,
 * from a serialisable spec. How an answer's body is read (a whole JSON answer or an event
 * stream, under the idle deadline) is ./answer-body.ts.
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { HarnessError } from '../../errors.js';
import type { CallAttempt, Completion, CompletionHooks, ModelRequest, Provider, RetryOptions } from '../provider.js';
import { scrubText } from '../secrets.js';
import type { WebActivity } from '../web/web.js';
import { closeBody, IdleWatch, readEventStream, readWholeAnswer, sniff } from './answer-body.js';
import {
  CallCancel,
  type CancelSignal,
  decodedBody,
  readText,
  type Transport,
  type WireRequest,
  type WireResponse,
} from './http.js';
import { DEFAULT_IDLE_TIMEOUT_MS } from './idle.js';
import { bodyKind, contentCodings, headerValue } from './media-type.js';
import { parseRateLimits, parseRetryAfter } from './rate-limits.js';
import {
  type CallUsage,
  estimatedUsage,
  type ModelInfo,
  ProviderError,
  type RateLimits,
  type StreamPart,
} from './types.js';
import { toolCallsOf, type Wire, type WireConfig } from './wires.js';

/**
 * A provider that is tried one call at a time under its own retry policy (the harness's
 * HTTP wires, an AI SDK model): the fallback below retries it; any other provider's
 * `complete` is called once.
 */
export interface TriedProvider extends Provider {
  readonly model: string;
  readonly retry: Required<RetryOptions>;
  once(request: ModelRequest, signal?: AbortSignal, hooks?: CompletionHooks): Promise<Completion>;
}

function tried(provider: Provider): TriedProvider | null {
  const candidate = provider as Partial<TriedProvider>;
  return typeof candidate.once === 'function' && candidate.retry !== undefined ? (provider as TriedProvider) : null;
}

/** A retry policy with its defaults: 3 tries, 250 ms doubling, at most 20 s. */
export function retryPolicy(retry: RetryOptions = {}): Required<RetryOptions> {
  return {
    maxAttempts: Math.max(1, Math.floor(retry.maxAttempts ?? 3)),
    baseDelayMs: retry.baseDelayMs ?? 250,
    maxDelayMs: retry.maxDelayMs ?? 20_000,
  };
}

export class HttpProvider implements TriedProvider {
  readonly name: string;
  readonly model: string;
  readonly #wire: Wire;
  readonly #config: WireConfig;
  readonly #transport: Transport;
  readonly #retry: Required<RetryOptions>;
  readonly #idleTimeoutMs: number;

  constructor(
    wire: Wire,
    config: WireConfig,
    transport: Transport,
    retry: RetryOptions = {},
    idleTimeoutMs: number = DEFAULT_IDLE_TIMEOUT_MS,
  ) {
    this.#idleTimeoutMs = idleTimeoutMs;
    this.name = config.name;
    this.model = config.model;
    this.#wire = wire;
    this.#config = config;
    this.#transport = transport;
    this.#retry = retryPolicy(retry);
  }

  get retry(): Required<RetryOptions> {
    return this.#retry;
  }

  /**
   * Sends the request and hands every part to `onPart`, synchronously, as each chunk of
   * the body is decoded. The hot path: no promise per part, only per network chunk.
   * Reading stops at the wire's terminator, not at the server's close; an answer that
   * produces no event for the idle deadline is ended as `stalled`.
   */
  async #run(
    request: ModelRequest,
    onPart: (part: StreamPart) => void,
    signal?: AbortSignal,
    onText: (text: string) => void = (text) => onPart({ type: 'text-delta', text }),
    joined = false,
  ): Promise<{ rateLimits: RateLimits; requestChars: number }> {
    const wire = this.#wire.request(request, this.#config);
    // The idle deadline aborts the request through a signal of its own, so its failure is
    // told apart from the caller's cancel.
    const local = new CallCancel();
    const forward = () => local.abort(signal?.reason);
    if (signal?.aborted) forward();
    else signal?.addEventListener('abort', forward, { once: true });
    const watch = new IdleWatch(this.#idleTimeoutMs, () => local.abort(new Error('stalled')));
    try {
      const rateLimits = await this.#exchange(wire, onPart, local, watch, onText, joined);
      return { rateLimits, requestChars: wire.body?.length ?? 0 };
    } catch (error) {
      // An error status the vendor sent is its answer, even if its body then went silent.
      const answered = error instanceof ProviderError && error.kind === 'http';
      if (watch.fired && !signal?.aborted && !answered) {
        throw new ProviderError({
          kind: 'stalled',
          provider: this.name,
          message: `${this.name}: the answer produced no event for ${this.#idleTimeoutMs} ms (the idle deadline); it was ended to be tried again.`,
          cause: error,
        });
      }
      throw error;
    } finally {
      watch.stop();
      signal?.removeEventListener('abort', forward);
    }
  }

  async #exchange(
    wire: WireRequest,
    onPart: (part: StreamPart) => void,
    signal: CancelSignal,
    watch: IdleWatch,
    onText: (text: string) => void,
    joined: boolean,
  ): Promise<RateLimits> {
    const response = await this.#transport.send(wire, this.name, signal);
    watch.moved();
    const rateLimits = parseRateLimits(response.headers);
    // A redirect is not followed (a key must not travel to another host): it is an answer we
    // cannot use. The status stands whatever its body: one in a coding this client cannot
    // read, cut, or trickled past the idle deadline is read as far as it goes.
    if (response.status >= 300) {
      const text = await this.#decoded(response).then(
        (body) => readText(body).catch(() => ''),
        () => '',
      );
      throw new ProviderError({
        kind: 'http',
        provider: this.name,
        statusCode: response.status,
        responseBody: text,
        retryAfterMs: parseRetryAfter(response.headers),
        rateLimits,
        message: `${this.name}: HTTP ${response.status}: ${vendorMessage(text)}${response.status === 401 && this.#config.keySource ? ` (the key came from ${this.#config.keySource}: check that it is the vendor's current key)` : ''}`,
      });
    }
    const body = await this.#decoded(response);
    const decoder = this.#wire.decoder(this.#config);
    const emit = (parts: StreamPart[]) => {
      for (const part of parts) onPart(part);
    };
    const contentType = headerValue(response.headers, 'content-type');
    let kind = bodyKind(contentType);
    // Whether the body is known to be an event stream: by its media type, or by how it opens.
    let evident = kind === 'event-stream';
    let chunks = body[Symbol.asyncIterator]();
    if (kind === 'unknown') {
      // No media type this client reads (or none at all): the body's first byte decides.
      const sniffed = await sniff(chunks, this.name, signal);
      chunks = sniffed.chunks;
      kind = sniffed.json ? 'json' : 'event-stream';
      evident = sniffed.events;
    }
    if (kind === 'json') {
      emit(decoder.whole(await readWholeAnswer(chunks, this.name)));
      return rateLimits;
    }
    await readEventStream(chunks, {
      provider: this.name,
      decoder,
      emit,
      onText,
      joined,
      signal,
      watch,
      evident,
      contentType,
    });
    return rateLimits;
  }

  /** The completion as it streams: text deltas, tool-call starts, deltas and ends, usage, end. One try, no retries. */
  async *stream(request: ModelRequest, signal?: AbortSignal): AsyncGenerator<StreamPart, RateLimits> {
    const queue: StreamPart[] = [];
    let wake: (() => void) | null = null;
    let finished = false;
    let failure: unknown = null;
    let rateLimits: RateLimits | null = null;
    // A caller that stops reading before the end (a break, a throw) ends the request too.
    // (A listener rather than AbortSignal.any, which costs more than the first token takes.)
    const stop = new AbortController();
    const forward = () => stop.abort(signal?.reason);
    if (signal?.aborted) forward();
    else signal?.addEventListener('abort', forward, { once: true });
    this.#run(
      request,
      (part) => {
        queue.push(part);
        wake?.();
      },
      stop.signal,
    ).then(
      (result) => {
        rateLimits = result.rateLimits;
        finished = true;
        wake?.();
      },
      (error: unknown) => {
        failure = error;
        finished = true;
        wake?.();
      },
    );
    try {
      for (;;) {
        while (queue.length > 0) yield queue.shift() as StreamPart;
        if (finished) break;
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = null;
      }
      while (queue.length > 0) yield queue.shift() as StreamPart;
    } finally {
      signal?.removeEventListener('abort', forward);
      if (!finished) stop.abort(new Error('the caller stopped reading the stream'));
    }
    if (failure !== null) throw failure;
    return rateLimits as unknown as RateLimits;
  }

  /** One try: the stream gathered into a completion. */
  async once(request: ModelRequest, signal?: AbortSignal, hooks?: CompletionHooks): Promise<Completion> {
    const started = performance.now();
    let firstToken: number | null = null;
    const text: string[] = [];
    let usage: CallUsage | null = null;
    let finishReason: string | null = null;
    const ends: Extract<StreamPart, { type: 'tool-call-end' }>[] = [];
    let web: WebActivity | null = null;
    /** The sources kept so far, by kind, page and passage: one cited twice is one source. */
    const seen = new Set<string>();
    const { rateLimits, requestChars } = await this.#run(
      request,
      (part) => {
        if (firstToken === null && (part.type === 'text-delta' || part.type === 'tool-call-start'))
          firstToken = performance.now();
        if (part.type === 'text-delta') {
          text.push(part.text);
          hooks?.onText?.(part.text);
        } else if (part.type === 'tool-call-end') {
          ends.push(part);
          // A call whose arguments could not be decoded is never started early.
          if (!part.invalid) hooks?.onToolCall?.({ id: part.id, name: part.name, args: part.args }, part.index);
        } else if (part.type === 'usage') usage = part.usage;
        else if (part.type === 'end') finishReason = part.finishReason;
        else if (part.type === 'web-source') {
          web ??= { searches: 0, fetches: 0, sources: [] };
          const key = JSON.stringify([part.source.kind, part.source.url, part.source.citedText]);
          if (!seen.has(key)) {
            seen.add(key);
            web.sources.push(part.source);
          }
        } else if (part.type === 'web-use') {
          // The vendor's running count: the last one stands. Nothing done is nothing to keep.
          if (web === null && part.searches === 0 && part.fetches === 0) return;
          web ??= { searches: 0, fetches: 0, sources: [] };
          web.searches = part.searches;
          web.fetches = part.fetches;
        }
      },
      signal,
      // Text read by the fast lane goes straight to the completion, with no part object, a
      // run of events at a time: the completion needs their concatenation, not each delta.
      (delta) => {
        firstToken ??= performance.now();
        text.push(delta);
        hooks?.onText?.(delta);
      },
      true,
    );
    const finished = performance.now();
    const answer = text.join('');
    const toolCalls = toolCallsOf(ends);
    return {
      text: answer,
      toolCalls,
      usage: usage ?? estimatedUsage(requestChars, answer, toolCalls),
      ...(usage === null ? { usageReported: false } : {}),
      model: this.model,
      provider: this.name,
      finishReason,
      latencyMs: finished - started,
      timeToFirstTokenMs: firstToken === null ? null : firstToken - started,
      rateLimits,
      ...(web === null ? {} : { web }),
    };
  }

  /** With retries: 408, 409, 429, 5xx, a failed connection and a cut stream are tried again after a back-off. */
  async complete(request: ModelRequest, signal?: AbortSignal, hooks?: CompletionHooks): Promise<Completion> {
    return completeWithFallback([this], request, signal, hooks);
  }

  async probe(signal?: AbortSignal): Promise<void> {
    const timeout = AbortSignal.timeout(5_000);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    let response: Awaited<ReturnType<Transport['send']>>;
    try {
      response = await this.#transport.send(this.#wire.models(this.#config), this.name, combined);
    } catch (error) {
      // Our own time limit running out means no answer came: unreachable, not cancelled.
      if (error instanceof ProviderError && error.kind === 'aborted' && !signal?.aborted) {
        throw new ProviderError({
          kind: 'connection',
          provider: this.name,
          message: `${this.name}: no answer within 5 s`,
          cause: error,
        });
      }
      throw error;
    }
    // Any answer at all, even an error status, means the vendor is there.
    await readText(response.body).catch(() => '');
  }

  /** The response's body with its content codings undone; a coding it cannot read closes the body and throws. */
  async #decoded(response: WireResponse): Promise<AsyncIterable<Uint8Array>> {
    try {
      return decodedBody(response.body, contentCodings(response.headers), this.name);
    } catch (error) {
      await closeBody(response.body);
      throw error;
    }
  }

  /** What the vendor says it can run, with context windows and prices where it publishes them. */
  get baseUrl(): string {
    return this.#config.baseUrl;
  }

  async models(signal?: AbortSignal): Promise<ModelInfo[]> {
    const response = await this.#transport.send(this.#wire.models(this.#config), this.name, signal);
    const body = await this.#decoded(response);
    const text = await readText(body, 32 * 1024 * 1024, this.name);
    if (response.status >= 400) {
      throw new ProviderError({
        kind: 'http',
        provider: this.name,
        statusCode: response.status,
        responseBody: text,
        message: `${this.name}: listing models failed with HTTP ${response.status}: ${vendorMessage(text)}`,
      });
    }
    try {
      return this.#wire.parseModels(JSON.parse(text));
    } catch (cause) {
      throw new ProviderError({
        kind: 'undecodable',
        provider: this.name,
        message: `${this.name}: the model list is not JSON`,
        cause,
      });
    }
  }
}

/** The message in a vendor's error body (its `error.message`, `error` or `message`), scrubbed; else the body's start. */
export function vendorMessage(given: string): string {
  // Scrubbed before it is cut, so no part of a key the vendor echoed is left at the cut.
  const body = scrubText(given);
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown } | string; message?: unknown };
    if (typeof parsed.error === 'string') return parsed.error;
    if (parsed.error && typeof parsed.error.message === 'string') return parsed.error.message;
    if (typeof parsed.message === 'string') return parsed.message;
  } catch {
    // not JSON: the text itself says it
  }
  return body.slice(0, 300) || '(no body)';
}

function backoff(provider: TriedProvider, error: ProviderError, attempt: number): number {
  const { baseDelayMs, maxDelayMs } = provider.retry;
  const exponential = baseDelayMs * 2 ** attempt;
  const jittered = exponential * (0.8 + Math.random() * 0.4);
  return Math.max(error.retryAfterMs ?? 0, Math.min(maxDelayMs, jittered));
}

/**
 * Tries each provider in turn, each with its own retries. The failed tries travel
 * with the completion (or the final error) so the step can put them in the trace.
 */
export async function completeWithFallback(
  providers: Provider[],
  request: ModelRequest,
  signal?: AbortSignal,
  hooks?: CompletionHooks,
): Promise<Completion> {
  const attempts: CallAttempt[] = [];
  let last: unknown = null;
  for (const [position, provider] of providers.entries()) {
    const isLast = position === providers.length - 1;
    const http = tried(provider);
    const maxAttempts = http ? http.retry.maxAttempts : 1;
    for (let attempt = 0; attempt < maxAttempts; attempt++) {
      const started = performance.now();
      try {
        const completion = http
          ? await http.once(request, signal, hooks)
          : await provider.complete(request, signal, hooks);
        return { ...completion, attempts: [...attempts, ...(completion.attempts ?? [])] };
      } catch (error) {
        last = error;
        if (signal?.aborted || (error instanceof ProviderError && error.kind === 'aborted'))
          throw withAttempts(error, attempts);
        if (!(error instanceof ProviderError)) {
          // Not a vendor failure (a module provider's own error): no retry, but the next provider may answer.
          const message = error instanceof Error ? error.message : String(error);
          attempts.push({
            provider: provider.name,
            model: provider.name,
            kind: 'error',
            statusCode: null,
            message,
            next: isLast ? 'none' : 'fallback',
            delayMs: 0,
            latencyMs: Math.round(performance.now() - started),
          });
          break;
        }
        mergeAttempts(attempts, error);
        // A vendor asking us to wait longer than we are willing to is a reason to move on, not to ask early.
        const tooLong = error.retryAfterMs !== null && http !== null && error.retryAfterMs > http.retry.maxDelayMs;
        const retry = error.isRetryable && !tooLong && attempt + 1 < maxAttempts && http !== null;
        const delayMs = retry && http ? backoff(http, error, attempt) : 0;
        attempts.push({
          provider: provider.name,
          model: http?.model ?? provider.name,
          kind: error.kind,
          statusCode: error.statusCode,
          message: error.message,
          next: retry ? 'retry' : isLast ? 'none' : 'fallback',
          delayMs: Math.round(delayMs),
          latencyMs: Math.round(performance.now() - started),
        });
        if (!retry) break;
        await sleep(delayMs, undefined, { signal }).catch(() => {
          throw withAttempts(
            new ProviderError({
              kind: 'aborted',
              provider: provider.name,
              message: `${provider.name}: cancelled while backing off`,
            }),
            attempts,
          );
        });
      }
    }
  }
  throw withAttempts(last, attempts);
}

function withAttempts(error: unknown, attempts: CallAttempt[]): unknown {
  if (HarnessError.isInstance(error)) error.details.attempts = attempts;
  return error;
}

/** Tries a nested provider (a fallback within a fallback) already made come first. */
function mergeAttempts(attempts: CallAttempt[], error: ProviderError): void {
  const inner = error.details.attempts as CallAttempt[] | undefined;
  if (inner && inner.length > 0 && inner !== attempts) attempts.push(...inner);
}

/** Providers tried in order (see completeWithFallback); built by the registry from a fallback spec. */
export class FallbackProvider implements Provider {
  readonly name: string;
  readonly #providers: Provider[];

  constructor(providers: Provider[]) {
    this.#providers = providers;
    this.name = providers.map((provider) => provider.name).join(' -> ');
  }

  complete(request: ModelRequest, signal?: AbortSignal, hooks?: CompletionHooks): Promise<Completion> {
    return completeWithFallback(this.#providers, request, signal, hooks);
  }

  /** Only the primary is probed: that is what refuse-to-start asks about. */
  async probe(signal?: AbortSignal): Promise<void> {
    await this.#providers[0]?.probe?.(signal);
  }
}
