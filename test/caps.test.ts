import { afterEach, describe, expect, it } from 'vitest';
import type { HarnessEvent } from '../dist/index.js';
import { observationsOf, type StoreHarness, script, storeHarness } from './support/harness.js';

let h: StoreHarness;
afterEach(async () => {
  await h?.close();
});

/** The most children of a tree running at once, read off the event stream. */
function peakConcurrency(events: HarnessEvent[], rootId: string): number {
  let live = 0;
  let peak = 0;
  for (const event of events) {
    if (event.type === 'spawn-started') peak = Math.max(peak, ++live);
    if (event.type === 'run-end' && event.runId !== rootId) live--;
  }
  return peak;
}

describe('admission caps', () => {
  it('refuses the spawn that would cross maxTotalAgents as an observation the parent reads', async () => {
    h = await storeHarness({ maxTotalAgents: 3 });
    const result = await h.supervisor.run({
      task: 'too many',
      provider: await script('fanout', { children: 4, finishEarly: true }),
    }).result;
    expect(result.status).toBe('finished');
    expect(result.runs).toBe(4);
    const spawns = (await observationsOf(h.store, result.rootId)).filter((o) => o.name === 'spawn_agent');
    expect(spawns.slice(0, 3).every((o) => !o.isError)).toBe(true);
    expect(spawns[3]?.isError).toBe(true);
    expect(spawns[3]?.content).toBe(
      'spawn refused (maxTotalAgents): this tree may hold at most 3 spawned agents and already has 3; finish with the agents you have.',
    );
    expect((await h.store.events(result.rootId)).filter((event) => event.type === 'spawn-refused')).toHaveLength(1);
    expect((await h.store.events(result.rootId)).find((event) => event.type === 'refusal')).toMatchObject({
      rule: 'maxTotalAgents',
    });
  });

  it('queues past maxConcurrentAgents, admits first in first out, and completes every queued child', async () => {
    h = await storeHarness({ maxConcurrentAgents: 2 });
    const events: HarnessEvent[] = [];
    h.supervisor.observe((event) => events.push(event));
    const result = await h.supervisor.run({
      task: 'six',
      provider: await script('fanout', { children: 6, steps: 2, latencyMs: 20 }),
    }).result;
    expect(result).toMatchObject({ status: 'finished', reply: '6 reports', runs: 7 });
    expect(peakConcurrency(events, result.rootId)).toBe(2);
    const queued = events.flatMap((event) => (event.type === 'spawn-queued' ? [event.childId] : []));
    const started = events.flatMap((event) => (event.type === 'spawn-started' ? [event.runId] : []));
    expect(started).toEqual(queued);
    expect((await h.store.queue(result.rootId)).every((entry) => entry.state === 'admitted')).toBe(true);
    for (const run of await h.store.runs(result.rootId)) expect(run.status).toBe('finished');
  });

  it('finishes a hundred-agent task at concurrency 16', async () => {
    h = await storeHarness({ maxConcurrentAgents: 16 });
    const events: HarnessEvent[] = [];
    h.supervisor.observe((event) => events.push(event));
    const result = await h.supervisor.run({
      task: 'hundred',
      provider: await script('fanout', { children: 100, steps: 2, latencyMs: 5 }),
    }).result;
    expect(result).toMatchObject({ status: 'finished', reply: '100 reports', runs: 101 });
    expect(peakConcurrency(events, result.rootId)).toBeLessThanOrEqual(16);
    expect((await h.store.runs(result.rootId)).filter((run) => run.status === 'finished')).toHaveLength(101);
  });

  it('never charges a child that only waited in the queue', async () => {
    h = await storeHarness({ maxConcurrentAgents: 1 });
    const handle = h.supervisor.run({
      task: 'cancel me',
      provider: await script('fanout', { children: 4, steps: 50, latencyMs: 20 }),
    });
    // Cancel once the first child is running and the other three wait in the queue.
    await new Promise<void>((resolve) => {
      const stop = h.supervisor.observe((event) => {
        if (event.type === 'step-end' && event.runId !== handle.rootId) {
          stop();
          resolve();
        }
      });
    });
    await handle.cancel();
    const result = await handle.result;
    const runs = await h.store.runs(result.rootId);
    expect(runs.every((run) => run.status === 'cancelled')).toBe(true);
    const neverRan = runs.filter((run) => run.lastSeq === 0 && run.runId !== result.rootId);
    expect(neverRan.length).toBeGreaterThanOrEqual(3);
    const ledger = await h.store.ledger(result.rootId);
    for (const run of neverRan) {
      expect(ledger?.accounts.find((account) => account.runId === run.runId)?.spent).toEqual({ steps: 0, tokens: 0 });
      expect(ledger?.draws.filter((draw) => draw.runId === run.runId)).toEqual([]);
    }
  });

  it('does not settle a tree while a child it started is still running', async () => {
    h = await storeHarness();
    const result = await h.supervisor.run({
      task: 'leave early',
      provider: await script('fanout', { children: 2, steps: 4, latencyMs: 30, finishEarly: true }),
    }).result;
    const runs = await h.store.runs(result.rootId);
    expect(runs.every((run) => run.status === 'finished')).toBe(true);
    const ends = (await h.store.treeEvents(result.rootId)).filter((event) => event.type === 'run-end');
    expect(ends[0]?.runId).toBe(result.rootId); // the root answered first ...
    expect(ends).toHaveLength(3); // ... and the tree settled only after both children ended
  });
});
