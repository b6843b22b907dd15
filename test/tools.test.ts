/**
 * The embedder's own tools: declared with a zod schema on this thread, called by agents on
 * worker threads over the host channel, governed by the policy, journaled when they act,
 * and given back on resume.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  answerQuestion,
  CallbackApprover,
  HostTool,
  OpenAI,
  Policy,
  Store,
  Supervisor,
  TaskContract,
  Tool,
  type ToolCallContext,
  tool,
} from '../dist/index.js';
import { assistantTurns, ScriptedModelServer } from '../dist/testing/index.js';
import { Driver, tempStorePath } from './support/processes.js';
import { later, tempWorkspace } from './support/workspace.js';

const forecast = (calls: { city: string; days: number; context: ToolCallContext }[]) =>
  tool({
    name: 'forecast',
    description: 'The weather forecast for a city, a number of days ahead.',
    parameters: z.object({
      city: z.string().min(1).describe('The city'),
      days: z.number().int().min(1).max(7),
    }),
    effect: 'reads',
    execute: ({ city, days }, context) => {
      calls.push({ city, days, context });
      return { city, days, sky: 'clear' };
    },
  });

const broken = tool({
  name: 'broken',
  description: 'Always fails.',
  parameters: { type: 'object', properties: {}, additionalProperties: false },
  execute: () => {
    throw new Error('the backend is down');
  },
});

/** A model that calls the given tools in its first turn, then answers. */
async function model(first: { name: string; args: Record<string, unknown> }[]) {
  const server = await ScriptedModelServer.start((call) =>
    assistantTurns(call) === 0 ? { text: 'calling', toolCalls: first } : { text: 'all done' },
  );
  later(() => server.close());
  const provider = OpenAI.create({
    model: 'scripted',
    baseUrl: `${server.url}/v1`,
    apiKey: 'k',
    retry: { baseDelayMs: 5 },
  });
  return { server, provider };
}

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

async function supervisorOn(options: Parameters<typeof Supervisor.start>[1] = {}) {
  const store = await Store.open(tempStorePath());
  const supervisor = await Supervisor.start(store, options);
  cleanup.push(async () => {
    await supervisor.close();
    store.close();
  });
  return { store, supervisor };
}

