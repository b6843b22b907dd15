/**
 * Agents without a workspace: a plain run (supervisor.run, runWith with a task) gives a
 * typed, checked, re-prompted answer with `outputSchema`, and a session opened with no
 * repository holds a conversation. Neither sends the workspace tools or their
 * instructions: the first request of a typed plain run is within 10% of a plain run's.
 * Real worker threads, real SQLite, the scripted model server over loopback HTTP.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Policy, runWith, Session, Store, Supervisor, TaskContract, tool } from '../dist/index.js';
import { assistantTurns, lastUserText, type ScriptedCall, ScriptedModelServer } from '../dist/testing/index.js';
import { type Harness, harness } from './support/harness.js';
import { tempStorePath } from './support/processes.js';
import { openAiAt } from './support/wire.js';
import { tempWorkspace } from './support/workspace.js';

let h: Harness | undefined;
let server: ScriptedModelServer | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
  await server?.close();
  server = undefined;
});

const openai = (url: string) => openAiAt(url);

const Review = z.object({ summary: z.string(), risk: z.enum(['low', 'high']) });

/** The tools a request offered, by name. */
function toolNames(call: ScriptedCall | undefined): string[] {
  const body = call?.body as { tools?: { function: { name: string } }[] } | undefined;
  return (body?.tools ?? []).map((item) => item.function.name).sort();
}

const WORKSPACE_TOOLS = ['read_file', 'write_file', 'edit_file', 'patch_file', 'grep', 'find', 'exec'];

describe('a typed answer from a plain run', () => {
  it('checks the answer, re-prompts a wrong one, and types output; nothing of a workspace is sent', async () => {
    // The first answer is not JSON; told so, the model answers in shape.
    server = await ScriptedModelServer.start((call) =>
      assistantTurns(call) === 0 ? { text: 'It looks fine to me.' } : { text: '{"summary":"one change","risk":"low"}' },
    );
    h = await harness();
    const handle = h.supervisor.run({
      task: 'Review this change: ...',
      provider: openai(server.url),
      outputSchema: Review,
    });
    const result = await handle.result;
    expect(result).toMatchObject({ status: 'finished', output: { summary: 'one change', risk: 'low' } });
    // Typed by the zod schema, with no cast.
    const risk: 'low' | 'high' | undefined = result.output?.risk;
    expect(risk).toBe('low');
    const events = h.store.events(handle.rootId);
    expect(events.filter((event) => event.type === 'schema-invalid')).toMatchObject([{ reprompted: true }]);
    expect(lastUserText(server.calls[1] as ScriptedCall)).toContain('does not satisfy the required output schema');

    const first = server.calls[0] as ScriptedCall;
    const body = first.body as {
      response_format?: { json_schema?: { schema?: unknown } };
      messages: { content: string }[];
    };
    expect(body.response_format?.json_schema?.schema).toMatchObject({ properties: { summary: {}, risk: {} } });
    expect(toolNames(first).filter((name) => WORKSPACE_TOOLS.includes(name))).toEqual([]);
    const system = body.messages[0]?.content as string;
    expect(system).toContain('a single JSON value matching the schema');
    expect(system).not.toContain('coding agent');
  });

  it("keeps the first request within 10% of a plain run's, where a workspace run's is far larger", async () => {
    server = await ScriptedModelServer.start(() => ({ text: '{"summary":"s","risk":"high"}' }));
    h = await harness();
    const provider = openai(server.url);
    const task = 'Review this change: the retry delay doubles now.';
    await h.supervisor.run({ task, provider }).result;
    await h.supervisor.run({ task, provider, outputSchema: Review }).result;
    const root = tempWorkspace({ 'a.txt': 'a\n' });
    await h.supervisor.run({ contract: TaskContract.workspace(task, root).withOutputSchema(Review), provider }).result;
    const [plain, typed, workspace] = server.calls.map((call) => call.raw.length) as [number, number, number];
    expect(typed / plain).toBeLessThanOrEqual(1.1);
    expect(typed).toBeGreaterThan(plain);
    expect(workspace / plain).toBeGreaterThan(1.5);
    expect(toolNames(server.calls[1])).toEqual(toolNames(server.calls[0]));
  });

  it('runWith(task) gives the same, and an answer never in shape ends schema-unsatisfied', async () => {
    let shaped = true;
    server = await ScriptedModelServer.start(() => ({
      text: shaped ? '{"summary":"ok","risk":"high"}' : 'no JSON here',
    }));
    const store = await Store.open(tempStorePath());
    try {
      const result = await runWith('Review it.', openai(server.url), store, { outputSchema: Review });
      expect(result.outcome.kind).toBe('finished');
      const summary: string | undefined = result.output?.summary;
      expect(summary).toBe('ok');
      shaped = false;
      const unshaped = await runWith('Review it.', openai(server.url), store, { outputSchema: Review });
      expect(unshaped.outcome).toMatchObject({ kind: 'schema-unsatisfied' });
      expect(unshaped.output).toBeNull();
      // Three answers: the first and two re-prompts.
      expect(server.calls.length).toBe(1 + 3);
      // A plain run takes its policy in its options, and a contract says its own shape.
      await expect(runWith('x', openai(server.url), store, Policy.default() as never)).rejects.toThrow(
        /a plain run takes its policy in options/,
      );
      const supervisor = await Supervisor.start(store);
      try {
        expect(() =>
          supervisor.run({
            contract: TaskContract.workspace('x', tempWorkspace()),
            provider: openai(server?.url as string),
            outputSchema: Review,
          }),
        ).toThrow(/outputSchema is for a run without a contract/);
      } finally {
        await supervisor.close();
      }
    } finally {
      // Closing the store ends the shared supervisor runWith started on it.
      store.close();
    }
  });
});

