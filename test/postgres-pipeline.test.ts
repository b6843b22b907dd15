/**
 * A write on PostgreSQL does not wait for each statement: what a rule does not read the
 * answer of goes out behind what it does, and a step's commit waits on the server a few
 * times however many statements it sends (src/store/postgres/outbox.ts). Counted on the
 * tests' real server by watching the client: a statement sent while none is in flight
 * starts a round trip. And a write of a batch whose statement fails at the database, one
 * it never waited for, fails alone; the writes after it run again.
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { PostgresBatchWriter } from '../dist/store/postgres/batch.js';
import { PostgresStore } from '../dist/store/postgres/index.js';
import { channelOf } from '../dist/store/postgres/notify.js';
import { sqlRows } from './support/backends.js';
import { counting, freshDatabase } from './support/postgres.js';
import { claimOf, emptyStep, rootInput, spawnInput } from './support/writer.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A fresh database, a store on it (`max` connections), and a root run of each id, with its fence. */
async function withRoots(ids: string[], max?: number) {
  const db = await freshDatabase();
  cleanups.push(() => db.drop());
  const store = await PostgresStore.open(db.url, max === undefined ? {} : { max });
  cleanups.push(() => store.close());
  const fences: { runId: string; generation: number; owner: string }[] = [];
  for (const runId of ids) {
    const { generation } = await store.call('createRoot', rootInput(runId, { owner: 'o' }));
    fences.push({ runId, generation, owner: 'o' });
  }
  return { db, store, fences };
}

const call = (tokens: number) => ({
  provider: 'p',
  model: 'm',
  outcome: 'ok',
  statusCode: 200,
  inputTokens: tokens,
  outputTokens: 1,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  reasoningTokens: 0,
  latencyMs: 1,
  ttftMs: null,
});

