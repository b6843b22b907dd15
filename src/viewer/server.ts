/**
 * The trace viewer's server: a read-only page on loopback over a store, and the JSON it
 * reads. `viewer(store)` for embedders, `npx io-harness view runs.db` from a shell.
 *
 * It opens its own read-only connection to the store's file, or its own small pool on a
 * PostgreSQL store (so it never writes, and a supervisor in this process, another process
 * or another host goes on as before), serves the page prebuilt in
 * the package (dist/viewer: no CDN, nothing fetched at run time), and follows live runs
 * with server-sent events fed by polling the store's events after the last id sent.
 *
 * It answers GET only, on a loopback address only, and only to a Host header naming
 * loopback (a page elsewhere that rebinds a name to 127.0.0.1 is refused), and only under
 * a path made of a random token (`url` carries it), so another user of this machine who
 * can reach the port cannot read the store. The page is served with a content security
 * policy that allows nothing but itself.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize, sep } from 'node:path';
import { InvalidArgumentError } from '../errors.js';
import { packageFile } from '../package-files.js';
import { isTerminal } from '../runtime/events.js';
import type { PostgresStore } from '../store/postgres/index.js';
import type { RunRecord } from '../store/records.js';
import { TraceReader } from '../store/sqlite/reader.js';
import { storeFileState } from '../store/sqlite/schema.js';
import { type FirstView, withFirstPaint } from './first-paint.js';
import { timelineQuery } from './timeline.js';

export interface ViewerOptions {
  /** The port (default: one the system picks). */
  port?: number;
  /** A loopback address to listen on (default 127.0.0.1). */
  host?: string;
  /** How often live pages look for new events, in milliseconds (default 250). */
  pollMs?: number;
}

