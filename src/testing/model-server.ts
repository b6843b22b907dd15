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

/** A successful answer: text, tool calls, or both. */
export interface ScriptedCompletion {
  text?: string;
  toolCalls?: ScriptedToolCall[];
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

type Wire = ScriptedCall['wire'];

interface ResolvedToolCall {
  id: string;
  name: string;
  args: Record<string, unknown>;
  argumentsJson: string;
}

interface ResolvedUsage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  reasoningTokens: number;
}

/** A completion with every default filled in: what both wire encoders work from. */
interface ResolvedCompletion {
  model: string;
  text: string;
  toolCalls: ResolvedToolCall[];
  usage: ResolvedUsage;
}

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

/** The system prompt of a request, from either wire; several system parts are joined with newlines. */
export function systemText(call: ScriptedCall): string {
  const body = record(call.body);
  if (call.wire === 'anthropic') return contentText(body.system);
  return messages(call)
    .filter((message) => message.role === 'system' || message.role === 'developer')
    .map((message) => contentText(message.content))
    .join('\n');
}

/**
 * The text of the newest user message that has any. On the Anthropic wire a user
 * message carrying only tool results is skipped, so both wires agree on what the user
 * last said. Empty when there is none.
 */
export function lastUserText(call: ScriptedCall): string {
  const users = messages(call).filter((message) => message.role === 'user');
  for (const message of users.reverse()) {
    if (call.wire === 'openai') return contentText(message.content);
    if (typeof message.content === 'string') return message.content;
    const blocks = list(message.content).map(record);
    if (blocks.some((block) => block.type === 'text')) return contentText(blocks);
  }
  return '';
}

/**
 * Every tool result the request carries, oldest first, with the name of the tool call
 * it answers where the request still holds that call. OpenAI's wire has no error flag,
 * so `isError` is always false there.
 */
export function toolResults(
  call: ScriptedCall,
): { name?: string; callId: string; content: string; isError: boolean }[] {
  const names = new Map<string, string>();
  const results: { name?: string; callId: string; content: string; isError: boolean }[] = [];
  const add = (callId: string, content: string, isError: boolean) => {
    const name = names.get(callId);
    results.push(name === undefined ? { callId, content, isError } : { name, callId, content, isError });
  };
  for (const message of messages(call)) {
    if (call.wire === 'openai') {
      for (const toolCall of list(message.tool_calls).map(record)) {
        const name = record(toolCall.function).name;
        if (typeof toolCall.id === 'string' && typeof name === 'string') names.set(toolCall.id, name);
      }
      if (message.role === 'tool') add(text(message.tool_call_id), contentText(message.content), false);
      continue;
    }
    for (const block of list(message.content).map(record)) {
      if (block.type === 'tool_use' && typeof block.id === 'string' && typeof block.name === 'string') {
        names.set(block.id, block.name);
      }
      if (block.type === 'tool_result')
        add(text(block.tool_use_id), contentText(block.content), block.is_error === true);
    }
  }
  return results;
}

/** How many assistant messages the request carries: the step an agent is on, from zero. */
export function assistantTurns(call: ScriptedCall): number {
  return messages(call).filter((message) => message.role === 'assistant').length;
}

function messages(call: ScriptedCall): Record<string, unknown>[] {
  return list(record(call.body).messages).map(record);
}

/** Reads untrusted JSON without trusting it: anything that is not an object reads as an empty one. */
function record(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

function list(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

/** The text of a content field in either wire: a string, or a list of parts whose text parts are joined with newlines. */
/** The text of a message's content, a string or text parts. */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  return list(content)
    .map(record)
    .filter((part) => part.type === 'text' && typeof part.text === 'string')
    .map((part) => part.text as string)
    .join('\n');
}

/** The shape checks a vendor would reject a request for, so a provider bug shows up as the 400 the vendor would send. */
function invalidRequest(wire: Wire, body: unknown): string | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return 'request body must be a JSON object';
  const fields = body as Record<string, unknown>;
  if (typeof fields.model !== 'string') return 'model: a string is required';
  if (!Array.isArray(fields.messages)) return 'messages: an array is required';
  if (fields.messages.some((message) => typeof record(message).role !== 'string')) {
    return 'messages: every message needs a role';
  }
  if (wire === 'anthropic' && typeof fields.max_tokens !== 'number') return 'max_tokens: a number is required';
  if (fields.stream !== undefined && typeof fields.stream !== 'boolean') return 'stream: must be a boolean';
  return wire === 'openai' ? invalidOpenAiMessages(fields.messages) : invalidAnthropicMessages(fields.messages);
}

