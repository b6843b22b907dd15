/**
 * A scripted model behind a real HTTP server on loopback, answering in the vendors' own
 * wire formats (OpenAI Chat Completions, Anthropic Messages, an OpenAI-style model
 * list), so the runtime's real HTTP providers — their request building, SSE parsing,
 * usage accounting, error classification and retries — can be driven end to end
 * without a key or a network.
 *
 * What each request gets is decided by a {@link ModelScript}: a completion (text and
 * tool calls, streamed or not), or a fault (an error status, a stream cut mid-event, a
 * stream that stops being JSON, a request that never answers, or a recorded vendor
 * transcript replayed byte for byte).
 *
 * A request is read by ./wire-requests.ts (also what a script reads it with) and an answer
 * written in the vendor's wire by ./wire-answers.ts; this module is the server between them.
 *
 * @example
 * const server = await ScriptedModelServer.start((call) =>
 *   toolResults(call).length === 0
 *     ? { toolCalls: [{ name: 'read_file', args: { path: 'a.txt' } }] }
 *     : { text: 'done' });
 * // point an OpenAI-compatible provider at `${server.url}/v1`
 * await server.close();
 */
import { readFile } from 'node:fs/promises';
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { resolve as resolvePath } from 'node:path';
import type { HttpProviderSpec } from '../runtime/provider.js';
import { encodeEvents, encodeMessage, errorBody, resolveCompletion } from './wire-answers.js';
import { invalidRequest, record, type Wire } from './wire-requests.js';

export { assistantTurns, contentText, lastUserText, systemText, toolResults } from './wire-requests.js';

/** The header a provider from {@link ScriptedModelServer.provider} sends the asking agent's address in. */
export const AGENT_HEADER = 'x-io-harness-agent';

/** One model request as the server received it. */
export interface ScriptedCall {
  /** Which vendor's format the request came in, from its path. */
  wire: 'openai' | 'anthropic';
  /** The request path as sent, query included. */
  path: string;
  /** Request headers, names lowercased, repeated headers joined with ", ". */
  headers: Record<string, string>;
  /** The parsed JSON body, or null when the body was not JSON. */
  body: unknown;
  /** The body text exactly as received. */
  raw: string;
  /** This call's position in {@link ScriptedModelServer.calls}, from zero. */
  index: number;
  /**
   * The address of the agent that asked (`root`, or the name a spawn gave, such as `helper`), as the provider sent it
   * in the {@link AGENT_HEADER} header: a provider from {@link ScriptedModelServer.provider}
   * sends it. Null when the request did not carry it.
   */
  agent: string | null;
  /**
   * Which connection carried it: the server numbers connections from zero as it accepts
   * them, so two calls with one number came over one kept-alive socket.
   */
  connection: number;
}

/**
 * A request body as a script sees it: the server has checked it is a JSON object with a
 * `model` and `messages` whose every entry has a `role` (else it answered 400 and did not
 * ask the script). The rest is the vendor's wire, loosely typed: read what you need.
 */
export interface ScriptedRequestBody {
  model: string;
  messages: ScriptedMessage[];
  /** The Anthropic wire's system block (text, or text parts). */
  system?: unknown;
  tools?: Record<string, unknown>[];
  stream?: boolean;
  [field: string]: unknown;
}

/** One message of a request, on either wire. */
export interface ScriptedMessage {
  role: string;
  /** Text, or the wire's content parts. */
  content?: unknown;
  /** OpenAI wire: the assistant's tool calls. */
  tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[];
  /** OpenAI wire: the call a tool message answers. */
  tool_call_id?: string;
  [field: string]: unknown;
}

/** A request the script is asked to answer: a {@link ScriptedCall} whose body passed the shape checks. */
export interface ScriptedRequest extends ScriptedCall {
  body: ScriptedRequestBody;
}

/** A tool call the scripted model makes. Without an id, a deterministic one is made up. */
export interface ScriptedToolCall {
  id?: string;
  name: string;
  args: Record<string, unknown>;
  /**
   * The arguments exactly as the wire carries them, in place of the JSON of `args`: for a
   * model that sends broken JSON, or JSON that is not an object. On the Anthropic wire's
   * non-streaming answer, `input` is this text parsed (or the text itself when it is not JSON).
   */
  rawArguments?: string;
}

