/**
 * The served runs' model (see ./server.ts): a loopback endpoint on the OpenAI Chat
 * Completions wire, held by a random key, whose every answer is the one the server hands
 * it — the client's next call as a tool call, or the text that ends a run. A served run
 * reaches it through an ordinary OpenAI provider spec, so its model calls take the path
 * every model call takes (the provider's request building, stream parsing and usage
 * accounting), and nothing served has a way of its own around the boundary.
 *
 * It speaks only what that provider sends and reads: a streamed completion (or a whole
 * one, when the request did not ask for a stream), with usage, and an error body for a
 * request it will not answer.
 */
import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

/** What the model answers one request with. */
export interface BridgeAnswer {
  text: string;
  toolCalls?: { id: string; name: string; args: Record<string, unknown> }[];
}

type Answerer = () => BridgeAnswer | Promise<BridgeAnswer>;

const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' } as const;

/** Compares a request's key with the bridge's in constant time. */
function keyMatches(given: string | undefined, key: string): boolean {
  const a = Buffer.from(given ?? '');
  const b = Buffer.from(`Bearer ${key}`);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** A loopback model endpoint answering each request with what `answer` returns; only requests with its key are answered. */
export class ModelBridge {
  /** Where it listens, without a trailing slash: a provider's base URL is this plus `/v1`. */
  readonly url: string;
  readonly #server: Server;
  readonly #key: string;
  readonly #answer: Answerer;
  #requests = 0;
  #closed: Promise<void> | null = null;

  private constructor(server: Server, key: string, answer: Answerer) {
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('the model bridge is not on TCP');
    this.url = `http://127.0.0.1:${address.port}`;
    this.#server = server;
    this.#key = key;
    this.#answer = answer;
    server.on('request', (request: IncomingMessage, response: ServerResponse) => {
      void this.#handle(request, response);
    });
  }

  /** Listens on a port of loopback the system picks. */
  static async start(key: string, answer: Answerer): Promise<ModelBridge> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    return new ModelBridge(server, key, answer);
  }

  /** Stops listening and cuts every open request (a model request still waiting for a client's call included). */
  close(): Promise<void> {
    this.#closed ??= new Promise<void>((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
    return this.#closed;
  }

  /** Never rejects: whatever goes wrong is a 500 for that request. */
  async #handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    // A provider that hangs up mid-write makes the response emit 'error': its business, not a crash here.
    response.on('error', () => undefined);
    try {
      await this.#route(request, response);
    } catch (error) {
      if (response.headersSent || response.destroyed) response.destroy();
      else sendError(response, 500, `the model bridge failed: ${(error as Error).message}`);
    }
  }

  async #route(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const raw = await readBody(request);
    if (request.method !== 'POST' || (request.url ?? '').split('?')[0] !== '/v1/chat/completions') {
      sendError(response, 404, `no route for ${request.method} ${request.url}`);
      return;
    }
    if (!keyMatches(request.headers.authorization, this.#key)) {
      sendError(response, 401, 'this endpoint answers only the runs of the server that opened it');
      return;
    }
    let body: { model?: unknown; stream?: unknown };
    try {
      body = JSON.parse(raw) as typeof body;
    } catch {
      sendError(response, 400, 'the request body is not JSON');
      return;
    }
    const answer = await this.#answer();
    if (response.destroyed) return;
    const completion = completionOf(answer, raw, typeof body.model === 'string' ? body.model : 'mcp-client');
    const id = `chatcmpl-bridge-${this.#requests++}`;
    if (body.stream === true) {
      response.writeHead(200, SSE_HEADERS);
      for (const event of streamed(id, completion)) response.write(event);
      response.end();
    } else sendJson(response, 200, whole(id, completion));
  }
}

interface Resolved {
  model: string;
  text: string;
  toolCalls: { id: string; name: string; argumentsJson: string }[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

/**
 * The answer as the wire carries it. No model counts tokens here: the usage reported is
 * a quarter of the characters sent and of those answered, the usual rough measure of a
 * token, so a served run draws on its budget as a run does whose vendor reports usage.
 */
function completionOf(answer: BridgeAnswer, raw: string, model: string): Resolved {
  const calls = answer.toolCalls ?? [];
  const callsJson = calls.length > 0 ? JSON.stringify(calls.map(({ name, args }) => ({ name, args }))) : '';
  const input = Math.ceil(raw.length / 4);
  const output = Math.ceil((answer.text.length + callsJson.length) / 4);
  return {
    model,
    text: answer.text,
    toolCalls: calls.map((call) => ({ id: call.id, name: call.name, argumentsJson: JSON.stringify(call.args) })),
    usage: { prompt_tokens: input, completion_tokens: output, total_tokens: input + output },
  };
}

/** A streamed answer: the text, each tool call, the finish, then the usage (the request asks for it). */
function streamed(id: string, completion: Resolved): string[] {
  const head = { id, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model: completion.model };
  const chunk = (delta: Record<string, unknown>, finishReason: string | null) =>
    data({ ...head, choices: [{ index: 0, delta, finish_reason: finishReason }], usage: null });
  const events = [chunk({ role: 'assistant', content: '' }, null)];
  if (completion.text !== '') events.push(chunk({ content: completion.text }, null));
  for (const [index, call] of completion.toolCalls.entries()) {
    const named = { index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } };
    events.push(chunk({ tool_calls: [named] }, null));
    events.push(chunk({ tool_calls: [{ index, function: { arguments: call.argumentsJson } }] }, null));
  }
  events.push(chunk({}, completion.toolCalls.length > 0 ? 'tool_calls' : 'stop'));
  events.push(data({ ...head, choices: [], usage: completion.usage }), 'data: [DONE]\n\n');
  return events;
}

/** A whole answer, for a request that did not ask for a stream. */
function whole(id: string, completion: Resolved): unknown {
  const toolCalls = completion.toolCalls.map((call) => ({
    id: call.id,
    type: 'function',
    function: { name: call.name, arguments: call.argumentsJson },
  }));
  return {
    id,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: completion.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: completion.text === '' && toolCalls.length > 0 ? null : completion.text,
          ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
        },
        finish_reason: toolCalls.length > 0 ? 'tool_calls' : 'stop',
      },
    ],
    usage: completion.usage,
  };
}

function data(payload: unknown): string {
  return `data: ${JSON.stringify(payload)}\n\n`;
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    request.on('error', reject);
  });
}

function sendJson(response: ServerResponse, status: number, payload: unknown): void {
  const text = JSON.stringify(payload);
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) });
  response.end(text);
}

function sendError(response: ServerResponse, status: number, message: string): void {
  sendJson(response, status, {
    error: { message, type: status === 401 ? 'authentication_error' : 'invalid_request_error' },
  });
}
