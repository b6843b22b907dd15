/**
 * The locks a PostgreSQL write takes: a tree's own for a write inside one tree, so writes
 * to different trees go side by side while one tree's queue; the store's for the rest. And
 * two hosts committing to one tree's accounts at once keep its ledger to the token. On the
 * tests' real server, each host a store handle with its own pool.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Attach } from '../dist/index.js';
import { PostgresStore } from '../dist/store/postgres/index.js';
import { lockStatements, MAX_TREE_LOCKS, scopeOf } from '../dist/store/postgres/locks.js';
import { freshDatabase } from './support/postgres.js';
import { later } from './support/workspace.js';
import { claimOf, emptyStep, rootInput, spawnInput } from './support/writer.js';

async function database() {
  const db = await freshDatabase();
  later(() => db.drop());
  return db;
}

async function open(url: string): Promise<PostgresStore> {
  const store = await PostgresStore.open(url, { max: 8 });
  later(() => store.close());
  return store;
}

async function client(url: string): Promise<pg.Client> {
  const connection = new pg.Client({ connectionString: url });
  await connection.connect();
  later(() => connection.end());
  return connection;
}

/** The locks sessions are waiting for, by kind ('advisory', 'transactionid', 'tuple'). */
async function waiting(watcher: pg.Client): Promise<string[]> {
  const rows = await watcher.query<{ locktype: string }>(
    `SELECT l.locktype FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
     WHERE NOT l.granted AND a.datname = current_database()`,
  );
  return rows.rows.map((row) => row.locktype);
}

/**
 * Waits until `promise` settles or a session waits for a lock of a kind `blocked` names;
 * says which came first. Decided by what the server says, not by time.
 */
