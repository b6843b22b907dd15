/**
 * io.toml over four scopes: the library's defaults, a user file, the committed io.toml and
 * the gitignored io.local.toml, merged (tables by key, arrays of tables appended, other
 * values the later file's), each value explained by the file and line that set it, and
 * projected onto the typed API. A workspace file may narrow and never widen: every widening
 * key is refused in both workspace files, naming the user file, and accepted there. An
 * unknown key, a wrong type and a TOML syntax error each name the file and line, and
 * nothing of the configuration is used. A real run takes its contract and policy from it.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { Config, ConfigError, OpenAI, Policy, runWith, Store, TaskContract } from '../dist/index.js';
import { ScriptedModelServer } from '../dist/testing/index.js';
import { tempStorePath } from './support/processes.js';
import { later, tempWorkspace } from './support/workspace.js';

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

/** A workspace and a user directory with the files given: `user`, `project` (io.toml), `local` (io.local.toml). */
function fixture(files: { user?: string; project?: string; local?: string }, extra: Record<string, string> = {}) {
  const root = tempWorkspace(extra);
  const home = tempWorkspace();
  const userFile = join(home, 'io.toml');
  if (files.user !== undefined) writeFileSync(userFile, files.user);
  if (files.project !== undefined) writeFileSync(join(root, 'io.toml'), files.project);
  if (files.local !== undefined) writeFileSync(join(root, 'io.local.toml'), files.local);
  return { root, userFile };
}