/**
 * Token counts to report. `inputTokens` is the whole prompt, cached parts included (the
 * runtime's own convention); on the Anthropic wire the server reports
 * `input_tokens = inputTokens - cacheReadTokens - cacheWriteTokens`, as Anthropic does,
 * so a provider must add the cache counts back.
 */
export interface ScriptedUsage {
  inputTokens?: number;
  outputTokens?: number;
  cacheReadTokens?: number;
  cacheWriteTokens?: number;
  reasoningTokens?: number;
}

/**
 * What the vendor's own web tools did for an answer (a run with `withWeb`), sent in each
 * wire's shape: on the Anthropic wire, a `server_tool_use` block and its result block per
 * search and fetch, the citations as `citations_delta` events of the text block, and the
 * counts in the usage's `server_tool_use`; on the OpenAI wire, the citations as
 * `url_citation` annotations and the searches counted in the usage's `server_tool_use`
 * (as OpenRouter reports them).
 */
export interface ScriptedWeb {
  /** Searches the vendor ran, each with what it found. */
  searches?: { query: string; results: { url: string; title: string }[] }[];
  /** Pages the vendor fetched (the Anthropic wire only). */
  fetches?: { url: string; title?: string; text?: string }[];
  /** Passages the answer's text cites. */
  citations?: { url: string; title: string; citedText: string }[];
}

/** A successful answer: text, tool calls, or both. */
export interface ScriptedCompletion {
  text?: string;
  toolCalls?: ScriptedToolCall[];
  /** What the vendor's server-side web tools did before answering. */
  web?: ScriptedWeb;
  /** The finish reason sent in place of the usual (`stop`/`tool_calls`, `end_turn`/`tool_use`): `pause_turn`, say. */
  finishReason?: string;
  usage?: ScriptedUsage;
  /** Wait this long before sending the response headers, like a model thinking. */
  latencyMs?: number;
  /** Extra response headers, such as a vendor's rate-limit headers. */
  headers?: Record<string, string>;
}

export type ScriptedFault =
  /** An error status with a vendor-shaped JSON body (or `body` verbatim). */
  | { fault: 'status'; status: number; body?: string; retryAfter?: string; headers?: Record<string, string> }
  /** Send `afterEvents` whole SSE events, then half of the next one, then destroy the socket. */
  | { fault: 'truncate'; afterEvents: number }
  /** Send one valid SSE event, then `data: {not json` and a blank line, then end the stream cleanly. */
  | { fault: 'malformed' }
  /** Accept the request and never answer, until {@link ScriptedModelServer.close}. */
  | { fault: 'hang' }
  /** Send the bytes of a recorded SSE transcript verbatim; a relative path is resolved from the working directory. */
  | { fault: 'fixture'; file: string }
  /**
   * The response exactly as given, for what no completion can express: the status, the
   * headers with their names' case and order (no header is added, not even Content-Type),
   * then each chunk in its own write (`{ waitMs }` waits in between). `after` says what
   * follows the last chunk: `end` (the default) ends the response, `destroy` cuts the
   * socket, `hang` holds it open sending nothing, and `{ every, send }` goes on writing
   * `send` every `every` milliseconds (keep-alive comments, say) until the client closes.
   * {@link ScriptedModelServer.responseEnd} tells which side ended it.
   */
  | {
      fault: 'raw';
      status?: number;
      headers?: Record<string, string> | [string, string][];
      chunks: (string | Uint8Array | { waitMs: number })[];
      after?: 'end' | 'destroy' | 'hang' | { every: number; send: string | Uint8Array };
    };

export type ScriptedAnswer = ScriptedCompletion | ScriptedFault;

export type ModelScript = (call: ScriptedRequest) => ScriptedAnswer | Promise<ScriptedAnswer>;

/** One entry of `GET /v1/models`, in the OpenRouter-style shape some providers read context and prices from. */
export interface ScriptedModel {
  id: string;
  contextLength?: number;
  /** Prices per token as decimal strings, as OpenRouter publishes them. */
  pricing?: { prompt: string; completion: string };
}

export interface ScriptedModelServerOptions {
  /** What `GET /v1/models` lists; empty when not given. */
  models?: ScriptedModel[];
  /** Wait between SSE events; at 0 the server still yields a turn so each event goes out in its own write. */
  chunkDelayMs?: number;
  /**
   * Keep each call in {@link ScriptedModelServer.calls} and its response's end (default
   * true). A long-lived server that answers from its script alone sets it false, so it
   * holds no request once answered.
   */
  keepCalls?: boolean;
}

