/**
 * A step's run of spawns without `wait` is reserved together: its requests reach the store
 * at once, in call order, each call taking its own reply. A reservation the loop never
 * reaches (it was cancelled in between) is not part of the committed step: the child is
 * dropped, never started. The agent runs in-process on the SQLite backend behind a store
 * port that counts the spawns in flight and can hold the first one's reply.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runAgent } from '../dist/actors/agent/loop.js';
import { systemClock } from '../dist/clock.js';
import { reserveAhead } from '../dist/runtime/tools/families/tree.js';
import type { StorePort } from '../dist/store/port.js';
import { openLocalStore } from '../dist/store/sqlite/local.js';
import { TraceReader } from '../dist/store/sqlite/reader.js';
import { stubHost } from './support/hosts.js';
import { tempStorePath } from './support/processes.js';
import { later } from './support/workspace.js';
import { claimOf } from './support/writer.js';

const SCRIPT = join(import.meta.dirname, 'support', 'scripts', 'turns.mjs');
const CHILDREN = 6;

/** The store, with the spawns in flight counted, and the first spawn's reply held until `release()`. */
function watched(store: StorePort, holdFirst: boolean) {
  let inFlight = 0;
  let most = 0;
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let firstSeen!: () => void;
  const first = new Promise<void>((resolve) => {
    firstSeen = resolve;
  });
  let spawns = 0;
  const port: StorePort = {
    ...store,
    call: async (op, input) => {
      if (op !== 'spawn') return store.call(op, input);
      const nth = spawns++;
      inFlight++;
      most = Math.max(most, inFlight);
      try {
        const reply = store.call(op, input);
        if (holdFirst && nth === 0) {
          firstSeen();
          await released;
        }
        return await reply;
      } finally {
        inFlight--;
      }
    },
  };
  return { port, most: () => most, release, first };
}

async function rootWithSpawns(path: string) {
  const store = openLocalStore(path);
  later(() => store.close());
  const provider = {
    kind: 'module' as const,
    module: SCRIPT,
    options: {
      turns: [
        {
          text: 'fanning out',
          toolCalls: Array.from({ length: CHILDREN }, (_, i) => ({
            name: 'spawn_agent',
            args: { task: `part ${i}`, as: `p${i}`, wait: false },
          })),
        },
        { text: 'all spawned', toolCalls: [] },
      ],
    },
  };
  const runId = 'spawn-ahead-root';
  const { generation } = await store.call('createRoot', {
    runId,
    task: 'fan out',
    spec: { provider },
    ceilings: { steps: null, tokens: null, wallMs: null },
    maxTotalAgents: 100,
    maxConcurrentAgents: 100,
    maxWaitSecs: 30,
    claim: claimOf({ owner: 'test' }),
  });
  return { store, provider, runId, generation };
}

describe('spawns without wait in one step', () => {
  it('are reserved together, in call order, and every child starts once the step commits', async () => {
    const path = tempStorePath();
    const { store, provider, runId, generation } = await rootWithSpawns(path);
    const watch = watched(store, false);
    const { exit } = runAgent(
      { type: 'start', runId, generation, owner: 'test', resumed: false, provider },
      { store: watch.port, host: stubHost(), clock: systemClock },
    );
    expect(await exit).toEqual({ kind: 'ended', status: 'finished' });
    // All six requests were in flight at once; one by one, it would be 1.
    expect(watch.most()).toBe(CHILDREN);
    const reader = new TraceReader(path);
    later(() => reader.close());
    const children = reader.runs(runId).filter((run) => run.parentId === runId);
    expect(children.map((run) => run.address).sort()).toEqual(
      Array.from({ length: CHILDREN }, (_, i) => `p${i}`).sort(),
    );
    expect(children.every((run) => run.status === 'queued')).toBe(true);
    // Reserved in call order.
    expect(reader.queue(runId).map((entry) => reader.run(entry.childRunId)?.address)).toEqual(
      Array.from({ length: CHILDREN }, (_, i) => `p${i}`),
    );
    const observations = reader.steps(runId)[0]?.observations ?? [];
    expect(observations.map((o) => o.isError)).toEqual(Array.from({ length: CHILDREN }, () => false));
  });

  it('drops, never starting, the children whose calls a cancel kept the loop from reaching', async () => {
    const path = tempStorePath();
    const { store, provider, runId, generation } = await rootWithSpawns(path);
    const watch = watched(store, true);
    const { agent, exit } = runAgent(
      { type: 'start', runId, generation, owner: 'test', resumed: false, provider },
      { store: watch.port, host: stubHost(), clock: systemClock },
    );
    // Every reservation is sent while the first call waits for its reply; then the run is cancelled.
    await watch.first;
    await new Promise((resolve) => setTimeout(resolve, 50));
    agent.cancel();
    watch.release();
    expect(await exit).toEqual({ kind: 'ended', status: 'cancelled' });
    const reader = new TraceReader(path);
    later(() => reader.close());
    const [step] = reader.steps(runId);
    // The step made its first call; the others were not run, and say so.
    expect(step?.observations.map((o) => o.content.split(';')[0])).toEqual([
      'spawned agent p0',
      ...Array.from({ length: CHILDREN - 1 }, () => 'not run: cancelled by the supervisor'),
    ]);
    const children = reader.runs(runId).filter((run) => run.parentId === runId);
    const made = children.find((run) => run.address === 'p0');
    expect(made?.status).toBe('queued');
    const dropped = children.filter((run) => run.runId !== made?.runId);
    expect(dropped).toHaveLength(CHILDREN - 1);
    for (const run of dropped) {
      expect(run.status).toBe('cancelled');
      expect(run.outcome?.reason).toBe('the call that spawned it is not in the step its parent committed');
      expect(reader.steps(run.runId)).toEqual([]);
    }
    expect(watch.most()).toBe(CHILDREN);
  });

  it('checks each call of a run of a thousand once, not once for every call before it', () => {
    const n = 1000;
    const calls = Array.from({ length: n }, (_, i) => ({
      name: 'spawn_agent',
      args: { task: `part ${i}`, as: `p${i}`, wait: false } as Record<string, unknown>,
    }));
    const reservations = new Map<number, Promise<unknown>>();
    let requests = 0;
    const context = {
      planning: false,
      agents: [],
      policyData: null,
      run: { runId: 'root', address: 'root' },
      seq: 1,
      fence: {},
      clock: systemClock,
      step: { reservations },
      store: {
        call: async () => {
          requests++;
          return { status: 'spawned' };
        },
      },
    };
    let checks = 0;
    const eligible = () => {
      checks++;
      return true;
    };
    // The loop dispatches each call in turn; each takes its own reservation as it runs.
    for (let index = 0; index < n; index++) {
      reserveAhead(context as unknown as Parameters<typeof reserveAhead>[0], calls, index, eligible);
      expect(reservations.has(index)).toBe(true);
      reservations.delete(index);
    }
    expect(requests).toBe(n);
    // Once each; looking again at every later call on every call would be n(n+1)/2 = 500,500.
    expect(checks).toBe(n);
  });
});
