// A chat server for a useChat page: each chat is an io-harness session with no repository,
// each message a durable turn streamed as the AI SDK's UI message stream. A page that lost
// the server mid-turn asks again for the turn's stream (GET /api/chat/:id/stream); a
// restarted server resumes the turn from its last committed step and streams it to the end.
//
//   node examples/chat/server.mjs --store chat.db --port 3000
//
// The model is OpenAI.fromEnv(): OPENAI_API_KEY, OPENAI_MODEL, OPENAI_BASE_URL.
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { extname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { OpenAI, Policy, Session, Store, Supervisor, tool } from 'io-harness';
import { z } from 'zod';
import { buildPage } from './build.mjs';

const { values } = parseArgs({
  options: {
    store: { type: 'string', default: 'chat.db' },
    port: { type: 'string', default: '3000' },
    page: { type: 'string' },
  },
});
const page = values.page ?? (await buildPage(join(tmpdir(), 'io-harness-chat-page')));

// The agent's one tool: what grows where, and what hangs in the shed.
const garden = { north: 'tomatoes and basil', south: 'beans', shed: 'a rake and a spade' };
const lookUp = tool({
  name: 'look_up',
  description: 'Says what is in a part of the garden: north, south or shed.',
  parameters: z.object({ place: z.enum(['north', 'south', 'shed']) }),
  effect: 'reads',
  execute: ({ place }) => garden[place],
});
const turnOptions = {
  provider: OpenAI.fromEnv(),
  tools: [lookUp],
  policy: Policy.empty().layer('garden').allowTool('look_up'),
};

const store = await Store.open(values.store);
const supervisor = await Supervisor.start(store);

/** The chat's session: opened with the chat's id the first time, resumed after. */
async function sessionOf(id) {
  const known = (await store.sessions()).some((session) => session.sessionId === id);
  return known ? Session.resume(store, id, { supervisor }) : Session.open(store, { id, supervisor });
}

async function body(request) {
  const chunks = [];
  for await (const chunk of request) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css' };

const server = createServer(async (request, response) => {
  try {
    const url = new URL(request.url ?? '/', 'http://localhost');
    const chat = /^\/api\/chat\/([^/]+)\/(messages|stream)$/.exec(url.pathname);
    if (request.method === 'POST' && url.pathname === '/api/chat') {
      const { id, messages } = await body(request);
      const last = messages.at(-1);
      const text = last.parts
        .filter((part) => part.type === 'text')
        .map((part) => part.text)
        .join('');
      const session = await sessionOf(id);
      await session.turn(text, turnOptions).pipeUIMessageStreamToResponse(response);
      return;
    }
    if (request.method === 'GET' && chat?.[2] === 'messages') {
      const id = decodeURIComponent(chat[1]);
      const known = (await store.sessions()).some((session) => session.sessionId === id);
      const messages = known ? await (await Session.resume(store, id, { supervisor })).uiMessages() : [];
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(messages));
      return;
    }
    if (request.method === 'GET' && chat?.[2] === 'stream') {
      // useChat's resume: the turn still running, replayed from the store and followed to its end.
      const session = await sessionOf(decodeURIComponent(chat[1]));
      const running = await session.runningTurn();
      if (running === null) response.writeHead(204).end();
      else await session.reconnect(running.turnId, turnOptions).pipeUIMessageStreamToResponse(response);
      return;
    }
    if (request.method === 'GET') {
      const name = url.pathname === '/' ? 'index.html' : url.pathname.slice(1);
      if (!/^[\w.-]+(\/[\w.-]+)*$/.test(name) || name.includes('..')) throw new Error('no such file');
      const file = await readFile(join(page, name));
      response.writeHead(200, { 'content-type': TYPES[extname(name)] ?? 'application/octet-stream' }).end(file);
      return;
    }
    response.writeHead(405).end();
  } catch (error) {
    console.error(`${request.method} ${request.url}: ${error.stack ?? error.message}`);
    if (!response.headersSent) response.writeHead(error.message === 'no such file' ? 404 : 500);
    response.end(error.message);
  }
});
server.listen(Number(values.port), '127.0.0.1', () => {
  console.log(`chat on http://127.0.0.1:${server.address().port}/`);
});
