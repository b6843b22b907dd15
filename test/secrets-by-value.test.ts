/**
 * Secrets scrubbed by value (runtime/secrets.ts), tested as a leak would happen: a distinct
 * secret in each carrier the harness holds — the provider's key, credential headers under
 * names no list knows (X-Auth, Authentication, X-Session), a base URL's user:pass@ and
 * ?api_key=, a vendor's 401 body that echoes the key, a PostgreSQL password in URL and in
 * key/value form — and a model that repeats them where it can (a tool it names after the
 * key, a path holding a header's value). None of them may be found in the store file's
 * bytes (and its log), any error, the outcome, the CLI's output or an exported span.
 */
import { existsSync, readFileSync } from 'node:fs';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { HarnessError, loadProvider, OpenAI, type Store, TaskContract } from '../dist/index.js';
import { otelObserver } from '../dist/otel/index.js';
import { PostgresStore } from '../dist/store/postgres/index.js';
import { ScriptedModelServer } from '../dist/testing/index.js';
import { cli } from './support/cli.js';
import { freshDatabase } from './support/postgres.js';
import { later, supervisorOnStore, tempWorkspace } from './support/workspace.js';

const KEY = 'sk-live-KEY-a1b2c3d4e5f6';
const X_AUTH = 'xauth-SECRET-2222cccc';
const AUTHENTICATION = 'authn-SECRET-3333dddd';
const X_SESSION = 'session-SECRET-4444eeee';
const URL_USER = 'urluser-SECRET-5555';
const URL_PASS = 'urlpass-SECRET-6666ffff';
const QUERY_KEY = 'querykey-SECRET-7777gggg';
const PG_URL_PASS = 'pgurlpass-SECRET-8888';
const PG_SSL_PASS = 'pgsslpass-SECRET-8989';
const PG_KV_PASS = 'pgkvpass-SECRET-9999';
const PG_KV_QUOTED = 'pg kv quoted SECRET 0000';

const PROVIDER_SECRETS = [KEY, X_AUTH, AUTHENTICATION, X_SESSION, URL_USER, URL_PASS, QUERY_KEY];
const ALL = [...PROVIDER_SECRETS, PG_URL_PASS, PG_SSL_PASS, PG_KV_PASS, PG_KV_QUOTED];

/** Every secret found in `text`, in any of the spellings it could be written in. */
function leaked(text: string, secrets: readonly string[] = ALL): string[] {
  return secrets.filter(
    (secret) =>
      text.includes(secret) ||
      text.includes(encodeURIComponent(secret)) ||
      text.includes(JSON.stringify(secret).slice(1, -1)),
  );
}

/** The store's file and its write-ahead log, as bytes read as text. */
function storeBytes(store: Store): string {
  return [store.path, `${store.path}-wal`]
    .filter((path) => existsSync(path))
    .map((path) => readFileSync(path).toString('latin1'))
    .join('\n');
}

/** What an error carries that anyone could print: message, stack, details, fields, causes. */
function errorText(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current; depth++) {
    const item = current as Record<string, unknown>;
    parts.push(String(item.message), String(item.stack), JSON.stringify(item.details ?? null));
    parts.push(JSON.stringify(item.responseBody ?? null), JSON.stringify(item, Object.getOwnPropertyNames(item)));
    current = item.cause;
  }
  return parts.join('\n');
}

/** The vendor's error body: it echoes the key and the session header it was sent, as some vendors do. */
const ECHO = JSON.stringify({
  error: { message: `Incorrect API key provided: ${KEY} (session ${X_SESSION})`, type: 'invalid_request_error' },
});

/**
 * A model on loopback that repeats the secrets where a model could: it first calls a tool
 * it names after the key and reads a path holding a header's value, then answers 401 with
 * a body that echoes the key.
 */
