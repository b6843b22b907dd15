/**
 * Leases as fenced rows, on both backends (vitest.config.ts): a live owner's lease refuses
 * a second driver, a dead owner's is taken at once, another host's only by its ttl (the
 * clock injected), a takeover raises the generation and fences the old owner's commit
 * inside its transaction, renewal reports only what another generation took, and two
 * real driver processes on one run let exactly one progress.
 */
import { spawnSync } from 'node:child_process';
import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { ConflictError, HarnessError, LeaseLostError } from '../dist/index.js';
import { HOST } from '../dist/store/liveness.js';
import type { StoreOperation, StoreOperations } from '../dist/store/port.js';
import { ManualClock } from '../dist/testing/index.js';
import { freshStore, openAt, SUITE_BACKEND, sqlRows } from './support/backends.js';
import { checkInvariantsOf } from './support/invariants.js';
import { Driver } from './support/processes.js';
import { type Claim, emptyStep, rootInput } from './support/writer.js';

function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', '0']);
  return child.pid as number;
}

/** A fresh store on the suite's backend: its writes by name, each committed in a transaction of its own, and plain SQL. */
async function storeWrites() {
  const location = await freshStore();
  const store = await openAt(location);
  return {
    call<K extends StoreOperation>(op: K, input: StoreOperations[K][0]): Promise<StoreOperations[K][1]> {
      return store.kind === 'postgres' ? store.call(op, input) : Promise.resolve().then(() => store.write(op, input));
    },
    rows: (sql: string, ...args: unknown[]) => sqlRows(location, sql, ...args),
    async root(runId: string, claim: Claim) {
      const { generation } = await this.call('createRoot', rootInput(runId, claim));
      return { runId, generation, owner: claim.owner };
    },
  };
}