const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

/** Chat Completions' rules for tool answers and images, as its 400s state them. */
function invalidOpenAiMessages(messages: unknown[]): string | null {
  for (const [index, item] of messages.entries()) {
    const message = record(item);
    const parts = Array.isArray(message.content) ? message.content.map(record) : [];
    if (message.role === 'tool' && parts.some((part) => part.type !== 'text'))
      return `messages[${index}].content: a tool message takes text parts only`;
    for (const part of parts) {
      if (part.type !== 'image_url') continue;
      const url = String(record(part.image_url).url ?? '');
      const data = /^data:([^;,]+);base64,/.exec(url);
      if (data ? !IMAGE_TYPES.has(data[1] as string) : !/^https?:\/\//.test(url))
        return `messages[${index}].content: image_url must be a URL or a data URL of PNG, JPEG, GIF or WebP`;
    }
    const calls = list(message.tool_calls).map(record);
    if (message.role !== 'assistant' || calls.length === 0) continue;
    const answered = new Set<unknown>();
    for (let next = index + 1; next < messages.length && record(messages[next]).role === 'tool'; next++)
      answered.add(record(messages[next]).tool_call_id);
    if (calls.some((call) => !answered.has(call.id)))
      return `messages[${index}]: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'`;
  }
  return null;
}

/** The Messages API's rules for images and tool results. */
function invalidAnthropicMessages(messages: unknown[]): string | null {
  for (const [index, item] of messages.entries()) {
    const blocks = list(record(item).content).map(record);
    for (const block of blocks) {
      const inner = block.type !== 'tool_result' ? [block] : list(block.content).map(record);
      for (const part of inner) {
        if (block.type === 'tool_result' && part.type !== 'text' && part.type !== 'image')
          return `messages.${index}.content: a tool_result holds text and image blocks only`;
        if (part.type !== 'image') continue;
        const source = record(part.source);
        if (source.type !== 'base64' || !IMAGE_TYPES.has(String(source.media_type)) || typeof source.data !== 'string')
          return `messages.${index}.content: an image's source must be base64 of image/jpeg, image/png, image/gif or image/webp`;
      }
    }
  }
  return null;
}

/**
 * Fills in what the script left out. Ids and token counts are functions of the call
 * alone, so a test can predict them: tool call n of call i is `call_i_n` (OpenAI) or
 * `toolu_i_n` (Anthropic); input tokens are a quarter of the raw body length; output
 * tokens a quarter of the text plus the JSON of `[{name, args}, ...]` when there are
 * tool calls; cache and reasoning counts 0.
 */
function resolveCompletion(call: ScriptedCall, answer: ScriptedCompletion): ResolvedCompletion {
  const prefix = call.wire === 'openai' ? 'call' : 'toolu';
  const toolCalls = (answer.toolCalls ?? []).map((toolCall, position) => ({
    id: toolCall.id ?? `${prefix}_${call.index}_${position}`,
    name: toolCall.name,
    args: toolCall.args,
    argumentsJson: toolCall.rawArguments ?? JSON.stringify(toolCall.args),
  }));
  const text = answer.text ?? '';
  const callsJson =
    toolCalls.length > 0
      ? JSON.stringify(toolCalls.map((toolCall) => ({ name: toolCall.name, args: toolCall.args })))
      : '';
  const usage = answer.usage ?? {};
  const model = record(call.body).model;
  return {
    model: typeof model === 'string' ? model : 'scripted-model',
    text,
    toolCalls,
    usage: {
      inputTokens: usage.inputTokens ?? Math.ceil(call.raw.length / 4),
      outputTokens: usage.outputTokens ?? Math.ceil((text.length + callsJson.length) / 4),
      cacheReadTokens: usage.cacheReadTokens ?? 0,
      cacheWriteTokens: usage.cacheWriteTokens ?? 0,
      reasoningTokens: usage.reasoningTokens ?? 0,
    },
  };
}

function encodeEvents(wire: Wire, call: ScriptedCall, completion: ResolvedCompletion): string[] {
  return wire === 'openai' ? openAiEvents(call, completion) : anthropicEvents(call, completion);
}

function encodeMessage(wire: Wire, call: ScriptedCall, completion: ResolvedCompletion): unknown {
  return wire === 'openai' ? openAiMessage(call, completion) : anthropicMessage(call, completion);
}

function openAiUsage(usage: ResolvedUsage) {
  return {
    prompt_tokens: usage.inputTokens,
    completion_tokens: usage.outputTokens,
    total_tokens: usage.inputTokens + usage.outputTokens,
    prompt_tokens_details: { cached_tokens: usage.cacheReadTokens, audio_tokens: 0 },
    completion_tokens_details: {
      reasoning_tokens: usage.reasoningTokens,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
}

/**
 * A Chat Completions stream as OpenAI sends it: a role chunk, content pieces word by
 * word, each tool call opened with its id and name and then its arguments in several
 * fragments, a finish chunk, and — only when the request asked with
 * `stream_options.include_usage`, as with OpenAI — a usage chunk with empty choices
 * (every earlier chunk then carries `usage: null`). Ends with `data: [DONE]`.
 */
function openAiEvents(call: ScriptedCall, completion: ResolvedCompletion): string[] {
  const includeUsage = record(record(call.body).stream_options).include_usage === true;
  const head = {
    id: `chatcmpl-scripted-${call.index}`,
    object: 'chat.completion.chunk',
    created: Math.floor(Date.now() / 1000),
    model: completion.model,
    system_fingerprint: 'fp_scripted',
  };
  const chunk = (delta: Record<string, unknown>, finishReason: string | null) =>
    data({
      ...head,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
      ...(includeUsage ? { usage: null } : {}),
    });
  const events = [chunk({ role: 'assistant', content: '', refusal: null }, null)];
  for (const piece of words(completion.text)) events.push(chunk({ content: piece }, null));
  for (const [index, toolCall] of completion.toolCalls.entries()) {
    events.push(
      chunk(
        {
          tool_calls: [{ index, id: toolCall.id, type: 'function', function: { name: toolCall.name, arguments: '' } }],
        },
        null,
      ),
    );
    for (const fragment of fragments(toolCall.argumentsJson)) {
      events.push(chunk({ tool_calls: [{ index, function: { arguments: fragment } }] }, null));
    }
  }
  events.push(chunk({}, completion.toolCalls.length > 0 ? 'tool_calls' : 'stop'));
  if (includeUsage) events.push(data({ ...head, choices: [], usage: openAiUsage(completion.usage) }));
  events.push('data: [DONE]\n\n');
  return events;
}

function openAiMessage(call: ScriptedCall, completion: ResolvedCompletion) {
  const toolCalls = completion.toolCalls.map((toolCall) => ({
    id: toolCall.id,
    type: 'function',
    function: { name: toolCall.name, arguments: toolCall.argumentsJson },
  }));
  return {
    id: `chatcmpl-scripted-${call.index}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: completion.model,
    system_fingerprint: 'fp_scripted',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: completion.text === '' && toolCalls.length > 0 ? null : completion.text,
          refusal: null,
          ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
        },
        logprobs: null,
        finish_reason: toolCalls.length > 0 ? 'tool_calls' : 'stop',
      },
    ],
    usage: openAiUsage(completion.usage),
  };
}

/** Anthropic counts cache reads and writes apart from `input_tokens`; the script's `inputTokens` includes them. */
function anthropicUsage(usage: ResolvedUsage, outputTokens: number) {
  return {
    input_tokens: Math.max(0, usage.inputTokens - usage.cacheReadTokens - usage.cacheWriteTokens),
    cache_creation_input_tokens: usage.cacheWriteTokens,
    cache_read_input_tokens: usage.cacheReadTokens,
    output_tokens: outputTokens,
  };
}

function anthropicBlocks(completion: ResolvedCompletion) {
  return [
    ...(completion.text === '' ? [] : [{ type: 'text', text: completion.text }]),
    ...completion.toolCalls.map((toolCall) => ({
      type: 'tool_use',
      id: toolCall.id,
      name: toolCall.name,
      input: toolCall.argumentsJson === JSON.stringify(toolCall.args) ? toolCall.args : decoded(toolCall.argumentsJson),
    })),
  ];
}

/**
 * A Messages stream as Anthropic sends it: `message_start` (whose usage carries the
 * prompt counts and an output count of at most 1, as Anthropic's does — the final count
 * is in `message_delta`), then per block start, deltas and stop, with a `ping` after the
 * first block opens; tool input arrives as an empty `input_json_delta` followed by at
 * least two fragments. Then `message_delta` with the stop reason and `message_stop`.
 */
function anthropicEvents(call: ScriptedCall, completion: ResolvedCompletion): string[] {
  const stopReason = completion.toolCalls.length > 0 ? 'tool_use' : 'end_turn';
  const events = [
    named('message_start', {
      type: 'message_start',
      message: {
        id: `msg_scripted_${call.index}`,
        type: 'message',
        role: 'assistant',
        model: completion.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: anthropicUsage(completion.usage, Math.min(1, completion.usage.outputTokens)),
      },
    }),
  ];
  const ping = named('ping', { type: 'ping' });
  let index = 0;
  if (completion.text !== '') {
    events.push(
      named('content_block_start', { type: 'content_block_start', index, content_block: { type: 'text', text: '' } }),
    );
    events.push(ping);
    for (const piece of words(completion.text)) {
      events.push(
        named('content_block_delta', {
          type: 'content_block_delta',
          index,
          delta: { type: 'text_delta', text: piece },
        }),
      );
    }
    events.push(named('content_block_stop', { type: 'content_block_stop', index }));
    index++;
  }
  for (const toolCall of completion.toolCalls) {
    events.push(
      named('content_block_start', {
        type: 'content_block_start',
        index,
        content_block: { type: 'tool_use', id: toolCall.id, name: toolCall.name, input: {} },
      }),
    );
    if (index === 0) events.push(ping);
    for (const fragment of ['', ...fragments(toolCall.argumentsJson)]) {
      events.push(
        named('content_block_delta', {
          type: 'content_block_delta',
          index,
          delta: { type: 'input_json_delta', partial_json: fragment },
        }),
      );
    }
    events.push(named('content_block_stop', { type: 'content_block_stop', index }));
    index++;
  }
  if (index === 0) events.push(ping);
  events.push(
    named('message_delta', {
      type: 'message_delta',
      delta: { stop_reason: stopReason, stop_sequence: null },
      usage: { output_tokens: completion.usage.outputTokens },
    }),
  );
  events.push(named('message_stop', { type: 'message_stop' }));
  return events;
}

function anthropicMessage(call: ScriptedCall, completion: ResolvedCompletion) {
  return {
    id: `msg_scripted_${call.index}`,
    type: 'message',
    role: 'assistant',
    model: completion.model,
    content: anthropicBlocks(completion),
    stop_reason: completion.toolCalls.length > 0 ? 'tool_use' : 'end_turn',
    stop_sequence: null,
    usage: anthropicUsage(completion.usage, completion.usage.outputTokens),
  };
}

/** The error body each vendor sends with an error status, so providers parse the shape they will meet in production. */
function errorBody(wire: Wire, status: number, message: string): unknown {
  if (wire === 'anthropic') return { type: 'error', error: { type: anthropicErrorType(status), message } };
  const [type, code] = openAiErrorType(status);
  return { error: { message, type, param: null, code } };
}

function anthropicErrorType(status: number): string {
  switch (status) {
    case 400:
      return 'invalid_request_error';
    case 401:
      return 'authentication_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 529:
      return 'overloaded_error';
    default:
      return status >= 500 ? 'api_error' : 'invalid_request_error';
  }
}

function openAiErrorType(status: number): [string, string | null] {
  switch (status) {
    case 401:
      return ['invalid_request_error', 'invalid_api_key'];
    case 404:
      return ['invalid_request_error', 'model_not_found'];
    case 429:
      return ['requests', 'rate_limit_exceeded'];
    default:
      return status >= 500 ? ['server_error', null] : ['invalid_request_error', null];
  }
}

function data(payload: unknown): string {
  return `data: ${JSON.stringify(payload)}\n\n`;
}

function named(event: string, payload: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(payload)}\n\n`;
}

/** Splits text the way a model streams it: each piece a word with the whitespace before it. */
function words(text: string): string[] {
  return text.match(/\s*\S+|\s+$/g) ?? [];
}

/**
 * Splits tool-call arguments into at least two fragments (when there are two characters
 * to split), cutting on code points so no fragment holds half a surrogate pair.
 */
function fragments(json: string): string[] {
  // Huge arguments (a model sending megabytes) go in a few large pieces: millions of
  // twelve-character events would make the stream, not the runtime, the thing measured.
  if (json.length > 65536) {
    const pieces: string[] = [];
    const size = Math.ceil(json.length / 16);
    let start = 0;
    while (start < json.length) {
      let end = Math.min(json.length, start + size);
      // Never between the two halves of a surrogate pair.
      if (end < json.length && /[\uD800-\uDBFF]/.test(json[end - 1] ?? '')) end++;
      pieces.push(json.slice(start, end));
      start = end;
    }
    return pieces;
  }
  const points = Array.from(json);
  const size = Math.max(1, Math.min(12, Math.ceil(points.length / 2)));
  const pieces: string[] = [];
  for (let start = 0; start < points.length; start += size) pieces.push(points.slice(start, start + size).join(''));
  return pieces;
}

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

/** Raw arguments as a JSON value, or the text itself when it is not JSON. */
function decoded(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