/** What a truncated stream carries before it is cut, since a truncate fault has no content of its own. */
const TRUNCATED_TEXT = 'This answer was cut off before the model finished saying it.';

/** A fixed `created` for listed models, so `/v1/models` answers are identical run to run. */
const MODEL_LIST_CREATED = 1_700_000_000;

/**
 * A loopback HTTP server that plays a model vendor. Start one per test (or per suite),
 * point a provider's base URL at {@link url}, and close it afterwards: close also cuts
 * requests that are still open, so a `hang` fault never outlives its test.
 */
export class ScriptedModelServer {
  /** Where the server listens, without a trailing slash: clients append `/v1/...`. */
  readonly url: string;
  /**
   * Every model request received (`/v1/chat/completions` and `/v1/messages`, malformed
   * ones included), in arrival order. Model listings and unknown routes are not calls.
   */
  readonly calls: ScriptedCall[] = [];
  /** How many times `GET /v1/models` was asked (the catalogue a provider reads a window from). */
  modelListings = 0;

  readonly #server: Server;
  readonly #script: ModelScript;
  readonly #models: ScriptedModel[];
  readonly #chunkDelayMs: number;
  readonly #keepCalls: boolean;
  readonly #responseEnds = new Map<number, Promise<'finished' | 'closed'>>();
  readonly #connections = new WeakMap<object, number>();
  #connectionCount = 0;
  #closed: Promise<void> | null = null;

  private constructor(server: Server, script: ModelScript, options: ScriptedModelServerOptions) {
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('scripted model server is not on TCP');
    this.url = `http://127.0.0.1:${address.port}`;
    this.#server = server;
    this.#script = script;
    this.#models = options.models ?? [];
    this.#chunkDelayMs = Math.max(0, options.chunkDelayMs ?? 0);
    this.#keepCalls = options.keepCalls !== false;
    server.on('connection', (socket) => {
      this.#connections.set(socket, this.#connectionCount++);
    });
    server.on('request', (request: IncomingMessage, response: ServerResponse) => {
      void this.#handle(request, response);
    });
  }

  /**
   * A provider spec for this server, on the OpenAI wire (or the Anthropic one): its URL, a
   * placeholder key, and the agent's address sent with each request, read back as `call.agent`.
   */
  provider(options: { wire?: 'openai' | 'anthropic'; model?: string } = {}): HttpProviderSpec {
    const wire = options.wire ?? 'openai';
    return {
      kind: wire,
      model: options.model ?? 'scripted',
      baseUrl: wire === 'openai' ? `${this.url}/v1` : this.url,
      apiKey: 'scripted-model-server',
      agentHeader: AGENT_HEADER,
      retry: { baseDelayMs: 1 },
    };
  }