function thrownBy(body: () => unknown): ConfigError {
  try {
    body();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

const USER = `# the user's own choices
[[provider]]
kind = "openai"
model = "gpt-4.1"
api_key_env = "OPENAI_API_KEY"

[[provider]]
kind = "anthropic"
model = "claude-sonnet-4"
api_key_env = "ANTHROPIC_API_KEY"

[budget]
steps = 50
tokens = 200000

[[policy.layer]]
name = "team"
[[policy.layer.rule]]
effect = "allow"
act = "exec"
pattern = "npm test*"

[profile.tight.budget]
steps = 10

[memory]
cap = 64
`;

const PROJECT = `[budget]
steps = 20

[context]
share = 0.6
snip = true

[[policy.layer]]
name = "repo"
rule = [{ effect = "deny", act = "read", pattern = "secrets/**" }]
`;

const LOCAL = `[sandbox]
access = "read-only"

[memory]
cap = 32
`;

describe('io.toml over four scopes', () => {
  it('merges the scopes, names the file and line of each value, and projects the typed API', () => {
    const { root, userFile } = fixture({ user: USER, project: PROJECT, local: LOCAL });
    const config = Config.discover(root, { userFile });
    // Each scope decides one key; explain names it.
    const table: [string, string, number | null, unknown][] = [
      ['policy.base', '(defaults)', null, 'default'],
      ['provider[1].model', userFile, 9, 'claude-sonnet-4'],
      ['budget.tokens', userFile, 14, 200000],
      ['budget.steps', join(root, 'io.toml'), 2, 20],
      ['context.share', join(root, 'io.toml'), 5, 0.6],
      ['policy.layer[0]', userFile, 16, undefined],
      ['policy.layer[1].rule[0]', join(root, 'io.toml'), 10, undefined],
      ['sandbox.access', join(root, 'io.local.toml'), 2, 'read-only'],
      ['memory.cap', join(root, 'io.local.toml'), 5, 32],
    ];
    for (const [key, file, line, value] of table) {
      const origin = config.explain(key);
      expect(origin, key).toMatchObject({ file, line });
      if (value !== undefined) expect(origin?.value, key).toEqual(value);
    }
    expect(config.explain('budget.wall_secs')).toBeNull();
    // The projections equal what the embedder would have built by hand.
    expect(config.policy().toJSON()).toEqual(
      Policy.default().layer('team').allowExec('npm test*').layer('repo').denyRead('secrets/**').toJSON(),
    );
    expect(config.provider()).toEqual({
      kind: 'fallback',
      providers: [
        { kind: 'openai', model: 'gpt-4.1', apiKeyEnv: 'OPENAI_API_KEY' },
        { kind: 'anthropic', model: 'claude-sonnet-4', apiKeyEnv: 'ANTHROPIC_API_KEY' },
      ],
    });
    expect(config.budget()).toEqual({ steps: 20, tokens: 200000 });
    expect(config.sandbox()).toEqual({ access: 'read-only' });
    expect(config.context()).toEqual({ share: 0.6, snip: true });
    expect(config.memory()).toEqual({ cap: 32 });
    expect(config.contract('fix the test').toJSON()).toEqual(
      TaskContract.workspace('fix the test', root)
        .withBudget({ steps: 20, tokens: 200000 })
        .withContext({ share: 0.6, snip: true })
        .withMemory({ cap: 32 })
        .withReadOnlyAccess()
        .toJSON(),
    );
    // Every value listed, each with where it came from.
    const all = config.explainAll();
    expect(all.find((item) => item.key === 'budget.steps')).toMatchObject({ scope: 'project', line: 2 });
    expect(all.find((item) => item.key === 'policy.base')).toMatchObject({ scope: 'defaults' });
  });

  it('overlays a profile straight after the file that holds it, so a workspace file still narrows it', () => {
    const { root, userFile } = fixture({ user: USER, project: '[budget]\nsteps = 5\n' });
    const tight = Config.discover(root, { userFile, profile: 'tight' });
    expect(tight.budget()).toEqual({ steps: 5, tokens: 200000 });
    const { root: other, userFile: otherUser } = fixture({ user: USER });
    const chosen = Config.discover(other, { userFile: otherUser, profile: 'tight' });
    expect(chosen.explain('budget.steps')).toMatchObject({ value: 10, file: otherUser, line: 24 });
    expect(thrownBy(() => Config.discover(other, { userFile: otherUser, profile: 'loose' })).message).toMatch(
      /no \[profile\.loose\] .*the profiles are tight/,
    );
  });

  it('refuses every widening key in io.toml and in io.local.toml, naming the user file; the user file may set each', () => {
    const user = '[budget]\nsteps = 50\n[sandbox.caps]\ncpu_secs = 10\n';
    const table: [string, string, RegExp, boolean][] = [
      [
        'a provider',
        '[[provider]]\nkind = "openai"\nmodel = "m"\n',
        /provider names an endpoint a credential is sent to/,
        true,
      ],
      ['an MCP server', '[[mcp]]\nname = "srv"\ncommand = ["srv"]\n', /mcp names a program to run/, true],
      ['a toolchain', '[toolchain]\nnode = { test = ["npm", "test"] }\n', /toolchain names programs to run/, true],
      [
        'a permissive base',
        '[policy]\nbase = "permissive"\n',
        /policy\.base sets the policy's base to "permissive"/,
        true,
      ],
      [
        'an allow rule',
        '[[policy.layer]]\nname = "x"\n[[policy.layer.rule]]\neffect = "allow"\nact = "exec"\npattern = "*"\n',
        /policy\.layer\[0\]\.rule\[0\] is a policy rule whose effect is "allow"/,
        true,
      ],
      [
        'an ask rule',
        '[[policy.layer]]\nname = "x"\nrule = [{ effect = "ask", act = "net", pattern = "*" }]\n',
        /effect is "ask"/,
        true,
      ],
      ['full access', '[sandbox]\naccess = "full"\n', /sandbox\.access grants "full" access/, true],
      [
        'workspace-write access',
        '[sandbox]\naccess = "workspace-write"\n',
        /sandbox\.access grants "workspace-write"/,
        true,
      ],
      [
        'writable roots',
        '[sandbox]\nwritable_roots = ["/tmp"]\n',
        /sandbox\.writable_roots grants writes outside/,
        true,
      ],
      ['shared caches', '[sandbox]\nshared_caches = true\n', /sandbox\.shared_caches shares/, true],
      ['a rung', '[sandbox]\nrung = "floor"\n', /sandbox\.rung chooses how commands are contained/, true],
      ['a raised budget', '[budget]\nsteps = 500\n', /budget\.steps raises 50 .* to 500/, true],
      ['a raised cap', '[sandbox.caps]\ncpu_secs = 999\n', /sandbox\.caps\.cpu_secs raises 10 .* to 999/, true],
      [
        'a widening profile',
        '[profile.x.sandbox]\naccess = "full"\n',
        /profile\.x\.sandbox\.access grants "full"/,
        true,
      ],
      [
        'a hook',
        '[[hook]]\nevents = ["run-end"]\nappend = "audit.log"\n',
        /hook names a program to run or a file to write/,
        true,
      ],
      [
        'a browser',
        '[browser]\ntimeout_secs = 30\n',
        /browser names a program to run and opens a route to the web/,
        true,
      ],
      ['the web', '[web]\nsearch = true\n', /web opens a route to the web/, true],
      ['programs', '[codeact]\nmax_acts = 20\n', /codeact names programs to run/, true],
      ['documents', '[documents]\nformats = ["pdf"]\n', /documents turns on parsers/, true],
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a TOML file's substitution, as written
      ['a command substitution', '[[policy.layer]]\nname = "${cmd:whoami}"\n', /runs a command/, false],
    ];
    for (const [what, text, why, userMay] of table) {
      for (const place of ['project', 'local'] as const) {
        const { root, userFile } = fixture({ user, [place]: text });
        const error = thrownBy(() => Config.discover(root, { userFile }));
        const file = join(root, place === 'project' ? 'io.toml' : 'io.local.toml');
        expect(error.code, `${what} in ${place}`).toBe('CONFIG_REFUSED');
        expect(error.message, `${what} in ${place}`).toMatch(why);
        expect(error.message.startsWith(`${file}:`), `${what} in ${place}`).toBe(true);
        expect(error.message, `${what} in ${place}`).toContain(`put it in your user file, ${userFile}`);
        expect(error.details).toMatchObject({ file, userFile });
      }
      if (userMay) {
        // The user file, outside every workspace, may set it.
        const { root, userFile } = fixture({ user: text });
        expect(() => Config.discover(root, { userFile }), `${what} in the user file`).not.toThrow();
      }
    }
    // What narrows is taken from the workspace: a deny rule, read-only access, a lower budget and cap, an empty base.
    const { root, userFile } = fixture({
      user,
      project:
        '[policy]\nbase = "empty"\n[[policy.layer]]\nname = "repo"\nrule = [{ effect = "deny", act = "net", pattern = "*" }]\n[budget]\nsteps = 5\n',
      local: '[sandbox]\naccess = "read-only"\nshared_caches = false\n[sandbox.caps]\ncpu_secs = 3\n',
    });
    const narrowed = Config.discover(root, { userFile });
    // A "user file" inside the workspace would be one its authors could write: refused, by any spelling.
    writeFileSync(join(root, 'mine.toml'), '[sandbox]\naccess = "full"\n');
    for (const inner of [
      join(root, 'mine.toml'),
      join(root, 'src', '..', 'mine.toml'),
      join(root, 'not-yet', 'io.toml'),
    ])
      expect(thrownBy(() => Config.discover(root, { userFile: inner })).message).toMatch(/is inside the workspace/);
    expect(narrowed.budget()).toEqual({ steps: 5 });
    expect(narrowed.sandbox()).toEqual({ access: 'read-only', sharedCaches: false, caps: { cpuSecs: 3 } });
    expect(narrowed.policy().toJSON()).toEqual(Policy.empty().layer('repo').denyNet('*').toJSON());
  });

  it('keeps what a workspace cannot undo: arrays of tables only append, links and devices refused, lines placed exactly', () => {
    const user =
      '[[policy.layer]]\nname = "mine"\nrule = [{ effect = "deny", act = "read", pattern = "secrets/**" }]\n[profile.ci.budget]\nsteps = 3\n';
    const denies = (config: Config) =>
      config.policy().decide({ kind: 'read', path: 'secrets/key.txt' }, config.root).effect === 'deny';
    // An empty array of tables, in any spelling, adds nothing: the user's deny layer stays.
    for (const [place, text, profile] of [
      ['project', '[policy]\nlayer = []\n', undefined],
      ['local', 'policy = { layer = [] }\n', undefined],
      ['project', '[profile.ci.policy]\nlayer = []\n', 'ci'],
      ['project', '"\\u0070olicy".layer = []\n', undefined],
    ] as const) {
      const { root, userFile } = fixture({ user, [place]: text });
      const config = Config.discover(root, { userFile, ...(profile ? { profile } : {}) });
      expect(denies(config), text).toBe(true);
    }
    // An escaped key is placed on its own line, and refused there.
    const { root: escaped, userFile: escapedUser } = fixture({
      project: '\n"\\u0070rovider" = [{ kind = "openai", model = "m" }]\n',
    });
    expect(thrownBy(() => Config.discover(escaped, { userFile: escapedUser })).message).toMatch(
      /io\.toml:2: provider names an endpoint/,
    );
    // A multi-line string's escaped quotes do not end it early: the line named is the one that set the value.
    const tricky = '[budget]\nsteps = 5\n[app]\nnote = """\n\\"""\n[budget]\nsteps = 1\n"""\n';
    const { root: strings, userFile: stringsUser } = fixture({ user: tricky });
    expect(Config.discover(strings, { userFile: stringsUser }).explain('budget.steps')).toMatchObject({
      value: 5,
      line: 2,
    });
    // A workspace file that is a link (to a file of the workspace, or to a device) is refused, and nothing hangs.
    for (const target of ['notes/cfg.toml', '/dev/zero']) {
      const { root, userFile } = fixture({ user }, { 'notes/cfg.toml': '[budget]\nsteps = 1\n' });
      symlinkSync(target, join(root, 'io.toml'));
      const error = thrownBy(() => Config.discover(root, { userFile }));
      expect(error.code, target).toBe('CONFIG_REFUSED');
      expect(error.message, target).toMatch(/io\.toml: is a symbolic link/);
    }
    // A user file that is not a regular file (a pipe) is refused at once.
    const home = tempWorkspace();
    execFileSync('mkfifo', [join(home, 'io.toml')]);
    const { root } = fixture({});
    expect(thrownBy(() => Config.discover(root, { userFile: join(home, 'io.toml') })).message).toMatch(
      /is not a regular file/,
    );
  });

  it('refuses in a workspace file what widens in effect: memory turned on, raised shares, skills outside it', () => {
    const table: [string, string, string, RegExp][] = [
      ['memory turned on', '', '[memory]\ncap = 10\n', /memory turns durable memory on/],
      ['the git tools turned on', '', '[git]\n', /git turns the git tools on/],
      ['a raised memory cap', '[memory]\ncap = 10\n', '[memory]\ncap = 100\n', /memory\.cap raises 10 .* to 100/],
      [
        'a share above the default',
        '',
        '[context]\nshare = 1\n',
        /context\.share raises 0\.8 \(set in the defaults\) to 1/,
      ],
      ['a memory share above the default', '[memory]\n', '[memory]\nshare = 0.5\n', /memory\.share raises 0\.1/],
      [
        'a skill root outside',
        '',
        '[skills]\nroots = ["../../.."]\n',
        /skills\.roots\[0\] names "\.\.\/\.\.\/\.\." , outside the workspace|skills\.roots\[0\] names "..\/..\/..", outside the workspace/,
      ],
    ];
    for (const [what, user, project, why] of table) {
      const { root, userFile } = fixture({ user, project });
      const error = thrownBy(() => Config.discover(root, { userFile }));
      expect(error.code, what).toBe('CONFIG_REFUSED');
      expect(error.message, what).toMatch(why);
    }
    // Lowering them, and skills of its own, are the workspace's to choose.
    const { root, userFile } = fixture(
      {
        user: '[memory]\ncap = 10\n',
        project: '[memory]\ncap = 5\nshare = 0.05\n[context]\nshare = 0.5\n[skills]\nroots = ["skills"]\n',
      },
      { 'skills/.keep': '' },
    );
    const config = Config.discover(root, { userFile });
    expect(config.memory()).toEqual({ cap: 5, share: 0.05 });
    // Off unless a file says [git]; on from the user's file, and the contract offers the tools.
    expect(config.git()).toBe(false);
    expect(config.contract('x').toJSON().git).toBeUndefined();
    const withGit = fixture({ user: '[git]\n', project: '[git]\n' });
    const gitConfig = Config.discover(withGit.root, { userFile: withGit.userFile });
    expect(gitConfig.git()).toBe(true);
    expect(gitConfig.contract('x').toJSON().git).toBe(true);
    expect(config.skills()).toEqual([join(root, 'skills')]);
    expect(config.explain('skills.roots[0]')).toMatchObject({ value: 'skills', scope: 'project' });
  });

  it('takes language servers from the user file only, checked as withLsp checks them', () => {
    const server =
      '[[lsp]]\ncommand = ["typescript-language-server", "--stdio"]\nextensions = [".ts", ".tsx"]\ntimeout_secs = 20\n[lsp.initialization_options]\ntsserver = { useSyntaxServer = "never" }\n';
    const { root, userFile } = fixture({ user: server });
    const config = Config.discover(root, { userFile });
    expect(config.contract('x').toJSON().lsp).toEqual([
      {
        command: ['typescript-language-server', '--stdio'],
        extensions: ['.ts', '.tsx'],
        initializationOptions: { tsserver: { useSyntaxServer: 'never' } },
        timeoutSecs: 20,
      },
    ]);
    // None named: the contract names none.
    const none = fixture({ user: '' });
    expect(Config.discover(none.root, { userFile: none.userFile }).contract('x').toJSON().lsp).toBeUndefined();
    // A workspace file names no program to run.
    for (const where of ['project', 'local'] as const) {
      const refused = fixture({ [where]: server });
      const error = thrownBy(() => Config.discover(refused.root, { userFile: refused.userFile }));
      expect(error.code, where).toBe('CONFIG_REFUSED');
      expect(error.message, where).toMatch(/lsp names a program to run/);
    }
    // A bad server is named by its file and line.
    const bad = fixture({ user: '[[lsp]]\ncommand = ["tsls"]\nextensions = ["ts"]\n' });
    const error = thrownBy(() => Config.discover(bad.root, { userFile: bad.userFile }));
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toMatch(/io\.toml:1: lsp: .*"ts" is not an extension; write each with its dot/);
  });

  it('names the file, the line and a fix for an unknown key, a wrong type and a syntax error; nothing is used', () => {
    const table: [string, string, RegExp, number][] = [
      ['a near miss', '[budget]\nsetps = 3\n', /:2: unknown key budget\.setps; did you mean budget\.steps\?/, 2],
      ['an unknown section', '\n[contxt]\nshare = 0.5\n', /:2: unknown key contxt; did you mean context\?/, 2],
      ['a wrong type', '[budget]\nsteps = 3\ntokens = "many"\n', /:3: budget\.tokens: .*expected number/, 3],
      [
        'a bad enum',
        '[[policy.layer]]\nname = "x"\n[[policy.layer.rule]]\neffect = "permit"\n',
        /:4: policy\.layer\[0\]\.rule\[0\]\.effect: /,
        4,
      ],
      ['a syntax error', '[budget]\nsteps = = 3\n', /:2:\d+: .*fix the TOML there/, 2],
      [
        'a substitution of a variable not set',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a TOML file's substitution, as written
        '[app]\nx = 1\n[[mcp]]\nname = "a"\nurl = "${env:IO_HARNESS_TEST_NOT_SET}"\n',
        /:5: mcp\[0\]\.url: .*names a variable that is not set/,
        5,
      ],
      ['an unknown key of a section', '[browser]\nenabled = true\n', /:2: unknown key browser\.enabled/, 2],
      [
        'an object’s own machinery',
        '[app]\nok = 1\n__proto__ = { polluted = true }\n',
        /:3: app\.__proto__ is not a key/,
        3,
      ],
    ];
    for (const [what, text, why, line] of table) {
      const { root, userFile } = fixture({ user: text });
      const error = thrownBy(() => Config.discover(root, { userFile }));
      expect(error.code, what).toBe('CONFIG_INVALID');
      expect(error.message, what).toMatch(why);
      expect(error.message, what).toContain('nothing of the configuration was used');
      expect(error.message.startsWith(`${userFile}:${line}`), what).toBe(true);
    }
    // A file too large to be a configuration is refused before it is parsed.
    const { root: big, userFile: bigFile } = fixture({ user: `[app]\nx = "${'y'.repeat(1_100_000)}"\n` });
    expect(thrownBy(() => Config.discover(big, { userFile: bigFile })).message).toMatch(
      /is above the 1048576 bytes a configuration file may have/,
    );
    // [app] is your program's own: stored, never validated.
    const { root, userFile } = fixture({ user: '[app]\nanything = { goes = [1, "two"] }\n' });
    expect(Config.discover(root, { userFile }).app()).toEqual({ anything: { goes: [1, 'two'] } });
  });

  it('prints every value with its file and line from npx io-harness config explain, and an error with status 1', () => {
    const { root, userFile } = fixture({ user: USER, project: PROJECT });
    const bin = fileURLToPath(new URL('../bin/io-harness.mjs', import.meta.url));
    const out = execFileSync(process.execPath, [bin, 'config', 'explain', '--root', root, '--user-file', userFile], {
      encoding: 'utf8',
    });
    expect(out).toContain(`# project: ${join(root, 'io.toml')}\n`);
    expect(out).toContain(`# local: ${join(root, 'io.local.toml')} (none)\n`);
    expect(out).toContain(`budget.steps = 20    # ${join(root, 'io.toml')}:2 (project)\n`);
    expect(out).toContain(`budget.tokens = 200000    # ${userFile}:14 (user)\n`);
    expect(out).toContain('policy.base = "default"    # defaults\n');
    const one = execFileSync(
      process.execPath,
      [bin, 'config', 'explain', 'provider[0].model', '--root', root, '--user-file', userFile],
      {
        encoding: 'utf8',
      },
    );
    expect(one).toBe(`provider[0].model = "gpt-4.1"    # ${userFile}:4 (user)\n`);
    writeFileSync(join(root, 'io.local.toml'), '[sandbox]\naccess = "full"\n');
    const refused = spawnSync(process.execPath, [bin, 'config', 'explain', '--root', root, '--user-file', userFile], {
      encoding: 'utf8',
    });
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain(`${join(root, 'io.local.toml')}:2: sandbox.access grants "full" access`);
  });

  it('lists every key in the configuration guide, from the schema', async () => {
    const { keysTable, renamedTable } = await import('../scripts/config-keys.mjs');
    const guide = readFileSync(new URL('../docs/guides/configuration.md', import.meta.url), 'utf8');
    // The table as written, its columns aligned or not.
    const cells = (table: string) => table.replace(/ *\| */g, '|').replace(/-{3,}/g, '---');
    const written = (name: string) =>
      guide.slice(guide.indexOf(`<!-- ${name} -->`) + name.length + 10, guide.indexOf(`<!-- /${name} -->`)).trim();
    expect(cells(written('keys'))).toBe(cells(keysTable()));
    expect(cells(written('renamed'))).toBe(cells(renamedTable()));
  });

  it('gives a real run its contract and policy: a deny rule from io.toml holds', async () => {
    const { root, userFile } = fixture(
      { user: '[budget]\nsteps = 60\n', project: PROJECT },
      { 'secrets/key.txt': 'hunter2\n', 'notes.txt': 'hello\n' },
    );
    mkdirSync(join(root, 'src'), { recursive: true });
    const config = Config.discover(root, { userFile });
    const server = await ScriptedModelServer.start(
      (call) => {
        const done = (call.body as { messages: { role: string }[] }).messages.filter(
          (m) => m.role === 'assistant',
        ).length;
        return done === 0
          ? {
              text: 'reading',
              toolCalls: [
                { name: 'read_file', args: { path: 'secrets/key.txt' } },
                { name: 'read_file', args: { path: 'notes.txt' } },
              ],
            }
          : { text: 'done' };
      },
      { keepCalls: true },
    );
    later(() => server.close());
    const store = await Store.open(tempStorePath());
    cleanup.push(async () => store.close());
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const result = await runWith(config.contract('read the notes'), provider, store, config.policy());
    expect(result.outcome.kind).toBe('finished');
    const observations = store.steps(result.runId)[0]?.observations ?? [];
    expect(observations[0]).toMatchObject({ isError: true });
    expect(observations[0]?.content).toMatch(/deny-read secrets\/\*\*/);
    expect(observations[1]).toMatchObject({ isError: false, content: 'hello\n' });
    expect(store.events(result.runId).find((event) => event.type === 'refusal')).toMatchObject({ layer: 'repo' });
    expect(config.budget()).toEqual({ steps: 20 });
  });
});
