/**
 * Skills over the scripted model server: found under the stated roots, one catalogue line
 * each in the system block (sorted, the same bytes every request), opened with read_skill
 * under the run's read policy, and never past the skill's own folder: a link out and a
 * path out are refused alike. A skill file that cannot be read as one is a clear error.
 */
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ErrorCode, OpenAI, Policy, TaskContract, tool } from '../dist/index.js';
import { assistantTurns, ScriptedModelServer } from '../dist/testing/index.js';
import { later, supervisorOnStore, tempWorkspace } from './support/workspace.js';

type Body = { messages: { role: string; content?: unknown }[]; tools?: { function: { name: string } }[] };

/** A skills root: review (with a checklist beside it, and a link out), deploy; and a secret outside. */
function skillsRoot() {
  const outside = tempWorkspace({ 'secret.txt': 'the launch code\n' });
  const root = tempWorkspace({
    'review/SKILL.md': '---\nname: review\ndescription: How to review a change.\n---\nRead checklist.md first.\n',
    'review/checklist.md': '1. Tests pass.\n',
    'deploy/SKILL.md': '---\nname: deploy\ndescription: "How to ship it."\n---\nShip on Tuesdays.\n',
    'notes/README.md': 'not a skill\n',
  });
  symlinkSync(join(outside, 'secret.txt'), join(root, 'review', 'escape.md'));
  return { root, outside };
}

