/**
 * The HTTP provider: one wire, one transport, retries with back-off that honour
 * Retry-After, and fallback across providers. Built inside the thread that uses it,
 * from a serialisable spec.
 */
import { isAscii } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import { StringDecoder } from 'node:string_decoder';
import { setTimeout as sleep } from 'node:timers/promises';
import { ErrorCode, HarnessError } from '../../errors.js';
import type {
  CallAttempt,
  Completion,
  CompletionHooks,
  HttpProviderSpec,
  ModelRequest,
  Provider,
  ProviderSpec,
  RetryOptions,
  ToolCall,
} from '../provider.js';
import { loadProvider } from '../provider.js';
import { DEFAULT_KEY_ENV, holdSecrets, providerSecrets, scrubText } from '../secrets.js';
import { checkIdleTimeout } from './builders.js';
import {
  bodyError,
  CallCancel,
  type CancelSignal,
  decodedBody,
  readText,
  recordingTransport,
  replayTransport,
  type Transport,
  undiciTransport,
  type WireRequest,
  type WireResponse,
} from './http.js';
import { bodyKind, contentCodings, headerValue } from './media-type.js';
import { findPreset } from './presets.js';
import { parseRateLimits, parseRetryAfter } from './rate-limits.js';
import { SseParser } from './sse.js';
import { type CallUsage, type ModelInfo, ProviderError, type RateLimits, type StreamPart } from './types.js';
import { anthropicWire, openAiWire, toolCallsOf, type Wire, type WireConfig, type WireDecoder } from './wires.js';

const DEFAULT_BASE_URLS = {
  openai: 'https://api.openai.com/v1',
  anthropic: 'https://api.anthropic.com',
  openrouter: 'https://openrouter.ai/api/v1',
} as const;

/** The blank line that ends an event (LF framing, which is what vendors send). */
const BLANK_LINE = Buffer.from('\n\n');

/** The largest whole JSON answer read (a server that ignored `stream`). */
const WHOLE_BODY_LIMIT = 16 * 1024 * 1024;
/** The longest single event: past it a body is not an event stream this client will hold in memory. */
const MAX_EVENT_CHARS = 64 * 1024 * 1024;
/**
 * The most an event stream may send: far past any model's output limit, so only a server
 * that never ends (text deltas forever, which the idle deadline cannot see) reaches it.
 */
const MAX_STREAM_BYTES = 256 * 1024 * 1024;
/** The idle deadline when a spec names none: long enough for a local runtime's slow first token. */
export const DEFAULT_IDLE_TIMEOUT_MS = 300_000;

/**
 * The idle deadline of one call. `moved()` is called when the answer produces something
 * (its headers, an event, a chunk of a whole body); one timer, re-armed only when it
 * fires early, checks the time since, so a busy stream costs a clock read per chunk.
 */
class IdleWatch {
  readonly #ms: number;
  readonly #onIdle: () => void;
  #last = performance.now();
  #timer: NodeJS.Timeout | null;
  fired = false;

  constructor(ms: number, onIdle: () => void) {
    this.#ms = ms;
    this.#onIdle = onIdle;
    this.#timer = setTimeout(this.#check, ms);
  }

  moved(): void {
    this.#last = performance.now();
  }

  #check = (): void => {
    const quiet = performance.now() - this.#last;
    if (quiet >= this.#ms - 1) {
      this.#timer = null;
      this.fired = true;
      this.#onIdle();
    } else {
      this.#timer = setTimeout(this.#check, this.#ms - quiet);
    }
  };

  stop(): void {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
  }
}

/** The body's next chunk; a failure to read it is the vendor's (a cut stream) or the caller's (a cancel). */
async function nextChunk(
  chunks: AsyncIterator<Uint8Array>,
  provider: string,
  signal: CancelSignal,
): Promise<IteratorResult<Uint8Array>> {
  try {
    return await chunks.next();
  } catch (error) {
    throw bodyError(error, provider, signal);
  }
}

/** Stops reading a body: the transport drains what is left for a moment, then closes the connection. */
async function closeIterator(chunks: AsyncIterator<Uint8Array>): Promise<void> {
  await Promise.resolve(chunks.return?.()).catch(() => undefined);
}

async function closeBody(body: AsyncIterable<Uint8Array>): Promise<void> {
  await closeIterator(body[Symbol.asyncIterator]());
}

const WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);
/** The first bytes of an event stream's lines: `:` (a comment), and d, e, i, r (data, event, id, retry). */
const SSE_OPENERS = new Set([0x3a, 0x64, 0x65, 0x69, 0x72]);

/**
 * Reads the body up to its first byte that is not whitespace: `{` or `[` means a whole
 * JSON answer, anything else an event stream. The bytes read are handed back in front of
 * the rest, so the caller reads the body from its start.
 */
