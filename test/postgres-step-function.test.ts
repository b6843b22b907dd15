/**
 * A step's commit in one statement on PostgreSQL (src/store/postgres/step-function.ts): the
 * store actor's writer sends a batch of plain steps, each one call of the function
 * installed with the schema, and its COMMIT in one flight. The step rule stays the
 * definition: the same writes, committed once with the function and once by the rules
 * alone (the function dropped), leave the same rows, answer the same and announce the
 * same, including the steps the function leaves to the rule (a fence that does not hold,
 * a step out of order, a ceiling crossed, a child reserved and not claimed, a person's
 * correction waiting), with a secret the thread holds scrubbed from every row either
 * way. And a function of its name that this release did not make, or that another user
 * owns, is never called; one dropped under a writer leaves it to the rules. On the
 * tests' real server.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { holdSecrets } from '../dist/runtime/secrets.js';
import { PostgresBatchWriter } from '../dist/store/postgres/batch.js';
import { PostgresStore } from '../dist/store/postgres/index.js';
import { STEP_FUNCTION } from '../dist/store/postgres/step-function.js';
import type { CommitStepInput, Fence } from '../dist/store/records.js';
import { sqlRows } from './support/backends.js';
import { counting, freshDatabase } from './support/postgres.js';
import { later } from './support/workspace.js';
import { claimOf, emptyStep, rootInput } from './support/writer.js';

const NOW = 1_700_000_000_000;

async function database() {
  const db = await freshDatabase();
  later(() => db.drop());
  return db;
}

async function writerOn(url: string): Promise<PostgresBatchWriter> {
  const writer = await PostgresBatchWriter.open({ connectionString: url });
  later(() => writer.close());
  return writer;
}

const call = (tokens: number, extra: Record<string, unknown> = {}) => ({
  provider: 'p',
  model: 'm\u0000odel',
  outcome: 'ok',
  statusCode: 200,
  inputTokens: tokens,
  outputTokens: 2,
  cacheReadTokens: 1,
  cacheWriteTokens: 0,
  reasoningTokens: 0,
  latencyMs: 12.25,
  ttftMs: null,
  ...extra,
});

/** A root with a token ceiling and a child admitted under it, both held by owner o; the same in any database. */
async function tree(url: string): Promise<{ root: Fence; child: Fence; grand: Fence }> {
  const store = await PostgresStore.open(url, { max: 1 });
  try {
    const made = await store.call('createRoot', {
      ...rootInput('root', { owner: 'o', now: NOW }),
      ceilings: { steps: null, tokens: 400, wallMs: null },
    });
    const root = { runId: 'root', generation: made.generation, owner: 'o' };
    await store.call('spawn', {
      ...root,
      key: 'root:0:0',
      task: 'child task',
      as: 'kid',
      asked: { steps: 5, tokens: null, wallMs: null },
      maxWaitSecs: null,
      newRunId: 'child',
      queueNow: true,
      now: NOW,
    });
    const admitted = (await store.call('admit', { childId: 'child', ...claimOf({ owner: 'o', now: NOW }) })) as {
      generation: number;
    };
    const child = { runId: 'child', generation: admitted.generation, owner: 'o' };
    // And a grandchild: its draws are checked on three accounts.
    await store.call('spawn', {
      ...child,
      key: 'child:0:0',
      task: 'grandchild task',
      as: 'grandkid',
      asked: { steps: null, tokens: null, wallMs: null },
      maxWaitSecs: null,
      newRunId: 'grand',
      queueNow: true,
      now: NOW,
    });
    const second = (await store.call('admit', { childId: 'grand', ...claimOf({ owner: 'o', now: NOW }) })) as {
      generation: number;
    };
    return { root, child, grand: { runId: 'grand', generation: second.generation, owner: 'o' } };
  } finally {
    await store.close();
  }
}

const step = (fence: Fence, seq: number, extra: Partial<CommitStepInput> = {}) => ({
  op: 'commitStep' as const,
  input: emptyStep(fence, seq, { now: NOW + seq, ...extra }),
});