export interface Viewer {
  /** The page's address, its token included: whoever has it can read the store. */
  readonly url: string;
  close(): Promise<void>;
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);
const ASSETS = `${packageFile('dist', 'viewer', 'page')}${sep}`;
const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};
const SECURITY = {
  'content-security-policy':
    "default-src 'self'; img-src 'self' data:; style-src 'self'; base-uri 'self'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};
/** The most trees a listing sends, newest first. */
const LIST_LIMIT = 500;

/** Steps and tokens spent. */
type Spent = { steps: number; tokens: number };
/** What one text field of a step may carry to the page (the store keeps it whole). */
const CLIP = 4000;

const clip = (text: string) =>
  text.length > CLIP ? `${text.slice(0, CLIP)}… (${text.length - CLIP} more characters)` : text;

/** What the viewer reads a store by: a SQLite file's reader (answers at once) or a PostgreSQL store (promises). */
type Reads = TraceReader | PostgresStore;

/** Starts the viewer over `store` (a store of either backend, or the path of a SQLite file). */
export async function viewer(
  store: { path: string } | PostgresStore | string,
  options: ViewerOptions = {},
): Promise<Viewer> {
  const host = options.host ?? '127.0.0.1';
  if (!LOOPBACK.has(host))
    throw new InvalidArgumentError(
      `viewer: host ${host} is not a loopback address; the viewer serves this machine only (127.0.0.1 or ::1).`,
    );
  if (!existsSync(join(ASSETS, 'index.html')))
    throw new InvalidArgumentError(
      `viewer: the page is not built (${ASSETS}index.html is missing); run npm run build in the package.`,
    );
  const reader = await readsOf(store);
  const pollMs = options.pollMs ?? 250;
  const token = randomBytes(18).toString('base64url');
  const streams = new Set<ServerResponse>();
  const server = createServer((request, response) => {
    route(reader, token, request, response, streams, pollMs).catch((error: unknown) => {
      // Half a response sent (an event stream, say): end it; nothing escapes to the process.
      if (response.headersSent) response.destroy();
      else send(response, 500, { error: (error as Error).message });
    });
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, host, () => resolve());
    });
  } catch (error) {
    await reader.close();
    throw error;
  }
  const address = server.address() as AddressInfo;
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${shown}:${address.port}/${token}/`,
    close: async () => {
      for (const stream of streams) stream.end();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // Every connection, a silent or half-sent one too: none may keep close() waiting.
      server.closeAllConnections();
      await closed;
      await reader.close();
    },
  };
}

/** The viewer's own reads of `store`: a read-only connection to a SQLite file, a small pool of its own on PostgreSQL. */
async function readsOf(store: { path: string } | PostgresStore | string): Promise<Reads> {
  if (typeof store === 'object' && store !== null && (store as { kind?: unknown }).kind === 'postgres') {
    const postgres = store as PostgresStore;
    postgres.assertOpen();
    const { PostgresStore: Postgres } = await import('../store/postgres/index.js');
    return Postgres.attach(postgres.target, { max: 2 });
  }
  const path = typeof store === 'string' ? store : (store as { path: string }).path;
  const state = storeFileState(path);
  if (state.kind !== 'store')
    throw new InvalidArgumentError(
      state.kind === 'missing'
        ? `viewer: there is no store at ${path}; pass the file your runs were kept in.`
        : `viewer: ${path} is a SQLite file but not an io-harness store; nothing was changed.`,
    );
  return new TraceReader(path);
}

function send(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...SECURITY });
  response.end(JSON.stringify(body));
}

const same = (given: string, token: string) => {
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
};

/** A path's segments decoded, or null for a malformed escape. */
function segments(pathname: string): string[] | null {
  try {
    return pathname.split('/').filter(Boolean).map(decodeURIComponent);
  } catch {
    return null;
  }
}

async function route(
  reader: Reads,
  token: string,
  request: IncomingMessage,
  response: ServerResponse,
  streams: Set<ServerResponse>,
  pollMs: number,
): Promise<void> {
  const hostHeader = (request.headers.host ?? '').replace(/:\d+$/, '').replace(/^\[|\]$/g, '');
  if (!LOOPBACK.has(hostHeader)) {
    send(response, 403, { error: 'the viewer answers loopback hosts only' });
    return;
  }
  if (request.method !== 'GET') {
    send(response, 405, { error: 'the viewer is read-only: GET only' });
    return;
  }
  const url = new URL(request.url ?? '/', 'http://localhost');
  const decoded = segments(url.pathname);
  if (decoded === null) {
    send(response, 400, { error: 'the path has a malformed escape' });
    return;
  }
  const [given, ...parts] = decoded;
  // The icon a browser asks the origin for: the same one the page names.
  if (given === 'favicon.ico' && parts.length === 0) {
    response.writeHead(200, { 'content-type': TYPES['.svg'] as string, ...SECURITY });
    response.end(readFileSync(join(ASSETS, 'favicon.svg')));
    return;
  }
  if (given === undefined || !same(given, token)) {
    send(response, 404, { error: 'nothing here: open the address the viewer printed, token and all' });
    return;
  }
  // The page's own links are relative to /<token>/: without the slash they would not be.
  if (parts.length === 0 && !url.pathname.endsWith('/')) {
    response.writeHead(308, { location: `/${token}/`, ...SECURITY });
    response.end();
    return;
  }
  if (parts[0] === 'api') {
    if (parts[1] === 'trees' && parts.length === 2) {
      send(response, 200, await trees(reader));
      return;
    }
    if (parts[1] === 'tree' && parts[3] === 'timeline' && parts.length === 4) {
      const data = await reader.query(timelineQuery(parts[2] as string, Date.now()));
      send(response, data ? 200 : 404, data ?? { error: `no tree ${parts[2]}` });
      return;
    }
    if (parts[1] === 'tree' && parts.length === 3) {
      const data = await tree(reader, parts[2] as string);
      send(response, data ? 200 : 404, data ?? { error: `no tree ${parts[2]}` });
      return;
    }
    if (parts[1] === 'run' && parts.length === 3) {
      const data = await run(reader, parts[2] as string);
      send(response, data ? 200 : 404, data ?? { error: `no run ${parts[2]}` });
      return;
    }
    if (parts[1] === 'events' && parts.length === 2) {
      await events(reader, request, url, response, streams, pollMs);
      return;
    }
    send(response, 404, { error: `no ${url.pathname}` });
    return;
  }
  const page =
    parts.length === 0 ||
    ((parts[0] === 'run' || parts[0] === 'tree' || parts[0] === 'timeline') && parts.length === 2);
  if (page) {
    // The first paint is the server's: the view the path names, with the data it shows, then the page takes over.
    const view = await firstView(reader, parts);
    response.writeHead(200, { 'content-type': TYPES['.html'] as string, ...SECURITY });
    response.end(withFirstPaint(readFileSync(join(ASSETS, 'index.html'), 'utf8'), view, `/${token}/`));
    return;
  }
  const file = parts.join('/');
  const full = normalize(join(ASSETS, file));
  if (!full.startsWith(ASSETS) || full.includes(`${sep}..`) || !TYPES[extname(full)] || !existsSync(full)) {
    send(response, 404, { error: `no ${url.pathname}` });
    return;
  }
  response.writeHead(200, { 'content-type': TYPES[extname(full)] as string, ...SECURITY });
  response.end(readFileSync(full));
}

async function summary(reader: Reads, run: RunRecord) {
  const account = await reader.account(run.runId);
  return {
    runId: run.runId,
    rootId: run.rootId,
    parentId: run.parentId,
    address: run.address,
    depth: run.depth,
    status: run.status,
    task: clip(run.task),
    createdAt: run.createdAt,
    endedAt: run.endedAt,
    spent: account?.spent ?? { steps: 0, tokens: 0 },
    ceilings: account?.ceilings ?? null,
  };
}

/**
 * Each run's own spend beside its subtree's. A run's account is drawn on by its own steps
 * and by every run below it (a child's draw is charged up the tree), so what the account
 * says is the subtree's; the run's own is that less what its children's accounts say.
 */
function withSubtrees<T extends { runId: string; parentId: string | null; spent: Spent }>(
  runs: T[],
): (T & { subtree: Spent })[] {
  const below = new Map<string, Spent>();
  for (const run of runs) {
    if (run.parentId === null) continue;
    const sum = below.get(run.parentId) ?? { steps: 0, tokens: 0 };
    sum.steps += run.spent.steps;
    sum.tokens += run.spent.tokens;
    below.set(run.parentId, sum);
  }
  return runs.map((run) => {
    const children = below.get(run.runId) ?? { steps: 0, tokens: 0 };
    return {
      ...run,
      spent: {
        steps: Math.max(0, run.spent.steps - children.steps),
        tokens: Math.max(0, run.spent.tokens - children.tokens),
      },
      subtree: run.spent,
    };
  });
}

async function trees(reader: Reads) {
  const roots = await reader.runs();
  const shown = [];
  for (const root of roots.slice(-LIST_LIMIT).reverse())
    shown.push({ ...(await summary(reader, root)), runs: (await reader.runs(root.runId)).length });
  return { total: roots.length, trees: shown };
}

/** The view a page path names (`/`, `/tree/<id>`, `/run/<id>` under the token), with its data when it has any. */
async function firstView(reader: Reads, parts: string[]): Promise<FirstView> {
  const [kind, id] = parts;
  if (kind === 'tree' && id)
    return { kind: 'tree', id, api: `api/tree/${encodeURIComponent(id)}`, data: await tree(reader, id) };
  if (kind === 'run' && id)
    return { kind: 'run', id, api: `api/run/${encodeURIComponent(id)}`, data: await run(reader, id) };
  if (kind === 'timeline' && id)
    return {
      kind: 'timeline',
      id,
      api: `api/tree/${encodeURIComponent(id)}/timeline`,
      data: await reader.query(timelineQuery(id, Date.now())),
    };
  return { kind: 'trees', id: null, api: 'api/trees', data: await trees(reader) };
}

async function tree(reader: Reads, rootId: string) {
  const root = await reader.run(rootId);
  if (!root || root.parentId !== null) return null;
  const ledger = await reader.ledger(rootId);
  const runs = await reader.runs(rootId);
  const summaries = [];
  for (const item of runs) summaries.push(await summary(reader, item));
  return {
    root: await summary(reader, root),
    // Some agent is still going (a paused one waits on a person, not on the tree).
    live: runs.some((item) => !isTerminal(item.status) && item.status !== 'paused'),
    runs: withSubtrees(summaries),
    ledger: ledger
      ? { root: ledger.root, maxTotalAgents: ledger.maxTotalAgents, maxConcurrentAgents: ledger.maxConcurrentAgents }
      : null,
    queue: (await reader.queue(rootId)).map((item) => ({
      childRunId: item.childRunId,
      parentId: item.parentId,
      state: item.state,
    })),
    messages: (await reader.messages(rootId)).map((item) => ({
      msgId: item.msgId,
      from: item.fromAddress,
      to: item.toAddress,
      read: item.consumedBy !== null,
      body: clip(item.body),
    })),
  };
}

async function run(reader: Reads, runId: string) {
  const record = await reader.run(runId);
  if (!record) return null;
  return {
    run: {
      ...(await summary(reader, record)),
      reply: record.reply === null ? null : clip(record.reply),
      reason: record.outcome?.reason ?? null,
    },
    steps: (await reader.steps(runId)).map((step) => ({
      seq: step.seq,
      model: step.completion.model,
      text: clip(step.completion.text),
      usage: step.usage,
      toolCalls: step.completion.toolCalls.map((call) => ({
        id: call.id,
        name: call.name,
        args: clip(JSON.stringify(call.args)),
      })),
      observations: step.observations.map((item) => ({
        callId: item.callId,
        name: item.name,
        isError: item.isError,
        content: clip(item.content),
      })),
    })),
    events: (await reader.events(runId)).filter((event) =>
      [
        'refusal',
        'gate-evaluated',
        'gate-output',
        'file-changed',
        'run-paused',
        'question-answered',
        'spend',
        'spawn-queued',
        'schema-invalid',
        'budget-exhausted',
        'run-end',
      ].includes(event.type),
    ),
    modelCalls: (await reader.modelCalls({ runId })).map((call) => ({
      seq: call.seq,
      attempt: call.attempt,
      provider: call.provider,
      model: call.model,
      outcome: call.outcome,
      inputTokens: call.inputTokens,
      outputTokens: call.outputTokens,
      cacheReadTokens: call.cacheReadTokens,
      latencyMs: call.latencyMs,
      ttftMs: call.ttftMs,
    })),
    patch: await reader.patch(runId),
  };
}

/** Server-sent events: every committed event after `after` (or Last-Event-ID), of one tree or all. */
async function events(
  reader: Reads,
  request: IncomingMessage,
  url: URL,
  response: ServerResponse,
  streams: Set<ServerResponse>,
  pollMs: number,
): Promise<void> {
  const rootId = url.searchParams.get('root');
  const asked = request.headers['last-event-id'] ?? url.searchParams.get('after');
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let reading = false;
  const stop = () => {
    stopped = true;
    clearInterval(timer);
    streams.delete(response);
  };
  // Heard before the first read: a page gone while it waits on the store stops its stream.
  request.on('close', stop);
  response.on('close', stop);
  // A page reads what is there from /api and follows from here: no history replayed.
  let after = asked === null || asked === undefined ? await reader.lastEventId() : Number(asked);
  if (!Number.isSafeInteger(after) || after < 0) after = await reader.lastEventId();
  if (stopped) return;
  response.writeHead(200, { 'content-type': 'text/event-stream', connection: 'keep-alive', ...SECURITY });
  response.write('retry: 1000\n\n');
  streams.add(response);
  const tick = async () => {
    // One read at a time: a slow store skips a tick rather than stacking reads.
    if (reading || stopped) return;
    reading = true;
    let batch: Awaited<ReturnType<TraceReader['eventsAfter']>>;
    try {
      batch = await reader.eventsAfter(after, 500);
    } catch {
      // The store could not be read (a damaged row, a file gone): this stream ends, the server goes on.
      stop();
      response.destroy();
      return;
    } finally {
      reading = false;
    }
    if (stopped) return;
    const last = batch.at(-1)?.eventId;
    for (const event of batch) {
      if (rootId && event.rootId !== rootId) continue;
      // Only what the page shows: type, ids and status; the texts are read from /api/run.
      const { type, eventId, runId, rootId: root, seq, at } = event;
      const status = event.type === 'run-end' ? event.status : undefined;
      response.write(
        `id: ${eventId}\ndata: ${JSON.stringify({ type, eventId, runId, rootId: root, seq, at, status })}\n\n`,
      );
    }
    if (last !== undefined) after = last;
  };
  await tick();
  if (!stopped) timer = setInterval(() => void tick(), pollMs);
}
