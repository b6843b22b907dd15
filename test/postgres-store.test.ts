/**
 * Opening a PostgreSQL store: an empty database gets the tables, an older store is
 * migrated forward, two hosts opening at once make them once; and what is refused with
 * nothing written — a URL that does not connect, a store newer than this release, a
 * database of someone else's — each saying what to do. On the tests' real server.
 */
import { existsSync } from 'node:fs';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { StoreClient, startStoreWorker } from '../dist/actors/store.js';
import { PostgresStore, postgresMigration } from '../dist/store/postgres/index.js';
import { Store } from '../dist/store/sqlite/store.js';
import { SCHEMA_VERSION } from '../dist/store/version.js';
import { freshDatabase } from './support/postgres.js';
import { claimOf, emptyStep, rootInput, spawnInput } from './support/writer.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function database() {
  const db = await freshDatabase();
  cleanups.push(() => db.drop());
  return db;
}

/** A store actor on the database at `url`, and `count` roots made through it (`prefix`0, `prefix`1 ...), each held by o. */
async function actorWithRoots(url: string, prefix: string, count: number) {
  const worker = await startStoreWorker({ target: { kind: 'postgres', connectionString: url }, killAt: null });
  const client = new StoreClient(worker);
  const fences = await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const { generation } = await client.call('createRoot', rootInput(`${prefix}${i}`, { owner: 'o' }));
      return { runId: `${prefix}${i}`, generation, owner: 'o' };
    }),
  );
  return { worker, client, fences };
}

async function sql<T extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(text, values)).rows;
  } finally {
    await client.end();
  }
}

async function tables(url: string, schema = 'public'): Promise<string[]> {
  const rows = await sql<{ name: string }>(
    url,
    'SELECT table_name AS name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name',
    [schema],
  );
  return rows.map((row) => row.name);
}

/** Every column of the schema's tables, as table.column: what a migration that adds only columns changes. */
async function columns(url: string, schema = 'public'): Promise<string[]> {
  const rows = await sql<{ name: string }>(
    url,
    `SELECT table_name || '.' || column_name AS name FROM information_schema.columns WHERE table_schema = $1 ORDER BY 1`,
    [schema],
  );
  return rows.map((row) => row.name);
}

async function thrown(promise: Promise<unknown>): Promise<Error & { code?: string }> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: Error & { code?: string }) => error,
  );
}