  static async start(script: ModelScript, options: ScriptedModelServerOptions = {}): Promise<ScriptedModelServer> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    return new ScriptedModelServer(server, script, options);
  }

  /**
   * How the response to call `index` ended: `finished` when the server wrote all of it
   * (the client may keep the connection for its next request), `closed` when the
   * connection closed first (the client hung up, or the server cut it). Resolves once it
   * has ended; rejects when there is no such call.
   */
  responseEnd(index: number): Promise<'finished' | 'closed'> {
    return this.#responseEnds.get(index) ?? Promise.reject(new Error(`no call ${index} reached the server`));
  }

  /** Stops listening and destroys every open connection, including requests held by a `hang` fault. */
  close(): Promise<void> {
    this.#closed ??= new Promise<void>((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
    return this.#closed;
  }

  /** Never rejects: whatever goes wrong becomes a 500 for that request, never a crash of the test process. */
  async #handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    // A client that hangs up mid-write makes the response emit 'error'; that is the
    // client's business, and an unhandled 'error' event would take the process down.
    response.on('error', () => undefined);
    try {
      await this.#route(request, response);
    } catch (error) {
      if (response.headersSent || response.destroyed) {
        response.destroy();
        return;
      }
      sendJson(response, 500, {
        error: { message: `scripted model server failed: ${describe(error)}`, type: 'server_error' },
      });
    }
  }

  async #route(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const method = request.method ?? 'GET';
    const path = request.url ?? '/';
    const pathname = path.split('?')[0] ?? '/';
    if (method === 'GET' && pathname === '/v1/models') {
      this.modelListings++;
      sendJson(response, 200, {
        object: 'list',
        data: this.#models.map((model) => ({
          id: model.id,
          object: 'model',
          created: MODEL_LIST_CREATED,
          owned_by: 'scripted',
          ...(model.contextLength === undefined ? {} : { context_length: model.contextLength }),
          ...(model.pricing === undefined ? {} : { pricing: model.pricing }),
        })),
      });
      return;
    }
    const wire: Wire | null =
      method === 'POST' && pathname === '/v1/chat/completions'
        ? 'openai'
        : method === 'POST' && pathname === '/v1/messages'
          ? 'anthropic'
          : null;
    if (wire === null) {
      request.resume();
      sendJson(response, 404, { error: { message: `no route for ${method} ${pathname}`, type: 'not_found_error' } });
      return;
    }
    await this.#modelCall(wire, path, request, response);
  }

  async #modelCall(wire: Wire, path: string, request: IncomingMessage, response: ServerResponse): Promise<void> {
    const raw = await readBody(request);
    let body: unknown = null;
    let parseError: string | null = null;
    try {
      body = JSON.parse(raw);
    } catch (error) {
      parseError = `request body is not JSON: ${describe(error)}`;
    }
    const call: ScriptedCall = {
      wire,
      path,
      headers: flattenHeaders(request.headers),
      body,
      raw,
      index: this.calls.length,
      agent: typeof request.headers[AGENT_HEADER] === 'string' ? (request.headers[AGENT_HEADER] as string) : null,
      connection: this.#connections.get(request.socket) ?? -1,
    };
    if (this.#keepCalls) this.calls.push(call);
    if (this.#keepCalls)
      this.#responseEnds.set(
        call.index,
        new Promise((resolve) => {
          const ended = () => resolve(response.writableFinished ? 'finished' : 'closed');
          if (response.destroyed) ended();
          else response.once('close', ended);
        }),
      );
    const problem = parseError ?? invalidRequest(wire, body);
    if (problem !== null) {
      sendJson(response, 400, errorBody(wire, 400, problem));
      return;
    }
    const stream = record(body).stream === true;

    let answer: ScriptedAnswer;
    try {
      // The shape checks above passed: the body is a request's.
      answer = await this.#script(call as ScriptedRequest);
    } catch (error) {
      sendJson(response, 500, errorBody(wire, 500, `the script threw: ${describe(error)}`));
      return;
    }
    if (response.destroyed) return;

    if (!('fault' in answer)) {
      if (answer.latencyMs !== undefined && answer.latencyMs > 0) await pause(answer.latencyMs, response);
      if (response.destroyed) return;
      const completion = resolveCompletion(call, answer);
      const headers = answer.headers ?? {};
      if (stream) await this.#stream(response, encodeEvents(wire, call, completion), headers);
      else sendJson(response, 200, encodeMessage(wire, call, completion), headers);
      return;
    }

    switch (answer.fault) {
      case 'status': {
        const headers: Record<string, string> = {
          'content-type': 'application/json',
          ...(answer.retryAfter === undefined ? {} : { 'retry-after': answer.retryAfter }),
          ...answer.headers,
        };
        const text =
          answer.body ?? JSON.stringify(errorBody(wire, answer.status, `scripted fault: status ${answer.status}`));
        response.writeHead(answer.status, { ...headers, 'content-length': String(Buffer.byteLength(text)) });
        response.end(text);
        return;
      }
      case 'truncate': {
        const completion = resolveCompletion(call, { text: TRUNCATED_TEXT });
        if (stream) {
          await this.#truncate(response, encodeEvents(wire, call, completion), answer.afterEvents);
        } else {
          const whole = Buffer.from(JSON.stringify(encodeMessage(wire, call, completion)));
          response.writeHead(200, { 'content-type': 'application/json', 'content-length': String(whole.length) });
          cutAfter(response, whole.subarray(0, Math.floor(whole.length / 2)));
        }
        return;
      }
      case 'malformed': {
        if (stream) {
          const first = encodeEvents(wire, call, resolveCompletion(call, { text: TRUNCATED_TEXT }))[0] ?? '';
          const broken =
            wire === 'anthropic' ? 'event: content_block_delta\ndata: {not json\n\n' : 'data: {not json\n\n';
          await this.#stream(response, [first, broken], {});
        } else {
          response.writeHead(200, { 'content-type': 'application/json' });
          response.end('{not json');
        }
        return;
      }
      case 'hang':
        return;
      case 'raw':
        await this.#raw(response, answer);
        return;
      case 'fixture': {
        let bytes: Buffer;
        try {
          bytes = await readFile(resolvePath(answer.file));
        } catch (error) {
          sendJson(response, 500, errorBody(wire, 500, `fixture ${answer.file} could not be read: ${describe(error)}`));
          return;
        }
        await this.#stream(response, splitEvents(bytes), {});
        return;
      }
    }
  }

  /** Writes each event on its own turn, so clients see the stream arrive in pieces as they would from a vendor. */
  async #stream(response: ServerResponse, events: (string | Buffer)[], headers: Record<string, string>): Promise<void> {
    response.writeHead(200, { ...SSE_HEADERS, ...headers });
    for (const [position, event] of events.entries()) {
      if (position > 0) await this.#gap(response);
      if (response.destroyed) return;
      response.write(event);
    }
    response.end();
  }

  async #raw(response: ServerResponse, answer: Extract<ScriptedFault, { fault: 'raw' }>): Promise<void> {
    const pairs = Array.isArray(answer.headers) ? answer.headers : Object.entries(answer.headers ?? {});
    // A flat list keeps each name's case and order, and adds nothing of Node's own.
    response.writeHead(answer.status ?? 200, pairs.flat());
    response.flushHeaders();
    for (const chunk of answer.chunks) {
      if (response.destroyed) return;
      if (typeof chunk === 'object' && 'waitMs' in chunk) await pause(chunk.waitMs, response);
      else {
        response.write(chunk);
        await this.#gap(response);
      }
    }
    if (response.destroyed) return;
    const after = answer.after ?? 'end';
    if (after === 'end') response.end();
    else if (after === 'destroy') cutAfter(response, Buffer.alloc(0));
    else if (typeof after === 'object') {
      while (!response.destroyed) {
        response.write(after.send);
        await pause(Math.max(1, after.every), response);
      }
    }
  }

  async #truncate(response: ServerResponse, events: string[], afterEvents: number): Promise<void> {
    const whole = Math.max(0, Math.min(Math.floor(afterEvents), events.length - 1));
    response.writeHead(200, SSE_HEADERS);
    for (const event of events.slice(0, whole)) {
      if (response.destroyed) return;
      response.write(event);
      await this.#gap(response);
    }
    if (response.destroyed) return;
    const next = Buffer.from(events[whole] ?? '');
    cutAfter(response, next.subarray(0, Math.max(1, Math.floor(next.length / 2))));
  }

  #gap(response: ServerResponse): Promise<void> {
    if (this.#chunkDelayMs > 0) return pause(this.#chunkDelayMs, response);
    return new Promise((resolve) => setImmediate(resolve));
  }
}

