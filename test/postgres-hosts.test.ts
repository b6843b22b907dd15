/**
 * Several hosts, one tree, on the tests' PostgreSQL server. Each "host" is a process of its
 * own (or, for the lost-hint case, a supervisor of its own in this process) under a host
 * name of its own, so a lease held by the other is answered by its ttl alone, as across
 * machines. A 200-agent tree started on host A is driven by A and B both; A is SIGKILLed
 * mid-tree and B finishes it with every crash-fuzz invariant intact, while a sampler reads
 * the lease rows and never sees more of the tree running than its cap. A host stopped with
 * SIGSTOP past its ttl loses its runs to the other and, continued, commits nothing more of
 * them. Hints killed on their way (the listeners' connections terminated) delay a message
 * and an admission, and lose neither. Each case says what it is doing as it goes.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { hookObserver } from '../dist/config/hooks.js';
import type { HarnessEvent } from '../dist/index.js';
import { Store, Supervisor } from '../dist/index.js';
import { PostgresStore } from '../dist/store/postgres/index.js';
import { script } from './support/harness.js';
import { checkInvariantsOf, numericClient, postgresRows } from './support/invariants.js';
import { freshDatabase } from './support/postgres.js';
import { Driver, type DriverConfig, tempStorePath } from './support/processes.js';
import { later, tempWorkspace } from './support/workspace.js';

const MCP_FIXTURE = fileURLToPath(new URL('./fixtures/mcp-server.mjs', import.meta.url));

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function database(): Promise<string> {
  const db = await freshDatabase();
  later(() => db.drop());
  return db.url;
}

/** A host process on the store: its own supervisor under its own host name, its own scripted model server. */
function host(name: string, config: Omit<DriverConfig, 'supervisor'>, supervisor: Record<string, unknown> = {}) {
  const driver = new Driver({
    // A write a stopped host left open is ended well before its leases lapse (Supervisor.start refuses otherwise).
    storeOptions: { idleInTransactionTimeoutMs: 500 },
    ...config,
    supervisor: { maxConcurrentAgents: 8, leaseTtlMs: 2_000, pollMs: 100, ...supervisor, host: name },
  });
  cleanups.push(async () => {
    if (driver.child.exitCode === null && driver.child.signalCode === null) {
      driver.child.kill('SIGCONT');
      driver.child.kill('SIGKILL');
    }
    await driver.exited;
  });
  return driver;
}

function tree(workers: number): Omit<DriverConfig, 'store' | 'mode'> {
  return {
    wireScript: 'tree-wire#treeScript',
    // The root reads its reports ten at a time, so the tree's time is its agents', not 200 steps of the root's.
    options: { workers, perStep: 20, readLimit: 10 },
    run: { budget: { steps: 10_000, tokens: 1_000_000 } },
  };
}

