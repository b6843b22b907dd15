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
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../src/errors.js';
import { harnessCodePaths, keptPackageDir, packageName } from '../src/runtime/exec/containment/harness-code.js';

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

function drive(config: Record<string, unknown>, cwd: string): Record<string, unknown> {
  const out = spawnSync(process.execPath, [SCRIPT, JSON.stringify(config)], { cwd, encoding: 'utf8', timeout: 90_000 });
  const line = out.stdout.trim().split('\n').at(-1) ?? '';
  if (out.status !== 0 || !line.startsWith('{')) throw new Error(`the driver failed (${out.status}): ${out.stderr}`);
  return JSON.parse(line);
}

const digest = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

describe('the harness code a run could reach', () => {
  it('keeps its modules, its package.json and its node_modules from the commands and file tools of a run whose workspace holds them', () => {
    const project = installedProject();
    const index = join(project, 'node_modules', 'io-harness', 'dist', 'index.js');
    const manifest = join(project, 'node_modules', 'io-harness', 'package.json');
    const before = [digest(index), digest(manifest)];
    const report = drive({ project, mode: 'rewrite' }, project) as {
      status: string;
      answers: { name: string; content: string; isError: boolean }[];
      contained: { rung: string; protectedPaths: string };
    };
    expect(report.status).toBe('finished');
    expect(report.contained).toMatchObject({ rung: 'bubblewrap', protectedPaths: 'enforced' });
    const [append, plant, rewrite, writeModule, writePackage] = report.answers;
    // The commands ran (their paths are built at run time, so no check of the line saw them) and the sandbox stopped each write.
    expect(append?.content).toContain('EROFS node_modules/io-harness/dist/index.js');
    expect(plant?.content).toContain('EROFS node_modules/planted-pkg');
    expect(rewrite?.content).toContain('EROFS node_modules/io-harness/package.json');
    // The file tools act in the harness's process, where no mount reaches: the policy's trust layer refuses them, naming its rule.
    expect(writeModule).toMatchObject({ isError: true });
    expect(writeModule?.content).toContain('deny-write node_modules/io-harness/dist (layer trust)');
    expect(writePackage).toMatchObject({ isError: true });
    expect(writePackage?.content).toContain('deny-write node_modules (layer trust)');
    expect([digest(index), digest(manifest)]).toEqual(before);
    expect(existsSync(join(project, 'node_modules', 'planted-pkg'))).toBe(false);
    expect(existsSync(join(project, 'node_modules', 'other-pkg'))).toBe(false);
  }, 120_000);

  it('does not load an AI SDK provider from a node_modules made after the process started', () => {
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

  it('lists its code, its package.json and every node_modules on the way up, a linked one by its target too', () => {
    const top = temp();
    const target = join(top, 'real-modules');
    mkdirSync(target);
    mkdirSync(join(top, 'work'));
    symlinkSync(target, join(top, 'work', 'node_modules'));
    const paths = harnessCodePaths(join(top, 'work'));
    expect(paths).toContain(join(REPO, 'src'));
    expect(paths).toContain(join(REPO, 'package.json'));
    expect(paths).toContain(join(REPO, 'node_modules'));
    expect(paths).toContain(join(top, 'work', 'node_modules'));
    expect(paths).toContain(target);
    // A directory with no node_modules adds nothing of its own.
    expect(paths.filter((path) => path.startsWith(top))).toHaveLength(2);
  });
});