const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' } as const;

/** Cuts a recorded transcript after each blank line, so it replays event by event yet byte for byte. */
function splitEvents(bytes: Buffer): Buffer[] {
  const pieces: Buffer[] = [];
  let start = 0;
  for (let end = bytes.indexOf('\n\n', start); end !== -1; end = bytes.indexOf('\n\n', start)) {
    pieces.push(bytes.subarray(start, end + 2));
    start = end + 2;
  }
  if (start < bytes.length) pieces.push(bytes.subarray(start));
  return pieces;
}

/** Writes the last bytes and destroys the socket once they are handed to the kernel, so the client receives them before the cut. */
function cutAfter(response: ServerResponse, bytes: Buffer): void {
  response.write(bytes, () => response.destroy());
}

/** Waits, but no longer than the response lives: close() must not leave timers behind. */
function pause(milliseconds: number, response: ServerResponse): Promise<void> {
  if (response.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const finish = () => {
      clearTimeout(timer);
      response.off('close', finish);
      resolve();
    };
    const timer = setTimeout(finish, milliseconds);
    response.on('close', finish);
  });
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    request.on('error', reject);
  });
}

function sendJson(
  response: ServerResponse,
  status: number,
  payload: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(payload);
  response.writeHead(status, {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(text)),
    ...headers,
  });
  response.end(text);
}

function flattenHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const flat: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) flat[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return flat;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
