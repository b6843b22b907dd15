/**
 * Tool tiers over the scripted model server: a contract with `withToolTiers()` offers the
 * core tools from the first request, names the other families (an MCP server's tools,
 * background commands, skills) in one line of the system block, and offers a family from
 * the request after `expand_tools(family)`. A tool of a family not yet offered is refused
 * (rule `tool-tier`); a masked or denied tool stays refused before and after. Which
 * families are open is kept in the trace, so a resumed run offers them again.
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { answerQuestion, OpenAI, Policy, Supervisor, TaskContract, tool } from '../dist/index.js';
import { McpServers } from '../dist/mcp/index.js';
import { assistantTurns, ScriptedModelServer } from '../dist/testing/index.js';
import { later, supervisorOnStore, tempWorkspace } from './support/workspace.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/mcp-server.mjs', import.meta.url));

type Body = { messages: { role: string; content?: unknown }[]; tools?: { function: { name: string } }[] };

/** A model that makes the given calls, one step each, then answers; the request bodies kept. */
async function model(calls: { name: string; args: Record<string, unknown> }[]) {
  const bodies: Body[] = [];
  const server = await ScriptedModelServer.start((call) => {
    bodies.push(call.body as Body);
    const next = calls[assistantTurns(call)];
    return next ? { text: 'working', toolCalls: [next] } : { text: 'done' };
  });
  later(() => server.close());
  return { bodies, provider: OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' }) };
}

/** An embedder's tool in a family of its own, \`talk\`. */
const echo = tool({
  name: 'echo',
  description: 'Says it back.',
  parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
  effect: 'reads',
  family: 'talk',
  execute: ({ text }) => `echo: ${String(text)}`,
});

const names = (body: Body | undefined) => (body?.tools ?? []).map((item) => item.function.name);
const system = (body: Body | undefined) => String(body?.messages.find((item) => item.role === 'system')?.content);

describe('tool tiers', () => {
  it('offers the core first, an MCP server after expand_tools("mcp"), and keeps masked and denied tools refused', async () => {
    const workspace = tempWorkspace({ 'a.txt': 'alpha\n' });
    const mcp = await McpServers.connect([{ name: 'notes', command: ['node', FIXTURE], cwd: workspace }], {
      connectTimeoutMs: 10_000,
    });
    later(() => mcp.close());
    const { store, supervisor } = await supervisorOnStore();
    const { bodies, provider } = await model([
      { name: 'read_file', args: { path: 'a.txt' } },
      { name: 'notes__note_read', args: { path: 'a.txt' } },
      { name: 'notes__note_write', args: { path: 'b.txt', text: 'planted' } },
      { name: 'shell_start', args: { command: 'echo hi' } },
      { name: 'expand_tools', args: { family: 'mcp' } },
      { name: 'notes__note_read', args: { path: 'a.txt' } },
      { name: 'notes__note_write', args: { path: 'b.txt', text: 'planted' } },
      { name: 'expand_tools', args: { family: 'jobs' } },
      { name: 'shell_start', args: { command: 'echo hi' } },
      { name: 'expand_tools', args: { family: 'nope' } },
    ]);
    const policy = Policy.default().layer('mcp').allowTool('notes__note_read').denyTool('notes__note_write');
    const result = await supervisor.run({
      contract: TaskContract.workspace('use the notes', workspace).withToolTiers().withToolMask(['shell_start']),
      policy,
      provider,
      tools: mcp.tools(),
    }).result;
    expect(result.status).toBe('finished');

    // The first request: the core and expand_tools, nothing of a family kept back.
    const first = names(bodies[0]);
    expect(first).toContain('read_file');
    expect(first).toContain('exec');
    expect(first).toContain('spawn_agent');
    expect(first).toContain('expand_tools');
    expect(first.filter((name) => name.startsWith('notes__') || name.startsWith('shell_'))).toEqual([]);
    // The array is the same bytes while the tier is the same, and the system block every request.
    expect(JSON.stringify(bodies[1]?.tools)).toBe(JSON.stringify(bodies[0]?.tools));
    expect(JSON.stringify(bodies[4]?.tools)).toBe(JSON.stringify(bodies[0]?.tools));
    expect(new Set(bodies.map(system)).size).toBe(1);
    expect(system(bodies[0])).toContain('mcp (');
    expect(system(bodies[0])).toContain('from the server notes');
    expect(system(bodies[0])).toContain('jobs (3 tools, background commands: shell_kill, shell_poll, shell_start)');
    // After expand_tools('mcp'): the server's tools from the next request, and still not the jobs.
    const after = names(bodies[5]);
    expect(after).toContain('notes__note_read');
    expect(after).toContain('notes__note_write');
    expect(after).not.toContain('shell_start');
    expect(after.slice().sort()).toEqual(after);

    const observations = store.steps(result.rootId).flatMap((step) => step.observations);
    expect(observations.map((item) => [item.name, item.isError])).toEqual([
      ['read_file', false],
      ['notes__note_read', true],
      ['notes__note_write', true],
      ['shell_start', true],
      ['expand_tools', false],
      ['notes__note_read', false],
      ['notes__note_write', true],
      ['expand_tools', false],
      ['shell_start', true],
      ['expand_tools', true],
    ]);
    expect(observations[1]?.content).toContain('call expand_tools with family "mcp" first');
    expect(observations[5]?.content).toBe('alpha\n');
    expect(observations[9]?.content).toContain('the families are: jobs, mcp');
    expect(names(bodies[8])).toContain('shell_start');
    const refusals = store
      .events(result.rootId)
      .flatMap((event) => (event.type === 'refusal' ? [`${event.tool}: ${event.rule} (${event.layer})`] : []));
    expect(refusals).toEqual([
      'notes__note_read: tool-tier (runtime)',
      'notes__note_write: tool-tier (runtime)',
      'shell_start: tool-mask (runtime)',
      'notes__note_write: deny-tool notes__note_write (mcp)',
      'shell_start: tool-mask (runtime)',
    ]);
    expect(
      store.events(result.rootId).flatMap((event) => (event.type === 'tools-expanded' ? [event.family] : [])),
    ).toEqual(['mcp', 'jobs']);
  });

  it('offers every tool from the first request when the contract has no tiers', async () => {
    const workspace = tempWorkspace({ 'a.txt': 'alpha\n' });
    const { supervisor } = await supervisorOnStore();
    const { bodies, provider } = await model([]);
    const result = await supervisor.run({
      contract: TaskContract.workspace('look', workspace),
      provider,
      tools: [echo],
    }).result;
    expect(result.status).toBe('finished');
    const first = names(bodies[0]);
    expect(first).toContain('shell_start');
    expect(first).toContain('echo');
    expect(first).not.toContain('expand_tools');
    expect(system(bodies[0])).not.toContain('kept back');
  });

  it("keeps an embedder's family back, and a resumed run offers what the trace says was opened", async () => {
    const workspace = tempWorkspace({ 'a.txt': 'alpha\n' });
    const { store, supervisor } = await supervisorOnStore();
    const { bodies, provider } = await model([
      { name: 'expand_tools', args: { family: 'talk' } },
      { name: 'ask_operator', args: { question: 'go on?' } },
      { name: 'echo', args: { text: 'hi' } },
    ]);
    const contract = TaskContract.workspace('talk', workspace).withToolTiers();
    const paused = await supervisor.run({ contract, provider, tools: [echo] }).result;
    expect(paused.status).toBe('paused');
    expect(names(bodies[0])).not.toContain('echo');
    expect(system(bodies[0])).toContain('talk (1 tool: echo)');
    expect(names(bodies[1])).toContain('echo');
    const [question] = store.questions({ status: 'open' });
    answerQuestion(store, question?.questionId as string, 'yes');
    await supervisor.close();

    // A new supervisor: the family opened in a committed step is offered again.
    const again = await Supervisor.start(store, { tools: [echo] });
    later(() => again.close());
    const seen = bodies.length;
    const result = await (await again.resume(paused.rootId, { provider })).result;
    expect(result.status).toBe('finished');
    expect(names(bodies[seen])).toContain('echo');
    expect(names(bodies[seen])).not.toContain('shell_start');
    const last = store.steps(result.rootId).at(-2)?.observations[0];
    expect(last).toMatchObject({ name: 'echo', isError: false, content: 'echo: hi' });
  });

  it("a paused step's own expand_tools opens the family from the next step on its replay too", async () => {
    const workspace = tempWorkspace({ 'a.txt': 'alpha\n' });
    const { store, supervisor } = await supervisorOnStore();
    const bodies: Body[] = [];
    const server = await ScriptedModelServer.start((call) => {
      bodies.push(call.body as Body);
      const turn = assistantTurns(call);
      if (turn === 0) {
        // One completion: open the family, ask a person (the step pauses), and call the tool at once.
        return {
          text: 'all at once',
          toolCalls: [
            { name: 'expand_tools', args: { family: 'talk' } },
            { name: 'ask_operator', args: { question: 'go on?' } },
            { name: 'echo', args: { text: 'early' } },
          ],
        };
      }
      return turn === 1 ? { text: 'now', toolCalls: [{ name: 'echo', args: { text: 'late' } }] } : { text: 'done' };
    });
    later(() => server.close());
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const contract = TaskContract.workspace('talk', workspace).withToolTiers();
    const paused = await supervisor.run({ contract, provider, tools: [echo] }).result;
    expect(paused.status).toBe('paused');
    const [question] = store.questions({ status: 'open' });
    answerQuestion(store, question?.questionId as string, 'yes');
    const result = await (await supervisor.resume(paused.rootId, { provider, tools: [echo] })).result;
    expect(result.status).toBe('finished');
    const observations = store.steps(result.rootId).flatMap((step) => step.observations);
    expect(observations.map((item) => [item.name, item.isError])).toEqual([
      ['expand_tools', false],
      ['ask_operator', false],
      ['echo', true],
      ['echo', false],
    ]);
    expect(observations[2]?.content).toContain('which this step was not offered');
    expect(names(bodies.at(-2))).toContain('echo');
  });

  it('refuses a family name that is not a name', () => {
    expect(() =>
      tool({
        name: 'echo',
        description: 'Says it back.',
        parameters: { type: 'object' },
        family: 'core',
        execute: () => '',
      }),
    ).toThrow(/family must be 1 to 32 letters.*not "core"/);
  });
});