async function sniff(
  chunks: AsyncIterator<Uint8Array>,
  provider: string,
  signal: CancelSignal,
): Promise<{ json: boolean; events: boolean; chunks: AsyncIterator<Uint8Array> }> {
  const held: Uint8Array[] = [];
  let first: number | null = null;
  let seen = Buffer.alloc(0);
  while (first === null) {
    const next = await nextChunk(chunks, provider, signal);
    if (next.done) break;
    held.push(next.value);
    // Only the start is looked at, so what is kept to look at stays small.
    seen = Buffer.concat([seen, next.value.subarray(0, 64)]);
    // A UTF-8 byte order mark (which the network may cut anywhere) is not the first byte.
    let from = 0;
    if (seen[0] === 0xef) {
      if (seen.length < 3) continue;
      if (seen[1] === 0xbb && seen[2] === 0xbf) from = 3;
    }
    const at = seen.subarray(from).findIndex((byte) => !WHITESPACE.has(byte));
    if (at >= 0) first = seen[from + at] as number;
    else seen = seen.subarray(0, from);
  }
  return {
    json: first === 0x7b || first === 0x5b,
    // A comment or a field name opens the body: it is an event stream, whatever it was labelled.
    events: first !== null && SSE_OPENERS.has(first),
    chunks: {
      next: () =>
        held.length > 0 ? Promise.resolve({ value: held.shift() as Uint8Array, done: false }) : chunks.next(),
      return: () => chunks.return?.() ?? Promise.resolve({ value: undefined, done: true }),
    },
  };
}

