/**
 * Finds a program the way `execvp` does: a name holding a `/` from the working directory
 * (joined as text, so the kernel resolves a `..` after a link from where the link leads),
 * any other name in the entries of PATH, in order (an empty entry is the working
 * directory). The first regular file found that may be executed is the one; one found
 * that may not be is reported when nothing better is found. Nothing throws on a missing file.
 */
import { accessSync, constants, statSync } from 'node:fs';

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