describe("the embedder's tools", () => {
  it('are offered on the wire as JSON Schema, byte-identical run to run; bad arguments and throws are observations', async () => {
    const calls: { city: string; days: number; context: ToolCallContext }[] = [];
    const { store, supervisor } = await supervisorOn({ tools: [forecast(calls)] });
    const wire: string[] = [];
    const roots: string[] = [];
    for (let run = 0; run < 2; run++) {
      const { server, provider } = await model([
        { name: 'forecast', args: { city: 'Oslo', days: 2 } },
        { name: 'forecast', args: { city: 'Oslo', days: 'two' } },
        { name: 'broken', args: {} },
      ]);
      const result = await supervisor.run({ task: 'plan a trip', provider, tools: [broken] }).result;
      expect(result.status).toBe('finished');
      roots.push(result.rootId);
      const body = server.calls[0]?.body as { tools: { function: { name: string; parameters: unknown } }[] };
      wire.push(JSON.stringify(body.tools));
      const offered = body.tools.find((item) => item.function.name === 'forecast');
      expect(offered?.function.parameters).toEqual({
        type: 'object',
        properties: {
          city: { type: 'string', minLength: 1, description: 'The city' },
          days: { type: 'integer', minimum: 1, maximum: 7 },
        },
        required: ['city', 'days'],
        additionalProperties: false,
      });
      const observations = store.steps(result.rootId)[0]?.observations ?? [];
      expect(observations.map((o) => [o.name, o.isError])).toEqual([
        ['forecast', false],
        ['forecast', true],
        ['broken', true],
      ]);
      expect(JSON.parse(observations[0]?.content ?? '')).toEqual({ city: 'Oslo', days: 2, sky: 'clear' });
      expect(observations[1]?.content).toMatch(/^the arguments to forecast are not valid: days: /);
      expect(observations[2]?.content).toBe('broken failed: the backend is down');
    }
    expect(wire[0]).toBe(wire[1]);
    // The bad call never reached the tool; the good ones did, told who called.
    expect(calls.map((call) => [call.city, call.days])).toEqual([
      ['Oslo', 2],
      ['Oslo', 2],
    ]);
    // Each call is told who made it, and the id the trace keeps for it.
    const first = roots[0] as string;
    expect(calls[0]?.context).toMatchObject({
      address: 'root',
      rootId: first,
      runId: first,
      callId: store.steps(first)[0]?.observations[0]?.callId,
    });
  });

  it('are governed by the policy: ask reaches the approver, deny is refused naming its rule and layer', async () => {
    const calls: { city: string; days: number; context: ToolCallContext }[] = [];
    const { store, supervisor } = await supervisorOn({ tools: [forecast(calls), broken] });
    const asked: string[] = [];
    const approver = new CallbackApprover((request) => {
      asked.push(`${request.act.kind} ${request.subject} (${request.rule}, ${request.layer})`);
      return 'approve';
    });
    const policy = Policy.empty().layer('tools').askTool('forecast').denyTool('brok*');
    const { provider } = await model([
      { name: 'forecast', args: { city: 'Bergen', days: 1 } },
      { name: 'broken', args: {} },
    ]);
    const result = await supervisor.run({ task: 'check', provider, policy, approver }).result;
    expect(result.status).toBe('finished');
    expect(asked).toEqual(['tool forecast (ask-tool forecast, tools)']);
    expect(calls.map((call) => call.city)).toEqual(['Bergen']);
    const events = store.events(result.rootId);
    expect(events.filter((event) => event.type === 'refusal')).toMatchObject([
      { tool: 'broken', rule: 'deny-tool brok*', layer: 'tools' },
    ]);
    expect(events.filter((event) => event.type === 'policy-decision')).toMatchObject([
      { act: 'tool', subject: 'forecast', effect: 'ask', answer: 'approve' },
      { act: 'tool', subject: 'broken', effect: 'deny', rule: 'deny-tool brok*' },
    ]);
  });

  it('are refused at the start, naming them, when two share a name or one takes a built-in name', async () => {
    expect(() => tool({ name: 'read_file', description: 'x', parameters: z.object({}), execute: () => 'x' })).toThrow(
      /read_file is the name of a built-in tool/,
    );
    const { supervisor } = await supervisorOn({ tools: [broken] });
    const { provider } = await model([]);
    expect(() => supervisor.run({ task: 't', provider, tools: [broken] })).toThrow(/the tool broken is given twice/);
  });

  it('may take none of the names every built-in family declares, each refused by name', async () => {
    const { BUILT_IN_TOOL_NAMES } = await import('../dist/runtime/tools/names.js');
    const { registryFor } = await import('../dist/runtime/tools/registry.js');
    const { workspaceTools } = await import('../dist/runtime/tools/families/workspace.js');
    const everything = {
      planGate: true,
      skills: true,
      tiers: true,
      memory: true,
      git: true,
      lsp: true,
      browser: true,
      codeact: ['javascript', 'python'] as const,
      documents: ['barcode', 'docx', 'pdf', 'pptx', 'xlsx'] as const,
      workspaceTools,
    };
    const declared = new Set(
      (['workspace', 'file'] as const).flatMap((mode) =>
        registryFor({ mode, ...everything })
          .definitions()
          .map((definition) => definition.name),
      ),
    );
    expect([...BUILT_IN_TOOL_NAMES].sort()).toEqual([...declared].sort());
    for (const name of declared) {
      expect(() => tool({ name, description: 'x', parameters: z.object({}), execute: () => 'x' })).toThrow(
        `tool(): ${name} is the name of a built-in tool`,
      );
    }
  });

  it('are HostTools, and the class keeps its first name, Tool, as a deprecated alias', () => {
    expect(broken).toBeInstanceOf(HostTool);
    expect(Tool).toBe(HostTool);
    const named: Tool = new Tool({ name: 'old_name', description: 'x', parameters: z.object({}), execute: () => 'x' });
    expect(named).toBeInstanceOf(HostTool);
  });
});

