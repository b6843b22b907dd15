/**
 * Finds a program the way `execvp` does: a name holding a `/` from the working directory
 * (joined as text, so the kernel resolves a `..` after a link from where the link leads),
 * any other name in the entries of PATH, in order (an empty entry is the working
 * directory). The first regular file found that may be executed is the one; one found
 * that may not be is reported when nothing better is found. Nothing throws on a missing file.
 */
import { accessSync, constants, realpathSync, statSync } from 'node:fs';
import { isAbsolute, relative } from 'node:path';

export type Located = { kind: 'found'; path: string } | { kind: 'missing' } | { kind: 'not-executable'; path: string };

/** What execvp searches when PATH is not set. */
const DEFAULT_PATH = '/bin:/usr/bin';

export function findProgram(program: string, path: string | undefined, cwd: string): Located {
  const under = (dir: string) => (dir === '' ? cwd : dir.startsWith('/') ? dir : `${cwd}/${dir}`);
  const candidates = program.includes('/')
    ? [program.startsWith('/') ? program : `${cwd}/${program}`]
    : (path ?? DEFAULT_PATH).split(':').map((dir) => `${under(dir)}/${program}`);
  let blocked: string | null = null;
  for (const candidate of candidates) {
    if (!statSync(candidate, { throwIfNoEntry: false })?.isFile()) continue;
    try {
      accessSync(candidate, constants.X_OK);
      return { kind: 'found', path: candidate };
    } catch {
      // not executable: execvp goes on to the next entry
      blocked ??= candidate;
    }
  }
  return blocked === null ? { kind: 'missing' } : { kind: 'not-executable', path: blocked };
}

/**
 * Where the harness looks for the programs it runs itself (bubblewrap, unshare, setpriv, the
 * C compiler that builds the containment helper): the system's directories, never PATH. A
 * PATH entry may be a directory a run can write (`node_modules/.bin`, a workspace's `bin`,
 * the current directory), and a program planted there would run on the host, uncontained,
 * the next time the harness starts its containment. `IO_HARNESS_SYSTEM_PATH` replaces the
 * list, for a host that keeps them elsewhere; it is read from the harness's own
 * environment, which no run's command can change.
 */
export const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** A program the harness runs itself, found in {@link SYSTEM_PATH} (see there). */
export function findSystemProgram(program: string, env: NodeJS.ProcessEnv = process.env): Located {
  const path = (env.IO_HARNESS_SYSTEM_PATH ?? SYSTEM_PATH)
    .split(':')
    .filter((dir) => dir.startsWith('/'))
    .join(':');
  return findProgram(program, path, '/');
}

/** Whether `path` is `dir` or lies beneath it, compared as written. */
export function isWithin(path: string, dir: string): boolean {
  const rel = relative(dir, path);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

/**
 * The one of `untrusted` (the directories a run can write: its workspace, its writable
 * roots) that `real` (a program's real path) lies in, each compared by its real path where
 * it exists; null when none. A program there is one a run could have put in place, and
 * the harness does not run it.
 */
export function writableByRun(real: string, untrusted: readonly string[]): string | null {
  for (const dir of untrusted) {
    let base = dir;
    try {
      base = realpathSync(dir);
    } catch {
      // not there: compared as written
    }
    if (isWithin(real, base)) return dir;
  }
  return null;
}
