/**
 * Crash fuzz: a child process drives a tree of 56 agents, each calling a seeded
 * scripted model over HTTP (the OpenAI wire, a server in the same process), and is SIGKILLed (a real kill -9, by the store actor's test hook) at seeded points
 * before, inside and after a commit, mid-spawn, mid-message and mid-queue. A fresh
 * process resumes it, sometimes is killed again, and a last one finishes it. Every
 * durability invariant is checked, and the outcome and ledger must equal those of an
 * uncrashed run on the same model.
 */
import { describe, expect, it } from 'vitest';
import { checkInvariants, snapshot, type TreeSnapshot } from './support/invariants.js';
import { Driver, type DriverConfig, tempStorePath } from './support/processes.js';

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

/** Where to die: which operation's batch, which one of them, and where around its commit. */
function killPoint(random: () => number): string {
  const kinds: [string, number][] = [
    ['commitStep', 120], // a step: trace, draw, checkpoint, mailbox
    ['spawn', 45], // mid-spawn
    ['admit', 45], // mid-queue
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

describe('crash-resume', () => {
  it(`survives ${KILLS_REQUIRED}+ seeded SIGKILLs with every invariant intact (seed ${SEED})`, {
    timeout: 600_000,
  }, async () => {
    const referencePath = tempStorePath();
    const reference = await drive({ ...base, store: referencePath, mode: 'run' });
    expect(reference.result?.status, reference.stderr).toBe('finished');
    const rootOfReference = reference.rootId as string;
    checkInvariants(referencePath, rootOfReference, reference.acks);
    const expected: TreeSnapshot = snapshot(referencePath, rootOfReference);
    expect(expected.runs).toBeGreaterThanOrEqual(51);

    const random = mulberry32(SEED);
    let kills = 0;
    let attempts = 0;
    const points: string[] = [];
    while (kills < KILLS_REQUIRED && attempts < MAX_ATTEMPTS) {
      attempts++;
      const path = tempStorePath();
      const point = killPoint(random);
      const first = await drive({ ...base, store: path, mode: 'run', killAt: point });
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
        // Minutes of work: say how far it is.
        if (kills % 10 === 0) console.log(`crash fuzz: kill ${kills} of ${KILLS_REQUIRED}, at ${point}`);
        // A second crash on the way back, for a third of the seeds.
        if (random() < 0.33) {
          const again = await drive({ ...base, store: path, mode: 'resume', rootId, killAt: killPoint(random) });
          acks.push(...again.acks);
          if (!again.result) expect((await again.exited).signal, again.stderr).toBe('SIGKILL');
        }
        const last = await drive({ ...base, store: path, mode: 'resume', rootId });
        acks.push(...last.acks);
        expect(last.error, `${point}: ${last.stderr}`).toBeUndefined();
        expect(last.result?.status).toBe('finished');
      }
      checkInvariants(path, rootId, acks);
      const got = snapshot(path, rootId);
      expect(got, `after a kill at ${point}`).toEqual(expected);
    }
    expect(kills, `kill points: ${points.join(' ')}`).toBeGreaterThanOrEqual(KILLS_REQUIRED);
  });
});