async function settlesOrWaits(
  promise: Promise<unknown>,
  watcher: pg.Client,
  blocked: (kinds: string[]) => boolean,
): Promise<'settled' | 'waiting'> {
  let settled = false;
  void promise.then(
    () => {
      settled = true;
    },
    () => {
      settled = true;
    },
  );
  for (;;) {
    if (settled) return 'settled';
    const kinds = await waiting(watcher);
    if (blocked(kinds)) return settled ? 'settled' : 'waiting';
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A store with two trees, tree-a and tree-b, created by owner o; watched and held by sessions of their own. */
async function twoTrees() {
  const db = await database();
  const store = await open(db.url);
  const watcher = await client(db.url);
  const holder = await client(db.url);
  const fenceOf = async (runId: string) => {
    const { generation } = await store.call('createRoot', rootInput(runId, { owner: 'o' }));
    return { runId, generation, owner: 'o' };
  };
  return { url: db.url, store, watcher, holder, a: await fenceOf('tree-a'), b: await fenceOf('tree-b') };
}

/** Events as a rule records them, each named by its `provider`. */
const said = (provider: string) => [{ type: 'provider-unreachable', provider, message: 'm' }] as never;

/**
 * What another host's write of tree a is in the middle of: tree a's locks taken (the
 * statements the store takes them with), an event's id handed out, nothing committed.
 */
async function holdTreeA(holder: pg.Client): Promise<void> {
  await holder.query('BEGIN');
  for (const statement of lockStatements({ runs: [], roots: ['tree-a'] })) {
    let n = 0;
    await holder.query(
      statement.text.replace(/\?/g, () => `$${++n}`),
      statement.params as unknown[],
    );
  }
  await holder.query(
    `INSERT INTO events (root_id, run_id, seq, generation, type, data, at)
     VALUES ('tree-a', 'tree-a', NULL, 1, 'provider-unreachable', '{"provider":"held","message":"m"}', 0)`,
  );
}

describe('PostgreSQL write locks', () => {
  it("commits one tree's writes while another tree's write is held inside its transaction; that tree's next write waits its turn", {
    timeout: 60_000,
  }, async () => {
    const { store, watcher, holder, a, b } = await twoTrees();
    // Another session holds tree a's root row: a's step commit takes its locks, then waits on the row.
    await holder.query('BEGIN');
    await holder.query("SELECT * FROM runs WHERE run_id = 'tree-a' FOR UPDATE");
    const stepA = store.call('commitStep', emptyStep(a, 1, { events: said('in the step') }));
    expect(await settlesOrWaits(stepA, watcher, (kinds) => kinds.includes('transactionid'))).toBe('waiting');
    // Tree b's writes go through meanwhile: no lock of tree a's, nor the store's, stands in their way.
    const stepB = store.call('commitStep', emptyStep(b, 1));
    expect(await settlesOrWaits(stepB, watcher, (kinds) => kinds.includes('advisory'))).toBe('settled');
    await stepB;
    await store.call('commitStep', emptyStep(b, 2));
    expect((await store.steps('tree-b')).map((step) => step.seq)).toEqual([1, 2]);
    // Tree a's next write waits for the one in flight: on tree a's lock.
    const eventsA = store.call('recordEvents', { ...a, events: said('after the step'), now: Date.now() });
    expect(await settlesOrWaits(eventsA, watcher, (kinds) => kinds.includes('advisory'))).toBe('waiting');
    // A write that takes the whole store (a session opened) waits for tree a's too.
    const session = store.call('openSession', { sessionId: 's', root: 'tree-b', now: Date.now() });
    expect(
      await settlesOrWaits(session, watcher, (kinds) => kinds.filter((kind) => kind === 'advisory').length >= 2),
    ).toBe('waiting');
    await holder.query('COMMIT');
    await Promise.all([stepA, eventsA, session]);
    expect((await store.steps('tree-a')).map((step) => step.seq)).toEqual([1]);
    // Tree a's events are in the order its writes committed.
    const providers = (await store.events('tree-a')).flatMap((event) =>
      event.type === 'provider-unreachable' ? [event.provider] : [],
    );
    expect(providers).toEqual(['in the step', 'after the step']);
  });

  it("reads every tree's events in id order only up to where none is still to commit", {
    timeout: 60_000,
  }, async () => {
    const { store, watcher, holder, b } = await twoTrees();
    const before = await store.lastEventId();
    // A write of tree a, as another host makes it: its locks taken, its event's id handed out, not yet committed.
    await holdTreeA(holder);
    // Tree b commits meanwhile, its event's id after tree a's.
    await store.call('recordEvents', { ...b, events: said('committed'), now: Date.now() });
    expect((await store.treeEvents('tree-b', before)).map((event) => event.type)).toEqual(['provider-unreachable']);
    // A reader of every tree waits for tree a's write rather than read past it and miss its event for good.
    const read = store.eventsAfter(before);
    expect(await settlesOrWaits(read, watcher, (kinds) => kinds.includes('advisory'))).toBe('waiting');
    await holder.query('COMMIT');
    expect((await read).map((event) => (event as { provider?: string }).provider)).toEqual(['held', 'committed']);
  });

  it("follows a session's turns each by its own cursor: a turn's event committed after another turn's later id is still seen", {
    timeout: 60_000,
  }, async () => {
    const { store, holder, b } = await twoTrees();
    await store.call('openSession', { sessionId: 's', root: '/ws', now: Date.now() });
    for (const [turnId, runId] of [
      ['t1', 'tree-a'],
      ['t2', 'tree-b'],
    ] as const) {
      await store.call('beginTurn', { sessionId: 's', turnId, parent: null, text: 'go', now: Date.now() });
      await store.call('startedTurn', { turnId, runId });
    }
    const attach = await Attach.open(store, 's');
    const abort = new AbortController();
    const seen: string[] = [];
    const stream = attach.events({ pollMs: 5, signal: abort.signal })[Symbol.asyncIterator]();
    const until = async (provider: string) => {
      for (;;) {
        const next = await stream.next();
        if (next.done) throw new Error(`the stream ended before ${provider}`);
        const name = (next.value as { provider?: string }).provider;
        if (name) seen.push(name);
        if (name === provider) return;
      }
    };
    // Turn one's tree has an event's id handed out, not committed, when turn two's commits a later one.
    await holdTreeA(holder);
    await store.call('recordEvents', { ...b, events: said('committed'), now: Date.now() });
    await until('committed');
    await holder.query('COMMIT');
    await store.call('recordEvents', { ...b, events: said('later'), now: Date.now() });
    await until('later');
    abort.abort();
    expect(seen).toEqual(['committed', 'held', 'later']);
  });

  it('names the trees a write decides on, and takes the whole store for anything else', () => {
    const write = (op: string, input: unknown) => ({ op, input }) as never;
    expect(scopeOf([write('commitStep', { runId: 'r1' }), write('admit', { childId: 'c1' })])).toEqual({
      runs: ['r1', 'c1'],
      roots: [],
    });
    expect(scopeOf([write('claim', { roots: ['a', 'b'] })])).toEqual({ runs: [], roots: ['a', 'b'] });
    // A lease renewal updates each row by its key: the store's lock shared, no tree's.
    expect(scopeOf([write('renewLeases', { leases: [{ runId: 'r1' }] })])).toEqual({ runs: [], roots: [] });
    // Not listed, or beside one not listed: the store's lock whole.
    expect(scopeOf([write('openSession', { sessionId: 's' })])).toBeNull();
    expect(scopeOf([write('commitStep', { runId: 'r1' }), write('answer', { questionId: 'q' })])).toBeNull();
    // Input not shaped as the rule takes it (the rule refuses it): the store's lock, not a throw.
    expect(scopeOf([write('commitStep', { runId: 7 })])).toBeNull();
    expect(scopeOf([write('claim', { roots: 'a' })])).toBeNull();
    expect(scopeOf([write('commitStep', null)])).toBeNull();
    // More trees than a transaction should lock one by one: the store's lock.
    const many = Array.from({ length: MAX_TREE_LOCKS + 1 }, (_, i) => write('commitStep', { runId: `r${i}` }));
    expect(scopeOf(many)).toBeNull();
    expect(scopeOf(many.slice(1))).not.toBeNull();
  });

  it("finds a write's trees by its runs' keys, whatever plan the server keeps for the statement", async () => {
    const db = await database();
    await open(db.url);
    const session = await client(db.url);
    const other = await client(db.url);
    // A tree of three hundred runs the server has no statistics for (as a new store's first
    // minutes are), and the plan every later call of the prepared statement runs.
    await session.query(
      `INSERT INTO runs (run_id, root_id, parent_id, address, depth, ancestry, status, task, spec, created_at)
       SELECT 'r' || i, 'big', CASE WHEN i = 0 THEN NULL ELSE 'r0' END,
         CASE WHEN i = 0 THEN 'root' ELSE 'root.' || i END, 1, '[]', 'running', 't', '{}', 0
       FROM generate_series(0, 300) AS i`,
    );
    const [, trees] = lockStatements({ runs: ['r5', 'gone'], roots: ['other-tree'] }) as [unknown, { text: string }];
    let n = 0;
    await session.query(`PREPARE trees AS ${trees.text.replace(/\?/g, () => `$${++n}`)}`);
    await session.query('SET plan_cache_mode = force_generic_plan');
    const plan = (await session.query("EXPLAIN EXECUTE trees('{r5,gone}', '{other-tree}')")).rows
      .map((row) => row['QUERY PLAN'])
      .join('\n');
    expect(plan).toContain('runs_pkey');
    expect(plan).not.toMatch(/Seq Scan on runs/);
    // Run, it takes the lock of r5's tree and of the one named by its root; a run not found is no error.
    await session.query('BEGIN');
    await session.query("EXECUTE trees('{r5,gone}', '{other-tree}')");
    const free = async (key: string) =>
      (await other.query<{ free: boolean }>(`SELECT pg_try_advisory_xact_lock(7311, hashtext($1)) AS free`, [key]))
        .rows[0]?.free;
    expect([await free('big'), await free('other-tree')]).toEqual([false, false]);
    await session.query('ROLLBACK');
  });

  it("keeps one tree's ledger to the token when two hosts commit to its accounts at once", {
    timeout: 120_000,
  }, async () => {
    const db = await database();
    const hostA = await open(db.url);
    const hostB = await open(db.url);
    const root = await hostA.call('createRoot', {
      ...rootInput('tree', { owner: 'a' }),
      ceilings: { steps: null, tokens: 10_000_000, wallMs: null },
    });
    const fence = { runId: 'tree', generation: root.generation, owner: 'a' };
    const children: { runId: string; generation: number; owner: string; host: PostgresStore }[] = [];
    for (let i = 0; i < 8; i++) {
      await hostA.call('spawn', spawnInput(fence, `tree:1:${i}`, `c${i}`));
      const host = i % 2 === 0 ? hostA : hostB;
      const owner = i % 2 === 0 ? 'a' : 'b';
      const admitted = (await host.call('admit', { childId: `c${i}`, ...claimOf({ owner }) })) as {
        generation: number;
      };
      children.push({ runId: `c${i}`, generation: admitted.generation, owner, host });
    }
    const STEPS = 15;
    const tokensOf = (child: number, seq: number) => ({ inputTokens: 100 + child * 7 + seq, outputTokens: 3 + seq });
    // Every child commits its steps one after another; the children (four on each host) all at once.
    await Promise.all(
      children.map(async ({ host, ...child }, index) => {
        for (let seq = 1; seq <= STEPS; seq++)
          await host.call('commitStep', emptyStep(child, seq, { usage: tokensOf(index, seq) }));
      }),
    );
    let tokens = 0;
    for (let index = 0; index < children.length; index++)
      for (let seq = 1; seq <= STEPS; seq++) {
        const usage = tokensOf(index, seq);
        tokens += usage.inputTokens + usage.outputTokens;
      }
    const ledger = await hostB.ledger('tree');
    expect(ledger?.root.spent).toMatchObject({ steps: children.length * STEPS, tokens });
    expect(ledger?.draws.reduce((sum, draw) => sum + draw.tokens, 0)).toBe(tokens);
    expect(ledger?.draws.length).toBe(children.length * STEPS);
    for (const [index, child] of children.entries()) {
      let own = 0;
      for (let seq = 1; seq <= STEPS; seq++)
        own += tokensOf(index, seq).inputTokens + tokensOf(index, seq).outputTokens;
      expect((await hostA.account(child.runId))?.spent).toMatchObject({ steps: STEPS, tokens: own });
    }
  });
});
