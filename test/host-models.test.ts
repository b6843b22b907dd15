/**
 * Host models: a model served by the embedder's own function on its thread, asked by an
 * agent on a worker thread over its host channel, through the same step, draw and trace
 * as a vendor's model; refused up front when not given, and given again to resume.
 */
import { isMainThread } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  type HostModel,
  type HostModelRequest,
  hostModel,
  Store,
  Supervisor,
  TaskContract,
  tool,
  Verification,
  withFallback,
} from '../dist/index.js';
import { tempStorePath } from './support/processes.js';
import { tempWorkspace } from './support/workspace.js';

const forecast = tool({
  name: 'forecast',
  description: 'The weather forecast for a city.',
  parameters: z.object({ city: z.string().min(1) }),
  effect: 'reads',
  execute: ({ city }) => ({ city, sky: 'clear' }),
});

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

async function storeAt(path = tempStorePath()) {
  const store = await Store.open(path);
  cleanup.push(async () => store.close());
  return { store, path };
}

async function supervisorOn(store: Store, options: Parameters<typeof Supervisor.start>[1] = {}) {
  const supervisor = await Supervisor.start(store, options);
  cleanup.push(() => supervisor.close());
  return supervisor;
}

/** A promise and what settles it: for a test to wait until a model has been asked, or told to stop. */
function latch(): { done: Promise<void>; open: () => void } {
  let open: () => void = () => undefined;
  const done = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { done, open };
}

/** A root asking only the host model `name`, answered by `model`: its result. */
function askOnly(supervisor: Supervisor, name: string, model: HostModel) {
  return supervisor.run({ task: 'hello', provider: hostModel(name), models: { [name]: model } }).result;
}

/** Whether a request's transcript already holds an answer of a tool. */
const answered = (request: HostModelRequest) => request.transcript.some((entry) => entry.role === 'tool');

