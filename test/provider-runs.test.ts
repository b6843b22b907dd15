/**
 * Providers inside the runtime: agents in worker threads calling the scripted model
 * server over loopback HTTP. What a failed call leaves in the trace, fallback,
 * refuse-to-start, accounting, and record/replay.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { HttpProviderSpec } from '../dist/index.js';
import { ScriptedModelServer } from '../dist/testing/index.js';
import { type Harness, harness } from './support/harness.js';
import { closedPort, openAiAt, programs } from './support/wire.js';

let h: Harness | undefined;
const servers: ScriptedModelServer[] = [];
afterEach(async () => {
  await h?.close();
  h = undefined;
  for (const server of servers.splice(0)) await server.close();
});

async function serve(script: Parameters<typeof ScriptedModelServer.start>[0]): Promise<ScriptedModelServer> {
  const server = await ScriptedModelServer.start(script);
  servers.push(server);
  return server;
}

const openai = openAiAt;

const loop = programs({
  root: [{ text: 'thinking', toolCalls: [{ name: 'read_messages', args: {} }] }, { text: 'done' }],
});

describe('a model call that fails inside a run', () => {
  it.each([
    ['a stream cut mid-event', { fault: 'truncate', afterEvents: 1 } as const, 'truncated'],
    ['an HTTP 500', { fault: 'status', status: 500 } as const, 'http'],
  ])('retries %s: the step commits once, and the retry is in its trace', async (_label, fault, kind) => {
    let faulted = false;
    const server = await serve((call) => {
      if (!faulted) {
        faulted = true;
        return fault;
      }
      return loop(call);
    });
    h = await harness();
    const result = await h.supervisor.run({ task: 'go', provider: openai(server.url) }).result;
    expect(result).toMatchObject({ status: 'finished', reply: 'done' });
    const steps = h.store.steps(result.rootId);
    expect(steps.map((step) => step.seq)).toEqual([1, 2]);
    const retry = h.store.events(result.rootId).find((event) => event.type === 'model-retry');
    expect(retry).toMatchObject({ seq: 1, provider: 'openai', kind });
    expect(h.store.modelCalls({ rootId: result.rootId }).map((call) => [call.seq, call.attempt, call.outcome])).toEqual(
      [
        [1, 0, kind],
        [1, 1, 'ok'],
        [2, 0, 'ok'],
      ],
    );
  });

  it('does not commit the step of an event that is not JSON, and ends the run failed with why', async () => {
    const server = await serve(() => ({ fault: 'malformed' }));
    h = await harness();
    const result = await h.supervisor.run({ task: 'go', provider: openai(server.url) }).result;
    expect(result.status).toBe('failed');
    expect(result.reason).toContain('not JSON');
    expect(h.store.steps(result.rootId)).toEqual([]);
    expect(server.calls).toHaveLength(1); // undecodable is not retried
    expect(h.store.events(result.rootId).find((event) => event.type === 'model-failed')).toMatchObject({
      kind: 'undecodable',
    });
    expect(h.store.modelCalls({ rootId: result.rootId })).toMatchObject([{ seq: 1, outcome: 'undecodable' }]);
  });

  it('falls back when the primary keeps failing, and the trace names both', async () => {
    const primary = await serve(() => ({ fault: 'status', status: 503 }));
    const secondary = await serve(loop);
    h = await harness();
    const { withFallback } = await import('../dist/index.js');
    const provider = withFallback([
      openai(primary.url, { name: 'primary', retry: { maxAttempts: 2, baseDelayMs: 1 } }),
      openai(secondary.url, { name: 'secondary' }),
    ]);
    const result = await h.supervisor.run({ task: 'go', provider }).result;
    expect(result).toMatchObject({ status: 'finished', reply: 'done' });
    // Each step tries the primary (twice), then falls back; the trace says so step by step.
    const events = h.store.events(result.rootId).filter((event) => event.seq === 1);
    expect(events.filter((event) => event.type === 'model-retry')).toMatchObject([
      { provider: 'primary', statusCode: 503 },
    ]);
    expect(events.filter((event) => event.type === 'model-fallback')).toMatchObject([
      { from: 'primary', to: 'secondary', statusCode: 503 },
    ]);
    expect(events.find((event) => event.type === 'step-end')).toMatchObject({ provider: 'secondary' });
    expect(
      h.store
        .modelCalls({ rootId: result.rootId })
        .filter((call) => call.seq === 1)
        .map((call) => [call.provider, call.outcome]),
    ).toEqual([
      ['primary', 'http'],
      ['primary', 'http'],
      ['secondary', 'ok'],
    ]);
    expect(primary.calls.length).toBeGreaterThanOrEqual(2);
  });

  it('refuses to start, before step one, when the primary is unreachable and the rule is on', async () => {
    const port = await closedPort();
    const secondary = await serve(loop);
    h = await harness();
    const { withFallback } = await import('../dist/index.js');
    const provider = withFallback(
      [openai(`http://127.0.0.1:${port}`, { name: 'primary' }), openai(secondary.url, { name: 'secondary' })],
      { refuseIfPrimaryUnreachable: true },
    );
    const result = await h.supervisor.run({ task: 'go', provider }).result;
    expect(result.status).toBe('failed');
    expect(result.reason).toContain('refused to start: the primary provider primary is unreachable');
    expect(h.store.steps(result.rootId)).toEqual([]);
    expect(secondary.calls).toEqual([]);
    expect(h.store.events(result.rootId).find((event) => event.type === 'provider-unreachable')).toMatchObject({
      provider: 'primary',
    });
  });
});

describe('accounting and cache affinity', () => {
  it('writes a row per call and derives cost on read from the embedder\u2019s prices', async () => {
    const usage = { inputTokens: 1000, outputTokens: 100, cacheReadTokens: 800, reasoningTokens: 10 };
    const server = await serve(
      programs({
        root: [
          { text: 'a', toolCalls: [{ name: 'read_messages', args: {} }], usage },
          { text: 'b', usage },
        ],
      }),
    );
    h = await harness();
    const result = await h.supervisor.run({ task: 'go', provider: openai(server.url), session: 'chat-42' }).result;
    const calls = h.store.modelCalls({ rootId: result.rootId });
    expect(
      calls.map((call) => [
        call.provider,
        call.model,
        call.inputTokens,
        call.outputTokens,
        call.cacheReadTokens,
        call.reasoningTokens,
      ]),
    ).toEqual([
      ['openai', 'gpt-scripted', 1000, 100, 800, 10],
      ['openai', 'gpt-scripted', 1000, 100, 800, 10],
    ]);
    for (const call of calls) {
      expect(call.latencyMs).toBeGreaterThan(0);
      expect(call.ttftMs).not.toBeNull();
    }
    // per million: 200 plain input at 2, 800 cached at 0.5, 100 output at 8 -> 0.0004 + 0.0004 + 0.0008 per call
    const cost = h.store.cost(result.rootId, { 'gpt-scripted': { input: 2, cacheRead: 0.5, output: 8 } });
    expect(cost.total).toBeCloseTo(0.0032, 10);
    expect(cost.unpriced).toEqual([]);
    // For a person: no float noise, two significant digits.
    expect(cost.text).toBe('$0.0032 (gpt-scripted $0.0032)');
    expect(h.store.cost(result.rootId, {}).unpriced).toEqual(['gpt-scripted']);
    expect(h.store.cost(result.rootId, {}).text).toBe('$0.00; not priced: gpt-scripted');
    const stepEnd = h.store.events(result.rootId).find((event) => event.type === 'step-end');
    expect(stepEnd).toMatchObject({ cacheReadTokens: 800, cachedShare: 0.8 });
    // The affinity key is a digest: the same for every call of the session, and not the session's name.
    const keys = new Set(server.calls.map((call) => call.headers['x-session-affinity']));
    expect(keys.size).toBe(1);
    const [key] = [...keys];
    expect(key).toMatch(/^[0-9a-f]{32}$/);
    expect(JSON.stringify(server.calls.map((call) => call.raw))).not.toContain('chat-42');
    expect((server.calls[0]?.body as { prompt_cache_key?: string } | undefined)?.prompt_cache_key).toBe(key);
  });
});

describe('a recorded provider', () => {
  it('records a run\u2019s wire exchanges and replays them byte-identically, twice, with no server', async () => {
    const server = await serve(
      programs({
        root: [
          { text: 'delegating', toolCalls: [{ name: 'spawn_agent', args: { task: 'look', as: 'helper' } }] },
          { text: 'all done' },
        ],
        helper: [{ toolCalls: [{ name: 'read_messages', args: {} }] }, { text: 'looked' }],
      }),
    );
    h = await harness();
    const file = join(dirname(h.store.path), 'exchanges.jsonl');
    const trace = async (transport: HttpProviderSpec['transport']) => {
      const handle = (h as Harness).supervisor.run({
        task: 'record me',
        session: 'recorded',
        provider: openai(server.url, { transport }),
      });
      const result = await handle.result;
      expect(result.status).toBe('finished');
      return (h as Harness).store
        .runs(result.rootId)
        .map((run) =>
          (h as Harness).store
            .steps(run.runId)
            .map((step) =>
              JSON.stringify([run.address, step.completion.text, step.completion.toolCalls, step.observations]),
            ),
        )
        .join('\n');
    };
    const recorded = await trace({ record: file });
    expect(existsSync(file)).toBe(true);
    expect(readFileSync(file, 'utf8').trim().split('\n')).toHaveLength(4);
    await server.close();
    const first = await trace({ replay: file });
    const second = await trace({ replay: file });
    expect(first).toBe(recorded);
    expect(second).toBe(recorded);
  });

  it('replays a run that named no session: the affinity key differs, the request does not', async () => {
    const server = await serve(loop);
    h = await harness();
    const file = join(dirname(h.store.path), 'unnamed.jsonl');
    const recorded = await h.supervisor.run({
      task: 'same',
      provider: openai(server.url, { transport: { record: file } }),
    }).result;
    await server.close();
    const replayed = await h.supervisor.run({
      task: 'same',
      provider: openai(server.url, { transport: { replay: file } }),
    }).result;
    expect(replayed).toMatchObject({ status: 'finished', reply: recorded.reply });
    expect(h.store.steps(replayed.rootId).map((step) => step.completion.text)).toEqual(
      h.store.steps(recorded.rootId).map((step) => step.completion.text),
    );
  });

  it('fails plainly when a replay is asked something the recording never saw', async () => {
    const server = await serve(loop);
    h = await harness();
    const file = join(dirname(h.store.path), 'one.jsonl');
    await h.supervisor.run({ task: 'one', session: 's', provider: openai(server.url, { transport: { record: file } }) })
      .result;
    const result = await h.supervisor.run({
      task: 'another task',
      session: 's',
      provider: openai(server.url, { transport: { replay: file } }),
    }).result;
    expect(result.status).toBe('failed');
    expect(result.reason).toContain('has no recorded answer');
  });
});