describe('leases (injected clock)', () => {
  async function setup(claim: { owner: string; pid: number; host?: string }) {
    const clock = new ManualClock();
    const store = await storeWrites();
    const { generation } = await store.root('r1', { ...claim, ttlMs: 10_000, now: clock.now() });
    const take = (owner: string, now: number) =>
      store.call('acquireLease', { runId: 'r1', owner, pid: process.pid, host: HOST, ttlMs: 10_000, now });
    return { store, clock, generation, take };
  }

  it('refuses a second driver while a live owner holds the lease, naming the holder and when it lapses', async () => {
    const { clock, take } = await setup({ owner: 'A', pid: process.pid });
    const error = await take('B', clock.now() + 9_999).then(
      () => null,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(ConflictError);
    expect(HarnessError.isInstance(error) && error.code).toBe('CONFLICT');
    const conflict = error as ConflictError;
    expect(conflict.holder).toEqual({ owner: 'A', pid: process.pid, host: HOST, expiresAt: clock.now() + 10_000 });
    expect(conflict.message).toContain('owner A');
    expect(conflict.message).toContain(new Date(clock.now() + 10_000).toISOString());
  });

  it('takes a dead owner\u2019s lease at once, ttl or not', async () => {
    const { clock, take } = await setup({ owner: 'A', pid: deadPid() });
    expect(await take('B', clock.now() + 1)).toEqual({ generation: 2 });
  });

  it('falls back to the ttl when liveness cannot answer (another host)', async () => {
    const { clock, take } = await setup({ owner: 'A', pid: deadPid(), host: 'elsewhere' });
    await expect(take('B', clock.now() + 5_000)).rejects.toThrow(ConflictError);
    clock.advance(10_000);
    expect(await take('B', clock.now())).toEqual({ generation: 2 });
  });

  it('names a host by more than its name: a machine or container of the same name is another host, answered by the ttl', async () => {
    // On Linux the host is its name with a digest of the boot id and the pid namespace.
    if (process.platform === 'linux')
      expect(HOST).toMatch(new RegExp(`^${hostname().replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}#[0-9a-f]{8}$`));
    const twin = `${hostname()}#00000000`;
    const { clock, take } = await setup({ owner: 'A', pid: deadPid(), host: twin });
    // The pid is not running here, which says nothing about a process over there.
    await expect(take('B', clock.now() + 5_000)).rejects.toThrow(ConflictError);
    clock.advance(10_000);
    expect(await take('B', clock.now())).toEqual({ generation: 2 });
  });

  it('raises the generation on takeover and refuses the old owner\u2019s next commit inside the transaction', async () => {
    const { store, clock, generation, take } = await setup({ owner: 'A', pid: process.pid });
    clock.advance(10_001);
    const taken = await take('B', clock.now());
    expect(taken.generation).toBe(generation + 1);
    await expect(
      store.call('commitStep', emptyStep({ runId: 'r1', generation, owner: 'A' }, 1, { now: clock.now() })),
    ).rejects.toThrow(LeaseLostError);
    expect(await store.rows('SELECT count(*) AS n FROM steps')).toEqual([{ n: 0 }]);
    expect(await store.rows('SELECT count(*) AS n FROM draws')).toEqual([{ n: 0 }]);
  });
});

describe('lease renewal', () => {
  it('reports a lease lost when another generation took the run, driving it still or ended since, never for a run that ended under it', async () => {
    const store = await storeWrites();
    const now = Date.now();
    const root = (runId: string) => store.root(runId, { owner: 'A', ttlMs: 1_000, now });
    const ended = await root('ended');
    await store.call('endRun', {
      runId: 'ended',
      generation: ended.generation,
      owner: 'A',
      status: 'finished',
      reply: 'ok',
      reason: 'done',
      events: [],
      now,
    });
    const taken = await root('taken');
    await store.call('acquireLease', {
      runId: 'taken',
      owner: 'B',
      pid: process.pid,
      host: HOST,
      ttlMs: 1_000,
      now: now + 5_000,
    });
    // Taken by B, which then finished it: A, stopped meanwhile, still holds a slot for it.
    const finishedByB = await root('finished-by-b');
    const byB = await store.call('acquireLease', {
      runId: 'finished-by-b',
      owner: 'B',
      pid: process.pid,
      host: HOST,
      ttlMs: 1_000,
      now: now + 5_000,
    });
    await store.call('endRun', {
      runId: 'finished-by-b',
      generation: byB.generation,
      owner: 'B',
      status: 'finished',
      reply: 'ok',
      reason: 'done',
      events: [],
      now: now + 6_000,
    });
    const kept = await root('kept');
    const { lost } = await store.call('renewLeases', {
      owner: 'A',
      leases: [
        { runId: 'ended', generation: ended.generation },
        { runId: 'taken', generation: taken.generation },
        { runId: 'finished-by-b', generation: finishedByB.generation },
        { runId: 'kept', generation: kept.generation },
      ],
      expiresAt: now + 2_000,
    });
    expect(lost).toEqual(['taken', 'finished-by-b']);
    expect(await store.rows("SELECT lease_expires_at AS at FROM runs WHERE run_id = 'kept'")).toEqual([
      { at: now + 2_000 },
    ]);
  });
});

describe('two drivers on one run (real processes)', () => {
  it('lets exactly one progress; a stopped owner loses the lease past its ttl and its next commit is refused', {
    timeout: 120_000,
  }, async () => {
    const store = await freshStore();
    // A ttl long enough that a loaded machine still renews it in time, short enough to wait out once stopped.
    // On PostgreSQL a write a stopped owner left open is ended well before the ttl (Supervisor.start refuses otherwise).
    const base = { store, storeOptions: { idleInTransactionTimeoutMs: 1_000 }, supervisor: { leaseTtlMs: 4000 } };
    const first = new Driver({ ...base, mode: 'run', script: 'loop', options: { steps: 60, latencyMs: 40 } });
    await first.waitFor((line) => line.ack?.[1] === 2);
    const holder = first.lines.find((line) => line.owner) as { owner: string; pid: number; rootId: string };

    // A second driver while the owner is alive and its lease current: Conflict, naming the holder, before any step.
    const second = new Driver({ ...base, mode: 'resume', rootId: holder.rootId });
    await second.exited;
    expect(second.error?.code).toBe('CONFLICT');
    expect(second.error?.details?.holder).toMatchObject({ owner: holder.owner, pid: holder.pid });
    expect(second.error?.message).toContain(holder.owner);
    expect(second.acks).toEqual([]);

    // Stop the owner and wait, by reading the store, until its lease has lapsed. It is stopped
    // as a step's commit is announced, so while it waits on its model: a SQLite file has no
    // server to end a write a stopped process holds open, and the next owner would wait on it.
    const next = Math.max(...first.acks.map(([, seq]) => seq)) + 1;
    await first.waitFor((line) => line.ack !== undefined && line.ack[1] >= next);
    first.child.kill('SIGSTOP');
    const expiry = async () =>
      Number((await sqlRows(store, 'SELECT lease_expires_at AS at FROM runs WHERE run_id = ?', holder.rootId))[0]?.at);
    while ((await expiry()) >= Date.now()) await new Promise((resolve) => setTimeout(resolve, 50));

    const third = new Driver({ ...base, mode: 'resume', rootId: holder.rootId });
    await third.waitFor((line) => line.ack !== undefined);

    // Continue the old owner: its next commit is refused and it stops.
    first.child.kill('SIGCONT');
    await first.exited;
    // Its write was refused inside the transaction, and it heard the lease lost.
    expect(first.lines.some((line) => line.lost === holder.rootId)).toBe(true);
    if (SUITE_BACKEND.name === 'SQLite') expect(first.error?.code).toBe('LEASE_LOST');
    // Hosts share a PostgreSQL store: it lets the run go and awaits the tree, which the other finishes.
    else expect(first.result?.status, first.stderr).toBe('finished');
    await third.exited;
    expect(third.result?.status, third.stderr).toBe('finished');
    expect(third.result?.reply).toBe('done after 60 steps');

    const generations = (await sqlRows(
      store,
      'SELECT generation, count(*) AS n FROM steps WHERE run_id = ? GROUP BY generation ORDER BY generation',
      holder.rootId,
    )) as { generation: number; n: number }[];
    expect(generations).toHaveLength(2);
    expect(generations.reduce((sum, row) => sum + row.n, 0)).toBe(61);
    checkInvariantsOf(await SUITE_BACKEND.rows(store, holder.rootId), [...first.acks, ...third.acks]);
  });
});