describe('host models', () => {
  it("answer an agent on a worker thread from the embedder's thread, through the same step, draw and trace", async () => {
    const { store } = await storeAt();
    const seen: { main: boolean; request: HostModelRequest; aborted: boolean }[] = [];
    const local: HostModel = (request, signal) => {
      seen.push({ main: isMainThread, request: structuredClone(request), aborted: signal.aborted });
      return answered(request)
        ? { text: 'clear in Oslo', usage: { inputTokens: 70, outputTokens: 3 } }
        : { text: 'looking', toolCalls: [{ name: 'forecast', args: { city: 'Oslo' } }] };
    };
    const supervisor = await supervisorOn(store, { isolation: 'thread' });
    const result = await supervisor.run({
      task: 'what is the weather in Oslo?',
      provider: hostModel('local'),
      models: { local },
      tools: [forecast],
    }).result;
    expect(result.status).toBe('finished');
    expect(result.reply).toBe('clear in Oslo');
    // Asked twice, on this thread, while the agent ran on a worker of its own.
    expect(seen.map((item) => item.main)).toEqual([true, true]);
    const [first, second] = seen;
    expect(first?.request).toMatchObject({
      model: 'local',
      runId: result.rootId,
      rootId: result.rootId,
      address: 'root',
    });
    expect(first?.request.system.length).toBeGreaterThan(0);
    expect(first?.request.tools.map((item) => item.name)).toContain('forecast');
    const observation = second?.request.transcript.find((entry) => entry.role === 'tool');
    expect(observation).toMatchObject({ role: 'tool', name: 'forecast', isError: false });
    expect(JSON.parse((observation as { content: string }).content)).toEqual({ city: 'Oslo', sky: 'clear' });
    // The trace keeps both calls as it keeps a vendor's: the first estimated (no usage given), the second as reported.
    const calls = store.modelCalls({ rootId: result.rootId });
    expect(calls.map((call) => [call.provider, call.model, call.outcome])).toEqual([
      ['host:local', 'local', 'ok'],
      ['host:local', 'local', 'ok'],
    ]);
    expect(calls[0]?.usageReported).toBe(false);
    expect(calls[0]?.inputTokens).toBeGreaterThan(0);
    expect([calls[1]?.usageReported, calls[1]?.inputTokens, calls[1]?.outputTokens]).toEqual([true, 70, 3]);
    // And the ledger drew what the trace says, to the token.
    const drawn = calls.reduce((sum, call) => sum + call.inputTokens + call.outputTokens, 0);
    expect((await store.account(result.rootId))?.spent.tokens).toBe(drawn);
  });

  it('refuse a tree whose providers name one this process was not given, before anything is stored', async () => {
    const { store } = await storeAt();
    const supervisor = await supervisorOn(store, { models: { here: () => ({ text: 'hi' }) } });
    expect(() => supervisor.run({ task: 'hello', provider: hostModel('absent') })).toThrow(
      /host model "absent", which this process was not given; pass models: \{ "absent":/,
    );
    const fallback = withFallback([hostModel('here'), hostModel('gone')]);
    expect(() => supervisor.run({ task: 'hello', provider: fallback })).toThrow(/host model "gone"/);
    expect(() => hostModel(' ')).toThrow(/a host model needs \{ kind: "host", name \}/);
    expect(() =>
      supervisor.run({ task: 'hello', provider: hostModel('here'), models: { here: () => ({ text: 'x' }) } }),
    ).toThrow(/the host model "here" is given twice/);
    expect(() =>
      supervisor.run({
        task: 'hello',
        provider: hostModel('x'),
        models: { x: 'not a function' as unknown as HostModel },
      }),
    ).toThrow(/the host model "x" is not a function/);
    expect(store.runs()).toEqual([]);
    // The supervisor's own model serves a run that names it.
    const result = await supervisor.run({ task: 'hello', provider: hostModel('here') }).result;
    expect([result.status, result.reply]).toEqual(['finished', 'hi']);
  });

  it('fail the run on an answer that is not one, or a throw, naming what was wrong', async () => {
    const { store } = await storeAt();
    const supervisor = await supervisorOn(store, { isolation: 'in-process' });
    const bad = await askOnly(supervisor, 'bad', () => ({ text: 5 }) as unknown as { text: string });
    expect(bad.status).toBe('failed');
    expect(bad.reason).toMatch(/the host model "bad" answered without a text string/);
    const args = await askOnly(supervisor, 'args', () => ({
      text: '',
      toolCalls: [{ name: 'forecast', args: [] as unknown as Record<string, unknown> }],
    }));
    expect(args.reason).toMatch(/tool call 0 \(forecast\) whose args are not an object/);
    const thrown = await askOnly(supervisor, 'down', () => {
      throw new Error('the local model is down');
    });
    expect(thrown.status).toBe('failed');
    expect(thrown.reason).toMatch(/the host model "down" threw: the local model is down/);
    expect(store.modelCalls({ rootId: thrown.rootId }).map((call) => call.outcome)).toEqual(['undecodable']);
  });

  it("get unique call ids, their checked usage, and the tree's root even for a review gate's request", async () => {
    const { store } = await storeAt();
    const supervisor = await supervisorOn(store, { isolation: 'in-process' });
    const twice = await supervisor.run({
      task: 'the weather twice',
      provider: hostModel('twice'),
      tools: [forecast],
      models: {
        twice: (request) =>
          answered(request)
            ? { text: 'done' }
            : {
                text: '',
                toolCalls: [
                  { id: 'same', name: 'forecast', args: { city: 'Oslo' } },
                  { id: 'same', name: 'forecast', args: { city: 'Bergen' } },
                ],
              },
      },
    }).result;
    expect(twice.status).toBe('finished');
    const ids = store.steps(twice.rootId)[0]?.observations.map((item) => item.callId) ?? [];
    expect(ids).toHaveLength(2);
    expect(new Set(ids).size).toBe(2);
    const counted = await askOnly(supervisor, 'counted', () => ({
      text: 'hi',
      usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: -1 },
    }));
    expect(counted.reason).toMatch(/answered a usage whose cacheReadTokens is not a whole number/);

    const root = tempWorkspace();
    const asked: { rootId: string; address: string }[] = [];
    const gated = await supervisor.run({
      contract: TaskContract.workspace('say done', root).withVerification(
        Verification.review(hostModel('judge'), 'Anything passes.'),
      ),
      provider: hostModel('writer'),
      models: {
        writer: () => ({ text: 'done' }),
        judge: (request) => {
          asked.push({ rootId: request.rootId, address: request.address });
          return { text: '{"verdict":"pass","reasons":["fine"]}' };
        },
      },
    }).result;
    expect(gated.status).toBe('finished');
    expect(asked).toEqual([{ rootId: gated.rootId, address: 'root' }]);
  });

  it("hear the tree's cancel through their signal", async () => {
    const { store } = await storeAt();
    const supervisor = await supervisorOn(store);
    const heard = latch();
    const asked = latch();
    const slow: HostModel = (_request, signal) =>
      new Promise((resolve) => {
        asked.open();
        signal.addEventListener('abort', () => {
          heard.open();
          resolve({ text: 'too late' });
        });
      });
    const handle = supervisor.run({ task: 'hello', provider: hostModel('slow'), models: { slow } });
    await asked.done;
    handle.cancel();
    await heard.done;
    const result = await handle.result;
    expect(result.status).toBe('cancelled');
    expect(store.steps(result.rootId)).toEqual([]);
  });

  it('live in the process, not the store: a resume elsewhere is refused without the model, and goes on with it', async () => {
    const { store, path } = await storeAt();
    const first = await Supervisor.start(store);
    const asked = latch();
    // Asked once and never answered: the first process stops with its run in the middle.
    const stuck: HostModel = (_request, signal) =>
      new Promise((_resolve, reject) => {
        asked.open();
        signal.addEventListener('abort', () => reject(new Error('stopped')));
      });
    const handle = first.run({ task: 'hello', provider: hostModel('local'), models: { local: stuck } });
    await asked.done;
    await first.close();
    await handle.result.catch(() => undefined);
    const before = store.runs(handle.rootId).map((run) => run.status);
    expect(before).toEqual(['running']);

    const { store: again } = await storeAt(path);
    const second = await supervisorOn(again);
    await expect(second.resume(handle.rootId)).rejects.toThrow(
      /the tree's providers name the host model "local", which this process was not given/,
    );
    expect(again.runs(handle.rootId).map((run) => run.status)).toEqual(['running']);
    // Given the model again, the run goes on from where the store has it.
    const resumed = await second.resume(handle.rootId, { models: { local: () => ({ text: 'back' }) } });
    const result = await resumed.result;
    expect([result.status, result.reply]).toEqual(['finished', 'back']);
  });
});
