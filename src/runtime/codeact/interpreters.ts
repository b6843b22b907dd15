/**
 * The interpreters a program runs on: the host's, found and version-probed, never
 * downloaded. A name is looked up in the system's directories only (never PATH, which may
 * hold a directory a run can write: see find-program.ts), and the default `node`, where
 * they have none, is the one running the harness; an absolute path is taken as named,
 * unless it lies where the run can write. What a probe found is kept per thread,
 * by path and the file's change time.
 */
import { spawnSync } from 'node:child_process';
import { realpathSync, statSync } from 'node:fs';
import { dirname, isAbsolute } from 'node:path';
import { findSystemProgram, SYSTEM_PATH, writableByRun } from '../exec/find-program.js';
import type { CodeActData, CodeActLanguage } from './codeact.js';

/** An interpreter a program can run on, or why there is none. */
export type Interpreter =
  | { language: CodeActLanguage; usable: true; path: string; version: string }
  | { language: CodeActLanguage; usable: false; reason: string };

/** The oldest versions a program's prelude runs on. */
const MINIMUM: Record<CodeActLanguage, [number, number]> = { python: [3, 8], javascript: [18, 0] };

/** What prints the interpreter's version, as major.minor.patch. */
const PROBES: Record<CodeActLanguage, string[]> = {
  python: ['-I', '-c', 'import sys; print("%d.%d.%d" % sys.version_info[:3])'],
  javascript: ['-p', 'process.versions.node'],
};

/** How long a version probe may take. */
const PROBE_MS = 10_000;

const probed = new Map<string, { version: string } | { reason: string }>();

/** The interpreter for `language` under `data`, where the run may write `untrusted` (its workspace, its writable roots). */
export function findInterpreter(
  language: CodeActLanguage,
  data: CodeActData,
  untrusted: readonly string[],
): Interpreter {
  const named = language === 'python' ? data.python : data.node;
  const where = isAbsolute(named)
    ? named
    : (() => {
        const found = findSystemProgram(named);
        if (found.kind === 'found') return found.path;
        // The default node, where the system's directories have none: the one running the harness.
        return language === 'javascript' && named === 'node' ? process.execPath : null;
      })();
  if (where === null)
    return {
      language,
      usable: false,
      reason: `no ${named} in the system's directories (${process.env.IO_HARNESS_SYSTEM_PATH ?? SYSTEM_PATH})`,
    };
  let real: string;
  let changed: number;
  try {
    real = realpathSync(where);
    const stat = statSync(real);
    if (!stat.isFile()) return { language, usable: false, reason: `${where} is not a file` };
    // A program anyone may replace (or put beside it, by its directory) is not one to run.
    if ((stat.mode & 0o002) !== 0 || (statSync(dirname(real)).mode & 0o002) !== 0)
      return { language, usable: false, reason: `${real} or its directory may be written by anyone, so it is not run` };
    changed = stat.ctimeMs;
  } catch {
    return { language, usable: false, reason: `${where} does not exist` };
  }
  const writable = writableByRun(real, untrusted);
  if (writable !== null)
    return { language, usable: false, reason: `${where} is where the run can write (${writable}), so it is not run` };
  const key = `${language} ${real} ${changed}`;
  let found = probed.get(key);
  if (!found) {
    found = probe(language, real);
    probed.set(key, found);
  }
  return 'reason' in found
    ? { language, usable: false, reason: `${where}: ${found.reason}` }
    : { language, usable: true, path: real, version: found.version };
}

/** Runs the interpreter to read its version, and holds it to the minimum. */
function probe(language: CodeActLanguage, path: string): { version: string } | { reason: string } {
  const result = spawnSync(path, PROBES[language], {
    encoding: 'utf8',
    timeout: PROBE_MS,
    env: { PATH: SYSTEM_PATH },
    cwd: '/',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (result.error) return { reason: `could not be run (${result.error.message})` };
  const version = (result.stdout ?? '').trim();
  const match = /^(\d+)\.(\d+)\.(\d+)$/.exec(version);
  if (result.status !== 0 || !match)
    return { reason: `did not say its version (exit ${result.status ?? result.signal}: ${version.slice(0, 200)})` };
  const [major, minor] = [Number(match[1]), Number(match[2])];
  const [wantMajor, wantMinor] = MINIMUM[language];
  if (major < wantMajor || (major === wantMajor && minor < wantMinor))
    return { reason: `is version ${version}; programs need ${wantMajor}.${wantMinor} or later` };
  return { version };
}
