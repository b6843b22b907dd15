/**
 * How a provider reaches its vendor. A {@link Transport} sends one request and hands
 * back the status, the headers in the order they came, and the body as a stream of
 * bytes. The live one is undici; the recording one writes every exchange to a file;
 * the replaying one answers from that file, keyed by the request's own bytes, with no
 * socket and no key.
 */
import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { Agent } from 'undici';
import { ErrorCode, HarnessError } from '../../errors.js';
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

export interface Transport {
  send(wire: WireRequest, provider: string, signal?: AbortSignal): Promise<WireResponse>;
}

/** One keep-alive pool per thread: every provider of an agent thread shares its sockets. */
let sharedAgent: Agent | null = null;
function agent(): Agent {
  sharedAgent ??= new Agent({ keepAliveTimeout: 30_000, connections: 64 });
  return sharedAgent;
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
export function connectionError(error: unknown, provider: string, signal?: AbortSignal): ProviderError {
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
              if (signal?.aborted) controller.abort(signal.reason);
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
 * A response body as undici's dispatcher delivers it: chunks queued as they come, read
 * by one `for await`. Reading pauses the socket when the caller falls behind and resumes
 * it when the caller catches up; a caller that stops early aborts the request, so the
 * connection is closed instead of being left with an unread answer.
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

  push(chunk: Uint8Array): void {
    this.#chunks.push(chunk);
    if (this.#chunks.length - this.#head >= HIGH_WATER && this.controller && !this.#paused) {
      this.#paused = true;
      this.controller.pause();
    }
    this.#signal();
  }

  end(): void {
    this.#ended = true;
    this.#signal();
  }

  fail(error: unknown): void {
    this.#failure ??= { error };
    this.#signal();
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
        if (!this.#ended && this.#failure === null)
          this.controller?.abort(new Error('the response body was not read to its end'));
        this.#chunks.length = 0;
        this.#head = 0;
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
export function bodyError(error: unknown, provider: string, signal?: AbortSignal): ProviderError {
  if (error instanceof ProviderError) return error;
  const failure = connectionError(error, provider, signal);
  if (failure.kind === 'aborted') return failure;
  return new ProviderError({
    kind: 'truncated',
    provider,
    message: `${provider}: the stream was cut: ${(error as Error)?.message ?? String(error)}`,
    cause: error,
  });
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
export function replayTransport(file: string): Transport {
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
  const served = new Map<string, number>();
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
      const index = served.get(key) ?? 0;
      served.set(key, index + 1);
      const exchange = list[Math.min(index, list.length - 1)] as RecordedExchange;
      async function* body(): AsyncIterable<Uint8Array> {
        for (const chunk of exchange.chunks) yield Buffer.from(chunk, 'base64');
        if (exchange.cut !== undefined) throw new Error(`the recorded stream was cut: ${exchange.cut}`);
      }
      return { status: exchange.status, headers: exchange.headers, body: body() };
    },
  };
}

/** Reads a whole (error) body as text, bounded. */
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