async function leakyModel(failAtOnce = false) {
  const server = await ScriptedModelServer.start((call) => {
    if (failAtOnce) return { fault: 'status', status: 401, body: ECHO };
    const results = (call.body as { messages: { role: string }[] }).messages.filter(
      (message) => message.role === 'tool',
    ).length;
    if (results === 0)
      return {
        toolCalls: [
          { name: KEY, args: { token: X_AUTH } },
          { name: 'read_file', args: { path: `notes-${AUTHENTICATION}.txt` } },
        ],
      };
    return { fault: 'status', status: 401, body: ECHO };
  });
  later(() => server.close());
  const base = new URL(server.url);
  const baseUrl = `http://${URL_USER}:${URL_PASS}@${base.host}/v1?api_key=${QUERY_KEY}`;
  const provider = OpenAI.create({
    model: 'scripted',
    baseUrl,
    apiKey: KEY,
    headers: {
      'X-Auth': X_AUTH,
      Authentication: `Token ${AUTHENTICATION}`,
      'X-Session': X_SESSION,
      'X-Title': 'kept-title',
    },
  });
  return { server, provider };
}

describe('secrets scrubbed by value', () => {
  it('a run holds none of them in the store file, the outcome or an exported span', { timeout: 60_000 }, async () => {
    const { server, provider } = await leakyModel();
    const exporter = new InMemorySpanExporter();
    const tracing = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const { store, supervisor } = await supervisorOnStore();
    supervisor.observe(otelObserver({ tracer: tracing.getTracer('io-harness') }));
    const events: unknown[] = [];
    supervisor.observe((event) => {
      events.push(event);
    });
    const root = tempWorkspace({ 'readme.txt': 'hello\n' });
    const result = await supervisor.run({ contract: TaskContract.workspace('read the notes', root), provider }).result;
    await tracing.forceFlush();

    // The secrets were really in play: sent to the vendor, and the run got as far as its 401.
    const first = server.calls[0];
    expect(first?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(first?.headers['x-auth']).toBe(X_AUTH);
    expect(first?.headers['x-session']).toBe(X_SESSION);
    expect(first?.path).toContain(`api_key=${QUERY_KEY}`);
    expect(server.calls.length).toBeGreaterThanOrEqual(2);
    expect(result.status).toBe('failed');
    expect(result.reason).toContain('Incorrect API key provided: ***');

    // The outcome, and every event an observer was handed.
    expect(leaked(JSON.stringify(result))).toEqual([]);
    expect(leaked(JSON.stringify(events))).toEqual([]);

    // The store's bytes: every row of the run, its stored spec too (which keeps the harmless header).
    const spec = store.spec(result.rootId) as { provider: Record<string, unknown> };
    expect(spec.provider).toMatchObject({ apiKeyRedacted: true, headers: { 'X-Title': 'kept-title' } });
    expect(String(spec.provider.baseUrl)).toContain('api_key=***');
    const bytes = storeBytes(store);
    expect(bytes).toContain('kept-title');
    expect(bytes).toContain('Incorrect API key provided');
    expect(leaked(bytes)).toEqual([]);

    // Every exported span: names, attributes, events, statuses.
    const spans = exporter.getFinishedSpans();
    expect(spans.some((span) => span.name.startsWith('execute_tool'))).toBe(true);
    const exported = JSON.stringify(
      spans.map((span) => ({ name: span.name, attributes: span.attributes, events: span.events, status: span.status })),
    );
    expect(leaked(exported)).toEqual([]);
    await tracing.shutdown();

    // The CLI reading the same store, in a process of its own.
    const shown = await cli(['show', result.rootId, '--store', store.path]);
    expect(shown.stdout).toContain('Incorrect API key provided');
    expect(leaked(shown.stdout + shown.stderr)).toEqual([]);
    const asJson = await cli(['show', result.rootId, '--store', store.path, '--json']);
    expect(leaked(asJson.stdout + asJson.stderr)).toEqual([]);
  });

  it('a provider error raised in this thread says none of them, in its message, stack, details or body', async () => {
    const { provider: spec } = await leakyModel(true);
    const provider = await loadProvider(spec);
    const error = await provider
      .complete({
        system: 's',
        transcript: [{ role: 'user', text: 'hello' }],
        tools: [],
        metadata: { runId: 'r', rootId: 'r', address: 'root', parentAddress: null, depth: 0, seq: 1 },
      })
      .then(
        () => null,
        (caught: unknown) => caught,
      );
    expect(HarnessError.isInstance(error)).toBe(true);
    expect((error as { statusCode?: number }).statusCode).toBe(401);
    expect(String((error as { responseBody?: string }).responseBody)).toContain('Incorrect API key provided: ***');
    expect(leaked(errorText(error))).toEqual([]);
  });

  it('a PostgreSQL password, in URL or key/value form, is in no error and no line of store copy', async () => {
    const keyValue = `host=127.0.0.1 port=1 user=someone password=${PG_KV_PASS} dbname=x sslpassword='${PG_KV_QUOTED}'`;
    const refused = await PostgresStore.open(keyValue).then(
      () => null,
      (caught: unknown) => caught,
    );
    expect(HarnessError.isInstance(refused) && refused.code).toBe('INVALID_ARGUMENT');
    expect(String((refused as Error).message)).toContain('password=***');
    expect(leaked(errorText(refused))).toEqual([]);

    const url = `postgres://someone:${PG_URL_PASS}@127.0.0.1:1/x?sslpassword=${PG_SSL_PASS}`;
    const unreachable = await PostgresStore.open(url, { connectTimeoutMs: 2_000 }).then(
      () => null,
      (caught: unknown) => caught,
    );
    expect(HarnessError.isInstance(unreachable) && unreachable.code).toBe('STORE_UNREACHABLE');
    expect(leaked(errorText(unreachable))).toEqual([]);

    const { store } = await supervisorOnStore();
    for (const target of [keyValue, url]) {
      const copied = await cli(['store', 'copy', store.path, target]);
      expect(copied.status).not.toBe(0);
      expect(copied.stderr).not.toBe('');
      expect(leaked(copied.stdout + copied.stderr)).toEqual([]);
    }
    const named = await cli(['runs', '--store', keyValue]);
    expect(named.status).not.toBe(0);
    expect(leaked(named.stdout + named.stderr)).toEqual([]);
  });

  it('a PostgreSQL store holds no byte of its own password, nor of the provider secrets, in any row', {
    timeout: 60_000,
  }, async () => {
    const db = await freshDatabase();
    later(() => db.drop());
    // The tests' server trusts loopback: a password in the URL is carried, and sent, but not needed.
    const withPassword = new URL(db.url);
    withPassword.password = PG_URL_PASS;
    const store = await PostgresStore.open(withPassword.toString());
    later(() => store.close());
    const { Supervisor } = await import('../dist/index.js');
    const supervisor = await Supervisor.start(store);
    later(() => supervisor.close());
    const server = await ScriptedModelServer.start((call) => {
      const results = (call.body as { messages: { role: string }[] }).messages.filter(
        (message) => message.role === 'tool',
      ).length;
      return results === 0
        ? { toolCalls: [{ name: 'read_file', args: { path: `${PG_URL_PASS}-${KEY}.txt` } }] }
        : { text: `done; the database password is ${PG_URL_PASS} and the key ${KEY}` };
    });
    later(() => server.close());
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: KEY });
    const root = tempWorkspace({ 'readme.txt': 'hello\n' });
    const result = await supervisor.run({ contract: TaskContract.workspace('read', root), provider }).result;
    expect(result.status).toBe('finished');
    expect(result.reply).toBe('done; the database password is *** and the key ***');

    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const tables = await client.query<{ name: string }>(
        "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public'",
      );
      let rows = '';
      for (const { name } of tables.rows) {
        const all = await client.query(`SELECT * FROM "${name}"`);
        rows += JSON.stringify(all.rows);
      }
      expect(rows).toContain('the database password is');
      expect(leaked(rows, [PG_URL_PASS, KEY])).toEqual([]);
    } finally {
      await client.end();
    }
  });
});
