import { afterEach, describe, expect, it } from 'vitest';
import type { HarnessEvent } from '../dist/index.js';
import { type Harness, harness, script } from './support/harness.js';

let h: Harness;
afterEach(async () => {
  await h?.close();
});

describe('the event bus', () => {
  it('delivers every committed event, in commit order, to callbacks and iterators alike', async () => {
    h = await harness({ maxConcurrentAgents: 2 });
    const seen: HarnessEvent[] = [];
    h.supervisor.observe((event) => seen.push(event));
    const iterator = h.supervisor.events();
    const handle = h.supervisor.run({ task: 'demo', provider: await script('fanout', { children: 3, steps: 2 }) });
    const result = await handle.result;
    const stored = h.store.treeEvents(result.rootId);
    expect(seen.map((event) => event.eventId)).toEqual(stored.map((event) => event.eventId));
    expect(seen).toEqual(stored);
    const iterated: HarnessEvent[] = [];
    for await (const event of iterator) {
      iterated.push(event);
      if (iterated.length === stored.length) break;
    }
    expect(iterated).toEqual(stored);
    const ids = stored.map((event) => event.eventId);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    const types = new Set(stored.map((event) => event.type));
    for (const type of [
      'lease-taken',
      'run-start',
      'tool-call',
      'spawn-queued',
      'spawn-started',
      'spend',
      'step-end',
      'message-sent',
      'message-read',
      'run-end',
    ]) {
      expect(types, type).toContain(type);
    }
  });

  it('filters by run, and keeps each run\u2019s events in order', async () => {
    h = await harness();
    const rootEvents: HarnessEvent[] = [];
    const handle = h.supervisor.run({ task: 'demo', provider: await script('fanout', { children: 2 }) });
    h.supervisor.observe((event) => rootEvents.push(event), { runId: handle.rootId });
    await handle.result;
    expect(rootEvents.every((event) => event.runId === handle.rootId)).toBe(true);
    expect(rootEvents).toEqual(h.store.events(handle.rootId));
    expect(rootEvents.at(-1)?.type).toBe('run-end');
  });

  it('isolates an observer that throws', async () => {
    h = await harness();
    let calls = 0;
    h.supervisor.observe(() => {
      calls++;
      throw new Error('observer bug');
    });
    const result = await h.supervisor.run({ task: 'demo', provider: await script('loop', { steps: 2 }) }).result;
    expect(result.status).toBe('finished');
    expect(calls).toBe(h.store.treeEvents(result.rootId).length);
  });
});
