/**
 * The live channel: text as the model streams it, and model and tool calls starting and
 * ending, from agents on worker threads to the main thread — before the step that holds
 * them commits, and never when nobody listens.
 */
import diagnostics from 'node:diagnostics_channel';
import { afterEach, describe, expect, it } from 'vitest';
import { ActorPool, type AgentOutput } from '../dist/actors/agent.js';
import { serveHost } from '../dist/actors/host-channel.js';
import { StoreClient, startStoreWorker } from '../dist/actors/store.js';
import type { HarnessEvent, LiveEvent } from '../dist/index.js';
import { LIVE_CHANNELS } from '../dist/index.js';
import { HOST } from '../dist/store/liveness.js';
import { type Harness, harness, script } from './support/harness.js';
import { stubHost } from './support/hosts.js';
import { tempStorePath } from './support/processes.js';

const TURNS = {
  turns: [
    { text: 'let me look at my inbox first', toolCalls: [{ name: 'read_messages', args: {} }] },
    { text: 'the inbox is empty so this is my final answer', toolCalls: [] },
  ],
};

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('the live channel', () => {
  it('streams text deltas in order, and tool calls, before the step commits; apart from committed events', async () => {
    h = await harness();
    const seen: (HarnessEvent | LiveEvent)[] = [];
    const plain: HarnessEvent[] = [];
    h.supervisor.observe((event) => seen.push(event), { live: true });
    h.supervisor.observe((event) => plain.push(event));
    const onChannel: unknown[] = [];
    const listen = (message: unknown) => onChannel.push(message);
    diagnostics.subscribe(LIVE_CHANNELS['text-delta'], listen);
    try {
      const result = await h.supervisor.run({ task: 'answer', provider: await script('turns', TURNS) }).result;
      expect(result.status).toBe('finished');
    } finally {
      diagnostics.unsubscribe(LIVE_CHANNELS['text-delta'], listen);
    }
    const live = seen.filter((event): event is LiveEvent => 'live' in event && event.live === true);
    // Live events are never committed ones: no id, and the plain observer saw none.
    expect(live.every((event) => !('eventId' in event))).toBe(true);
    expect(plain.some((event) => 'live' in event)).toBe(false);
    for (const [index, turn] of TURNS.turns.entries()) {
      const seq = index + 1;
      const deltas = live.filter((event) => event.type === 'text-delta' && event.seq === seq);
      expect(deltas.length).toBeGreaterThan(1);
      expect(deltas.map((event) => (event as { text: string }).text).join('')).toBe(turn.text);
      const stepEnd = seen.findIndex((event) => !('live' in event) && event.type === 'step-end' && event.seq === seq);
      expect(stepEnd).toBeGreaterThan(-1);
      const start = seen.findIndex(
        (event) => 'live' in event && event.type === 'model-call-start' && event.seq === seq,
      );
      expect(start).toBeGreaterThan(-1);
      // The call starts, its text streams, and only then does the step commit.
      for (const delta of deltas) {
        expect(seen.indexOf(delta)).toBeGreaterThan(start);
        expect(seen.indexOf(delta)).toBeLessThan(stepEnd);
      }
    }
    const tools = live.filter((event) => event.type === 'tool-call-start' || event.type === 'tool-call-end');
    expect(tools).toMatchObject([
      { type: 'tool-call-start', seq: 1, name: 'read_messages', index: 0, address: 'root' },
      { type: 'tool-call-end', seq: 1, name: 'read_messages', index: 0, isError: false },
    ]);
    // The diagnostics channel carried the same deltas.
    expect(onChannel).toEqual(live.filter((event) => event.type === 'text-delta'));
  });

  it('publishes nothing from an agent thread when nobody listens, and everything when someone does', async () => {
    const path = tempStorePath();
    const provider = await script('turns', TURNS);
    const storeWorker = await startStoreWorker({
      target: { kind: 'sqlite', path, synchronous: 'NORMAL' },
      killAt: null,
    });
    const store = new StoreClient(storeWorker);
    const counted: Record<string, number> = {};
    try {
      for (const live of [false, true]) {
        const runId = `live-${live}`;
        const { generation } = await store.call('createRoot', {
          runId,
          task: 'answer',
          spec: { provider },
          ceilings: { steps: null, tokens: null, wallMs: null },
          maxTotalAgents: 1,
          maxConcurrentAgents: 1,
          maxWaitSecs: 30,
          claim: { owner: 'test', pid: process.pid, host: HOST, ttlMs: 60_000, now: Date.now() },
        });
        const pool = new ActorPool({ isolation: 'thread' });
        const actor = pool.host(
          { type: 'start', runId, generation, owner: 'test', resumed: false, provider, live },
          { kind: 'sqlite', path },
          (port) => storeWorker.postMessage({ type: 'attach', port }, [port]),
        );
        serveHost(stubHost(), actor.host);
        let liveMessages = 0;
        actor.control.on('message', (message: AgentOutput) => {
          if (message.type === 'live') liveMessages++;
          if (message.type === 'live-flush') actor.control.postMessage({ type: 'live-flushed', id: message.id });
        });
        expect(await actor.exit).toEqual({ kind: 'ended', status: 'finished' });
        await pool.destroy();
        counted[String(live)] = liveMessages;
      }
    } finally {
      await storeWorker.terminate();
    }
    expect(counted.false).toBe(0);
    expect(counted.true).toBeGreaterThan(4);
  });
});
