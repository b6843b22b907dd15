/**
 * How a provider reaches its vendor. A {@link Transport} sends one request and hands
 * back the status, the headers in the order they came, and the body as a stream of
 * bytes. The live one is undici; the recording one writes every exchange to a file;
 * the replaying one answers from that file, keyed by the request's own bytes, with no
 * socket and no key.
 */
import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { pipeline, Readable, type Transform } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import type { Agent } from 'undici';
import { ErrorCode, HarnessError } from '../../errors.js';
import { requiredOnFirstUse } from '../lazy-require.js';
import { ProviderError } from './types.js';

export interface WireRequest {
  method: 'GET' | 'POST';
  url: string;
  headers: Record<string, string>;
  body?: string;
}

export interface WireResponse {
  status: number;
  /** Response headers, names lowercased, in the order received. */
  headers: [string, string][];
  body: AsyncIterable<Uint8Array>;
}

/**
 * What a transport reads of a cancel: an AbortSignal has all of it, and so has the
 * provider's own {@link CallCancel}, which a call makes without an AbortController.
 */
export interface CancelSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

export interface Transport {
  send(wire: WireRequest, provider: string, signal?: CancelSignal): Promise<WireResponse>;
}

/**
 * One call's cancel: the caller's cancel forwarded, or the idle deadline. A plain
 * listener list, not an AbortController: an AbortSignal's listeners cost microseconds
 * each to add and remove, on every call, where this costs nothing measurable.
 */
export class CallCancel implements CancelSignal {
  aborted = false;
  reason: unknown = undefined;
  #listeners: (() => void)[] = [];

  addEventListener(_type: 'abort', listener: () => void): void {
    if (!this.aborted) this.#listeners.push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const at = this.#listeners.indexOf(listener);
    if (at >= 0) this.#listeners.splice(at, 1);
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    for (const listener of this.#listeners.splice(0)) listener();
  }
}

/**
 * One keep-alive pool per thread: every provider of every actor on an agent thread shares
 * its sockets. Up to 512 at once to one origin, so a thread hosting hundreds of actors
 * does not make them queue for a socket (the supervisor's caps bound how many call at once).
 * undici's own header and body timeouts are off: the provider's idle deadline is the one
 * clock for a silent answer (it counts comments as silence, which undici cannot), so a
 * deadline set longer than undici's default is not cut short by it.
 */
let sharedAgent: Agent | null = null;
function agent(): Agent {
  sharedAgent ??= new (loadHttpClient().Agent)({
    keepAliveTimeout: 30_000,
    connections: 512,
    headersTimeout: 0,
    bodyTimeout: 0,
  });
  return sharedAgent;
}

/**
 * undici's keep-alive agent, required on the first request rather than with this module:
 * the main thread of a program whose models are called from agent threads never needs it,
 * and an agent thread calls this as it starts, so its first model call does not pay for
 * it (see docs/ARCHITECTURE.md, "Thread start cost"). Only the agent's own module is
 * loaded, not the package's index, which requires every dispatcher, mock, cache and
 * interceptor undici has (63 ms of a thread's start against 23 here); the transport uses
 * nothing but `Agent.dispatch`. undici is pinned to one version, and the file is checked
 * to be the package's own `Agent` (test/lazy-imports.test.ts).
 */
const undiciAgent = requiredOnFirstUse<typeof Agent>('undici/lib/dispatcher/agent.js');
export function loadHttpClient(): { Agent: typeof Agent } {
  return { Agent: undiciAgent() };
}

const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_CLOSED',
]);

/** The failure an undici error stands for: a cancel, or no answer. */
export function connectionError(error: unknown, provider: string, signal?: CancelSignal): ProviderError {
  if (signal?.aborted) {
    return new ProviderError({
      kind: 'aborted',
      provider,
      message: `${provider}: the call was cancelled`,
      cause: error,
    });
  }
  const code = errorCode(error);
  const known = code !== null && CONNECTION_CODES.has(code);
  return new ProviderError({
    kind: 'connection',
    provider,
    message: `${provider}: ${known ? `connection failed (${code})` : 'connection failed'}: ${(error as Error)?.message ?? String(error)}`,
    cause: error,
  });
}

function errorCode(error: unknown): string | null {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    current = (current as { cause?: unknown }).cause;
  }
  return null;
}

function headerPairs(headers: Record<string, string | string[] | undefined>): [string, string][] {
  const pairs: [string, string][] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const item of value) pairs.push([name, item]);
    else pairs.push([name, value]);
  }
  return pairs;
}

