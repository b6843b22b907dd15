/**
 * The harness's own code is out of reach of the runs it drives: installed in the very
 * project an agent works on (<project>/node_modules/io-harness, the project the run's
 * workspace), its modules, its package.json and the node_modules it loads from are
 * read-only to the run's commands under the real sandbox and refused to its file tools; a
 * package a run could have planted where Node's lookup would go on to is not loaded.
 * Each end-to-end case is a real process importing a real copy of the built package.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../src/errors.js';
import { harnessCodePaths, keptPackageDir, packageName } from '../src/runtime/exec/containment/harness-code.js';
import { relativeImports } from '../src/runtime/exec/containment/relative-imports.js';

const REPO = join(import.meta.dirname, '..');
const SCRIPT = join(import.meta.dirname, 'support', 'scripts', 'harness-code.mjs');
const made: string[] = [];
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function temp(): string {
  const dir = mkdtempSync(join(tmpdir(), 'io-harness-code-'));
  made.push(dir);
  return dir;
}

/** A project with io-harness installed in it as npm would: the built package, its native source, its dependencies beside it. */
function installedProject(): string {
  const project = join(temp(), 'project');
  const installed = join(project, 'node_modules', 'io-harness');
  mkdirSync(installed, { recursive: true });
  for (const part of ['dist', 'native', 'package.json'])
    cpSync(join(REPO, part), join(installed, part), { recursive: true });
  symlinkSync(join(REPO, 'node_modules'), join(installed, 'node_modules'));
  return project;
}

/**
 * A monorepo holding io-harness as one of its packages: packages/io-harness with no
 * node_modules of its own, linked from the root's node_modules, where every dependency is
 * hoisted (each a link to this checkout's).
 */
function monorepo(): string {
  const project = join(temp(), 'repo');
  const own = join(project, 'packages', 'io-harness');
  mkdirSync(own, { recursive: true });
  for (const part of ['dist', 'native', 'package.json']) cpSync(join(REPO, part), join(own, part), { recursive: true });
  mkdirSync(join(project, 'node_modules'));
  for (const name of readdirSync(join(REPO, 'node_modules')))
    symlinkSync(join(REPO, 'node_modules', name), join(project, 'node_modules', name));
  symlinkSync(own, join(project, 'node_modules', 'io-harness'));
  return project;
}

function drive(config: Record<string, unknown>, cwd: string, execArgv: string[] = []): Record<string, unknown> {
  const out = spawnSync(process.execPath, [...execArgv, SCRIPT, JSON.stringify(config)], {
    cwd,
    encoding: 'utf8',
    timeout: 90_000,
  });
  const line = out.stdout.trim().split('\n').at(-1) ?? '';
  if (out.status !== 0 || !line.startsWith('{')) throw new Error(`the driver failed (${out.status}): ${out.stderr}`);
  return JSON.parse(line);
}

const digest = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

type Answer = { name: string; content: string; isError: boolean };
type Rewrite = { status: string; answers: Answer[]; contained: { rung: string; protectedPaths: string } };

/** A run in `project` that tries each command's write and each file tool's; what it answered, and the files it aimed at unchanged. */
function tryRewrites(
  project: string,
  commands: { path: string; op: 'append' | 'mkdir' }[],
  fileWrites: string[],
  options: { inWorker?: boolean; execArgv?: string[]; cwd?: string; providerModule?: boolean | 'root' } = {},
): Rewrite {
  const files = commands.filter((entry) => entry.op === 'append').map((entry) => join(project, entry.path));
  const before = files.map((file) => (existsSync(file) ? digest(file) : null));
  // (A module provider's files are written by the driver itself.)
  const absent = options.providerModule ? [] : fileWrites.filter((path) => !existsSync(join(project, path)));
  const report = drive(
    {
      project,
      mode: 'rewrite',
      commands,
      fileWrites,
      inWorker: options.inWorker === true,
      providerModule: options.providerModule ?? false,
    },
    options.cwd ?? project,
    options.execArgv,
  ) as Rewrite;
  expect(report.status).toBe('finished');
  expect(report.contained).toMatchObject({ rung: 'bubblewrap', protectedPaths: 'enforced' });
  // The commands ran (their paths are built at run time, so no check of the line saw them) and the sandbox stopped each write.
  commands.forEach((entry, index) => {
    // Read-only (EROFS), or a made directory's parent an empty read-only mount that cannot hold it.
    expect(report.answers[index]?.content).toMatch(new RegExp(`(EROFS|ENOENT) ${entry.path}\\n`));
  });
  // The file tools act in the harness's process, where no mount reaches: the policy's trust layer refuses them, naming it.
  for (const answer of report.answers.slice(commands.length)) {
    expect(answer).toMatchObject({ name: 'write_file', isError: true });
    expect(answer.content).toContain('(layer trust)');
  }
  // Unchanged where they were there before the run; and none ends with what the commands appended.
  expect(files.map((file, index) => (before[index] === null ? null : digest(file)))).toEqual(before);
  for (const file of files) expect(readFileSync(file, 'utf8').endsWith('//')).toBe(false);
  for (const entry of commands.filter((item) => item.op === 'mkdir'))
    expect(existsSync(join(project, entry.path))).toBe(false);
  for (const path of absent) expect(existsSync(join(project, path))).toBe(false);
  return report;
}