/**
 * The URL of a user of `db` who may write its rows and create nothing: a writer opened
 * with it commits by the rules alone (the function is dropped, and it cannot make one).
 */
async function rulesOnly(db: Database): Promise<string> {
  await sqlRows(db.url, `DROP FUNCTION ${STEP_FUNCTION}`);
  await sqlRows(db.url, 'REVOKE CREATE ON SCHEMA public FROM PUBLIC');
  return userOf(db, 'writer', [
    'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO',
    'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO',
  ]);
}

type Database = Awaited<ReturnType<typeof freshDatabase>>;

/** The URL of a new user of `db` (dropped after the test, with the database), given each grant of `grants`. */
async function userOf(db: Database, kind: string, grants: string[]): Promise<string> {
  const role = `${kind}_${db.name}`;
  await sqlRows(db.url, `CREATE ROLE ${role} LOGIN PASSWORD 'pw'`);
  later(async () => {
    await db.drop();
    await sqlRows(new URL('/postgres', db.url).toString(), `DROP ROLE IF EXISTS ${role}`);
  });
  for (const grant of grants) await sqlRows(db.url, `${grant} ${role}`);
  const url = new URL(db.url);
  url.username = role;
  url.password = 'pw';
  return url.toString();
}

/** Every row of the tables a step writes, in a fixed order, the database's own row numbers left out. */
async function rows(url: string): Promise<Record<string, unknown[]>> {
  const tables: Record<string, string> = {
    runs: 'run_id',
    ledger: 'run_id',
    draws: 'draw_id',
    steps: 'run_id, seq',
    events: 'event_id',
    model_calls: 'call_id',
    checkpoints: 'run_id',
    drafts: 'run_id',
    step_images: 'run_id, seq, path',
    file_changes: 'run_id, seq, ordinal',
    steers: 'steer_id',
    spawn_queue: 'child_run_id',
    mailbox: 'ordinal',
  };
  const all: Record<string, unknown[]> = {};
  for (const [table, order] of Object.entries(tables)) {
    const found = await sqlRows(url, `SELECT * FROM ${table} ORDER BY ${order}`);
    all[table] = found.map(({ rowid: _rowid, call_id: _call, ...row }) => row);
  }
  // An id a transaction took and did not keep is gone (PostgreSQL's sequences do not go back): events by their order.
  all.events = (all.events as { event_id: number }[]).map((event, place) => ({ ...event, event_id: place }));
  all.mailbox = (all.mailbox as { ordinal: number }[]).map((message, place) => ({ ...message, ordinal: place }));
  return all;
}

/** Each event's place among the stored events, by its id: what `rows` numbers them by. */
async function places(url: string): Promise<Map<number, number>> {
  const ids = await sqlRows(url, 'SELECT event_id FROM events ORDER BY event_id');
  return new Map(ids.map((row, place) => [Number(row.event_id), place]));
}

/** What a batch answered, errors by their code and message, events by their place. */
function answered(result: Awaited<ReturnType<PostgresBatchWriter['run']>>, place: Map<number, number>) {
  return {
    outcomes: result.outcomes.map((outcome) =>
      outcome.ok
        ? outcome
        : {
            ok: false,
            code: (outcome.error as { code?: string }).code,
            message: (outcome.error as Error).message,
          },
    ),
    notifications: {
      ...result.notifications,
      events: result.notifications.events.map((event) => ({ ...event, eventId: place.get(event.eventId) })),
    },
  };
}