async function until(what: string, check: () => boolean | Promise<boolean>, ms = 120_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

async function client(url: string): Promise<pg.Client> {
  const connection = await numericClient(url);
  cleanups.push(() => connection.end());
  return connection;
}

/**
 * Reads the tree's lease rows every few milliseconds and keeps the most spawned agents it
 * saw running at once under a lease that had not lapsed and not parked on a child, as the
 * claims count them. The time a lease is judged by is taken after the read returns, so a
 * lease that lapsed before a claim took its run is never counted beside the claim's.
 */
function sampleHolding(
  connection: pg.Client,
  rootId: () => string | undefined,
): { peak: number; stop(): Promise<void> } {
  const state = { peak: 0, stopped: false };
  const done = (async () => {
    while (!state.stopped) {
      const root = rootId();
      if (root) {
        const rows = (
          await connection.query<{ lease_expires_at: number }>(
            `SELECT lease_expires_at FROM runs WHERE root_id = $1 AND parent_id IS NOT NULL AND status = 'running'
              AND lease_owner IS NOT NULL AND parked = 0`,
            [root],
          )
        ).rows;
        const now = Date.now();
        state.peak = Math.max(state.peak, rows.filter((row) => row.lease_expires_at > now).length);
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  })();
  return {
    get peak() {
      return state.peak;
    },
    async stop() {
      state.stopped = true;
      await done;
    },
  };
}

/** Who took each lease of the tree, from its lease-taken events. */
async function leaseOwners(
  connection: pg.Client,
  rootId: string,
): Promise<{ runId: string; owner: string; previous: string | null }[]> {
  const rows = (
    await connection.query<{ run_id: string; data: string }>(
      `SELECT run_id, data FROM events WHERE root_id = $1 AND type = 'lease-taken'`,
      [rootId],
    )
  ).rows;
  return rows.map((row) => {
    const data = JSON.parse(row.data) as { owner: string; previousOwner: string | null };
    return { runId: row.run_id, owner: data.owner, previous: data.previousOwner };
  });
}

describe('several hosts driving one tree on PostgreSQL', () => {
  it('drives a 200-agent tree from two hosts within its cap, and the second finishes it after the first is SIGKILLed; a third host that drives none of it follows every event', {
    timeout: 300_000,
  }, async () => {
    const url = await database();
    const watch = await client(url);
    // Neither host has a limit of its own: each would take all it could, and the tree's cap of 8 holds across both.
    const a = host('host-a', { ...tree(200), store: url, mode: 'run' });
    const { rootId } = (await a.waitFor((line) => line.rootId !== undefined)) as { rootId: string };
    // A host of the test's own follows the tree's events without driving any of it (it never joins).
    const watcherStore = await PostgresStore.open(url);
    cleanups.push(() => watcherStore.close());
    const watcher = await Supervisor.start(watcherStore, { host: 'watcher', pollMs: 200 });
    cleanups.push(() => watcher.close());
    const seen: HarnessEvent[] = [];
    let followed = false;
    void (async () => {
      for await (const event of watcher.events({ rootId })) seen.push(event);
      followed = true;
    })();
    // And keeps an audit log (config.hooks()'s), which follows every host's commits from the store.
    const audit = join(tempWorkspace(), 'audit.jsonl');
    const hooks = hookObserver(
      [{ name: 'audit', events: ['*'], append: audit, onFailure: 'ignore', timeoutMs: 5_000, from: 'test' }],
      { cwd: tempWorkspace() },
    );
    watcher.observe(hooks);
    cleanups.push(() => hooks.close());
    const sampler = sampleHolding(watch, () => rootId);
    const b = host('host-b', { ...tree(200), store: url, mode: 'join', rootId });
    await until('both hosts to commit steps of the tree', () => a.acks.length >= 30 && b.acks.length >= 10);
    console.log(`two hosts: A committed ${a.acks.length} steps and B ${b.acks.length}; SIGKILL A`);
    a.child.kill('SIGKILL');
    expect((await a.exited).signal).toBe('SIGKILL');
    await b.exited;
    await sampler.stop();
    expect(b.error, b.stderr).toBeUndefined();
    expect(b.result).toMatchObject({ rootId, status: 'finished', reply: 'collected 200 reports' });
    console.log(
      `two hosts: B finished the tree (${b.result?.runs} runs); the most running at once was ${sampler.peak}`,
    );

    const rows = await postgresRows(url, rootId);
    expect(rows.runs.length).toBe(221);
    checkInvariantsOf(rows, [...a.acks, ...b.acks]);
    // No step committed twice: one step-end event per step row.
    const ends = rows.events.filter((event) => event.type === 'step-end');
    expect(ends.length).toBe(rows.steps.length);
    // Both hosts drove the tree, and B took over what A held when it died.
    const owners = await leaseOwners(watch, rootId);
    const aOwner = a.lines.find((line) => line.owner)?.owner as string;
    const bOwner = b.lines.find((line) => line.owner)?.owner as string;
    expect(owners.some((lease) => lease.owner === aOwner)).toBe(true);
    expect(owners.some((lease) => lease.owner === bOwner && lease.previous === null)).toBe(true);
    expect(owners.some((lease) => lease.owner === bOwner && lease.previous === aOwner)).toBe(true);
    // The cap held across both hosts, read from the lease rows.
    expect(sampler.peak).toBeLessThanOrEqual(8);
    expect(sampler.peak).toBeGreaterThan(0);

    // The watcher's stream ended by itself once the tree settled, having seen every event from its start on, in commit order.
    await until('the watcher to see the tree settle', () => followed);
    const ids = seen.map((event) => event.eventId);
    expect(ids.length).toBeGreaterThan(500);
    const stored = (
      await watch.query<{ event_id: number }>(
        'SELECT event_id FROM events WHERE root_id = $1 AND event_id >= $2 ORDER BY event_id',
        [rootId, ids[0]],
      )
    ).rows.map((row) => Number(row.event_id));
    expect(ids).toEqual(stored);
    expect(seen.at(-1)).toMatchObject({ type: 'run-end', runId: rootId, status: 'finished' });
    // Committed by both hosts, the takeover among them.
    const taken = seen.filter((event) => event.type === 'lease-taken');
    expect(taken.some((event) => event.owner === aOwner)).toBe(true);
    expect(taken.some((event) => event.owner === bOwner && event.previousOwner === aOwner)).toBe(true);
    // The audit log holds every event of the store, A's and B's, once and in commit order, the takeover among them.
    const everything = (
      await watch.query<{ event_id: number }>('SELECT event_id FROM events ORDER BY event_id')
    ).rows.map((row) => Number(row.event_id));
    const logged = () =>
      readFileSync(audit, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => (JSON.parse(line) as HarnessEvent).eventId);
    await until('the audit log to hold every event', () => existsSync(audit) && logged().length >= everything.length);
    expect(logged()).toEqual(everything);
  });

  it('gives the runs of a host stopped past its ttl to the other, and the stopped host, continued, commits none of them', {
    timeout: 300_000,
  }, async () => {
    const url = await database();
    const watch = await client(url);
    const a = host('host-a', { ...tree(60), store: url, mode: 'run' }, { maxHostAgents: 4 });
    const { rootId } = (await a.waitFor((line) => line.rootId !== undefined)) as { rootId: string };
    const b = host('host-b', { ...tree(60), store: url, mode: 'join', rootId }, { maxHostAgents: 4 });
    await until('both hosts to commit steps of the tree', () => a.acks.length >= 10 && b.acks.length >= 5);
    const aOwner = a.lines.find((line) => line.owner)?.owner as string;
    a.child.kill('SIGSTOP');
    console.log('stopped host: A is stopped; waiting for B to take its runs once their leases lapse');
    await until('B to take over a run of A', async () =>
      (await leaseOwners(watch, rootId)).some((lease) => lease.previous === aOwner),
    );
    a.child.kill('SIGCONT');
    console.log('stopped host: B took over; A is continued');
    await Promise.all([a.exited, b.exited]);
    expect(b.error, b.stderr).toBeUndefined();
    expect(b.result).toMatchObject({ rootId, status: 'finished', reply: 'collected 60 reports' });
    // A heard it lost the runs, and awaits the same tree's result, finished by both.
    expect(
      a.lines.some((line) => line.lost !== undefined),
      a.stderr,
    ).toBe(true);
    expect(a.error, a.stderr).toBeUndefined();
    expect(a.result).toMatchObject({ rootId, status: 'finished' });
    // Nothing A committed came after a lease it held was taken: invariant 5 reads every event's generation.
    const rows = await postgresRows(url, rootId);
    checkInvariantsOf(rows, [...a.acks, ...b.acks]);
    // Every run B took from A, A was refused a write of (a step's commit, or its lease's renewal), and let go.
    const taken = (await leaseOwners(watch, rootId)).filter((lease) => lease.previous === aOwner);
    const lost = new Set(a.lines.filter((line) => line.lost !== undefined).map((line) => line.lost));
    for (const lease of taken) expect(lost.has(lease.runId), `A was not refused ${lease.runId}`).toBe(true);
    console.log(`stopped host: B took ${taken.length} runs over from A; A was refused a write of each`);
  });

  it('ends the mailbox wait of a run a stopped host lost as soon as that host is continued, not when the wait runs out', {
    timeout: 180_000,
  }, async () => {
    const url = await database();
    const watch = await client(url);
    const waiting = join(tempWorkspace(), 'waiting');
    // On A the waiter waits on its inbox for ten minutes; on B, once it has taken the run, not at all.
    const a = host('host-a', {
      wireScript: 'waiter-wire#waiterScript',
      options: { waitSecs: 600, waitingMarker: waiting },
      run: { maxWaitSecs: 600 },
      store: url,
      mode: 'run',
    });
    const { rootId } = (await a.waitFor((line) => line.rootId !== undefined)) as { rootId: string };
    await until('the waiter to wait on its inbox on A', () => existsSync(waiting));
    const aOwner = a.lines.find((line) => line.owner)?.owner as string;
    a.child.kill('SIGSTOP');
    console.log(
      'mailbox wait: A is stopped with its waiter waiting; B joins and takes the waiter once its lease lapses',
    );
    const b = host('host-b', {
      wireScript: 'waiter-wire#waiterScript',
      options: { waitSecs: 0 },
      store: url,
      mode: 'join',
      rootId,
    });
    await b.exited;
    expect(b.error, b.stderr).toBeUndefined();
    expect(b.result).toMatchObject({ rootId, status: 'finished' });
    const waiter = (await leaseOwners(watch, rootId)).find((lease) => lease.previous === aOwner);
    expect(waiter, 'B took a run of A').toBeDefined();
    a.child.kill('SIGCONT');
    const continued = Date.now();
    console.log('mailbox wait: B finished the tree; A is continued and must let its waiter go at its next renewal');
    // Far less than the wait A's waiter is in: A returns because it let the run go, not because the wait ran out.
    await until('A to return', () => a.child.exitCode !== null || a.child.signalCode !== null, 120_000);
    await a.exited;
    // Said, not judged: how long A took, against the ten minutes its waiter was waiting.
    console.log(`mailbox wait: A returned ${Date.now() - continued} ms after it was continued`);
    expect(a.error, a.stderr).toBeUndefined();
    expect(a.result).toMatchObject({ rootId, status: 'finished' });
    expect(a.lines.some((line) => line.lost === waiter?.runId)).toBe(true);
  });

  it('cancels a tree from a host that drives none of it: the host that drives its agents ends them, and a late joiner claims nothing', {
    timeout: 120_000,
  }, async () => {
    const url = await database();
    const watch = await client(url);
    const open = async () => {
      const store = await PostgresStore.open(url);
      cleanups.push(() => store.close());
      return store;
    };
    // The front drives only the root; the worker every spawned agent; the asker none of it.
    const front = await Supervisor.start(await open(), { host: 'front', maxHostAgents: 0, pollMs: 200 });
    cleanups.push(() => front.close());
    const worker = await Supervisor.start(await open(), { host: 'worker', pollMs: 200 });
    cleanups.push(() => worker.close());
    const asker = await Supervisor.start(await open(), { host: 'asker', maxHostAgents: 0, pollMs: 200 });
    cleanups.push(() => asker.close());
    const provider = await script('waiting-tree', { children: 3 });
    const handle = front.run({ task: 'wait', provider });
    const joined = await until(
      'the root to be stored',
      async () => (await watch.query('SELECT 1 FROM runs WHERE run_id = $1', [handle.rootId])).rows.length === 1,
    ).then(() => worker.join(handle.rootId, { provider }));
    const drivenByWorker = async () =>
      (
        await watch.query(
          `SELECT run_id FROM runs WHERE root_id = $1 AND parent_id IS NOT NULL AND status = 'running' AND lease_owner = $2`,
          [handle.rootId, worker.owner],
        )
      ).rows.length;
    await until('the worker to drive the three children', async () => (await drivenByWorker()) === 3);
    const asked = Date.now();
    await asker.cancel(handle.rootId, { reason: 'stop the waiting' });
    const [result, fromWorker] = await Promise.all([handle.result, joined.result]);
    console.log(`cancel across hosts: the tree settled ${Date.now() - asked} ms after the asker's cancel returned`);
    expect(result).toMatchObject({ status: 'cancelled', runs: 4 });
    expect(fromWorker).toMatchObject({ status: 'cancelled' });
    const statuses = (
      await watch.query<{ status: string }>('SELECT status FROM runs WHERE root_id = $1', [handle.rootId])
    ).rows;
    expect(statuses.map((row) => row.status)).toEqual(['cancelled', 'cancelled', 'cancelled', 'cancelled']);
    const events = (
      await watch.query<{ data: string }>("SELECT data FROM events WHERE root_id = $1 AND type = 'cancel-asked'", [
        handle.rootId,
      ])
    ).rows.map((row) => JSON.parse(row.data));
    expect(events).toEqual([{ owner: asker.owner, reason: 'stop the waiting' }]);
    // A host that joins the cancelled tree claims nothing of it.
    const late = await Supervisor.start(await open(), { host: 'late', pollMs: 200 });
    cleanups.push(() => late.close());
    const lateHandle = await late.join(handle.rootId, { provider });
    expect(await lateHandle.result).toMatchObject({ status: 'cancelled' });
    const lateLeases = (
      await watch.query<{ data: string }>("SELECT data FROM events WHERE root_id = $1 AND type = 'lease-taken'", [
        handle.rootId,
      ])
    ).rows.filter((row) => (JSON.parse(row.data) as { owner: string }).owner === late.owner);
    expect(lateLeases).toEqual([]);
  });

  it('settles a tree cancelled while a killed host held runs of it: they end once their leases lapse', {
    timeout: 120_000,
  }, async () => {
    const url = await database();
    const watch = await client(url);
    const a = host('host-a', { script: 'waiting-tree', options: { children: 2 }, store: url, mode: 'run' });
    const { rootId } = (await a.waitFor((line) => line.rootId !== undefined)) as { rootId: string };
    await until(
      'A to drive both children',
      async () =>
        (
          await watch.query(`SELECT 1 FROM runs WHERE root_id = $1 AND parent_id IS NOT NULL AND status = 'running'`, [
            rootId,
          ])
        ).rows.length === 2,
    );
    a.child.kill('SIGKILL');
    await a.exited;
    const open = async () => {
      const store = await PostgresStore.open(url, { idleInTransactionTimeoutMs: 500 });
      cleanups.push(() => store.close());
      return store;
    };
    // Asked by a host that drives none of it, while A's leases have not yet lapsed.
    const asker = await Supervisor.start(await open(), {
      host: 'asker',
      maxHostAgents: 0,
      pollMs: 200,
      leaseTtlMs: 2_000,
    });
    cleanups.push(() => asker.close());
    await asker.cancel(rootId, { reason: 'A is gone' });
    // A host that joins claims none of it, and ends what A held once A's leases lapse.
    const joiner = await Supervisor.start(await open(), { host: 'joiner', pollMs: 200, leaseTtlMs: 2_000 });
    cleanups.push(() => joiner.close());
    const joined = await joiner.join(rootId, { provider: await script('waiting-tree', { children: 2 }) });
    expect(await joined.result).toMatchObject({ status: 'cancelled', runs: 3 });
    const rows = (
      await watch.query<{ status: string; reason: string }>(
        `SELECT r.status, e.data AS reason FROM runs r JOIN events e ON e.run_id = r.run_id AND e.type = 'run-end'
          WHERE r.root_id = $1 ORDER BY r.created_at`,
        [rootId],
      )
    ).rows;
    expect(rows.map((row) => row.status)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    expect(rows.some((row) => row.reason.includes('cancelled while no host drove it'))).toBe(true);
  });

  it('delays and does not lose a message or an admission when the hints are lost', { timeout: 120_000 }, async () => {
    const url = await database();
    const watch = await client(url);
    const storeA = await PostgresStore.open(url);
    cleanups.push(() => storeA.close());
    const storeB = await PostgresStore.open(url);
    cleanups.push(() => storeB.close());
    // A drives only the root; every spawned agent is B's to admit.
    const front = await Supervisor.start(storeA, { host: 'front', maxHostAgents: 0, pollMs: 200 });
    cleanups.push(() => front.close());
    const worker = await Supervisor.start(storeB, { host: 'worker', pollMs: 200 });
    cleanups.push(() => worker.close());
    // Every listener's connection is terminated as soon as it is seen, for the whole run.
    let killed = 0;
    let killing = true;
    const killer = (async () => {
      while (killing) {
        const rows = await watch.query(
          `SELECT pg_terminate_backend(pid) AS gone FROM pg_stat_activity
            WHERE application_name = 'io-harness-listen' AND datname = current_database() AND pid <> pg_backend_pid()`,
        );
        killed += rows.rows.filter((row) => row.gone).length;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    const first = new Promise<string>((resolve) =>
      front.observe((event: HarnessEvent) => {
        if (event.type === 'lease-taken') resolve(event.rootId);
      }),
    );
    const handle = front.run({ task: 'mail', provider: await script('mailbox', { scenario: 'ordered' }) });
    expect(await first).toBe(handle.rootId);
    const joined = await worker.join(handle.rootId, { provider: await script('mailbox', { scenario: 'ordered' }) });
    const [result, fromWorker] = await Promise.all([handle.result, joined.result]);
    killing = false;
    await killer;
    console.log(`lost hints: ${killed} listener connections terminated while the tree ran`);
    expect(killed).toBeGreaterThan(0);
    expect(result, JSON.stringify(result)).toMatchObject({ status: 'finished', reply: 'sent four', runs: 2 });
    expect(fromWorker).toEqual(result);
    const runs = await storeA.runs(result.rootId);
    const reader = runs.find((run) => run.address === 'reader');
    // The reader was admitted by the worker host, and read every message the front host's root sent.
    expect(reader?.lease.host).toBe('worker');
    expect(reader?.reply).toBe('m1,m2,m3,m4');
    const messages = (await storeA.messages(result.rootId)).filter((message) => message.toAddress === 'reader');
    expect(messages.every((message) => message.consumedBy === reader?.runId)).toBe(true);
  });

  it('does not settle a tree a poll looks at before its root is stored', { timeout: 60_000 }, async () => {
    const url = await database();
    const storeA = await PostgresStore.open(url);
    cleanups.push(() => storeA.close());
    const storeB = await PostgresStore.open(url);
    cleanups.push(() => storeB.close());
    // A front host that claims nothing looks at its trees at once on every poll, here every 10 ms:
    // many land between run() and its root's first commit.
    const front = await Supervisor.start(storeA, { host: 'front', maxHostAgents: 0, pollMs: 10 });
    cleanups.push(() => front.close());
    const worker = await Supervisor.start(storeB, { host: 'worker', pollMs: 10 });
    cleanups.push(() => worker.close());
    const provider = await script('mailbox', { scenario: 'ordered' });
    // Each tree starts an MCP server (a real process) before its root is stored: polls land meanwhile.
    const mcp = [{ name: 'notes', command: ['node', MCP_FIXTURE], cwd: tempWorkspace() }];
    const handles = Array.from({ length: 4 }, () => front.run({ task: 'mail', provider, mcp }));
    const joined = await Promise.all(
      handles.map(async (handle) => {
        await until('the root to be stored', async () => Boolean(await storeB.run(handle.rootId)));
        return worker.join(handle.rootId, { provider, mcp });
      }),
    );
    const results = await Promise.all(handles.map((handle) => handle.result));
    for (const result of results) expect(result).toMatchObject({ status: 'finished', reply: 'sent four', runs: 2 });
    expect(await Promise.all(joined.map((handle) => handle.result))).toEqual(results);
  });

  it('refuses join() on a SQLite store, a tree it does not have, and a host name with spaces', async () => {
    const sqlite = await Store.open(tempStorePath());
    cleanups.push(async () => sqlite.close());
    const local = await Supervisor.start(sqlite);
    cleanups.push(() => local.close());
    await expect(local.join('any')).rejects.toThrow(/needs a PostgreSQL store.*use resume\(\)/);
    const store = await PostgresStore.open(await database());
    cleanups.push(() => store.close());
    const shared = await Supervisor.start(store);
    cleanups.push(() => shared.close());
    await expect(shared.join('no-such-root')).rejects.toMatchObject({
      code: 'RUN_NOT_FOUND',
      message: expect.stringContaining('once its root is stored'),
    });
    await expect(Supervisor.start(store, { host: 'two words' })).rejects.toThrow(/host must be a name/);
  });

  it("refuses a lease ttl a takeover would wait out: at or below the store's idle-in-transaction timeout, or with none", async () => {
    const url = await database();
    const open = async (idleInTransactionTimeoutMs: number) => {
      const store = await PostgresStore.open(url, { idleInTransactionTimeoutMs });
      cleanups.push(() => store.close());
      return store;
    };
    const fiveSeconds = await open(5_000);
    await expect(Supervisor.start(fiveSeconds, { leaseTtlMs: 5_000 })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining(
        "leaseTtlMs (5000 ms) must be longer than the store's idleInTransactionTimeoutMs (5000 ms)",
      ),
      details: { leaseTtlMs: 5_000, idleInTransactionTimeoutMs: 5_000 },
    });
    await expect(Supervisor.start(fiveSeconds, { leaseTtlMs: 2_000 })).rejects.toThrow(
      /PostgresStore\.open\(url, \{ idleInTransactionTimeoutMs \}\)/,
    );
    // A store whose open writes the server never ends: no ttl is long enough.
    const never = await open(0);
    await expect(Supervisor.start(never)).rejects.toThrow(/idleInTransactionTimeoutMs: 0, so PostgreSQL never ends/);
    // Above the timeout it starts; and a SQLite store has one host, so no such rule.
    const above = await Supervisor.start(fiveSeconds, { leaseTtlMs: 5_001 });
    await above.close();
    const sqlite = await Store.open(tempStorePath());
    cleanups.push(async () => sqlite.close());
    const local = await Supervisor.start(sqlite, { leaseTtlMs: 1 });
    await local.close();
  });
});