describe('the harness code a run could reach', () => {
  it('keeps its modules, its package.json, its native source and its node_modules from the commands and file tools of a run whose workspace holds them', () => {
    const project = installedProject();
    tryRewrites(
      project,
      [
        { path: 'node_modules/io-harness/dist/index.js', op: 'append' },
        { path: 'node_modules/io-harness/package.json', op: 'append' },
        { path: 'node_modules/io-harness/native/landlock-exec.c', op: 'append' },
        { path: 'node_modules/planted-pkg', op: 'mkdir' },
      ],
      ['node_modules/io-harness/dist/index.js', 'node_modules/other-pkg/index.js'],
    );
  }, 120_000);

  it('keeps, in a monorepo, the places Node would look for a dependency before the hoisted one, made or not', () => {
    const project = monorepo();
    tryRewrites(
      project,
      [
        // Nearer to io-harness's modules than the root's node_modules: a minimatch here would be loaded first.
        { path: 'packages/io-harness/node_modules/minimatch', op: 'mkdir' },
        { path: 'packages/node_modules/minimatch', op: 'mkdir' },
        { path: 'packages/io-harness/dist/index.js', op: 'append' },
        { path: 'packages/io-harness/native/landlock-exec.c', op: 'append' },
      ],
      ['packages/io-harness/node_modules/minimatch/index.js'],
    );
  }, 120_000);

  it('keeps a package the process preloads by name where each new thread would look for it, from the working directory', () => {
    const project = monorepo();
    const server = join(project, 'apps', 'server');
    mkdirSync(server, { recursive: true });
    mkdirSync(join(project, 'hoisted', 'pre-pkg'), { recursive: true });
    writeFileSync(join(project, 'hoisted', 'pre-pkg', 'index.js'), '// loaded into every thread\n');
    symlinkSync(join(project, 'hoisted', 'pre-pkg'), join(project, 'node_modules', 'pre-pkg'));
    tryRewrites(
      project,
      [
        // Nearer to the working directory than the hoisted one: every new thread would load this instead.
        { path: 'apps/server/node_modules/pre-pkg', op: 'mkdir' },
        { path: 'apps/node_modules/pre-pkg', op: 'mkdir' },
        // Where the hoisted one really is (its link's target), and the link's own directory.
        { path: 'hoisted/pre-pkg/index.js', op: 'append' },
      ],
      [],
      { cwd: server, execArgv: ['-r', 'pre-pkg'] },
    );
  }, 120_000);

  it('keeps a module provider named by a relative path with what it imports beside it', () => {
    const project = installedProject();
    tryRewrites(
      project,
      [
        { path: 'providers/calls.mjs', op: 'append' },
        { path: 'providers/model.mjs', op: 'append' },
        { path: 'providers/node_modules', op: 'mkdir' },
      ],
      ['providers/calls.mjs'],
      { providerModule: true },
    );
  }, 120_000);

  it("keeps what a module provider in the workspace's root imports beside it, its directory being the run's", () => {
    const project = installedProject();
    tryRewrites(
      project,
      [
        { path: 'calls.mjs', op: 'append' },
        { path: 'model.mjs', op: 'append' },
      ],
      ['calls.mjs'],
      { providerModule: 'root' },
    );
  }, 120_000);

  it('keeps the same when the supervisor runs on a worker thread of the embedder, and keeps what the process preloads', () => {
    const project = installedProject();
    writeFileSync(join(project, 'preload.cjs'), '// loaded into every thread\n');
    tryRewrites(
      project,
      [
        { path: 'node_modules/io-harness/dist/index.js', op: 'append' },
        { path: 'preload.cjs', op: 'append' },
      ],
      ['node_modules/io-harness/dist/index.js', 'preload.cjs'],
      { inWorker: true, execArgv: ['-r', './preload.cjs'] },
    );
  }, 120_000);

  it('does not load an AI SDK provider from a node_modules io-harness does not load from', () => {
    const project = installedProject();
    const cwd = join(temp(), 'elsewhere');
    mkdirSync(cwd);
    const marker = join(cwd, '..', 'planted-code-ran');
    const report = drive({ project, mode: 'planted-provider', marker }, cwd) as { status: string; reason: string };
    expect(report.status).toBe('failed');
    expect(report.reason).toContain(`will not load the package @planted/provider from ${join(cwd, 'node_modules')}`);
    expect(report.reason).toContain('npm install @planted/provider');
    expect(existsSync(marker)).toBe(false);
  }, 120_000);
});

