/**
 * Context assembly: every request fitted to a share of the model's window. A long run
 * over the scripted model server with a small stated window folds its old steps into
 * notes (each fold an `assembled` event and a step of its own); between folds every
 * request carries the one before it unchanged, message by message, on the recorded wire;
 * every request stays under its share, and the same run unfolded would not have. A run
 * killed after a fold and resumed sends the bytes the uncrashed run sent. The window comes
 * from the provider's catalogue, the reference table or an assumption, and the run says
 * which; a catalogue host the policy denies refuses the run, a stated window reads none.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  Anthropic,
  Compatible,
  OpenAI,
  OpenRouter,
  Policy,
  runWith,
  Store,
  TaskContract,
  tool,
} from '../dist/index.js';
import { type ScriptedCall, ScriptedModelServer } from '../dist/testing/index.js';
import { tempStorePath } from './support/processes.js';
import { driveKilledOrWhole, later, loggedRequests, tempWorkspace } from './support/workspace.js';

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

const FOLD_ASKED = 'Your context is nearly full';

type Message = { role: string; content: unknown };

/** Whether a request is a fold's: its last message asks for the notes. */
function isFold(call: ScriptedCall): boolean {
  const messages = (call.body as { messages: Message[] }).messages;
  return JSON.stringify(messages.at(-1)?.content ?? '').includes(FOLD_ASKED);
}

/** A model that reads `big.txt` for `steps` steps, then answers; a fold's request gets notes. */
async function reader(steps: number, options: { models?: { id: string; contextLength?: number }[] } = {}) {
  let step = 0;
  const server = await ScriptedModelServer.start(
    (call) => {
      if (isFold(call)) return { text: `notes after ${step} reads: big.txt holds the numbers; keep reading.` };
      step++;
      return step <= steps
        ? { text: `read ${step}`, toolCalls: [{ name: 'read_file', args: { path: 'big.txt' } }] }
        : { text: 'done reading' };
    },
    { keepCalls: true, ...(options.models ? { models: options.models } : {}) },
  );
  later(() => server.close());
  return server;
}

async function store() {
  const opened = await Store.open(tempStorePath());
  cleanup.push(async () => opened.close());
  return opened;
}

/** A workspace with a file whose reads fill a small window in a few steps. */
function workspace(): string {
  const lines = Array.from({ length: 60 }, (_, n) => `line ${n}: ${'0123456789'.repeat(3)}`);
  return tempWorkspace({ 'big.txt': `${lines.join('\n')}\n` });
}