describe("a step's commit in one statement on PostgreSQL", () => {
  it('leaves the same rows, answers and announcements as the rules alone, whichever step it takes', {
    timeout: 120_000,
  }, async () => {
    const withFunction = await database();
    const byRules = await database();
    const trees = [await tree(withFunction.url), await tree(byRules.url)];
    // The second store commits by the rules only: its function is gone, and its writer may not make one.
    const urls = [withFunction.url, await rulesOnly(byRules)];
    const writers = [await writerOn(urls[0] as string), await writerOn(urls[1] as string)];
    const { root, child, grand } = trees[0] as { root: Fence; child: Fence; grand: Fence };
    // A secret this thread holds, where a run could put it: no row keeps it, either way.
    const secret = `sk-${randomBytes(12).toString('hex')}`;
    holdSecrets([secret]);
    expect(trees[1]).toEqual(trees[0]);

    // Each batch as the store actor would gather it; the same on both stores.
    const batches: { op: string; input: unknown }[][] = [
      [
        step(root, 1, {
          calls: [
            call(40, { statusCode: null, model: `m ${secret}` }),
            call(50, { ttftMs: 3.5, usageReported: false }),
          ],
          events: [{ type: 'run-start', task: `t ${secret}`, address: 'root', parentId: null, resumed: false }],
          observations: [{ callId: 'c1', name: 'read_file', content: `key=${secret}`, isError: false }],
          changes: [
            { path: 'a.txt', diff: `--- a\n+++ b\n+x\u0000y ${secret}\n` },
            { path: 'b/c.md', diff: '+"quoted" \\ back\n' },
          ],
          completion: {
            text: `say "hi" \u2603 ${secret}`,
            toolCalls: [{ id: 'c1', name: 'read_file', args: { path: 'a.txt' } }],
            usage: { inputTokens: 30, outputTokens: 4, cacheReadTokens: 10 },
            model: 'm',
            provider: 'openai',
          },
          usage: { inputTokens: 30, outputTokens: 4, cacheReadTokens: 10 },
          sent: [
            { to: 'kid', body: 'hello kid' },
            { to: 'grandkid', body: 'hello grand' },
          ],
        }),
        step(child, 1, { calls: [call(7)] }),
        step(grand, 1),
      ],
      [step(root, 2)],
      // A fold's step draws tokens and no step; a step out of order is the rule's (a duplicate).
      [step(child, 2, { fold: true }), step(root, 2)],
      // A fence that does not hold, and a step that skips one: the rule refuses each, saying why.
      [step({ ...child, generation: child.generation + 1 }, 3)],
      [step({ ...child, owner: 'someone else' }, 3)],
      [step(child, 4)],
      [step(child, 3, { consumed: ['root:1:0'] }), step(grand, 2, { consumed: ['root:1:1'] })],
    ];
    // What the steps after those find waiting: a person's correction for the root; a child its step 4
    // reserved and did not claim.
    const steered = (url: string) =>
      sqlRows(
        url,
        `INSERT INTO steers (run_id, kind, body, by_whom, created_at) VALUES ('root', 'steer', 'look again', 'ann', ${NOW})`,
      );
    const reserved = async (url: string) => {
      const store = await PostgresStore.open(url, { max: 1 });
      try {
        await store.call('spawn', {
          ...root,
          key: 'root:4:0',
          task: 'never claimed',
          as: null,
          asked: { steps: null, tokens: null, wallMs: null },
          maxWaitSecs: null,
          newRunId: 'dropped',
          queueNow: false,
          now: NOW,
        });
      } finally {
        await store.close();
      }
    };
    batches.push(
      [step(root, 3), step(child, 4)],
      [step(root, 4)],
      // The ceiling of 400 tokens: this step's draw crosses it; the rule ends the run, saying which ceiling.
      [step(root, 5, { usage: { inputTokens: 380, outputTokens: 5 } })],
      // The child's own ceiling of 5 steps (its fold's step drew none; its child's count): refused on its account.
      [step(child, 5)],
      // Mail the rule refuses: a message waiting for another, one read already, an address no agent has. Then mail it sends.
      [step(grand, 3, { fold: true, consumed: ['root:1:0'] })],
      [step(grand, 3, { fold: true, consumed: ['root:1:1'] })],
      [step(grand, 3, { fold: true, sent: [{ to: 'nobody', body: 'x' }] })],
      [
        step(grand, 3, {
          fold: true,
          sent: [
            { to: 'kid', body: 'to my parent' },
            { to: 'root', body: 'to the top' },
          ],
        }),
      ],
    );
    // A batch that mixes plain steps with writes the function does not take: the plain ones go as
    // calls (one left to the rule when it finds a step out of order), the rest by the rules.
    const events = (fence: Fence, owner = fence.owner) => ({
      op: 'recordEvents' as const,
      input: {
        ...fence,
        owner,
        events: [{ type: 'lease-taken', owner, pid: 1, generation: fence.generation, previousOwner: null }],
        now: NOW + 50,
      },
    });
    batches.push(
      [step(grand, 4, { fold: true }), events(grand), step(grand, 5, { fold: true })],
      [
        step(grand, 7, { fold: true }),
        events(grand, 'someone else'),
        step(grand, 6, { fold: true, final: { status: 'finished', reply: 'done' } }),
      ],
    );
    // Before the batch at each place; a draft and a step's image of the root's step 2 are the commit's to clear.
    const before: Record<number, (url: string) => Promise<unknown>> = {
      1: async (url) => {
        await sqlRows(
          url,
          `INSERT INTO drafts (run_id, seq, generation, completion, at) VALUES ('root', 2, ${root.generation}, '{}', ${NOW})`,
        );
        await sqlRows(url, `INSERT INTO step_images (run_id, seq, path, existed) VALUES ('root', 2, 'a.txt', 0)`);
      },
      7: steered,
      8: reserved,
    };

    // Both stores in step, compared after every batch: what it answered, and every row.
    const answers: unknown[][] = [[], []];
    const trips: number[][] = [[], []];
    for (const [place, batch] of batches.entries()) {
      for (const [index, writer] of writers.entries()) {
        const url = urls[index] as string;
        await before[place]?.(url);
        const counted = await counting(() => writer.run(batch as never));
        answers[index]?.push(answered(counted.value, await places(url)));
        trips[index]?.push(counted.roundTrips);
      }
      expect(answers[0]?.[place], `batch ${place}`).toEqual(answers[1]?.[place]);
      expect(await rows(withFunction.url), `batch ${place}`).toEqual(await rows(byRules.url));
    }

    // What the steps came to, so the comparison compares something.
    const outcomes = (answers[0] as { outcomes: { ok: boolean; value?: { status: string }; code?: string }[] }[]).map(
      (batch) => batch.outcomes.map((outcome) => (outcome.ok ? outcome.value?.status : outcome.code)),
    );
    expect(outcomes).toEqual([
      ['committed', 'committed', 'committed'],
      ['committed'],
      ['committed', 'duplicate'],
      ['LEASE_LOST'],
      ['LEASE_LOST'],
      ['STEP_OUT_OF_ORDER'],
      ['committed', 'committed'],
      ['committed', 'committed'],
      ['committed'],
      ['exhausted'],
      ['exhausted'],
      ['MAILBOX_CONFLICT'],
      ['MAILBOX_CONFLICT'],
      ['MAILBOX_CONFLICT'],
      ['committed'],
      ['committed', undefined, 'committed'],
      ['STEP_OUT_OF_ORDER', 'LEASE_LOST', 'committed'],
    ]);
    const third = answers[0]?.[7] as { outcomes: { value: { steers?: string[] } }[] };
    expect(third.outcomes[0]?.value.steers).toEqual(['look again']);
    const stored = await rows(withFunction.url);
    expect((stored.runs as { run_id: string; status: string }[]).map((run) => `${run.run_id}:${run.status}`)).toEqual([
      'child:budget-exhausted',
      'dropped:cancelled',
      'grand:finished',
      'root:budget-exhausted',
    ]);
    expect(stored.file_changes).toHaveLength(2);
    expect(JSON.stringify([stored, answers[0]])).not.toContain(secret);
    expect(
      (stored.mailbox as { msg_id: string; to_address: string; consumed_by: string | null }[]).map(
        (message) => `${message.msg_id}>${message.to_address}:${message.consumed_by}`,
      ),
    ).toEqual([
      'root:1:0>kid:child',
      'root:1:1>grandkid:grand',
      'kid:end>root:null',
      'grandkid:3:0>kid:null',
      'grandkid:3:1>root:null',
      'grandkid:end>kid:null',
    ]);
    const last = answers[0]?.[14] as { notifications: { mail: unknown[] } };
    expect(last.notifications.mail).toEqual([
      { rootId: 'root', to: 'kid' },
      { rootId: 'root', to: 'root' },
    ]);
    expect(JSON.stringify(stored.steps)).toContain('***');
    expect([stored.drafts, stored.step_images]).toEqual([[], []]);
    expect((stored.file_changes as { diff: string }[])[0]?.diff).toContain('x\uFFFDy');
    // Announced with the ids the database gave: each names a stored event of its type, none twice, rising.
    const announced = (answers[0] as { notifications: { events: { eventId: number; type: string }[] } }[]).flatMap(
      (batch) => batch.notifications.events,
    );
    const types = (stored.events as { type: string }[]).map((event) => event.type);
    expect(announced.length).toBeGreaterThan(10);
    for (const event of announced) expect(types[event.eventId]).toBe(event.type);
    const order = announced.map((event) => event.eventId);
    expect(order).toEqual([...order].sort((a, b) => a - b));
    expect(new Set(order).size).toBe(order.length);

    // The function's batches of plain steps waited on the server once; the rules' more.
    expect(trips[0]?.[0]).toBe(1);
    expect(trips[0]?.[1]).toBe(1);
    expect(trips[1]?.[0]).toBeGreaterThan(2);
    expect(trips[1]?.[1]).toBe(2);
    // The steps the function left to the rule: a flight of its own, then the rule's.
    expect(trips[0]?.[7]).toBeGreaterThan(2);
    // In a mixed batch, the plain steps waited on nothing: fewer waits than the rules' alone.
    expect(trips[0]?.[15]).toBeLessThan(trips[1]?.[15] as number);
  });

  it('is installed with the schema; a user who may not create functions keeps the rules; a read-only server opens', {
    timeout: 60_000,
  }, async () => {
    const db = await database();
    const { root } = await tree(db.url);
    const installed = await sqlRows(db.url, 'SELECT proname FROM pg_proc WHERE proname LIKE ?', 'io_harness_step_%');
    expect(installed).toEqual([{ proname: STEP_FUNCTION }]);
    // An existing store without it, opened by a user who may write its rows and create nothing.
    const url = await rulesOnly(db);
    const writer = await writerOn(url);
    const done = await counting(() => writer.run([step(root, 1)] as never));
    expect(done.value.outcomes).toMatchObject([{ ok: true, value: { status: 'committed', seq: 1 } }]);
    expect(done.roundTrips).toBe(2);
    expect(await sqlRows(db.url, 'SELECT proname FROM pg_proc WHERE proname LIKE ?', 'io_harness_step_%')).toEqual([]);
    // Opened again by its owner, the store has it again, and a plain step waits once.
    const owner = await writerOn(db.url);
    const again = await counting(() => owner.run([step(root, 2)] as never));
    expect(again.value.outcomes).toMatchObject([{ ok: true, value: { status: 'committed', seq: 2 } }]);
    expect(again.roundTrips).toBe(1);
    // A store whose server takes no writes (a read-only database, a standby) still opens to be read.
    await sqlRows(db.url, `DROP FUNCTION ${STEP_FUNCTION}`);
    await sqlRows(db.url, `ALTER DATABASE ${db.name} SET default_transaction_read_only = on`);
    const reader = await PostgresStore.open(db.url, { max: 1 });
    expect((await reader.steps('root')).map((step) => step.seq)).toEqual([1, 2]);
    await reader.close();
  });

  it('never calls a function another user put under its name, and goes on by the rules when its own is dropped', {
    timeout: 60_000,
  }, async () => {
    const db = await database();
    const { root } = await tree(db.url);
    const [{ args, source }] = (await sqlRows(
      db.url,
      'SELECT pg_get_function_identity_arguments(oid) AS args, prosrc AS source FROM pg_proc WHERE proname = ?',
      STEP_FUNCTION,
    )) as [{ args: string; source: string }];
    // Its own, dropped after the writer opened: that batch, and every one after it, by the rules.
    const writer = await writerOn(db.url);
    await sqlRows(db.url, `DROP FUNCTION ${STEP_FUNCTION}`);
    const first = await counting(() => writer.run([step(root, 1)] as never));
    expect(first.value.outcomes).toMatchObject([{ ok: true, value: { status: 'committed', seq: 1 } }]);
    const second = await counting(() => writer.run([step(root, 2)] as never));
    expect(second.value.outcomes).toMatchObject([{ ok: true, value: { status: 'committed', seq: 2 } }]);
    expect(second.roundTrips).toBe(2);
    // A function of that name and signature whose text is not this release's, even the store owner's: never called.
    await sqlRows(
      db.url,
      `CREATE FUNCTION public.${STEP_FUNCTION}(${args}) RETURNS jsonb LANGUAGE plpgsql SET search_path FROM CURRENT
       AS $step$ BEGIN RETURN '{"root": "root", "ids": [1, 2], "steps": 0, "tokens": 0}'::jsonb; END $step$`,
    );
    const edited = await writerOn(db.url);
    const third = await counting(() => edited.run([step(root, 3)] as never));
    expect(third.value.outcomes).toMatchObject([{ ok: true, value: { status: 'committed', seq: 3 } }]);
    expect(third.roundTrips).toBe(2);
    await sqlRows(db.url, `DROP FUNCTION ${STEP_FUNCTION}`);
    // Another user who may create in the schema puts this release's very function there, first: theirs to
    // change at will, so never called either.
    const intruder = await userOf(db, 'intruder', ['GRANT CREATE ON SCHEMA public TO']);
    await sqlRows(
      intruder,
      `CREATE FUNCTION public.${STEP_FUNCTION}(${args}) RETURNS jsonb LANGUAGE plpgsql SET search_path FROM CURRENT
       AS $step$${source}$step$`,
    );
    // The owner's writer, opened after: it makes none of its own and calls none; the step is the rules'.
    const owner = await writerOn(db.url);
    const done = await counting(() => owner.run([step(root, 4)] as never));
    expect(done.value.outcomes).toMatchObject([{ ok: true, value: { status: 'committed', seq: 4 } }]);
    expect(done.roundTrips).toBe(2);
    expect(await sqlRows(db.url, "SELECT seq FROM steps WHERE run_id = 'root' ORDER BY seq")).toEqual([
      { seq: 1 },
      { seq: 2 },
      { seq: 3 },
      { seq: 4 },
    ]);
  });

  it("keeps to a store's own schema", { timeout: 60_000 }, async () => {
    const db = await database();
    const store = await PostgresStore.open(db.url, { max: 1, schema: 'agents' });
    const made = await store.call('createRoot', rootInput('r', { owner: 'o', now: NOW }));
    await store.close();
    const fence = { runId: 'r', generation: made.generation, owner: 'o' };
    expect(
      await sqlRows(
        db.url,
        'SELECT n.nspname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE p.proname = ?',
        STEP_FUNCTION,
      ),
    ).toEqual([{ nspname: 'agents' }]);
    const writer = await PostgresBatchWriter.open({ connectionString: db.url, schema: 'agents' });
    later(() => writer.close());
    const done = await counting(() => writer.run([step(fence, 1), step(fence, 2)] as never));
    expect(done.value.outcomes).toMatchObject([{ ok: true }, { ok: true, value: { status: 'committed', seq: 2 } }]);
    expect(done.roundTrips).toBe(1);
    const lone = await counting(() => writer.run([step(fence, 3)] as never));
    expect(lone.value.outcomes).toMatchObject([{ ok: true, value: { status: 'committed', seq: 3 } }]);
    expect(lone.roundTrips).toBe(1);
    expect(await sqlRows(db.url, 'SELECT seq FROM agents.steps ORDER BY seq')).toEqual([
      { seq: 1 },
      { seq: 2 },
      { seq: 3 },
    ]);
  });
});