describe('where the harness loads code from', () => {
  it('names the package a specifier names', () => {
    expect(packageName('vscode-jsonrpc/node')).toBe('vscode-jsonrpc');
    expect(packageName('@ai-sdk/openai-compatible')).toBe('@ai-sdk/openai-compatible');
    expect(packageName('@scope/name/deep/file.js')).toBe('@scope/name');
  });

  it("finds a package where Node's lookup does, and refuses one found outside the kept directories", () => {
    const top = temp();
    const kept = join(top, 'app', 'node_modules');
    mkdirSync(join(kept, 'kept-pkg'), { recursive: true });
    mkdirSync(join(top, 'node_modules', 'planted-pkg'), { recursive: true });
    mkdirSync(join(top, 'node_modules', 'kept-pkg'), { recursive: true });
    const from = join(top, 'app', 'src');
    mkdirSync(from);
    // The nearest one wins, as in Node: the copy higher up is never looked at.
    expect(keptPackageDir('kept-pkg', from, [kept])).toBe(join(kept, 'kept-pkg'));
    expect(keptPackageDir('missing-pkg', from, [kept])).toBeNull();
    let refused: unknown;
    try {
      keptPackageDir('planted-pkg', from, [kept]);
    } catch (error) {
      refused = error;
    }
    expect(refused).toMatchObject({ code: ErrorCode.CodeNotKept, details: { package: 'planted-pkg' } });
    // A thread that was never told the kept directories looks the package up and checks nothing.
    expect(keptPackageDir('planted-pkg', from, [])).toBe(join(top, 'node_modules', 'planted-pkg'));
  });

  it('finds a linked package by its real path: a link out of a kept node_modules is refused', () => {
    const top = temp();
    const kept = join(top, 'app', 'node_modules');
    mkdirSync(kept, { recursive: true });
    mkdirSync(join(top, 'packages', 'provider'), { recursive: true });
    symlinkSync(join(top, 'packages', 'provider'), join(kept, 'linked-pkg'));
    expect(() => keptPackageDir('linked-pkg', join(top, 'app'), [kept])).toThrow(
      /will not load the package linked-pkg/,
    );
  });

  it('lists its code, its package.json, its native source, every node_modules on the way up made or not, and the preloads', () => {
    const cwd = temp();
    const { code, protect } = harnessCodePaths(cwd, [
      '--require',
      './tracing.cjs',
      '--import=file:///opt/hooks/start.mjs',
      '-r',
      'some-package/register',
    ]);
    for (const part of ['src', 'package.json', 'native', 'node_modules']) expect(code).toContain(join(REPO, part));
    // Places a dependency would be looked for above the package, whether or not they exist.
    expect(code).toContain(join(REPO, '..', 'node_modules'));
    expect(code).toContain('/node_modules');
    // Preloads named by path, from the working directory, with the places their packages are found; their
    // directories are kept too, but are no place to find a package (one may hold the workspace).
    expect(code).toContain(join(cwd, 'tracing.cjs'));
    expect(code).toContain('/opt/hooks/start.mjs');
    expect(code).toContain('/opt/hooks/node_modules');
    expect(protect).toEqual(expect.arrayContaining([cwd, '/opt/hooks']));
    expect(code).not.toContain(cwd);
    // A package preloaded by name: every place it is looked for from the working directory (here
    // no node_modules exists, so each is kept whole).
    expect(code).toContain(join(cwd, 'node_modules'));
    expect(code).toContain(join(cwd, '..', 'node_modules'));
  });

  it('reads what a module imports by relative path, followed, and the package.json that decides how it is read', () => {
    const dir = temp();
    writeFileSync(
      join(dir, 'model.mjs'),
      "import { a } from './a.js';\nimport 'zod';\nexport const c = () => import('./lib/c.mjs');\nimport x from '#alias';\n",
    );
    writeFileSync(join(dir, 'a.js'), "module.exports = require('./b');\n");
    writeFileSync(join(dir, 'b.js'), 'module.exports = 1;\n');
    mkdirSync(join(dir, 'lib'));
    writeFileSync(join(dir, 'lib', 'c.mjs'), "const name = './never'; export default () => import(name);\n");
    writeFileSync(join(dir, 'package.json'), '{"type":"commonjs"}');
    expect(relativeImports(join(dir, 'model.mjs')).sort()).toEqual(
      [join(dir, 'a.js'), join(dir, 'b.js'), join(dir, 'lib', 'c.mjs'), join(dir, 'package.json')].sort(),
    );
  });

  it('keeps a place a preloaded package could be put by its first missing directory, so every rung holds it', () => {
    const cwd = temp();
    mkdirSync(join(cwd, 'app'));
    const { code } = harnessCodePaths(join(cwd, 'app'), ['-r', '@scope/pre']);
    // Neither node_modules exists: each is kept whole, not a path two or three levels below a missing directory.
    expect(code).toContain(join(cwd, 'app', 'node_modules'));
    expect(code).toContain(join(cwd, 'node_modules'));
    expect(code).not.toContain(join(cwd, 'app', 'node_modules', '@scope', 'pre'));
    mkdirSync(join(cwd, 'node_modules'));
    expect(harnessCodePaths(join(cwd, 'app'), ['-r', '@scope/pre']).code).toContain(
      join(cwd, 'node_modules', '@scope'),
    );
  });
});