describe('a PostgreSQL store', () => {
  it('makes its tables in an empty database, at this release’s version, and reads them back', async () => {
    const db = await database();
    const store = await PostgresStore.open(db.url);
    try {
      expect(await tables(db.url)).toEqual(
        expect.arrayContaining(['runs', 'ledger', 'steps', 'events', 'mailbox', 'memory_notes', 'io_harness_meta']),
      );
      const meta = await sql<{ key: string; value: string }>(db.url, 'SELECT key, value FROM io_harness_meta');
      expect(Object.fromEntries(meta.map((row) => [row.key, row.value]))).toEqual({
        store: 'io-harness store',
        schema_version: String(SCHEMA_VERSION),
      });
      expect(await store.runs()).toEqual([]);
      expect(await store.lastEventId()).toBe(0);
    } finally {
      await store.close();
    }
  });

  it('brings an older store forward, and two hosts opening one empty database at once make it once', async () => {
    const db = await database();
    // A store left at the version before this one.
    const older = SCHEMA_VERSION - 1;
    await sql(db.url, 'CREATE TABLE io_harness_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)');
    await sql(
      db.url,
      `INSERT INTO io_harness_meta VALUES ('store', 'io-harness store'), ('schema_version', '${older}')`,
    );
    for (let version = 0; version < older; version++) await sql(db.url, postgresMigration(version));
    const before = await columns(db.url);
    const store = await PostgresStore.open(db.url);
    await store.close();
    // The last migration's columns are there now.
    expect((await columns(db.url)).length).toBeGreaterThan(before.length);
    const after = await tables(db.url);
    const [version] = await sql<{ value: string }>(
      db.url,
      `SELECT value FROM io_harness_meta WHERE key = 'schema_version'`,
    );
    expect(version?.value).toBe(String(SCHEMA_VERSION));

    const empty = await database();
    const both = await Promise.all([PostgresStore.open(empty.url), PostgresStore.open(empty.url)]);
    for (const opened of both) await opened.close();
    expect(await tables(empty.url)).toEqual(after);
  });

  it('refuses a URL that does not connect, naming it without its password and saying what to check', async () => {
    const closed = await thrown(PostgresStore.open('postgres://someone:secret@127.0.0.1:1/harness'));
    expect(closed).toMatchObject({ name: 'StoreError', code: 'STORE_UNREACHABLE' });
    expect(closed.message).toContain('127.0.0.1:1');
    expect(closed.message).not.toContain('secret');
    expect(closed.message).toMatch(/Check that the server is running/);
    // A password in the query, as pg also reads one, is hidden too.
    const queried = await thrown(
      PostgresStore.open('postgres://someone@127.0.0.1:1/harness?password=hunter2&sslpassword=k3y'),
    );
    expect(queried).toMatchObject({ code: 'STORE_UNREACHABLE' });
    expect(queried.message).toContain('127.0.0.1:1');
    expect(queried.message).not.toMatch(/hunter2|k3y/);
    const db = await database();
    const missing = new URL(db.url);
    missing.pathname = '/no_such_database';
    const noDatabase = await thrown(PostgresStore.open(missing.toString()));
    expect(noDatabase).toMatchObject({ code: 'STORE_UNREACHABLE' });
    expect(noDatabase.message).toMatch(/no_such_database/);
    // The SQLite handle sends a URL here rather than making a file named like one.
    const sqliteOpen = await thrown(Store.open('postgres://someone@127.0.0.1/harness'));
    expect(sqliteOpen).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(sqliteOpen.message).toMatch(/io-harness\/postgres/);
    expect(existsSync('postgres:')).toBe(false);
    const notAUrl = await thrown(PostgresStore.open('runs.db'));
    expect(notAUrl).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(notAUrl.message).toMatch(/postgres:\/\//);
  });

  it('refuses a store newer than this release and changes nothing', async () => {
    const db = await database();
    await (await PostgresStore.open(db.url)).close();
    await sql(db.url, `UPDATE io_harness_meta SET value = '${SCHEMA_VERSION + 1}' WHERE key = 'schema_version'`);
    const before = await tables(db.url);
    const error = await thrown(PostgresStore.open(db.url));
    expect(error).toMatchObject({
      name: 'StoreError',
      code: 'STORE_SCHEMA_TOO_NEW',
      details: { fileVersion: SCHEMA_VERSION + 1, codeVersion: SCHEMA_VERSION },
    });
    expect(error.message).toMatch(/Upgrade io-harness/);
    expect(await tables(db.url)).toEqual(before);
    const [version] = await sql<{ value: string }>(
      db.url,
      `SELECT value FROM io_harness_meta WHERE key = 'schema_version'`,
    );
    expect(version?.value).toBe(String(SCHEMA_VERSION + 1));
  });

  it('refuses a database that is not ours, writing nothing, and keeps a store in a schema of its own beside it', async () => {
    const db = await database();
    await sql(db.url, 'CREATE TABLE customers (id SERIAL PRIMARY KEY, name TEXT)');
    await sql(db.url, `INSERT INTO customers (name) VALUES ('ada')`);
    const error = await thrown(PostgresStore.open(db.url));
    expect(error).toMatchObject({ name: 'StoreError', code: 'STORE_NOT_OURS', details: { tables: ['customers'] } });
    expect(error.message).toMatch(/customers/);
    expect(error.message).toMatch(/schema: "io_harness"/);
    expect(await tables(db.url)).toEqual(['customers']);
    // A meta table of another program's is not ours either.
    const other = await database();
    await sql(other.url, 'CREATE TABLE io_harness_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)');
    await sql(other.url, `INSERT INTO io_harness_meta VALUES ('store', 'something else')`);
    expect(await thrown(PostgresStore.open(other.url))).toMatchObject({ code: 'STORE_NOT_OURS' });
    expect(await tables(other.url)).toEqual(['io_harness_meta']);

    const store = await PostgresStore.open(db.url, { schema: 'io_harness' });
    try {
      expect(await store.runs()).toEqual([]);
      expect(await tables(db.url)).toEqual(['customers']);
      expect(await tables(db.url, 'io_harness')).toContain('runs');
      expect(await sql(db.url, 'SELECT name FROM customers')).toEqual([{ name: 'ada' }]);
    } finally {
      await store.close();
    }
    expect(await thrown(PostgresStore.open(db.url, { schema: 'no spaces' }))).toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
  });

  it('gathers concurrent writes through the store actor into shared transactions, a write that throws undone alone', async () => {
    const db = await database();
    const reads = await PostgresStore.open(db.url);
    const { worker, client, fences } = await actorWithRoots(db.url, 'r', 20);
    try {
      // Each step row marked with its transaction's start (now() is fixed for a transaction): one mark per transaction.
      await sql(db.url, 'ALTER TABLE steps ADD COLUMN begun TIMESTAMPTZ DEFAULT now()');
      // All at once: the actor gathers them. r0's step consumes a message no one sent, after its draw and row were written.
      const settled = await Promise.allSettled(
        fences.map((fence, i) => client.call('commitStep', emptyStep(fence, 1, i === 0 ? { consumed: ['nope'] } : {}))),
      );
      expect(settled[0]).toMatchObject({ status: 'rejected', reason: { code: 'MAILBOX_CONFLICT' } });
      expect(settled.slice(1).every((result) => result.status === 'fulfilled')).toBe(true);
      expect(await reads.steps('r0')).toEqual([]);
      expect(await reads.account('r0')).toMatchObject({ spent: { steps: 0, tokens: 0 } });
      expect((await reads.steps('r5')).map((step) => step.seq)).toEqual([1]);
      // Nineteen steps written by fewer transactions than steps: the batches were shared.
      const [marks] = await sql<{ transactions: number }>(
        db.url,
        'SELECT count(DISTINCT begun)::int AS transactions FROM steps',
      );
      expect(await sql(db.url, 'SELECT count(*)::int AS n FROM steps')).toEqual([{ n: 19 }]);
      expect(marks?.transactions).toBeLessThan(19);
    } finally {
      await worker.terminate();
      await reads.close();
    }
  });

  it('serves a long queue in transactions of at most 32 writes, and answers a sync once all of it is committed', async () => {
    const db = await database();
    const { worker, client, fences } = await actorWithRoots(db.url, 'q', 80);
    try {
      await sql(db.url, 'ALTER TABLE steps ADD COLUMN begun TIMESTAMPTZ DEFAULT now()');
      // Posted in one turn: they reach the actor as one queue of 80, and the sync behind them.
      let answered = 0;
      const steps = fences.map((fence) =>
        client.call('commitStep', emptyStep(fence, 1)).then(() => {
          answered++;
        }),
      );
      const synced = client.sync().then(() => answered);
      expect(await synced).toBe(80);
      await Promise.all(steps);
      const perTransaction = await sql<{ n: number }>(
        db.url,
        'SELECT count(*)::int AS n FROM steps GROUP BY begun ORDER BY n DESC',
      );
      expect(perTransaction.reduce((sum, row) => sum + row.n, 0)).toBe(80);
      // Shared, and none larger than the most a PostgreSQL batch takes.
      expect(perTransaction.length).toBeGreaterThanOrEqual(3);
      expect(perTransaction.length).toBeLessThan(80);
      expect(perTransaction[0]?.n).toBeLessThanOrEqual(32);
    } finally {
      await worker.terminate();
    }
  });

  it('holds what SQLite holds: a fraction of a second, a NUL, a branch of turns; its tables in its schema whatever the user’s', async () => {
    const db = await database();
    // A schema named for the user comes first on PostgreSQL's default search path: the store's tables do not go there.
    await sql(db.url, 'CREATE SCHEMA postgres');
    const store = await PostgresStore.open(db.url);
    try {
      expect(await tables(db.url, 'postgres')).toEqual([]);
      await (await PostgresStore.open(db.url)).close();
      await store.call('createRoot', { ...rootInput('half', { owner: 'o' }), maxWaitSecs: 0.5, task: 'a\u0000b' });
      expect(await store.account('half')).toMatchObject({ maxWaitSecs: 0.5 });
      // PostgreSQL's text cannot hold NUL: it is kept as U+FFFD rather than failing the write.
      expect((await store.run('half'))?.task).toBe('a\uFFFDb');
      await store.call('openSession', { sessionId: 's', root: '/w', now: 1 });
      const first = await store.call('beginTurn', { sessionId: 's', turnId: 't1', parent: null, text: 'one', now: 2 });
      await store.call('endTurn', { turnId: 't1', status: 'finished', reply: 'r1', now: 3 });
      await store.call('beginTurn', { sessionId: 's', turnId: 't2', parent: 't1', text: 'two', now: 4 });
      expect(first.seq).toBe(1);
      expect((await store.branch('t2')).map((part) => part.turn.turnId)).toEqual(['t1', 't2']);
      // Turns begun at once, on one session, each get a number of their own.
      const seqs = await Promise.all(
        [3, 4, 5, 6, 7, 8].map((n) =>
          store.call('beginTurn', { sessionId: 's', turnId: `t${n}`, parent: 't1', text: String(n), now: n }),
        ),
      );
      expect(seqs.map((begun) => begun.seq).sort()).toEqual([3, 4, 5, 6, 7, 8]);
    } finally {
      await store.close();
    }
  });

  it('lets a parent spawn while its children commit their last steps, all at once, with no deadlock', async () => {
    const db = await database();
    const store = await PostgresStore.open(db.url, { max: 24 });
    try {
      const root = await store.call('createRoot', rootInput('tree', { owner: 'o' }));
      const fence = { runId: 'tree', generation: root.generation, owner: 'o' };
      const spawnOf = (key: string, id: string) => spawnInput(fence, key, id);
      const children = [];
      for (let i = 0; i < 12; i++) {
        await store.call('spawn', spawnOf(`tree:1:${i}`, `c${i}`));
        const admitted = await store.call('admit', { childId: `c${i}`, ...claimOf({ owner: 'o' }) });
        children.push({ runId: `c${i}`, generation: (admitted as { generation: number }).generation, owner: 'o' });
      }
      const settled = await Promise.allSettled([
        ...children.map((child) =>
          store.call(
            'commitStep',
            emptyStep(child, 1, { final: { status: 'finished', reply: 'done', reason: null } } as never),
          ),
        ),
        ...children.map((_, i) => store.call('spawn', spawnOf(`tree:2:${i}`, `d${i}`))),
      ]);
      expect(settled.filter((result) => result.status === 'rejected')).toEqual([]);
      expect((await store.runs('tree')).length).toBe(25);
    } finally {
      await store.close();
    }
  });
});