describe('context assembly', () => {
  it('folds a 60-step run to its share: between folds each request extends the last, message by message', {
    timeout: 120_000,
  }, async () => {
    const dir = workspace();
    const trace = await store();
    const server = await reader(60);
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const window = 16_000;
    const contract = TaskContract.workspace('read big.txt sixty times', dir)
      .withBudget({ steps: 80 })
      .withContext({ window, share: 0.8 });
    const result = await runWith(contract, provider, trace, Policy.default());
    expect(result.outcome.kind, JSON.stringify(result.outcome)).toBe('finished');
    const limit = window * 0.8;

    const events = trace.events(result.runId);
    expect(events.find((event) => event.type === 'context-window')).toMatchObject({
      tokens: window,
      source: 'stated',
      share: 0.8,
    });
    const folds = events.filter((event) => event.type === 'assembled');
    expect(folds.length).toBeGreaterThanOrEqual(2);
    for (const fold of folds) expect(fold).toMatchObject({ rung: 'fold', limit: Math.floor(limit) });
    // Each fold is a step of its own, its notes the entry that stands for what it folded.
    const steps = trace.steps(result.runId);
    const foldSteps = steps.filter((step) => step.observations[0]?.name === '@fold');
    expect(foldSteps.length).toBe(folds.length);
    expect(foldSteps[0]?.observations[0]?.content).toMatch(
      /^Steps 1 to \d+ of this run were folded .*notes after \d+ reads/s,
    );
    // A fold draws its tokens and no step: 61 model steps, not 61 plus the folds.
    expect(result.usage.steps).toBe(61);

    const calls = server.calls;
    expect(calls.filter(isFold).length).toBe(folds.length);
    const main = calls.filter((call) => !isFold(call));
    expect(main.length).toBe(61);
    let extended = 0;
    for (let index = 1; index < calls.length; index++) {
      const before = calls[index - 1] as ScriptedCall;
      const now = calls[index] as ScriptedCall;
      if (isFold(now) || isFold(before)) continue;
      const a = (before.body as { messages: Message[] }).messages;
      const b = (now.body as { messages: Message[] }).messages;
      // Everything the last request sent is sent again, byte for byte, and more after it.
      expect(b.length).toBeGreaterThan(a.length);
      for (const [at, message] of a.entries()) expect(JSON.stringify(b[at])).toBe(JSON.stringify(message));
      expect(JSON.stringify((now.body as { tools: unknown }).tools)).toBe(
        JSON.stringify((before.body as { tools: unknown }).tools),
      );
      extended++;
    }
    expect(extended).toBe(main.length - 1 - folds.length);
    // Every request the model was sent fits its share, as the vendor counts it (a quarter of the body).
    const counted = main.map((call) => Math.ceil(call.raw.length / 4));
    expect(Math.max(...counted)).toBeLessThanOrEqual(limit);
    // Unfolded, the last request would have held every read: far past the whole window.
    const reads = steps.flatMap((step) => step.observations).filter((item) => item.name === 'read_file');
    const unfolded = reads.reduce((sum, item) => sum + item.content.length, 0) / 4;
    expect(unfolded).toBeGreaterThan(window);
    expect(trace.events(result.runId).filter((event) => event.type === 'prefix-broke')).toEqual([]);
  });

  it('resumes a run killed right after a fold to the bytes the uncrashed run sent', { timeout: 120_000 }, async () => {
    // One workspace for both runs, so their openings are the same bytes; the logs kept outside it.
    const dir = workspace();
    const logs = tempWorkspace();
    const run = async (name: string, killAt: string | null) => {
      const log = join(logs, `${name}.log`);
      const base = {
        store: tempStorePath(),
        wireScript: 'context#readerScript',
        options: { log, steps: 30 },
        workspace: {
          goal: 'read big.txt thirty times',
          root: dir,
          policy: 'default' as const,
          context: { window: 16_000 },
          budget: { steps: 60 },
        },
      };
      await driveKilledOrWhole(base, killAt);
      return loggedRequests<{ fold: boolean; messages: Message[] }>(log);
    };
    const whole = await run('whole', null);
    const firstFold = whole.findIndex((request) => request.fold);
    expect(firstFold).toBeGreaterThan(0);
    // Killed the moment the fold's step is committed (steps 1..n first, then the fold).
    const resumed = await run('resumed', `commitStep:${firstFold + 1}:after`);
    // The fold was not asked again, and every request after it is the uncrashed run's, byte for byte.
    expect(resumed.filter((request) => request.fold).length).toBe(whole.filter((request) => request.fold).length);
    expect(resumed.length).toBe(whole.length);
    const bytes = (messages: Message[] | undefined) => JSON.stringify(messages ?? []);
    const differing = whole.flatMap((request, index) =>
      bytes(request.messages) === bytes(resumed[index]?.messages) ? [] : [index],
    );
    expect(differing).toEqual([]);
  });

  it('marks a cache breakpoint after a fold once its prefix has been sent, on the Anthropic wire', async () => {
    const dir = workspace();
    const trace = await store();
    const server = await reader(24);
    const provider = Anthropic.create({ model: 'scripted', baseUrl: server.url, apiKey: 'k' });
    const contract = TaskContract.workspace('read big.txt', dir).withContext({ window: 16_000 });
    const result = await runWith(contract, provider, trace, Policy.default());
    expect(result.outcome.kind, JSON.stringify(result.outcome)).toBe('finished');
    const marked = (call: ScriptedCall) =>
      (call.body as { messages: { content: { cache_control?: unknown; text?: string }[] }[] }).messages.flatMap(
        (message) => (Array.isArray(message.content) ? message.content : []).filter((block) => block.cache_control),
      );
    const calls = server.calls;
    const fold = calls.findIndex(isFold);
    expect(fold).toBeGreaterThan(0);
    // Before the fold none; the first request after it sends the notes for the first time, unmarked.
    expect(calls.slice(0, fold + 2).flatMap(marked)).toEqual([]);
    // From the next on, the notes end a frozen prefix: one breakpoint, on them.
    const next = marked(calls[fold + 2] as ScriptedCall);
    expect(next).toHaveLength(1);
    expect(next[0]?.text).toMatch(/^Steps 1 to \d+ of this run were folded/);
  });

  it('names a request that paid again for a prefix the one before it had cached', async () => {
    const dir = workspace();
    const trace = await store();
    const reads = [0, 900, 400, 1200];
    const server = await ScriptedModelServer.start((call) => {
      const turn = (call.body as { messages: Message[] }).messages.filter((m) => m.role === 'assistant').length;
      const usage = { cacheReadTokens: reads[turn] ?? 0 };
      return turn < 3
        ? { text: `read ${turn}`, toolCalls: [{ name: 'read_file', args: { path: 'big.txt' } }], usage }
        : { text: 'done', usage };
    });
    later(() => server.close());
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const result = await runWith(TaskContract.workspace('read', dir), provider, trace, Policy.default());
    expect(result.outcome.kind).toBe('finished');
    // Step 3 extended step 2's request and read 400 from the cache where step 2 read 900.
    expect(trace.events(result.runId).filter((event) => event.type === 'cache-miss')).toMatchObject([
      { seq: 3, expected: 900, read: 400 },
    ]);
  });

  it('reads a file again when it changed after the model read it; the old entry is left as it was sent', async () => {
    const dir = tempWorkspace({ 'a.txt': 'alpha\n' });
    const trace = await store();
    const touch = tool({
      name: 'touch_up',
      description: 'Rewrites a.txt, as a command would.',
      parameters: z.object({}),
      execute: () => {
        writeFileSync(join(dir, 'a.txt'), 'beta\n');
        return 'done';
      },
    });
    const plan = [
      { name: 'read_file', args: { path: 'a.txt' } },
      { name: 'read_file', args: { path: 'a.txt', start_line: 1, end_line: 1 } },
      { name: 'touch_up', args: {} },
    ];
    const bodies: { messages: Message[] }[] = [];
    const server = await ScriptedModelServer.start((call) => {
      bodies.push(call.body as { messages: Message[] });
      const turn = (call.body as { messages: Message[] }).messages.filter((m) => m.role === 'assistant').length;
      const next = plan[turn];
      return next ? { text: `step ${turn + 1}`, toolCalls: [next] } : { text: 'done' };
    });
    later(() => server.close());
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const result = await runWith(TaskContract.workspace('look', dir), provider, trace, Policy.default(), undefined, {
      tools: [touch],
    });
    expect(result.outcome.kind).toBe('finished');
    const steps = trace.steps(result.runId);
    // Nothing is refreshed while the file is as the model read it.
    expect(
      steps
        .slice(0, 2)
        .flatMap((step) => step.observations)
        .filter((item) => item.name === '@refresh'),
    ).toEqual([]);
    expect(steps[2]?.observations.at(-1)).toMatchObject({
      name: '@refresh',
      content: 'a.txt has changed since you read it at step 1; it now reads:\nbeta\n',
      refreshed: { path: 'a.txt' },
    });
    // The next request: the first read as it was sent, the refresh after the step that changed it.
    const last = bodies.at(-1)?.messages ?? [];
    const tools = last.filter((message) => message.role === 'tool');
    expect(tools[0]?.content).toBe('alpha\n');
    expect(last.at(-1)).toEqual({
      role: 'user',
      content: 'a.txt has changed since you read it at step 1; it now reads:\nbeta\n',
    });
    // Once refreshed, it is not refreshed again.
    expect(steps.flatMap((step) => step.observations).filter((item) => item.name === '@refresh')).toHaveLength(1);
  });

  it('folds a step larger than the window, cutting it in the fold’s own request so that request fits too', async () => {
    const dir = workspace();
    const trace = await store();
    const huge = tool({
      name: 'dump',
      description: 'Prints a lot.',
      parameters: z.object({}),
      effect: 'reads',
      execute: () => 'x'.repeat(30_000),
    });
    let main = 0;
    const server = await ScriptedModelServer.start((call) => {
      if (isFold(call)) return { text: 'notes: dump printed thirty thousand x.' };
      main++;
      return main === 1 ? { text: 'dumping', toolCalls: [{ name: 'dump', args: {} }] } : { text: 'done' };
    });
    later(() => server.close());
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const window = 12_000;
    const contract = TaskContract.workspace('dump once', dir).withContext({ window });
    const result = await runWith(contract, provider, trace, Policy.default(), undefined, { tools: [huge] });
    expect(result.outcome.kind, JSON.stringify(result.outcome)).toBe('finished');
    const fold = server.calls.find(isFold) as ScriptedCall;
    // The fold's request, as the vendor counts it, fits the window; the dump in it is cut and says so.
    expect(Math.ceil(fold.raw.length / 4)).toBeLessThan(window);
    expect(fold.raw).toMatch(/more characters, not shown/);
    // The stored result is whole: only the fold's own request was cut.
    const [dumped] = trace.steps(result.runId)[0]?.observations ?? [];
    expect(dumped?.content).toHaveLength(30_000);
  });

  it('sizes the window from the catalogue, the reference table or an assumption, and says which', async () => {
    const dir = workspace();
    const trace = await store();
    const server = await reader(0, { models: [{ id: 'vendor/scripted', contextLength: 50_000 }] });
    const run = async (provider: Parameters<typeof runWith>[1], contract = TaskContract.workspace('answer', dir)) => {
      const result = await runWith(contract, provider, trace, Policy.default());
      expect(result.outcome.kind, JSON.stringify(result.outcome)).toBe('finished');
      return trace.events(result.runId).find((event) => event.type === 'context-window');
    };
    // A compatible endpoint's catalogue, on the host it already dials; an id ending in /model matches.
    const compatible = Compatible.create({ baseUrl: `${server.url}/v1`, model: 'scripted', auth: 'none' });
    expect(await run(compatible)).toMatchObject({ tokens: 50_000, source: 'catalogue', model: 'scripted' });
    // A stated window: no catalogue is read at all.
    expect(server.modelListings).toBe(1);
    expect(await run(compatible, TaskContract.workspace('answer', dir).withContext({ window: 20_000 }))).toMatchObject({
      tokens: 20_000,
      source: 'stated',
    });
    expect(server.modelListings).toBe(1);
    // OpenAI's models by the reference table when asked; otherwise assumed, as a remote endpoint.
    const gpt = OpenAI.create({ model: 'gpt-4.1-mini', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    expect(
      await run(gpt, TaskContract.workspace('answer', dir).withContext({ referenceCatalogue: true })),
    ).toMatchObject({ tokens: 1_047_576, source: 'reference' });
    expect(await run(gpt)).toMatchObject({ tokens: 128_000, source: 'assumed-remote' });
    // OpenAI's endpoint is never asked for its catalogue.
    expect(server.modelListings).toBe(1);
  });

  it('refuses a run whose catalogue host the policy denies, before any model call', async () => {
    const dir = workspace();
    const trace = await store();
    const server = await reader(0);
    const provider = OpenRouter.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const policy = Policy.default().layer('ops').denyNet('127.0.0.1');
    const result = await runWith(TaskContract.workspace('answer', dir), provider, trace, policy);
    expect(result.outcome).toMatchObject({
      kind: 'failed',
      reason: expect.stringMatching(
        /catalogue is on 127\.0\.0\.1, which the policy denies \(deny-net 127\.0\.0\.1, layer ops\)/,
      ),
    });
    expect(server.modelListings).toBe(0);
    expect(server.calls).toEqual([]);
  });

  it('refuses bad context options, and a window that cannot hold the system block, before the first call', async () => {
    const dir = workspace();
    const contract = TaskContract.workspace('answer', dir);
    expect(() => contract.withContext({ share: 0 })).toThrow(/share is the part of the model's window .* got 0/);
    expect(() => contract.withContext({ share: 1.5 })).toThrow(/above 0 and at most 1/);
    expect(() => contract.withContext({ window: 100.5 })).toThrow(/whole number of at least 1024/);
    expect(() => contract.withContext({ windw: 1 } as never)).toThrow(/there is no option "windw"/);
    const trace = await store();
    const server = await reader(3);
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const result = await runWith(contract.withContext({ window: 1024, share: 0.5 }), provider, trace, Policy.default());
    expect(result.outcome).toMatchObject({
      kind: 'failed',
      reason: expect.stringMatching(/window of 1024 tokens \(stated\), at a share of 0\.5, holds 512 tokens a request/),
    });
    expect(server.calls).toEqual([]);
  });
});
