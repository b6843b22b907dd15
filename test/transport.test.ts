/**
 * The live transport: undici's dispatcher with a small queue between the socket and the
 * caller, against real HTTP on loopback. Backpressure, cancellation before and during the
 * body, a caller that stops reading early, and a refused connection.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { ProviderError } from '../dist/index.js';
import { undiciTransport } from '../dist/runtime/providers/http.js';
import { closedPort } from './support/wire.js';

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
  server = undefined;
});

async function listen(handler: (request: IncomingMessage, response: ServerResponse) => void): Promise<string> {
  server = createServer(handler);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

const post = (url: string) => ({ method: 'POST' as const, url: `${url}/v1/x`, headers: {}, body: '{}' });

async function failure(promise: Promise<unknown>): Promise<ProviderError> {
  const error = await promise.then(
    () => null,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(ProviderError);
  return error as ProviderError;
}

describe('the live transport', () => {
  it('stops reading the socket while the caller falls behind, and delivers every byte in order', async () => {
    const piece = 64 * 1024;
    const total = 48 * 1024 * 1024;
    let accepted = 0;
    const url = await listen((request, response) => {
      request.resume();
      response.writeHead(200, { 'content-type': 'application/octet-stream' });
      let sent = 0;
      const more = () => {
        while (sent < total) {
          const chunk = Buffer.alloc(piece, sent / piece);
          sent += piece;
          const fits = response.write(chunk, () => {
            accepted += piece;
          });
          if (!fits) return void response.once('drain', more);
        }
        response.end();
      };
      more();
    });
    const response = await undiciTransport.send(post(url), 'p');
    const iterator = response.body[Symbol.asyncIterator]();
    const first = await iterator.next();
    // The caller reads nothing for a while: a transport that kept reading would take the
    // whole answer in meanwhile (loopback moves it in a few milliseconds).
    await sleep(400);
    expect(accepted).toBeLessThan(total / 2);
    let received = (first.value as Uint8Array).length;
    let ordered = true;
    for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
      const chunk = next.value as Uint8Array;
      for (let at = 0; at < chunk.length; at += 4096) {
        if (chunk[at] !== Math.floor((received + at) / piece) % 256) ordered = false;
      }
      received += chunk.length;
    }
    expect(received).toBe(total);
    expect(ordered).toBe(true);
  });

  it('is cancelled by its signal before the answer starts and while the body streams', async () => {
    let closed = 0;
    const url = await listen((request, response) => {
      request.resume();
      response.on('close', () => closed++);
      if (request.url?.includes('late')) return; // never answers
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write('data: first\n\n');
    });
    const early = new AbortController();
    const waiting = undiciTransport.send({ ...post(url), url: `${url}/late` }, 'p', early.signal);
    await sleep(50);
    early.abort();
    expect((await failure(waiting)).kind).toBe('aborted');

    const midway = new AbortController();
    const response = await undiciTransport.send(post(url), 'p', midway.signal);
    const iterator = response.body[Symbol.asyncIterator]();
    expect(Buffer.from((await iterator.next()).value as Uint8Array).toString()).toBe('data: first\n\n');
    const pending = iterator.next();
    midway.abort();
    await expect(pending).rejects.toThrow();
    while (closed < 2) await sleep(10);
    expect(closed).toBe(2);
  });

  it('sends nothing for a signal already aborted', async () => {
    let requests = 0;
    const url = await listen((_request, response) => {
      requests++;
      response.end();
    });
    const error = await failure(undiciTransport.send(post(url), 'p', AbortSignal.abort()));
    expect(error.kind).toBe('aborted');
    await sleep(50);
    expect(requests).toBe(0);
  });

  it('closes the connection when the caller stops reading before the end', async () => {
    const url = await listen((request, response) => {
      request.resume();
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write('data: one\n\n');
    });
    const closedConnection = new Promise<void>((resolve) =>
      server?.once('connection', (socket) => socket.on('close', () => resolve())),
    );
    const response = await undiciTransport.send(post(url), 'p');
    for await (const chunk of response.body) {
      expect(Buffer.from(chunk).toString()).toBe('data: one\n\n');
      break;
    }
    await closedConnection;
  }, 20_000);

  it('passes over interim answers (102, 103) to the answer that follows', async () => {
    const url = await listen((request, response) => {
      request.resume();
      if (request.url?.includes('hints')) {
        response.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
        response.writeHead(429, { 'retry-after': '7', 'content-type': 'application/json' });
        response.end('{"error":{"message":"slow down"}}');
      } else {
        response.writeProcessing();
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end('{"ok":true}');
      }
    });
    const limited = await undiciTransport.send({ ...post(url), url: `${url}/hints` }, 'p');
    expect(limited.status).toBe(429);
    expect(limited.headers).toContainEqual(['retry-after', '7']);
    const parts: Buffer[] = [];
    const answered = await undiciTransport.send(post(url), 'p');
    for await (const chunk of answered.body) parts.push(Buffer.from(chunk));
    expect(answered.status).toBe(200);
    expect(Buffer.concat(parts).toString()).toBe('{"ok":true}');
  });

  it('turns a URL that does not parse into a refused call, not a thrown TypeError', async () => {
    const sent = undiciTransport.send({ ...post('x'), url: '127.0.0.1:8080/v1/chat' }, 'p');
    expect(sent).toBeInstanceOf(Promise);
    expect((await failure(sent)).kind).toBe('connection');
  });

  it('is cancelled at once while it waits for a connection', async () => {
    let arrived = 0;
    const url = await listen((request) => {
      arrived++; // and never answered
      request.resume();
    });
    // Every connection the pool may open to this origin, held by requests that never end.
    const held = Array.from({ length: 64 }, () => undiciTransport.send(post(url), 'p').catch(() => null));
    while (arrived < 64) await sleep(10);
    const waiting = new AbortController();
    const queued = undiciTransport.send(post(url), 'p', waiting.signal);
    waiting.abort();
    expect((await failure(queued)).kind).toBe('aborted');
    server?.closeAllConnections();
    await Promise.all(held);
  }, 20_000);

  it('names a refused connection as one', async () => {
    const port = await closedPort();
    const error = await failure(undiciTransport.send(post(`http://127.0.0.1:${port}`), 'p'));
    expect(error.kind).toBe('connection');
    expect(error.message).toContain('ECONNREFUSED');
  });
});