/**
 * The live transport: undici over one shared keep-alive agent, through its dispatcher
 * interface rather than `request()`. Each chunk of the body goes straight from undici's
 * parser to a small queue the caller iterates: no Readable stream and no async iterator
 * of one between the socket and the decoder. On a long completion that machinery cost
 * more than our parsing and decoding together (docs/MEASUREMENTS.md).
 */
export const undiciTransport: Transport = {
  send(wire, provider, signal) {
    return new Promise<WireResponse>((resolve, reject) => {
      if (signal?.aborted) return reject(connectionError(signal.reason, provider, signal));
      const body = new BodyQueue();
      let started = false;
      const onAbort = () => {
        // Still waiting for a connection (the pool is busy, or the connect is slow): the
        // caller hears at once, and the request is dropped once undici reaches it.
        if (body.controller === null) reject(connectionError(signal?.reason, provider, signal));
        else body.controller.abort(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const settle = () => signal?.removeEventListener('abort', onAbort);
      try {
        const url = new URL(wire.url);
        agent().dispatch(
          {
            origin: url.origin,
            path: `${url.pathname}${url.search}`,
            method: wire.method,
            headers: wire.headers,
            body: wire.body ?? null,
          },
          {
            onRequestStart(controller) {
              body.controller = controller;
              if (signal?.aborted) controller.abort(signal.reason as Error);
            },
            onResponseStart(_controller, statusCode, headers) {
              // An interim answer (100 Continue, 102 Processing, 103 Early Hints) is not the answer.
              if (statusCode < 200) return;
              started = true;
              resolve({
                status: statusCode,
                headers: headerPairs(headers as Record<string, string | string[] | undefined>),
                body,
              });
            },
            onResponseData(_controller, chunk) {
              body.push(chunk);
            },
            onResponseEnd() {
              settle();
              body.end();
            },
            onResponseError(_controller, error) {
              settle();
              if (started) body.fail(error);
              else reject(connectionError(error, provider, signal));
            },
          },
        );
      } catch (error) {
        // A URL that does not parse, or options undici refuses: no answer can come.
        settle();
        reject(connectionError(error, provider, signal));
      }
    });
  },
};

/** What undici's dispatcher hands a handler to steer the response with. */
interface DispatchController {
  pause(): void;
  resume(): void;
  abort(reason: unknown): void;
}

/** Chunks held before undici is asked to stop reading the socket until the caller catches up. */
const HIGH_WATER = 16;

/**
 * After the caller stops reading (the vendor's terminator arrived, or the decoder gave
 * up), the rest of the answer is read and dropped for this long, and this much at most,
 * so a body that ends at once (as vendors' do, just after their terminator) leaves its
 * socket in the pool for the next call. A body that goes on (keep-alives after the
 * terminator) is aborted then, which closes the connection.
 */
const DRAIN_GRACE_MS = 250;
const DRAIN_LIMIT_BYTES = 64 * 1024;

/**
 * A response body as undici's dispatcher delivers it: chunks queued as they come, read
 * by one `for await`. Reading pauses the socket when the caller falls behind and resumes
 * it when the caller catches up. A caller that stops early is not kept waiting: what
 * comes after is dropped for a short grace ({@link DRAIN_GRACE_MS}), and an answer still
 * going then is aborted, so the connection is closed instead of being left reading.
 */
class BodyQueue implements AsyncIterable<Uint8Array> {
  controller: DispatchController | null = null;
  readonly #chunks: Uint8Array[] = [];
  #head = 0;
  #ended = false;
  #failure: { error: unknown } | null = null;
  #wake: (() => void) | null = null;
  #paused = false;
  #iterated = false;
  /** Set once the caller stopped reading: how much has been dropped since, and the grace's timer. */
  #draining: { dropped: number; timer: NodeJS.Timeout } | null = null;

  push(chunk: Uint8Array): void {
    if (this.#draining !== null) {
      this.#draining.dropped += chunk.byteLength;
      if (this.#draining.dropped > DRAIN_LIMIT_BYTES) this.#abandon();
      return;
    }
    this.#chunks.push(chunk);
    if (this.#chunks.length - this.#head >= HIGH_WATER && this.controller && !this.#paused) {
      this.#paused = true;
      this.controller.pause();
    }
    this.#signal();
  }

  end(): void {
    this.#ended = true;
    this.#stopDraining();
    this.#signal();
  }

  fail(error: unknown): void {
    this.#failure ??= { error };
    this.#stopDraining();
    this.#signal();
  }

  #stopDraining(): void {
    if (this.#draining !== null) clearTimeout(this.#draining.timer);
  }

  /** The grace is over, or too much came: the request is aborted and its socket closed. */
  #abandon(): void {
    this.#stopDraining();
    if (this.#ended || this.#failure !== null) return;
    this.#failure = { error: new Error('the response body was not read to its end') };
    this.controller?.abort(this.#failure.error);
  }

  #signal(): void {
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  }

  #take(): Uint8Array {
    const chunk = this.#chunks[this.#head] as Uint8Array;
    this.#chunks[this.#head] = EMPTY;
    this.#head++;
    if (this.#head === this.#chunks.length) {
      this.#chunks.length = 0;
      this.#head = 0;
    }
    if (this.#paused && this.#chunks.length - this.#head < HIGH_WATER / 2) {
      this.#paused = false;
      this.controller?.resume();
    }
    return chunk;
  }

  [Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    if (this.#iterated) throw new Error('a response body can be read once');
    this.#iterated = true;
    return {
      next: async (): Promise<IteratorResult<Uint8Array>> => {
        for (;;) {
          if (this.#head < this.#chunks.length) return { value: this.#take(), done: false };
          if (this.#failure !== null) throw this.#failure.error;
          if (this.#ended) return { value: undefined, done: true };
          await new Promise<void>((resolve) => {
            this.#wake = resolve;
          });
        }
      },
      return: async (): Promise<IteratorResult<Uint8Array>> => {
        this.#chunks.length = 0;
        this.#head = 0;
        if (!this.#ended && this.#failure === null && this.#draining === null) {
          const timer = setTimeout(() => this.#abandon(), DRAIN_GRACE_MS);
          timer.unref();
          this.#draining = { dropped: 0, timer };
          if (this.#paused) {
            this.#paused = false;
            this.controller?.resume();
          }
        }
        return { value: undefined, done: true };
      },
    };
  }
}

const EMPTY = new Uint8Array(0);

/**
 * The failure a body read error stands for: a cancel, or a stream the vendor had started
 * and that was cut. Callers reading a body wrap their loop with this.
 */
export function bodyError(error: unknown, provider: string, signal?: CancelSignal): ProviderError {
  if (error instanceof ProviderError) return error;
  const failure = connectionError(error, provider, signal);
  if (failure.kind === 'aborted') return failure;
  const code = errorCode(error);
  // Bytes that are not the coding the vendor named (a cut coded stream is Z_BUF_ERROR: cut).
  if (code === 'Z_DATA_ERROR' || code === 'ERR__ERROR_FORMAT_PADDING_1' || code?.startsWith('ERR_BROTLI')) {
    return new ProviderError({
      kind: 'undecodable',
      provider,
      message: `${provider}: the body is not in the content coding its headers name: ${(error as Error)?.message ?? String(error)}`,
      cause: error,
    });
  }
  return new ProviderError({
    kind: 'truncated',
    provider,
    message: `${provider}: the stream was cut: ${(error as Error)?.message ?? String(error)}`,
    cause: error,
  });
}

/** The decoders of the content codings a body may arrive in; `x-gzip` is gzip's old name (RFC 9110 §8.4.1.3). */
const CODINGS: Record<string, () => Transform> = {
  gzip: () => createGunzip(),
  'x-gzip': () => createGunzip(),
  deflate: () => createInflate(),
  br: () => createBrotliDecompress(),
};

/**
 * The body with its content codings undone, last applied first. A request says
 * `accept-encoding: identity`, but a server may code the answer all the same (a gateway
 * in front of the vendor, say), so gzip, deflate and br are read; any other coding is
 * an `undecodable` failure naming it. An uncoded body is handed back as it is.
 */
export function decodedBody(
  body: AsyncIterable<Uint8Array>,
  codings: readonly string[],
  provider: string,
): AsyncIterable<Uint8Array> {
  if (codings.length === 0) return body;
  const decoders = [...codings].reverse().map((coding) => {
    const make = CODINGS[coding];
    if (make === undefined) {
      throw new ProviderError({
        kind: 'undecodable',
        provider,
        message: `${provider}: the answer is in the content coding ${JSON.stringify(coding)}, which this client cannot read (gzip, deflate and br it can).`,
      });
    }
    return make();
  });
  // Destroying the last stream (a caller that stops reading) destroys the chain back to
  // the body, whose iterator is then told to stop as any reader's would be.
  const source = Readable.from(body, { objectMode: false });
  return pipeline([source, ...decoders] as unknown as [Readable, Transform], () => undefined) as unknown as Readable;
}

/** What identifies a request for replay: its method, path and body bytes (never its headers, which hold the key). */
export function exchangeKey(wire: WireRequest): string {
  const url = new URL(wire.url);
  return createHash('sha256')
    .update(`${wire.method} ${url.pathname}${url.search}\n${withoutAffinity(wire.body ?? '')}`)
    .digest('hex');
}

/**
 * The body less its session-affinity key: that key is a digest of the run's session (its
 * id unless named), so it differs between a recording and its replay while asking the same.
 */
function withoutAffinity(body: string): string {
  if (!body.includes('"prompt_cache_key"')) return body;
  try {
    const { prompt_cache_key: _affinity, ...rest } = JSON.parse(body) as Record<string, unknown>;
    return JSON.stringify(rest);
  } catch {
    return body;
  }
}

interface RecordedExchange {
  key: string;
  method: string;
  path: string;
  status: number;
  headers: [string, string][];
  /** The body exactly as it arrived, chunk by chunk, base64. */
  chunks: string[];
  /** Set when the stream was cut: why. A replay ends the same way. */
  cut?: string;
}

/** Sends through `inner` and appends every exchange, byte for byte, to `file` (JSON lines). */
export function recordingTransport(inner: Transport, file: string): Transport {
  return {
    async send(wire, provider, signal) {
      const response = await inner.send(wire, provider, signal);
      const chunks: string[] = [];
      const key = exchangeKey(wire);
      const url = new URL(wire.url);
      async function* tee(): AsyncIterable<Uint8Array> {
        let cut: string | null = null;
        try {
          for await (const chunk of response.body) {
            chunks.push(Buffer.from(chunk).toString('base64'));
            yield chunk;
          }
        } catch (error) {
          cut = error instanceof Error ? error.message : String(error);
          throw error;
        } finally {
          // Whatever arrived is recorded, however the read ended: a stream the decoder gave up
          // on replays to the same point, and one the network cut replays cut.
          const exchange: RecordedExchange = {
            key,
            method: wire.method,
            path: `${url.pathname}${url.search}`,
            status: response.status,
            headers: response.headers,
            chunks,
            ...(cut === null ? {} : { cut }),
          };
          appendFileSync(file, `${JSON.stringify(exchange)}\n`);
        }
      }
      return { status: response.status, headers: response.headers, body: tee() };
    },
  };
}

/**
 * Answers from a recording. Identical requests are answered in the order they were
 * recorded (the last answer repeats). A request never recorded is an error naming the
 * file, since a replay must not reach a vendor.
 */
export function replayTransport(file: string, served?: string): Transport {
  if (!existsSync(file)) {
    throw new HarnessError(
      ErrorCode.InvalidArgument,
      `no recording at ${file}; record one first with transport { record: "${file}" }.`,
    );
  }
  const byKey = new Map<string, RecordedExchange[]>();
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const exchange = JSON.parse(line) as RecordedExchange;
    const list = byKey.get(exchange.key) ?? [];
    list.push(exchange);
    byKey.set(exchange.key, list);
  }
  const answered = new Map<string, number>();
  return {
    async send(wire, provider) {
      const key = exchangeKey(wire);
      const list = byKey.get(key);
      if (!list || list.length === 0) {
        throw new HarnessError(
          ErrorCode.ReplayMiss,
          `${provider}: ${file} has no recorded answer for ${wire.method} ${new URL(wire.url).pathname} with this body (key ${key.slice(0, 12)}); the run asked something the recording never saw. Record it again.`,
        );
      }
      const index = answered.get(key) ?? 0;
      answered.set(key, index + 1);
      if (served !== undefined)
        appendFileSync(served, `${JSON.stringify({ key, path: new URL(wire.url).pathname, body: wire.body ?? '' })}\n`);
      const exchange = list[Math.min(index, list.length - 1)] as RecordedExchange;
      async function* body(): AsyncIterable<Uint8Array> {
        for (const chunk of exchange.chunks) yield Buffer.from(chunk, 'base64');
        if (exchange.cut !== undefined) throw new Error(`the recorded stream was cut: ${exchange.cut}`);
      }
      return { status: exchange.status, headers: exchange.headers, body: body() };
    },
  };
}

/**
 * Reads a whole (error) body as text, bounded: past `limit` bytes the rest is read and
 * dropped, and the text is `limit` characters long.
 */
export async function readText(
  body: AsyncIterable<Uint8Array>,
  limit = 64 * 1024,
  provider = 'provider',
): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      if (size < limit) parts.push(Buffer.from(chunk));
      size += chunk.byteLength;
    }
  } catch (error) {
    throw bodyError(error, provider);
  }
  return Buffer.concat(parts).toString('utf8').slice(0, limit);
}