async function model(calls: { name: string; args: Record<string, unknown> }[]) {
  const bodies: Body[] = [];
  const server = await ScriptedModelServer.start((call) => {
    bodies.push(call.body as Body);
    const next = calls[assistantTurns(call)];
    return next ? { text: 'reading', toolCalls: [next] } : { text: 'read them' };
  });
  later(() => server.close());
  return { bodies, provider: OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' }) };
}

async function supervisor() {
  return supervisorOnStore();
}

describe('skills', () => {
  it('lists each skill once in the system block and reads a skill and the file beside it, nothing outside its folder', async () => {
    const { root } = skillsRoot();
    const workspace = tempWorkspace();
    const { store, supervisor: running } = await supervisor();
    const { bodies, provider } = await model([
      { name: 'read_skill', args: { name: 'review' } },
      { name: 'read_skill', args: { name: 'review', path: 'checklist.md' } },
      { name: 'read_skill', args: { name: 'review', path: 'escape.md' } },
      { name: 'read_skill', args: { name: 'review', path: '../deploy/SKILL.md' } },
      { name: 'read_skill', args: { name: 'review', path: join(root, 'deploy', 'SKILL.md') } },
      { name: 'read_skill', args: { name: 'nope' } },
    ]);
    const policy = Policy.default().layer('skills').allowRead(`${root}/**`);
    const result = await running.run({
      contract: TaskContract.workspace('review the change', workspace),
      policy,
      provider,
      skills: [root],
    }).result;
    expect(result.status).toBe('finished');
    const observations = store.steps(result.rootId).flatMap((step) => step.observations);
    expect(observations.map((item) => item.isError)).toEqual([false, false, true, true, true, true]);
    expect(observations[0]?.content).toContain('Read checklist.md first.');
    expect(observations[1]?.content).toBe('1. Tests pass.\n');
    expect(observations[2]?.content).toContain('resolves outside the folder of the skill review');
    expect(observations[3]?.content).toContain('resolves outside the folder of the skill review');
    expect(observations[4]?.content).toContain('is absolute');
    expect(observations[5]?.content).toContain('there is no skill "nope"; the catalogue lists deploy, review');
    expect(JSON.stringify(observations)).not.toContain('launch code');
    // One line a skill, sorted, in the system block of every request, the same bytes each time.
    const systems = bodies.map((body) => String(body.messages.find((m) => m.role === 'system')?.content));
    expect(systems[0]).toContain('- deploy: How to ship it.\n- review: How to review a change.');
    expect(new Set(systems).size).toBe(1);
    expect(bodies[0]?.tools?.map((item) => item.function.name)).toContain('read_skill');
  });

  it("folds a skill's body out of later requests once the run folds, its catalogue line kept in every request", async () => {
    const { root } = skillsRoot();
    const workspace = tempWorkspace({ 'big.txt': `${'a line of the file, forty characters.\n'.repeat(60)}` });
    const { store, supervisor: running } = await supervisor();
    const bodies: Body[] = [];
    let main = 0;
    const server = await ScriptedModelServer.start((call) => {
      bodies.push(call.body as Body);
      if (JSON.stringify((call.body as Body).messages.at(-1)?.content ?? '').includes('Your context is nearly full'))
        return { text: 'notes: the review skill says to read the checklist first.' };
      main++;
      if (main === 1) return { text: 'reading', toolCalls: [{ name: 'read_skill', args: { name: 'review' } }] };
      if (main <= 14) return { text: 'reading', toolCalls: [{ name: 'read_file', args: { path: 'big.txt' } }] };
      return { text: 'done' };
    });
    later(() => server.close());
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const result = await running.run({
      contract: TaskContract.workspace('review the change', workspace).withContext({ window: 12_000 }),
      policy: Policy.default().layer('skills').allowRead(`${root}/**`),
      provider,
      skills: [root],
    }).result;
    expect(result.status).toBe('finished');
    expect(store.events(result.rootId).some((event) => event.type === 'assembled')).toBe(true);
    const body = 'Read checklist.md first.';
    const system = (item: Body) => String(item.messages.find((m) => m.role === 'system')?.content);
    // The body was sent while its step was in the window, and not after the fold took it.
    expect(JSON.stringify(bodies[1]?.messages.slice(1))).toContain(body);
    expect(JSON.stringify(bodies.at(-1)?.messages.slice(1))).not.toContain(body);
    // The catalogue line is in every request's system block, unchanged.
    for (const item of bodies) expect(system(item)).toContain('- review: How to review a change.');
  });

  it("reads a skill under the run's read policy, and offers no read_skill without skills", async () => {
    const { root } = skillsRoot();
    const { store, supervisor: running } = await supervisor();
    const { bodies, provider } = await model([{ name: 'read_skill', args: { name: 'deploy' } }]);
    const policy = Policy.default().layer('skills').denyRead(`${root}/deploy/**`);
    const result = await running.run({
      contract: TaskContract.workspace('ship it', tempWorkspace()),
      policy,
      provider,
      skills: [root],
    }).result;
    const [refused] = store.steps(result.rootId).flatMap((step) => step.observations);
    expect(refused?.isError).toBe(true);
    expect(store.events(result.rootId).filter((event) => event.type === 'refusal')).toMatchObject([
      { tool: 'read_skill', rule: `deny-read ${root}/deploy/**`, layer: 'skills' },
    ]);
    const plain = await model([]);
    await running.run({ contract: TaskContract.workspace('x', tempWorkspace()), provider: plain.provider }).result;
    expect(plain.bodies[0]?.tools?.map((item) => item.function.name)).not.toContain('read_skill');
    expect(bodies.length).toBeGreaterThan(0);
  });

  it('refuses skills it cannot read as skills, naming the file, before anything runs', async () => {
    const { supervisor: running } = await supervisor();
    const { provider } = await model([]);
    const bad = (files: Record<string, string>) => {
      const root = tempWorkspace(files);
      try {
        running.run({ task: 't', provider, skills: [root] });
      } catch (error) {
        return error as { code: string; message: string };
      }
      return null;
    };
    expect(bad({ 'a/SKILL.md': 'no front matter\n' })).toMatchObject({
      code: ErrorCode.InvalidArgument,
      message: expect.stringContaining('SKILL.md has no front matter'),
    });
    expect(bad({ 'a/SKILL.md': '---\nname: Bad Name\ndescription: x\n---\n' })?.message).toContain('name must be');
    expect(bad({ 'a/SKILL.md': '---\nname: a\n---\n' })?.message).toContain('description must say');
    expect(
      bad({ 'a/SKILL.md': '---\nname: a\ndescription: x\n---\n', 'b/SKILL.md': '---\nname: a\ndescription: y\n---\n' })
        ?.message,
    ).toContain('two skills are named a');
    const missing = join(tempWorkspace(), 'nowhere');
    mkdirSync(join(missing, '..'), { recursive: true });
    writeFileSync(join(missing, '..', 'x.txt'), 'x');
    expect(() => running.run({ task: 't', provider, skills: [missing] })).toThrow(/is not a directory/);
    // read_skill is the runtime's own name: no tool of the embedder's may take it.
    expect(() =>
      tool({ name: 'read_skill', description: 'x', parameters: { type: 'object' }, execute: () => 'x' }),
    ).toThrow(/read_skill is the name of a built-in tool/);
  });
});
