/**
 * The crash fuzz, written once for both backends (see test/crash-fuzz.test.ts).
 */
import { describe, expect, it } from 'vitest';
import type { TestBackend } from './backends.js';
import { checkInvariantsOf, snapshotOf, type TreeSnapshot } from './invariants.js';
import { Driver, type DriverConfig } from './processes.js';

const SEED = Number(process.env.IO_HARNESS_FUZZ_SEED ?? 20261129);
const KILLS_REQUIRED = 50;
const MAX_ATTEMPTS = 80;
const base = {
  wireScript: 'tree-wire#treeScript',
  options: { workers: 50, perStep: 10 },
  supervisor: { maxConcurrentAgents: 8 },
  run: { budget: { steps: 1000, tokens: 100000 } },
} satisfies Partial<DriverConfig>;

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The operation that admits a queued child: the supervisor's own on SQLite, a claim from the rows on PostgreSQL. */
const ADMISSION: Record<TestBackend['name'], string> = { SQLite: 'admit', PostgreSQL: 'claim' };

/** Where to die: which operation's batch, which one of them, and where around its commit. */
function killPoint(random: () => number, backend: TestBackend): string {
  const kinds: [string, number][] = [
    ['commitStep', 120], // a step: trace, draw, checkpoint, mailbox
    ['spawn', 45], // mid-spawn
    [ADMISSION[backend.name], 45], // mid-queue
    ['recordEvents', 45],
    ['*', 200],
  ];
  const [op, range] = kinds[Math.floor(random() * kinds.length)] as [string, number];
  const phase = ['before', 'inside', 'after'][Math.floor(random() * 3)];
  return `${op}:${1 + Math.floor(random() * range)}:${phase}`;
}

async function drive(config: DriverConfig): Promise<Driver> {
  const driver = new Driver(config);
  await driver.exited;
  return driver;
}

/** The fuzz, as a test of its own on `backend`: the crash-fuzz test files run it on each. */
export function crashFuzz(backend: TestBackend): void {
  describe(`crash-resume on ${backend.name}`, () => {
    it(`survives ${KILLS_REQUIRED}+ seeded SIGKILLs with every invariant intact (seed ${SEED})`, {
      // A ceiling, not a figure: each kill starts two driver processes, and on two cores shared with
      // the rest of the suite the PostgreSQL fuzz has taken from 7 to over 15 minutes.
      timeout: 1_800_000,
    }, async () => {
      const reference = await backend.fresh();
      const uncrashed = await drive({ ...base, store: reference.store, mode: 'run' });
      expect(uncrashed.result?.status, uncrashed.stderr).toBe('finished');
      const rootOfReference = uncrashed.rootId as string;
      const referenceRows = await backend.rows(reference.store, rootOfReference);
      checkInvariantsOf(referenceRows, uncrashed.acks);
      const expected: TreeSnapshot = snapshotOf(referenceRows, rootOfReference);
      expect(expected.runs).toBeGreaterThanOrEqual(51);
      await reference.drop();

      const random = mulberry32(SEED);
      let kills = 0;
      let attempts = 0;
      const points: string[] = [];
      while (kills < KILLS_REQUIRED && attempts < MAX_ATTEMPTS) {
        attempts++;
        const { store, drop } = await backend.fresh();
        const point = killPoint(random, backend);
        const first = await drive({ ...base, store, mode: 'run', killAt: point });
        const rootId = first.rootId as string;
        const acks = [...first.acks];
        if (first.result) {
          // The point lay past the end of this run: it finished untouched. Still check it.
          expect(first.result.status).toBe('finished');
        } else {
          const exit = await first.exited;
          expect(exit.signal, first.stderr).toBe('SIGKILL');
          kills++;
          points.push(point);
          if (kills % 10 === 0)
            console.log(`crash fuzz on ${backend.name}: kill ${kills} of ${KILLS_REQUIRED}, at ${point}`);
          // A second crash on the way back, for a third of the seeds.
          if (random() < 0.33) {
            const again = await drive({ ...base, store, mode: 'resume', rootId, killAt: killPoint(random, backend) });
            acks.push(...again.acks);
            if (!again.result) expect((await again.exited).signal, again.stderr).toBe('SIGKILL');
          }
          const last = await drive({ ...base, store, mode: 'resume', rootId });
          acks.push(...last.acks);
          expect(last.error, `${point}: ${last.stderr}`).toBeUndefined();
          expect(last.result?.status).toBe('finished');
        }
        const rows = await backend.rows(store, rootId);
        checkInvariantsOf(rows, acks);
        expect(snapshotOf(rows, rootId), `after a kill at ${point}`).toEqual(expected);
        await drop();
      }
      expect(kills, `kill points: ${points.join(' ')}`).toBeGreaterThanOrEqual(KILLS_REQUIRED);
    });
  });
}