export class HttpProvider implements Provider {
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
    this.#retry = {
      maxAttempts: Math.max(1, Math.floor(retry.maxAttempts ?? 3)),
      baseDelayMs: retry.baseDelayMs ?? 250,
      maxDelayMs: retry.maxDelayMs ?? 20_000,
    };
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
        message: `${this.name}: HTTP ${response.status}: ${vendorMessage(text)}`,
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
      // A whole answer was generated before it was sent, so all of it must arrive within one
      // idle deadline of the headers: bytes trickled (whitespace, say) do not keep it open.
      const read = await readText({ [Symbol.asyncIterator]: () => chunks }, WHOLE_BODY_LIMIT, this.name);
      // RFC 8259 lets a parser ignore a byte order mark; JSON.parse does not.
      const text = read.charCodeAt(0) === 0xfeff ? read.slice(1) : read;
      if (text.length >= WHOLE_BODY_LIMIT) {
        throw new ProviderError({
          kind: 'undecodable',
          provider: this.name,
          message: `${this.name}: the answer is larger than ${WHOLE_BODY_LIMIT} bytes of JSON`,
        });
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch (cause) {
        throw new ProviderError({
          kind: 'undecodable',
          provider: this.name,
          message: `${this.name}: the answer is not JSON`,
          cause,
        });
      }
      emit(decoder.whole(parsed));
      return rateLimits;
    }
    const parser = new SseParser();
    // StringDecoder keeps a character split across chunks whole, at several times TextDecoder's speed.
    const utf8 = new StringDecoder('utf8');
    // Whether the decoder holds no part of a character: then an all-ASCII chunk (most of them)
    // is its own text, copied as Latin-1 in about half the time UTF-8 decoding takes.
    let whole = true;
    const decode = (bytes: Buffer): string => {
      if (whole && isAscii(bytes)) return bytes.toString('latin1');
      // The decoder holds back bytes only when the chunk ends inside a character.
      if (bytes.length > 0) whole = (bytes[bytes.length - 1] as number) < 0x80;
      return utf8.write(bytes);
    };
    // Every event read (a ping, say, whatever its parts) is the stream moving; comments are not.
    const progress = { events: 0 };
    const counted = (text: string) => {
      progress.events++;
      onText(text);
    };
    // A completion gathered whole reads the plain text events of a chunk off its bytes.
    const scanBytes = joined ? decoder.scanBytes?.bind(decoder) : undefined;
    // Before the lane knows the stream's plain event, the first events go to the parser one
    // by one, so the lane can start within the first chunk; after these many, a stream
    // without plain events goes to the parser a chunk at a time.
    let learning = 8;
    let seen = 0;
    let received = 0;
    // Only a failure to read the body is the vendor's (a cut stream, a cancel); one thrown
    // while decoding is a ProviderError already, and one thrown by a caller's hook is the
    // caller's, which no retry would mend. Either way the request is given up.
    for (;;) {
      const next = await nextChunk(chunks, this.name, signal);
      if (next.done) break;
      const chunk = next.value;
      try {
        const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
        let from = 0;
        if (scanBytes !== undefined && whole) {
          for (;;) {
            if (parser.idle()) {
              const read = whole ? scanBytes(bytes, from, counted) : from;
              if (read >= 0) from = read;
              if (read >= 0 || learning === 0) break;
              learning--;
            }
            // The next event goes to the parser first: one begun in an earlier chunk, or one
            // the lane has yet to learn from.
            const cut = bytes.indexOf(BLANK_LINE, from);
            if (cut < 0) break;
            this.#chunk(decode(bytes.subarray(from, cut + 2)), parser, decoder, emit, counted, joined, progress);
            from = cut + 2;
            if (!parser.idle() || decoder.finished) break;
          }
        }
        if (from < bytes.length && !decoder.finished) {
          this.#chunk(
            decode(from === 0 ? bytes : bytes.subarray(from)),
            parser,
            decoder,
            emit,
            counted,
            joined,
            progress,
          );
        }
        received += bytes.length;
        if (received > MAX_STREAM_BYTES) {
          throw new ProviderError({
            kind: 'undecodable',
            provider: this.name,
            message: `${this.name}: the stream sent more than ${MAX_STREAM_BYTES} bytes without ending; no completion is that long`,
          });
        }
        if (parser.buffered() > MAX_EVENT_CHARS) {
          throw new ProviderError({
            kind: 'undecodable',
            provider: this.name,
            message: `${this.name}: an event of the stream is longer than ${MAX_EVENT_CHARS} characters`,
          });
        }
      } catch (error) {
        await closeIterator(chunks);
        throw error;
      }
      if (progress.events !== seen) {
        seen = progress.events;
        watch.moved();
      }
      if (decoder.finished) {
        // The vendor said the answer is complete: the rest of the body is not waited for.
        await closeIterator(chunks);
        emit(decoder.finish(false));
        return rateLimits;
      }
    }
    for (const event of parser.push(utf8.end())) emit(decoder.event(event));
    const ended = parser.end();
    // Bytes that were not events under a media type that did not say so: not this wire at
    // all (a sign-in page). No bytes at all is a cut stream, told as such below.
    if (!evident && progress.events === 0 && received > 0) {
      throw new ProviderError({
        kind: 'undecodable',
        provider: this.name,
        message: `${this.name}: the answer (${contentType === null ? 'with no Content-Type' : `Content-Type ${JSON.stringify(contentType)}`}) is neither an event stream nor JSON.`,
      });
    }
    emit(decoder.finish(ended.incomplete));
    return rateLimits;
  }

  /** One decoded chunk: runs of plain events through the fast lane, the rest through the parser. */
  #chunk(
    input: string,
    parser: SseParser,
    decoder: WireDecoder,
    emit: (parts: StreamPart[]) => void,
    onText: (text: string) => void,
    joined: boolean,
    progress: { events: number },
  ): void {
    let text = input;
    for (;;) {
      // Past the terminator nothing is read, whatever the chunk still holds.
      if (decoder.finished) return;
      // The fast lane reads runs of plain text events; the parser takes whatever breaks a run.
      if (decoder.scan && parser.idle()) {
        const read = decoder.scan(text, onText, joined);
        if (read > 0) text = text.slice(read);
      }
      const cut = text.indexOf('\n\n');
      if (cut < 0 || !decoder.scan) {
        for (const event of parser.push(text)) {
          progress.events++;
          emit(decoder.event(event));
        }
        return;
      }
      // One event at a time through the parser, so the fast lane can resume after it.
      for (const event of parser.push(text.slice(0, cut + 2))) {
        progress.events++;
        emit(decoder.event(event));
      }
      text = text.slice(cut + 2);
      if (text.length === 0) return;
    }
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

/**
 * What a call is taken to have cost when the vendor reported nothing: a quarter of the
 * characters sent and of those received (text and the calls' JSON), the usual rough
 * measure of a token, so a server that never reports usage still draws on the budget.
 */
function estimatedUsage(requestChars: number, text: string, calls: readonly ToolCall[]): CallUsage {
  const callChars = calls.reduce((sum, call) => sum + call.name.length + JSON.stringify(call.args).length, 0);
  return {
    inputTokens: Math.ceil(requestChars / 4),
    outputTokens: Math.ceil((text.length + callChars) / 4),
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    reasoningTokens: 0,
  };
}

function vendorMessage(given: string): string {
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

function backoff(provider: HttpProvider, error: ProviderError, attempt: number): number {
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
    const http = provider instanceof HttpProvider ? provider : null;
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

class FallbackProvider implements Provider {
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

function resolveKey(spec: HttpProviderSpec, envName: string | null, name: string): string | null {
  if (spec.apiKey) return spec.apiKey;
  if (spec.apiKeyRedacted) {
    throw new HarnessError(
      ErrorCode.ProviderLoadFailed,
      `${name}: no API key: this run's key was handed in directly and keys are never stored with a run. ` +
        "Pass it again: supervisor.resume(rootId, { provider }) for the tree's model, or { reviewer } (and retryGate(store, runId, { reviewer })) for a review gate's.",
    );
  }
  const variable = spec.apiKeyEnv ?? envName;
  if (variable && process.env[variable]) return process.env[variable] as string;
  if (spec.auth === 'none') return null;
  throw new HarnessError(
    ErrorCode.ProviderLoadFailed,
    `${name}: no API key: ${variable ? `the environment variable ${variable} is not set` : 'none was given'}. ` +
      'Set it, or pass apiKey; keys are never stored with a run, so a resume in another process needs it again.',
  );
}

function headersFor(spec: HttpProviderSpec, key: string | null): Record<string, string> {
  const headers: Record<string, string> = { 'user-agent': 'io-harness' };
  const auth = spec.auth ?? (spec.kind === 'anthropic' ? 'x-api-key' : 'bearer');
  if (key !== null && auth !== 'none') {
    if (auth === 'bearer') headers.authorization = `Bearer ${key}`;
    else if (auth === 'x-api-key') headers['x-api-key'] = key;
    else headers[auth.header.toLowerCase()] = key;
  }
  if (spec.kind === 'anthropic') headers['anthropic-version'] = '2023-06-01';
  if (spec.kind === 'openrouter') {
    headers['http-referer'] = 'https://github.com/io-harness/io-harness';
    headers['x-title'] = 'io-harness';
  }
  for (const [name, value] of Object.entries(spec.headers ?? {})) headers[name.toLowerCase()] = value;
  return headers;
}

/** Builds the provider a spec describes, in this thread. */
export async function buildHttpProvider(spec: Exclude<ProviderSpec, { kind: 'module' }>): Promise<Provider> {
  if (spec.kind === 'fallback') {
    if (spec.providers.length === 0) {
      throw new HarnessError(ErrorCode.ProviderLoadFailed, 'a fallback provider needs at least one provider.');
    }
    return new FallbackProvider(await Promise.all(spec.providers.map((inner) => loadProvider(inner))));
  }
  const preset = spec.kind === 'compatible' && spec.preset ? findPreset(spec.preset) : undefined;
  const name = spec.name ?? preset?.name ?? spec.kind;
  const baseUrl = spec.baseUrl ?? preset?.baseUrl ?? (spec.kind === 'compatible' ? null : DEFAULT_BASE_URLS[spec.kind]);
  if (!baseUrl) {
    throw new HarnessError(ErrorCode.ProviderLoadFailed, `${name}: a compatible provider needs a baseUrl or a preset.`);
  }
  const envName =
    spec.kind === 'compatible'
      ? preset && !preset.local
        ? `${preset.envPrefix}_API_KEY`
        : null
      : DEFAULT_KEY_ENV[spec.kind];
  const replaying = spec.transport !== undefined && 'replay' in spec.transport;
  // A replay reaches no vendor, so it needs no key; a local runtime needs none unless one was set.
  const key =
    replaying ||
    (spec.kind === 'compatible' && preset?.local && !spec.apiKey && !spec.apiKeyEnv && !spec.apiKeyRedacted)
      ? null
      : resolveKey(spec, envName, name);
  // From here on this thread scrubs the key, the headers and the URL's credentials from every error it raises.
  holdSecrets(providerSecrets(key === null ? spec : { ...spec, apiKey: key }));
  const config: WireConfig = {
    name,
    baseUrl,
    model: spec.model,
    headers: headersFor(spec, key),
    maxTokens: spec.maxTokens ?? null,
    promptCacheKey: spec.kind === 'openai' || spec.kind === 'openrouter' || (preset?.promptCacheKey ?? false),
    systemCacheMarker: spec.kind === 'openrouter',
    extraBody: spec.kind === 'openrouter' ? { usage: { include: true } } : {},
    images: spec.images !== false,
  };
  let transport: Transport = undiciTransport;
  if (spec.transport && 'replay' in spec.transport)
    transport = replayTransport(spec.transport.replay, spec.transport.served);
  else if (spec.transport && 'record' in spec.transport)
    transport = recordingTransport(undiciTransport, spec.transport.record);
  const idleTimeoutMs =
    spec.idleTimeoutMs === undefined
      ? DEFAULT_IDLE_TIMEOUT_MS
      : checkIdleTimeout(spec.idleTimeoutMs, `${name}: idleTimeoutMs`);
  return new HttpProvider(
    spec.kind === 'anthropic' ? anthropicWire : openAiWire,
    config,
    transport,
    spec.retry,
    idleTimeoutMs,
  );
}
