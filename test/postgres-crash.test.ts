/**
 * Crash-resume on PostgreSQL: a child process drives the crash fuzz's tree (50 workers
 * mailing their reports, each calling a seeded scripted model over HTTP) against the
 * tests' PostgreSQL server, and is SIGKILLed by the store actor's test hook at seeded
 * points before, inside and after a commit; a fresh process resumes it to its end. Every
 * durability invariant the fuzz checks holds, read straight from the database's rows, and
 * the outcome and ledger equal those of an uncrashed run. A handful of points, not the
 * fuzz's fifty: it says what it is doing as it goes.
 */
import { describe, expect, it } from 'vitest';
import { checkInvariantsOf, postgresRows, snapshotOf } from './support/invariants.js';
import { freshDatabase } from './support/postgres.js';
import { Driver, type DriverConfig } from './support/processes.js';
import { later } from './support/workspace.js';

const base = {
  wireScript: 'tree-wire#treeScript',
  options: { workers: 50, perStep: 10 },
  supervisor: { maxConcurrentAgents: 8 },
  run: { budget: { steps: 1000, tokens: 100000 } },
} satisfies Partial<DriverConfig>;

/**
 * Where to die: a commit before, inside and after it, mid-spawn, mid-claim (PostgreSQL
 * admits by claiming from the rows), a parent parking on its child, anywhere.
 */
const POINTS = [
  'commitStep:20:inside',
  'spawn:7:after',
  'claim:11:before',
  'park:3:inside',
  '*:90:inside',
  'commitStep:60:after',
];

async function drive(config: DriverConfig): Promise<Driver> {
  const driver = new Driver(config);
  await driver.exited;
  return driver;
}

async function database(): Promise<string> {
  const db = await freshDatabase();
  later(() => db.drop());
  return db.url;
}

describe('crash-resume on PostgreSQL', () => {
  it(`survives SIGKILLs at ${POINTS.length} seeded points with every invariant intact`, {
    timeout: 600_000,
  }, async () => {
    const referenceUrl = await database();
    const reference = await drive({ ...base, store: referenceUrl, mode: 'run' });
    expect(reference.result?.status, reference.stderr).toBe('finished');
    const rootOfReference = reference.rootId as string;
    const referenceRows = await postgresRows(referenceUrl, rootOfReference);
    checkInvariantsOf(referenceRows, reference.acks);
    const expected = snapshotOf(referenceRows, rootOfReference);
    expect(expected.runs).toBeGreaterThanOrEqual(51);

    let kills = 0;
    for (const point of POINTS) {
      const url = await database();
      const first = await drive({ ...base, store: url, mode: 'run', killAt: point });
      const rootId = first.rootId as string;
      const acks = [...first.acks];
      expect(first.result, `${point} lay past the end of the run`).toBeUndefined();
      expect((await first.exited).signal, first.stderr).toBe('SIGKILL');
      kills++;
      const last = await drive({ ...base, store: url, mode: 'resume', rootId });
      acks.push(...last.acks);
      expect(last.error, `${point}: ${last.stderr}`).toBeUndefined();
      expect(last.result?.status).toBe('finished');
      const rows = await postgresRows(url, rootId);
      checkInvariantsOf(rows, acks);
      expect(snapshotOf(rows, rootId), `after a kill at ${point}`).toEqual(expected);
      console.log(`crash-resume on PostgreSQL: kill ${kills} of ${POINTS.length}, at ${point}, resumed to its end`);
    }
  });
});
