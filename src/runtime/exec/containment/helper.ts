/**
 * The Landlock helper (native/landlock-exec.c): built with the system C compiler on first
 * use, no node-gyp, and cached by the hash of its source, so a changed source is built
 * anew and a cached binary is never one of another source. The bytes built are recorded
 * (their sha256 beside the binary) and checked before the binary is first run in a
 * process: one that does not match is removed and built again. A host with no compiler,
 * or whose kernel has no Landlock, has no helper; {@link landlockHelper} says why.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { packageFile } from '../../../package-files.js';
import { findSystemProgram } from '../find-program.js';

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
const SOURCE = packageFile('native', 'landlock-exec.c');

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

/** The sha256 of a file's bytes, in hex. */
function digest(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/**
 * Whether the binary at `path` is the one recorded beside it when it was built: a regular
 * file of this user's, written by no one else (not group- or world-writable), whose bytes
 * hash to the record. The cache directory is kept read-only to every contained command
 * (see contained.ts), so no run can rewrite the two together.
 */
function verified(path: string): boolean {
  try {
    const stat = lstatSync(path);
    const uid = process.getuid?.();
    if (!stat.isFile() || (stat.mode & 0o022) !== 0 || (uid !== undefined && stat.uid !== uid)) return false;
    const recorded = readFileSync(`${path}.sha256`, 'utf8').trim();
    return recorded.length === 64 && recorded === digest(path);
  } catch {
    return false;
  }
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
  // Trusted by content, never by name: a binary whose bytes are not the ones this harness
  // built and recorded (replaced, or a half-written one) is never run, on the host or in
  // a sandbox; it is built again.
  if (existsSync(binary) && !verified(binary)) {
    rmSync(binary, { force: true });
    rmSync(`${binary}.sha256`, { force: true });
  }
  if (!existsSync(binary)) {
    const compiler = ['cc', 'gcc', 'clang']
      .map((name) => findSystemProgram(name))
      .find((found) => found.kind === 'found');
    if (compiler?.kind !== 'found')
      return {
        ok: false,
        reason: "no C compiler (cc, gcc or clang) in the system's directories (IO_HARNESS_SYSTEM_PATH names others)",
      };
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
    writeFileSync(`${binary}.sha256.${process.pid}.partial`, `${digest(partial)}\n`, { mode: 0o644 });
    renameSync(`${binary}.sha256.${process.pid}.partial`, `${binary}.sha256`);
    renameSync(partial, binary);
    if (!verified(binary)) return { ok: false, reason: `the helper at ${binary} changed as it was built` };
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