describe("the embedder's tools against a hostile model", () => {
  it('bounds what a call with thousands of bad arguments sends back, and refuses a schema keyword nothing checks', async () => {
    const tags = tool({
      name: 'tag',
      description: 'Tags an item.',
      parameters: z.object({ tags: z.array(z.string()) }),
      effect: 'reads',
      execute: () => 'tagged',
    });
    const { store, supervisor } = await supervisorOn({ tools: [tags] });
    const { provider } = await model([{ name: 'tag', args: { tags: Array.from({ length: 5000 }, (_, i) => i) } }]);
    const result = await supervisor.run({ task: 't', provider }).result;
    const observation = store.steps(result.rootId)[0]?.observations[0];
    expect(observation?.isError).toBe(true);
    expect(observation?.content).toContain('tags.0: ');
    expect(observation?.content).toContain('; and 4990 more.');
    expect(observation?.content.length).toBeLessThan(2_000);
    expect(() =>
      tool({
        name: 'odd',
        description: 'x',
        parameters: { type: 'object', properties: { a: { type: 'string', frobnicate: true } } },
        execute: () => 'x',
      }),
    ).toThrow(/tool\(odd\): parameters is not a usable JSON Schema \(2020-12\): .*frobnicate/);
  });

  it('checks many JSON Schema tools side by side: two with one $id, and the same schema twice, each by its own', async () => {
    const context = { rootId: 'r', runId: 'r', address: 'root', callId: 'c', signal: new AbortController().signal };
    const schema = (type: string) => ({
      $id: 'https://example.com/args',
      type: 'object',
      properties: { v: { type } },
      required: ['v'],
    });
    const numbers = tool({ name: 'numbers', description: 'x', parameters: schema('number'), execute: () => 'n' });
    const words = tool({ name: 'words', description: 'x', parameters: schema('string'), execute: () => 'w' });
    expect(await numbers.call({ v: 1 }, context)).toEqual({ content: 'n', isError: false });
    expect((await numbers.call({ v: 'one' }, context)).isError).toBe(true);
    expect(await words.call({ v: 'one' }, context)).toEqual({ content: 'w', isError: false });
    expect((await words.call({ v: 1 }, context)).isError).toBe(true);
    const plain = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] };
    const first = tool({ name: 'first', description: 'x', parameters: plain, execute: () => 'a' });
    const second = tool({ name: 'second', description: 'x', parameters: plain, execute: () => 'b' });
    expect(await first.call({ n: 2 }, context)).toEqual({ content: 'a', isError: false });
    expect((await second.call({ n: 'two' }, context)).isError).toBe(true);
  });

  it('asks a person only about a call whose arguments are good, and shows them the arguments', async () => {
    const calls: { city: string; days: number; context: ToolCallContext }[] = [];
    const { store, supervisor } = await supervisorOn({ tools: [forecast(calls)] });
    const asked: unknown[] = [];
    const approver = new CallbackApprover((request) => {
      asked.push(request.act);
      return 'approve';
    });
    const { provider } = await model([
      { name: 'forecast', args: { city: '', days: 9 } },
      { name: 'forecast', args: { city: 'Tromsø', days: 3 } },
    ]);
    const policy = Policy.empty().layer('tools').askTool('*');
    const result = await supervisor.run({ task: 't', provider, policy, approver }).result;
    expect(asked).toEqual([{ kind: 'tool', name: 'forecast', args: '{"city":"Tromsø","days":3}' }]);
    const observations = store.steps(result.rootId)[0]?.observations ?? [];
    expect(observations[0]?.content).toMatch(/^the arguments to forecast are not valid: city: .*; days: /);
    expect(calls.map((call) => call.city)).toEqual(['Tromsø']);
  });

  it('lets a cancel end a run whose tool never returns, and fires the tool’s signal', async () => {
    const aborted: string[] = [];
    let started!: () => void;
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const hang = tool({
      name: 'hang',
      description: 'Never returns.',
      parameters: z.object({}),
      execute: (_args, context) =>
        new Promise(() => {
          context.signal.addEventListener('abort', () => aborted.push(context.callId));
          started();
        }),
    });
    const { store, supervisor } = await supervisorOn({ tools: [hang] });
    const { provider } = await model([{ name: 'hang', args: {} }]);
    const handle = supervisor.run({ task: 't', provider });
    await running;
    await handle.cancel();
    const result = await handle.result;
    expect(result.status).toBe('cancelled');
    expect(aborted).toHaveLength(1);
    expect(store.run(result.rootId)?.status).toBe('cancelled');
  });

  it('refuses an acts tool while a plan gate is planning, and a resume that changes a tool’s effect', async () => {
    const log = join(tempWorkspace(), 'deploys.log');
    const root = tempWorkspace({ 'a.txt': 'a\n' });
    const deploy = (effect: 'acts' | 'reads') =>
      tool({
        name: 'deploy',
        description: 'Deploys.',
        parameters: z.object({}),
        effect,
        execute: () => {
          writeFileSync(log, 'deployed\n');
          return 'deployed';
        },
      });
    const { store, supervisor } = await supervisorOn();
    const { provider } = await model([{ name: 'deploy', args: {} }]);
    const contract = TaskContract.workspace('deploy it', root).withPlanGate().withRetries(0);
    const result = await supervisor.run({ contract, provider, tools: [deploy('acts')] }).result;
    const events = store.events(result.rootId);
    expect(events.filter((event) => event.type === 'refusal')).toMatchObject([{ tool: 'deploy', rule: 'plan-gate' }]);
    expect(existsSync(log)).toBe(false);
    await expect(supervisor.resume(result.rootId, { tools: [deploy('reads')] })).rejects.toThrow(
      /deploy was started as an 'acts' tool, and is given back with another effect/,
    );
  });
});

