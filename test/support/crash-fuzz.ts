/**
 * The crash fuzz, written once for both backends (see test/crash-fuzz.test.ts). It runs in
 * the durability suite (`npm run test:durability`), not the main one. IO_HARNESS_FUZZ_KILLS
 * sets how many seeded kill points each backend must survive (50 unless set, sized for CI;
 * the figure in docs/MEASUREMENTS.md is a run of 1,000), IO_HARNESS_FUZZ_SEED the seed.
 */
import { describe, expect, it } from 'vitest';
import type { TestBackend } from './backends.js';
import { checkInvariantsOf, snapshotOf, type TreeSnapshot } from './invariants.js';
import { Driver, type DriverConfig } from './processes.js';

const SEED = Number(process.env.IO_HARNESS_FUZZ_SEED ?? 20261129);
const KILLS_REQUIRED = killCount(process.env.IO_HARNESS_FUZZ_KILLS);
// A point past the end of its run kills nothing (it is still checked): 80 attempts for CI's 50 kills, as
// before, and two for each kill past those, so a long run is not cut short by that share of its points.
const MAX_ATTEMPTS = KILLS_REQUIRED <= 50 ? Math.ceil(KILLS_REQUIRED * 1.6) : 80 + 2 * (KILLS_REQUIRED - 50);
const base = {
  wireScript: 'tree-wire#treeScript',
  options: { workers: 50, perStep: 10 },
  supervisor: { maxConcurrentAgents: 8 },
  run: { budget: { steps: 1000, tokens: 100000 } },
} satisfies Partial<DriverConfig>;

/** The kill count asked for: a positive whole number, 50 when none is. */
function killCount(text: string | undefined): number {
  if (text === undefined || text === '') return 50;
  const count = Number(text);
  if (!Number.isInteger(count) || count < 1)
    throw new Error(
      `IO_HARNESS_FUZZ_KILLS must be a positive whole number of kill points, not ${JSON.stringify(text)}`,
    );
  return count;
}

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
      // the rest of the suite the PostgreSQL fuzz's 50 kills have taken from 7 to over 15 minutes;
      // half an hour for 50, and as much again for each 50 more.
      timeout: 36_000 * KILLS_REQUIRED,
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
      let again = 0;
      const points: string[] = [];
      while (kills < KILLS_REQUIRED && attempts < MAX_ATTEMPTS) {
        attempts++;
        const { store, drop } = await backend.fresh();
        const point = killPoint(random, backend);
        const first = await drive({ ...base, store, mode: 'run', killAt: point });
        // The driver names the tree once run() has returned, and the root's own commit may be
        // the batch that dies before that line is written: the tree is then the store's one
        // root, where the kill left one.
        let rootId = first.rootId ?? (await backend.roots(store))[0];
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
          if (rootId === undefined) {
            // Killed before the root was stored: nothing durable was made, and the tree starts again.
            const again = await drive({ ...base, store, mode: 'run' });
            acks.push(...again.acks);
            expect(again.result?.status, again.stderr).toBe('finished');
            rootId = again.rootId as string;
          } else {
            // A second crash on the way back, for a third of the seeds.
            if (random() < 0.33) {
              const second = await drive({
                ...base,
                store,
                mode: 'resume',
                rootId,
                killAt: killPoint(random, backend),
              });
              acks.push(...second.acks);
              if (!second.result) {
                expect((await second.exited).signal, second.stderr).toBe('SIGKILL');
                again++;
              }
            }
            const last = await drive({ ...base, store, mode: 'resume', rootId });
            acks.push(...last.acks);
            expect(last.error, `${point}: ${last.stderr}`).toBeUndefined();
            expect(last.result?.status).toBe('finished');
          }
        }
        const tree = rootId as string;
        const rows = await backend.rows(store, tree);
        checkInvariantsOf(rows, acks);
        expect(snapshotOf(rows, tree), `after a kill at ${point}`).toEqual(expected);
        await drop();
      }
      console.log(
        `crash fuzz on ${backend.name}: ${kills} of ${KILLS_REQUIRED} seeded kill points run (and ${again} second kills on the way back) in ${attempts} attempts, seed ${SEED}; every invariant held after each`,
      );
      expect(kills, `kill points: ${points.join(' ')}`).toBeGreaterThanOrEqual(KILLS_REQUIRED);
    });
  });
}
