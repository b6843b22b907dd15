/**
 * The rule of trust, tried as an attacker would: what the harness reads back to decide what
 * a run may do (its store, a bundle the configuration names) and what it runs itself (the
 * Landlock helper) cannot be changed by a contained command, wherever it sits; a resumed
 * run is as narrow as before. And reads confined like writes: what the policy denies
 * reading is neither readable nor listable by a command on the rungs that can hide it.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { answerQuestion, Config, type HarnessEvent, Policy, runWith, Supervisor } from '../dist/index.js';
import { ContainedExecutor } from '../dist/runtime/exec/containment/contained.js';
import { landlockHelper } from '../dist/runtime/exec/containment/helper.js';
import { keepStoreFiles } from '../dist/runtime/exec/containment/kept.js';
import { hostRungs } from '../dist/runtime/exec/containment/rungs.js';
import { directExecutor } from '../dist/runtime/exec/executor.js';
import { SYSTEM_PATH } from '../dist/runtime/exec/find-program.js';
import { later, openStore, serve, tempWorkspace, turns } from './support/workspace.js';

// A helper cache of this file's own (this process and the threads it starts build there):
// the attacks below aim at the helper's binary, and must not touch the one the other suites run.
const cache = mkdtempSync(join(tmpdir(), 'io-harness-helper-cache-'));
process.env.XDG_CACHE_HOME = cache;
afterAll(() => rmSync(cache, { recursive: true, force: true }));

const rungs = hostRungs();
const HIDING = ['bubblewrap', 'landlock', 'namespaces'] as const;

function available(rung: (typeof HIDING)[number]): boolean {
  const probe = rungs[rung];
  if (probe.ok && (rung !== 'namespaces' || rungs.mounts)) return true;
  console.log(`containment rung ${rung}: not available here (${probe.ok ? 'no mounts' : probe.reason}); not run`);
  return false;
}

const hash = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

function git(root: string, ...args: string[]): void {
  execFileSync('git', ['-C', root, ...args], { stdio: 'ignore' });
}

describe('what the harness trusts', () => {
  it('keeps the store, the helper and a bundle from a command; the resumed run is as narrow as before', async () => {
    const helper = landlockHelper();
    expect(helper.ok, 'the Landlock helper is built here').toBe(true);
    const helperPath = (helper as { path: string }).path;
    const helperBytes = hash(helperPath);
    const root = tempWorkspace({
      'tools/guard/plugin.toml': 'name = "guard"\n[deny]\nwrite = ["locked.txt"]\n',
      'io.toml': '[[plugin]]\npath = "tools/guard"\n',
      // Each attempt on its own line, so that one refused does not stop the next; what each saw is noted.
      'attack.sh': [
        `printf 'name = "guard"\\n' > tools/guard/plugin.toml; echo "bundle=$?"`,
        `printf '#!/bin/sh\\nexit 0\\n' > '${helperPath}'; echo "helper=$?"`,
        `rm -f '${helperPath}'; echo "helper-removed=$?"`,
        `mv '${dirname(helperPath)}' '${dirname(helperPath)}.moved'; echo "cache-moved=$?"`,
        'printf junk >> runs.db; echo "store=$?"',
        'rm -f runs.db-wal; echo "wal=$?"',
        'printf junk > runs.db-journal; echo "journal=$?"',
        'cat runs.db > stolen.db; echo "read=$?"',
      ].join('\n'),
    });
    git(root, 'init', '-q');
    // The store in the workspace, as the CLI's default ./runs.db puts it; the helper's cache a root the run may write.
    const store = await openStore(join(root, 'runs.db'));
    // What the run may do is the user's to widen, in a file outside the workspace; the workspace's own io.toml names the bundle.
    const userFile = join(tempWorkspace(), 'io.toml');
    writeFileSync(
      userFile,
      [
        '[[policy.layer]]',
        'name = "work"',
        'rule = [',
        '  { effect = "allow", act = "exec", pattern = "sh *" },',
        '  { effect = "allow", act = "read", pattern = "**" },',
        '  { effect = "allow", act = "write", pattern = "**" },',
        ']',
      ].join('\n'),
    );
    const config = Config.discover(root, { userFile });
    const options = config.runOptions('try it');
    const contract = options.contract.withWritableRoots([dirname(helperPath)]);
    const writeLocked = { name: 'write_file', args: { path: 'locked.txt', content: 'x\n' } };
    const script = turns([
      { text: 'attack', toolCalls: [{ name: 'exec', args: { argv: ['sh', 'attack.sh'] } }] },
      { text: 'write', toolCalls: [writeLocked] },
      // The harness's own file tools, which no mount reaches, are held to the same list.
      {
        text: 'tools',
        toolCalls: [
          { name: 'read_file', args: { path: 'runs.db' } },
          { name: 'write_file', args: { path: 'runs.db-journal', content: 'x' } },
          { name: 'write_file', args: { path: 'tools/guard/plugin.toml', content: 'name = "guard"\n' } },
        ],
      },
      { text: 'ask', toolCalls: [{ name: 'ask_operator', args: { question: 'go on?' } }] },
      { text: 'again', toolCalls: [writeLocked] },
      { text: 'done' },
    ]);
    const { provider } = await serve(script);
    const paused = await runWith(contract, provider, store, options.policy);
    expect(paused.outcome).toMatchObject({ kind: 'paused' });

    const seen = store.steps(paused.runId)[0]?.observations[0]?.content ?? '';
    for (const attempt of ['bundle', 'helper', 'helper-removed', 'cache-moved', 'store', 'wal', 'journal', 'read'])
      expect(seen, attempt).toMatch(new RegExp(`${attempt}=[1-9]`));
    expect(readFileSync(join(root, 'tools/guard/plugin.toml'), 'utf8')).toContain('[deny]');
    expect(hash(helperPath)).toBe(helperBytes);
    expect(existsSync(`${dirname(helperPath)}.moved`)).toBe(false);
    expect(existsSync(join(root, 'runs.db-journal'))).toBe(false);
    expect(existsSync(join(root, 'stolen.db')) ? readFileSync(join(root, 'stolen.db')).length : 0).toBe(0);
    expect(existsSync(join(root, 'locked.txt'))).toBe(false);

    // Stopped there; resumed by a new supervisor after the question is answered.
    const [question] = store.questions({ runId: paused.runId, status: 'open' });
    answerQuestion(store, question?.questionId as string, 'yes');
    const supervisor = await Supervisor.start(store);
    later(() => supervisor.close());
    const resumed = await (await supervisor.resume(paused.runId, { provider })).result;
    expect(resumed.status).toBe('finished');
    expect(existsSync(join(root, 'locked.txt'))).toBe(false);
    // Every refusal is still there, and the resumed run refused the same write by the same bundle's rule.
    const refusals = store
      .events(paused.runId)
      .filter((event): event is Extract<HarnessEvent, { type: 'refusal' }> => event.type === 'refusal');
    expect(refusals.map((refusal) => [refusal.tool, refusal.layer])).toEqual([
      ['write_file', 'guard__deny'],
      ['read_file', 'trust'],
      ['write_file', 'trust'],
      ['write_file', 'trust'],
      ['write_file', 'guard__deny'],
    ]);
    // The store is whole.
    expect(store.runs().some((run) => run.runId === paused.runId)).toBe(true);
  });

  it('refuses a configuration whose bundle was broken, rather than run without its deny rules', () => {
    const root = tempWorkspace({
      'tools/guard/plugin.toml': 'name = "guard"\n[deny]\nwrite = ["locked.txt"]\n',
      'io.toml': '[[plugin]]\npath = "tools/guard"\n',
    });
    expect(
      Config.discover(root, { userFile: null }).policy().decide({ kind: 'write', path: 'locked.txt' }, root),
    ).toMatchObject({ effect: 'deny', layer: 'guard__deny' });
    // Broken as a command outside the boundary could break it: the configuration is refused, naming the bundle.
    writeFileSync(join(root, 'tools/guard/plugin.toml'), 'name = "guard"\n[deny\n');
    const broken = Config.discover(root, { userFile: null });
    expect(() => broken.policy()).toThrow(/tools\/guard.*could not be loaded|could not be loaded.*guard/s);
    expect(() => broken.runOptions('go')).toThrow(expect.objectContaining({ code: 'CONFIG_REFUSED' }));
  });

  it('verifies the helper by its bytes before running it, and builds it again when they changed', () => {
    // Processes of their own, each with a cache of its own: the helper is found once per process.
    const own = mkdtempSync(join(tmpdir(), 'io-harness-helper-cache-'));
    later(() => rmSync(own, { recursive: true, force: true }));
    const probe = `import { landlockHelper } from ${JSON.stringify(new URL('../dist/runtime/exec/containment/helper.js', import.meta.url).href)};
      const h = landlockHelper(); console.log(JSON.stringify({ ok: h.ok, path: h.path }));`;
    const find = () => {
      const found = spawnSync(process.execPath, ['--input-type=module', '-e', probe], {
        encoding: 'utf8',
        env: { ...process.env, XDG_CACHE_HOME: own },
      });
      expect(found.status, found.stderr).toBe(0);
      return JSON.parse(found.stdout) as { ok: boolean; path: string };
    };
    const built = find();
    expect(built.ok).toBe(true);
    const original = hash(built.path);
    // What a planted binary does when it is run: leaves a mark, and claims a Landlock it does not apply.
    const planted = join(own, 'planted');
    writeFileSync(built.path, `#!/bin/sh\ntouch ${planted}\necho '{"abi":9,"fs":true,"tcp":true,"scoped":true}'\n`);
    expect(hash(built.path)).not.toBe(original);
    const again = find();
    expect(again).toEqual({ ok: true, path: built.path });
    expect(existsSync(planted)).toBe(false);
    expect(hash(built.path)).toBe(original);
  });

  it("finds the programs it runs itself in the system's directories, never in a PATH entry a run could write", () => {
    // A directory a run can write, first on PATH (as node_modules/.bin is for npm scripts), with a
    // bwrap, unshare, setpriv and cc of its own that would leave a mark if the harness ran them.
    const planted = tempWorkspace();
    const mark = join(planted, 'ran');
    for (const name of ['bwrap', 'unshare', 'setpriv', 'cc', 'gcc', 'clang'])
      writeFileSync(join(planted, name), `#!/bin/sh\necho ${name} >> ${mark}\nexit 1\n`, { mode: 0o755 });
    const own = mkdtempSync(join(tmpdir(), 'io-harness-helper-cache-'));
    later(() => rmSync(own, { recursive: true, force: true }));
    const probe = `import { hostRungs } from ${JSON.stringify(new URL('../dist/runtime/exec/containment/rungs.js', import.meta.url).href)};
      const host = hostRungs(); console.log(JSON.stringify({ bwrap: host.bubblewrap.ok ? host.bubblewrap.argv0 : host.bubblewrap.reason, unshare: host.unshare?.[0] ?? null, setpriv: host.setpriv, helper: host.helper.ok }));`;
    const found = spawnSync(process.execPath, ['--input-type=module', '-e', probe], {
      encoding: 'utf8',
      env: { ...process.env, PATH: `${planted}:${process.env.PATH}`, XDG_CACHE_HOME: own },
    });
    expect(found.status, found.stderr).toBe(0);
    const seen = JSON.parse(found.stdout) as Record<string, string | boolean | null>;
    // Where the system has no bubblewrap, the planted one is not taken for it: the rung says it is missing.
    const systemBwrap = SYSTEM_PATH.split(':').some((dir) => existsSync(join(dir, 'bwrap')));
    if (systemBwrap) expect(seen.bwrap).toMatch(/^\/(usr\/)?(local\/)?s?bin\/bwrap$/);
    else expect(seen.bwrap).toMatch(/not installed/);
    expect(String(seen.bwrap)).not.toContain(planted);
    expect(seen.unshare).toMatch(/^\/(usr\/)?(local\/)?s?bin\/unshare$/);
    expect(seen.setpriv).toMatch(/^\/(usr\/)?(local\/)?s?bin\/setpriv$/);
    expect(seen.helper).toBe(true);
    expect(existsSync(mark) ? readFileSync(mark, 'utf8') : '').toBe('');
  });
});

describe('reads confined like writes', () => {
  const secret = 'KEY=sk-live-90210';
  const workspace = () => {
    const root = tempWorkspace({
      'secrets/api.env': `${secret}\n`,
      'secrets/deeper/more.env': `${secret}\n`,
      'certs/server.pem': 'PEM-9f8e7d\n',
      'src/app.js': 'console.log(1);\n',
    });
    git(root, 'init', '-q');
    mkdirSync(join(root, 'empty-dir'));
    return root;
  };
  const policy = Policy.default().layer('app').allowRead('**').denyRead('secrets').denyRead('**/*.pem');
  const walk =
    "import os\nfor top, dirs, files in os.walk('.'):\n    for name in files: print(os.path.join(top, name))\n    for name in dirs: print(os.path.join(top, name) + '/')";

  for (const rung of HIDING) {
    it(`hides what the policy denies reading, names and content, on the ${rung} rung`, async () => {
      if (!available(rung)) return;
      const root = workspace();
      writeFileSync(join(root, 'walk.py'), walk);
      const executor = new ContainedExecutor(directExecutor, {
        root,
        policy,
        sandbox: { access: 'workspace-write', writableRoots: [], rung, caps: {} },
      });
      later(() => executor.close());
      const run = async (argv: string[]) => {
        const result = await executor.run({
          argv,
          purpose: 'exec',
          cwd: root,
          timeoutMs: 30_000,
          outputLimit: 1 << 20,
          env: { PATH: process.env.PATH as string },
        });
        expect(result.started, result.error ?? '').toBe(true);
        return `${result.stdout}\n${result.stderr}`;
      };
      const cat = await run(['cat', 'secrets/api.env', 'secrets/deeper/more.env', 'certs/server.pem']);
      const status = await run(['git', 'status', '-vv', '--porcelain', '-uall', '--ignored']);
      const walked = await run(['python3', 'walk.py']);
      const listed = await run(['ls', '-laR', '.']);
      for (const seen of [cat, status, walked, listed]) {
        expect(seen).not.toContain('sk-live-90210');
        expect(seen).not.toContain('PEM-9f8e7d');
      }
      expect(cat).toMatch(/secrets\/api\.env: Permission denied/);
      // No name inside a denied directory is listed by anything (cat only repeats the names it was given).
      for (const seen of [status, walked, listed]) {
        expect(seen).not.toContain('api.env');
        expect(seen).not.toContain('more.env');
        expect(seen).not.toContain('deeper');
      }
      // What is not denied is read as before; and the containment's placeholders show as nothing to git.
      expect(walked).toContain('./src/app.js');
      expect(status).toContain('src/app.js');
      expect(status).not.toMatch(/io\.toml|io\.local\.toml|\.io-harness/);
      expect(executor.contained()).toMatchObject({ rung, reads: 'enforced' });
      // Nothing on the host changed.
      expect(readFileSync(join(root, 'secrets/api.env'), 'utf8')).toBe(`${secret}\n`);
    });
  }

  it('says in the report that the floor cannot hide a path', async () => {
    const root = workspace();
    const executor = new ContainedExecutor(directExecutor, {
      root,
      policy,
      sandbox: { access: 'workspace-write', writableRoots: [], rung: 'floor', caps: {} },
    });
    later(() => executor.close());
    expect(executor.contained()).toMatchObject({ rung: 'floor', reads: 'not established' });
  });

  it('hides a store kept from commands wherever it sits, and no command can make its journal', async () => {
    if (!available('bubblewrap')) return;
    const root = tempWorkspace();
    const elsewhere = tempWorkspace();
    const store = await openStore(join(elsewhere, 'runs.db'));
    keepStoreFiles(store.path);
    const executor = new ContainedExecutor(directExecutor, {
      root,
      policy,
      sandbox: { access: 'workspace-write', writableRoots: [elsewhere], rung: 'bubblewrap', caps: {} },
    });
    later(() => executor.close());
    const result = await executor.run({
      argv: [
        'sh',
        '-c',
        `cat '${store.path}' | wc -c; printf x > '${store.path}-journal'; echo "journal=$?"; ls '${elsewhere}'`,
      ],
      purpose: 'exec',
      cwd: root,
      timeoutMs: 30_000,
      outputLimit: 1 << 20,
      env: { PATH: process.env.PATH as string },
    });
    expect(result.stdout).toMatch(/^0\n/);
    expect(result.stdout).toMatch(/journal=[1-9]/);
    expect(existsSync(`${store.path}-journal`) ? readFileSync(`${store.path}-journal`).length : 0).toBe(0);
  });
});