describe('a write on PostgreSQL', () => {
  it("waits on the server twice for a step's commit of some twenty statements", async () => {
    const { store, fences } = await withRoots(['r'], 1);
    const fence = fences[0] as (typeof fences)[0];
    await store.call('commitStep', emptyStep(fence, 1));
    const step = await counting(() =>
      store.call(
        'commitStep',
        emptyStep(fence, 2, {
          calls: [call(10)],
          events: [{ type: 'run-start', task: 't', address: 'root', parentId: null, resumed: false }],
        }),
      ),
    );
    expect(step.value).toMatchObject({ status: 'committed', seq: 2 });
    // BEGIN, the lock, the draw, the run's row (one round trip); the rows and COMMIT behind them (a second).
    expect(step.statements).toBeGreaterThanOrEqual(18);
    expect(step.roundTrips).toBe(2);
    // What the rules read back still reaches them: the events' ids, in order, and the tree's spend.
    const events = await store.events('r');
    const ids = events.map((event) => event.eventId);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(ids.length);
    expect(await store.account('r')).toMatchObject({ spent: { steps: 2 } });
  });

  it("waits twice for a child's step, its last included: the tree's account, the parent and the reservations read ahead", async () => {
    const { store, fences } = await withRoots(['top'], 1);
    const top = fences[0] as (typeof fences)[0];
    await store.call('spawn', spawnInput(top, 'top:1:0', 'kid'));
    const admitted = (await store.call('admit', { childId: 'kid', ...claimOf({ owner: 'o' }) })) as {
      generation: number;
    };
    const kid = { runId: 'kid', generation: admitted.generation, owner: 'o' };
    const middle = await counting(() => store.call('commitStep', emptyStep(kid, 1)));
    expect(middle.value).toMatchObject({ status: 'committed' });
    const last = await counting(() =>
      store.call('commitStep', emptyStep(kid, 2, { final: { status: 'finished', reply: 'done' } })),
    );
    expect(last.value).toMatchObject({ status: 'committed' });
    expect([middle.roundTrips, last.roundTrips]).toEqual([2, 2]);
    expect(await store.account('top')).toMatchObject({ spent: { steps: 2 } });
    expect((await store.inbox('top', 'root')).map((message) => message.body)).toEqual([
      '[root.1 finished] done (steps 2, tokens 4)',
    ]);
  });

  it("reads a tree's cap and its slots once a claim, and waits for nothing more for each child it admits", async () => {
    const { store } = await withRoots([]);
    const { generation } = await store.call('createRoot', {
      ...rootInput('capped', { owner: 'o' }),
      maxConcurrentAgents: 4,
    });
    const parent = { runId: 'capped', generation, owner: 'o' };
    for (const n of [1, 2, 3, 4, 5, 6]) await store.call('spawn', spawnInput(parent, `capped:1:${n}`, `k${n}`));
    const claim = { ...claimOf({ owner: 'h', host: 'host-h' }), roots: ['capped'], limit: 16 };
    const first = await counting(() => store.call('claim', claim));
    // The cap holds as the claim counts what it takes: four of six, first in first out.
    expect(first.value.claimed.map((run) => run.runId)).toEqual(['k1', 'k2', 'k3', 'k4']);
    // The tree's slots counted once (not again for each child), its account read once.
    expect(first.texts.filter((text) => /COUNT\(\*\)/.test(text))).toHaveLength(1);
    expect(first.texts.filter((text) => /FROM ledger/.test(text))).toHaveLength(1);
    // Each child's row is taken as the claim read it, locked: the locks and the runs it may
    // take (one round trip), the tree's cap and count (one), the admissions behind them and
    // the COMMIT (one more), whatever the number admitted.
    expect(first.roundTrips).toBe(3);
    // Counted from the rows again at the next claim, which finds the tree full.
    expect((await store.call('claim', claim)).claimed).toEqual([]);
  });

  it("sends a batch's hint to other hosts with its COMMIT, and waits for neither alone", async () => {
    const { db, store, fences } = await withRoots(['top']);
    const top = fences[0] as (typeof fences)[0];
    const writer = await PostgresBatchWriter.open({ connectionString: db.url });
    cleanups.push(async () => writer.close());
    const listener = new pg.Client({ connectionString: db.url });
    await listener.connect();
    cleanups.push(() => listener.end());
    const heard = new Promise<string>((resolve) =>
      listener.on('notification', (message) => resolve(message.payload ?? '')),
    );
    await listener.query(`LISTEN ${channelOf({ connectionString: db.url })}`);
    const spawn = (n: number) => ({ op: 'spawn' as const, input: spawnInput(top, `top:1:${n}`, `kid${n}`) });
    // Two spawns by the rules, each waiting once for what it reads; then the savepoints' end,
    // and the hint with the COMMIT behind it: four waits on the server.
    const batch = await counting(() => writer.run([spawn(1), spawn(2)]));
    expect(batch.value.outcomes.map((outcome) => outcome.ok)).toEqual([true, true]);
    expect(batch.roundTrips).toBe(4);
    expect((await store.runs('top')).map((run) => run.runId).sort()).toEqual(['kid1', 'kid2', 'top']);
    // The hint landed with the commit: another host hears that the tree has work.
    expect(JSON.parse(await heard)).toMatchObject({ r: ['top'] });
  });

  it('fails alone a write of a batch whose statement fails at the database, one it did not wait for; the writes after it run again', async () => {
    const { db, store, fences } = await withRoots(['a', 'b', 'c', 'd']);
    const [a, b, c, d] = fences as [(typeof fences)[0], (typeof fences)[0], (typeof fences)[0], (typeof fences)[0]];
    const writer = await PostgresBatchWriter.open({ connectionString: db.url });
    cleanups.push(async () => writer.close());
    // b's model call says more tokens than a bigint holds: its row is refused by the database, after b's draw and step rows were sent.
    const batch = await counting(() =>
      writer.run([
        { op: 'commitStep', input: emptyStep(a, 1, { calls: [call(5)] }) },
        { op: 'commitStep', input: emptyStep(b, 1, { calls: [call(1e300)] }) },
        { op: 'commitStep', input: emptyStep(c, 1, { calls: [call(7)] }) },
        { op: 'commitStep', input: emptyStep(d, 1) },
      ]),
    );
    const outcomes = batch.value.outcomes;
    expect(outcomes.map((outcome) => outcome.ok)).toEqual([true, false, true, true]);
    expect(outcomes[1]).toMatchObject({ ok: false, error: { code: 'STORE_FAILED' } });
    expect(String((outcomes[1] as { error: Error }).error.message)).toMatch(/bigint|out of range|invalid input/i);
    // Nothing of b stayed: no step, no draw, no call, its account untouched; a, c and d committed whole.
    expect(await store.steps('b')).toEqual([]);
    expect(await store.account('b')).toMatchObject({ spent: { steps: 0, tokens: 0 } });
    expect(await sqlRows(db.url, "SELECT count(*)::int AS n FROM draws WHERE run_id = 'b'")).toEqual([{ n: 0 }]);
    for (const runId of ['a', 'c', 'd']) {
      expect((await store.steps(runId)).map((step) => step.seq)).toEqual([1]);
      expect(await store.account(runId)).toMatchObject({ spent: { steps: 1 } });
    }
    expect(
      await sqlRows(db.url, 'SELECT run_id, input_tokens FROM model_calls ORDER BY run_id').then((list) =>
        list.map((row) => `${row.run_id}:${row.input_tokens}`),
      ),
    ).toEqual(['a:5', 'c:7']);
    // What the batch announced is the committed writes' only, each event with the id the database gave it.
    const announced = batch.value.notifications.events;
    expect(new Set(announced.map((event) => event.runId))).toEqual(new Set(['a', 'c', 'd']));
    expect(announced.length).toBeGreaterThan(0);
    const stored = new Map(
      (await store.eventsAfter(0)).map((event) => [event.eventId, `${event.runId}:${event.type}`]),
    );
    for (const event of announced) expect(stored.get(event.eventId)).toBe(`${event.runId}:${event.type}`);
    // Four writes: three calls of the step function and b by the rule after its call failed, then
    // the commit: not one round trip a statement.
    expect(batch.statements).toBeGreaterThanOrEqual(5 * batch.roundTrips);
    expect(batch.roundTrips).toBeLessThan(8);
  });

  it('keeps nothing of a lone write whose statement fails at the database after the rule went on', async () => {
    const { db, store, fences } = await withRoots(['r']);
    const fence = fences[0] as (typeof fences)[0];
    const writer = await PostgresBatchWriter.open({ connectionString: db.url });
    cleanups.push(async () => writer.close());
    const result = await writer.run([{ op: 'commitStep', input: emptyStep(fence, 1, { calls: [call(1e300)] }) }]);
    expect(result.outcomes).toMatchObject([{ ok: false, error: { code: 'STORE_FAILED' } }]);
    expect(await store.steps('r')).toEqual([]);
    expect(await store.account('r')).toMatchObject({ spent: { steps: 0, tokens: 0 } });
    // The same through a handle's own write: refused, nothing kept (its COMMIT went behind the failed statement).
    await expect(store.call('commitStep', emptyStep(fence, 1, { calls: [call(1e300)] }))).rejects.toMatchObject({
      code: 'STORE_FAILED',
    });
    expect(await store.steps('r')).toEqual([]);
    expect(await store.account('r')).toMatchObject({ spent: { steps: 0, tokens: 0 } });
    // The connection is whole after it: the same step, sound, commits.
    const again = await writer.run([{ op: 'commitStep', input: emptyStep(fence, 1, { calls: [call(3)] }) }]);
    expect(again.outcomes).toMatchObject([{ ok: true, value: { status: 'committed', seq: 1 } }]);
    expect((await store.steps('r')).map((step) => step.seq)).toEqual([1]);
  });

  it("says why a batch failed when the transaction's own start fails (its lock timed out), and blames no write", async () => {
    const { db, store, fences } = await withRoots(['a', 'b']);
    await sqlRows(db.url, `ALTER DATABASE ${db.name} SET lock_timeout = '100ms'`);
    const writer = await PostgresBatchWriter.open({ connectionString: db.url });
    cleanups.push(async () => writer.close());
    // Another session holds the store's write lock for as long as the batch tries.
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    cleanups.push(() => holder.end());
    await holder.query('SELECT pg_advisory_lock(7310, 0)');
    for (const writes of [fences, fences.slice(0, 1)]) {
      const attempt = writer.run(writes.map((fence) => ({ op: 'commitStep' as const, input: emptyStep(fence, 1) })));
      await expect(attempt).rejects.toMatchObject({ code: 'STORE_FAILED', details: { sqlState: '55P03' } });
    }
    await holder.query('SELECT pg_advisory_unlock(7310, 0)');
    expect(await store.steps('a')).toEqual([]);
    const after = await writer.run(fences.map((fence) => ({ op: 'commitStep' as const, input: emptyStep(fence, 1) })));
    expect(after.outcomes.map((outcome) => outcome.ok)).toEqual([true, true]);
  });
});
