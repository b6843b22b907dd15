/**
 * The Landlock helper (native/landlock-exec.c): built with the system C compiler on first
 * use, no node-gyp, and cached by the hash of its source, so a changed source is built
 * anew and a cached binary is never one of another source. A host with no compiler, or
 * whose kernel has no Landlock, has no helper; {@link landlockHelper} says why.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findProgram } from '../find-program.js';

/** What the helper reports it applied (its `--report` line). */
export interface LandlockReport {
  abi: number;
  fs: boolean;
  tcp: boolean;
  scoped: boolean;
}

/**
 * The helper, Landlock verified; or why not, with the binary where it was built and runs
 * but the kernel has no Landlock (it can still make grants with mounts, join cgroups, relay).
 */
export type Helper =
  | { ok: true; path: string; report: LandlockReport }
  | { ok: false; reason: string; binary?: string };

/** The helper's source, shipped with the package beside dist/. */
const SOURCE = fileURLToPath(new URL('../../../../native/landlock-exec.c', import.meta.url));

let built: Helper | undefined;

/** Where built helpers are kept: `$XDG_CACHE_HOME/io-harness`, else `~/.cache/io-harness`, else the temp dir. */
function cacheDir(): string {
  const xdg = process.env.XDG_CACHE_HOME;
  if (xdg?.startsWith('/')) return join(xdg, 'io-harness');
  const home = homedir();
  return home ? join(home, '.cache', 'io-harness') : join(tmpdir(), 'io-harness-cache');
}

/**
 * Makes `dir` and its missing parents, one at a time: `mkdirSync`'s own recursion never
 * returns for a path under /proc, which a mistaken XDG_CACHE_HOME can name.
 */
function makeDirs(dir: string): void {
  const parts = dir.split('/').filter((part) => part !== '');
  let at = '';
  for (const part of parts) {
    at = `${at}/${part}`;
    try {
      mkdirSync(at, { mode: 0o700 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
}

/** The helper for this host, built once per process (and once per source, across processes). */
export function landlockHelper(): Helper {
  built ??= build();
  return built;
}

function build(): Helper {
  if (process.platform !== 'linux') return { ok: false, reason: `Landlock is Linux's; this is ${process.platform}` };
  let source: Buffer;
  try {
    source = readFileSync(SOURCE);
  } catch {
    return { ok: false, reason: `the helper's source is missing (${SOURCE})` };
  }
  const hash = createHash('sha256').update(source).update(process.arch).digest('hex').slice(0, 16);
  const dir = cacheDir();
  const binary = join(dir, `landlock-exec-${hash}`);
  if (!existsSync(binary)) {
    const compiler = ['cc', 'gcc', 'clang']
      .map((name) => findProgram(name, process.env.PATH, '/'))
      .find((found) => found.kind === 'found');
    if (compiler?.kind !== 'found') return { ok: false, reason: 'no C compiler (cc, gcc or clang) on PATH' };
    try {
      makeDirs(dir);
    } catch (error) {
      return { ok: false, reason: `cannot make the helper's cache ${dir}: ${(error as Error).message}` };
    }
    // Built beside its final name and renamed, so a process never runs a half-written binary.
    const partial = `${binary}.${process.pid}.partial`;
    const compiled = spawnSync(compiler.path, ['-O2', '-o', partial, SOURCE], { encoding: 'utf8', timeout: 60_000 });
    if (compiled.status !== 0) {
      rmSync(partial, { force: true });
      const said = (compiled.stderr || compiled.error?.message || `exit status ${compiled.status}`).trim();
      return { ok: false, reason: `the helper did not compile: ${said.split('\n')[0]}` };
    }
    chmodSync(partial, 0o755);
    renameSync(partial, binary);
  }
  // Verified by running it: it applies a ruleset and reports what it could.
  const probe = spawnSync(binary, ['--read', '/', '--report'], { encoding: 'utf8', timeout: 10_000 });
  if (probe.status !== 0) {
    const said = (probe.stderr || probe.error?.message || `exit status ${probe.status}`).trim();
    // It ran and said why (status 125): built, only the kernel lacks what Landlock needs.
    return { ok: false, reason: said.replace(/^landlock-exec: /, ''), ...(probe.status === 125 ? { binary } : {}) };
  }
  try {
    const report = JSON.parse(probe.stdout) as LandlockReport;
    return { ok: true, path: binary, report };
  } catch {
    return { ok: false, reason: `the helper's report is not JSON: ${probe.stdout.slice(0, 200)}` };
  }
}