describe('a conversation with no repository', () => {
  it('holds turns with no workspace: history, the embedder tools, a typed turn, resumed in another process', async () => {
    server = await ScriptedModelServer.start((call) => {
      const asked = lastUserText(call);
      if (asked.includes('plan for five')) {
        return assistantTurns(call) === 0
          ? { toolCalls: [{ name: 'lookup_plan', args: { seats: 5 } }] }
          : { text: 'The Team plan suits five.' };
      }
      if (asked.includes('as JSON')) return { text: '{"summary":"Team plan","risk":"low"}' };
      return { text: 'unexpected' };
    });
    h = await harness();
    const lookupPlan = tool({
      name: 'lookup_plan',
      description: 'The plan for a number of seats.',
      parameters: z.object({ seats: z.number() }),
      effect: 'reads',
      execute: ({ seats }) => (seats <= 10 ? 'Team' : 'Business'),
    });
    const chat = await Session.open(h.store, { supervisor: h.supervisor });
    expect(chat.root).toBeNull();
    const provider = openai(server.url);
    const first = await chat.turn('Which plan for five seats? plan for five', { provider, tools: [lookupPlan] });
    expect(first.reply).toBe('The Team plan suits five.');
    const second = await chat.turn('Say it as JSON.', { provider, outputSchema: Review });
    expect(second.output).toEqual({ summary: 'Team plan', risk: 'low' });
    // The second turn's request carried the first turn (its call and result) and no workspace tool.
    const last = server.calls.at(-1) as ScriptedCall;
    expect(last.raw).toContain('Team');
    expect(last.raw).toContain('lookup_plan');
    for (const call of server.calls)
      expect(toolNames(call).filter((name) => WORKSPACE_TOOLS.includes(name))).toEqual([]);
    expect(JSON.stringify(server.calls[0]?.body)).not.toContain('coding agent');
    // Another process (a fresh resume from the store) sees a session with no workspace.
    const again = await Session.resume(h.store, chat.id, { supervisor: h.supervisor });
    expect(again.root).toBeNull();
    expect((await again.history()).filter((entry) => entry.role === 'user').map((entry) => entry.text)).toEqual([
      'Which plan for five seats? plan for five',
      'Say it as JSON.',
    ]);
    await expect(Session.open(h.store, '')).rejects.toThrow(/leave it out for a conversation with no repository/);
  });
});
