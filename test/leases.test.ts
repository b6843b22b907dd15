import { spawnSync } from 'node:child_process';
import { hostname } from 'node:os';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { ConflictError, HarnessError, LeaseLostError } from '../dist/index.js';
import { HOST } from '../dist/store/liveness.js';
import { ManualClock } from '../dist/testing/index.js';
import { checkInvariants } from './support/invariants.js';
import { Driver, tempStorePath } from './support/processes.js';
import { createRoot, emptyStep, openStoreWriter } from './support/writer.js';

function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', '0']);
  return child.pid as number;
}

describe('leases (one writer, injected clock)', () => {
  let db: Database.Database | undefined;
  afterEach(() => db?.close());

  function setup(claim: { owner: string; pid: number; host?: string }) {
    const clock = new ManualClock();
    const opened = openStoreWriter();
    db = opened.db;
    const { generation } = createRoot(opened.writer, 'r1', { ...claim, ttlMs: 10_000, now: clock.now() });
    return { writer: opened.writer, clock, generation };
  }

  it('refuses a second driver while a live owner holds the lease, naming the holder and when it lapses', () => {
    const { writer, clock } = setup({ owner: 'A', pid: process.pid });
    const attempt = () =>
      writer.acquireLease({
        runId: 'r1',
        owner: 'B',
        pid: process.pid,
        host: HOST,
        ttlMs: 10_000,
        now: clock.now() + 9_999,
      });
    expect(attempt).toThrow(ConflictError);
    try {
      attempt();
    } catch (error) {
      expect(HarnessError.isInstance(error) && error.code).toBe('CONFLICT');
      const conflict = error as ConflictError;
      expect(conflict.holder).toEqual({ owner: 'A', pid: process.pid, host: HOST, expiresAt: clock.now() + 10_000 });
      expect(conflict.message).toContain('owner A');
      expect(conflict.message).toContain(new Date(clock.now() + 10_000).toISOString());
    }
  });

  it('takes a dead owner\u2019s lease at once, ttl or not', () => {
    const { writer, clock } = setup({ owner: 'A', pid: deadPid() });
    expect(
      writer.acquireLease({
        runId: 'r1',
        owner: 'B',
        pid: process.pid,
        host: HOST,
        ttlMs: 10_000,
        now: clock.now() + 1,
      }),
    ).toEqual({
      generation: 2,
    });
  });

  it('falls back to the ttl when liveness cannot answer (another host)', () => {
    const { writer, clock } = setup({ owner: 'A', pid: deadPid(), host: 'elsewhere' });
    const take = (now: number) =>
      writer.acquireLease({ runId: 'r1', owner: 'B', pid: process.pid, host: HOST, ttlMs: 10_000, now });
    expect(() => take(clock.now() + 5_000)).toThrow(ConflictError);
    clock.advance(10_000);
    expect(take(clock.now())).toEqual({ generation: 2 });
  });

  it('names a host by more than its name: a machine or container of the same name is another host, answered by the ttl', () => {
    // On Linux the host is its name with a digest of the boot id and the pid namespace.
    if (process.platform === 'linux')
      expect(HOST).toMatch(new RegExp(`^${hostname().replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}#[0-9a-f]{8}$`));
    const twin = `${hostname()}#00000000`;
    const { writer, clock } = setup({ owner: 'A', pid: deadPid(), host: twin });
    const take = (now: number) =>
      writer.acquireLease({ runId: 'r1', owner: 'B', pid: process.pid, host: HOST, ttlMs: 10_000, now });
    // The pid is not running here, which says nothing about a process over there.
    expect(() => take(clock.now() + 5_000)).toThrow(ConflictError);
    clock.advance(10_000);
    expect(take(clock.now())).toEqual({ generation: 2 });
  });

  it('raises the generation on takeover and refuses the old owner\u2019s next commit inside the transaction', () => {
    const { writer, clock, generation } = setup({ owner: 'A', pid: process.pid });
    clock.advance(10_001);
    const taken = writer.acquireLease({
      runId: 'r1',
      owner: 'B',
      pid: process.pid,
      host: HOST,
      ttlMs: 10_000,
      now: clock.now(),
    });
    expect(taken.generation).toBe(generation + 1);
    const commit = () => writer.commitStep(emptyStep({ runId: 'r1', generation, owner: 'A' }, 1, { now: clock.now() }));
    expect(commit).toThrow(LeaseLostError);
    expect(db?.prepare('SELECT count(*) AS n FROM steps').get()).toEqual({ n: 0 });
    expect(db?.prepare('SELECT count(*) AS n FROM draws').get()).toEqual({ n: 0 });
  });
});

describe('lease renewal', () => {
  it('reports a lease lost only when another generation drives the run, never for a run that ended', () => {
    const opened = openStoreWriter();
    const { writer } = opened;
    const now = Date.now();
    const root = (runId: string) => createRoot(writer, runId, { owner: 'A', ttlMs: 1_000, now });
    const ended = root('ended');
    writer.endRun({
      runId: 'ended',
      generation: ended.generation,
      owner: 'A',
      status: 'finished',
      reply: 'ok',
      reason: 'done',
      events: [],
      now,
    });
    const taken = root('taken');
    writer.acquireLease({ runId: 'taken', owner: 'B', pid: process.pid, host: HOST, ttlMs: 1_000, now: now + 5_000 });
    const kept = root('kept');
    const { lost } = writer.renewLeases({
      owner: 'A',
      leases: [
        { runId: 'ended', generation: ended.generation },
        { runId: 'taken', generation: taken.generation },
        { runId: 'kept', generation: kept.generation },
      ],
      expiresAt: now + 2_000,
    });
    expect(lost).toEqual(['taken']);
    expect(opened.db.prepare("SELECT lease_expires_at AS at FROM runs WHERE run_id = 'kept'").get()).toEqual({
      at: now + 2_000,
    });
    opened.db.close();
  });
});

describe('two drivers on one run (real processes)', () => {
  it('lets exactly one progress; a stopped owner loses the lease past its ttl and its next commit is refused', {
    timeout: 120_000,
  }, async () => {
    const store = tempStorePath();
    const base = { store, supervisor: { leaseTtlMs: 1500 } };
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

    // Stop the owner and wait, by reading the store, until its lease has lapsed.
    first.child.kill('SIGSTOP');
    const reader = new Database(store, { readonly: true });
    const expiry = () =>
      (reader.prepare('SELECT lease_expires_at AS at FROM runs WHERE run_id = ?').get(holder.rootId) as { at: number })
        .at;
    while (expiry() >= Date.now()) await new Promise((resolve) => setTimeout(resolve, 50));

    const third = new Driver({ ...base, mode: 'resume', rootId: holder.rootId });
    await third.waitFor((line) => line.ack !== undefined);

    // Continue the old owner: its next commit is refused and it stops.
    first.child.kill('SIGCONT');
    await first.exited;
    expect(first.error?.code).toBe('LEASE_LOST');
    await third.exited;
    expect(third.result?.status, third.stderr).toBe('finished');
    expect(third.result?.reply).toBe('done after 60 steps');

    const generations = reader
      .prepare('SELECT generation, count(*) AS n FROM steps WHERE run_id = ? GROUP BY generation ORDER BY generation')
      .all(holder.rootId) as { generation: number; n: number }[];
    expect(generations).toHaveLength(2);
    expect(generations.reduce((sum, row) => sum + row.n, 0)).toBe(61);
    reader.close();
    checkInvariants(store, holder.rootId, [...first.acks, ...third.acks]);
  });
});