describe('a reads tool', () => {
  it('starts while the completion is still streaming, and its result is the observation once', async () => {
    const started: number[] = [];
    const lookup = tool({
      name: 'lookup',
      description: 'Looks something up.',
      parameters: z.object({ key: z.string() }),
      effect: 'reads',
      execute: ({ key }) => {
        started.push(Date.now());
        return `value of ${key}`;
      },
    });
    const { store, supervisor } = await supervisorOn({ tools: [lookup] });
    // The second call's arguments stream slowly, a fragment per 20 ms, after the first call has ended.
    const long = 'x'.repeat(400);
    let firstAnswerEnded = Number.POSITIVE_INFINITY;
    const server: ScriptedModelServer = await ScriptedModelServer.start(
      (call) => {
        if (assistantTurns(call) > 0) return { text: 'done' };
        setImmediate(() =>
          server.responseEnd(call.index).then(() => {
            firstAnswerEnded = Date.now();
          }),
        );
        return {
          toolCalls: [
            { name: 'lookup', args: { key: 'a' } },
            { name: 'lookup', args: { key: long } },
          ],
        };
      },
      { chunkDelayMs: 20 },
    );
    later(() => server.close());
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const result = await supervisor.run({ task: 't', provider }).result;
    expect(result.status).toBe('finished');
    const observations = store.steps(result.rootId)[0]?.observations ?? [];
    expect(observations.map((o) => o.content)).toEqual(['value of a', `value of ${long}`]);
    // Called once per call; the first while the answer naming it was still streaming.
    expect(started).toHaveLength(2);
    expect(started[0]).toBeLessThan(firstAnswerEnded);
    expect(started[1]).toBeGreaterThanOrEqual(firstAnswerEnded);
  });
});

describe('an acts tool interrupted by SIGKILL', () => {
  it('pauses the resumed run on its intent; skip does not call it again; a resume without the tools is refused', {
    timeout: 120_000,
  }, async () => {
    const path = tempStorePath();
    const log = join(tempWorkspace(), 'deploys.log');
    const base = { store: path, wireScript: 'tools#deployScript', tools: 'tools#deployTools' };
    const first = new Driver({ ...base, mode: 'run', toolOptions: { log, holdMs: 60_000 } });
    // Wait until the tool is running, then kill the whole process.
    for (let i = 0; i < 600; i++) {
      let text = '';
      try {
        text = readFileSync(log, 'utf8');
      } catch {}
      if (text.includes('deploy prod')) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    first.child.kill('SIGKILL');
    await first.exited;
    const rootId = first.rootId as string;
    expect(readFileSync(log, 'utf8')).toBe('deploy prod\n');

    // Without the tools: refused, naming them, and nothing was taken.
    const bare = new Driver({ store: path, wireScript: 'tools#deployScript', mode: 'resume', rootId });
    await bare.exited;
    expect(bare.error).toMatchObject({ code: 'TOOLS_MISSING', details: { missing: ['deploy'] } });
    expect(bare.error?.message).toContain('deploy');

    // With them: the run pauses on the interrupted call instead of calling it again.
    const second = new Driver({ ...base, mode: 'resume', rootId, toolOptions: { log } });
    await second.exited;
    expect(second.result?.status, second.stderr).toBe('paused');
    const store = await Store.open(path);
    later(() => store.close());
    const open = store.questions({ status: 'open' });
    expect(open).toMatchObject([{ kind: 'intent', payload: { kind: 'tool', detail: 'deploy {"target":"prod"}' } }]);
    answerQuestion(store, open[0]?.questionId as string, 'skip', { by: 'operator' });

    const third = new Driver({ ...base, mode: 'resume', rootId, toolOptions: { log } });
    await third.exited;
    expect(third.result?.status, third.stderr).toBe('finished');
    expect(readFileSync(log, 'utf8')).toBe('deploy prod\n');
    const observation = store.steps(rootId)[0]?.observations[0];
    expect(observation).toMatchObject({ name: 'deploy', isError: true });
    expect(observation?.content).toContain('skip');
  });
});
