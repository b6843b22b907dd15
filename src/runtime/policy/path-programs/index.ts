/**
 * The programs whose arguments the checker reads as paths: which words a program reads,
 * which it writes, and which it walks (a recursive copy, a recursive grep), found by
 * parsing its options with its own table (options.ts), so an option's value is never
 * taken for a file and `--` is honoured. `allowExec('cat*')` then still refuses
 * `cat secrets/.env` under `denyRead('secrets/**')`.
 *
 * A program not in this table keeps the plain exec rule: its arguments are not file acts.
 */
import { READING } from './reading.js';
import type { PathAnalysis } from './use.js';
import { WRITING } from './writing.js';

export { SED_OPTIONS } from './reading.js';
export { NO_PATHS, type PathAnalysis, type PathUse } from './use.js';

const PATH_PROGRAMS = { ...READING, ...WRITING };

/**
 * The paths a known program reads and writes, or null when the program is not one the
 * checker knows (or only prints its help). An argv it cannot read is a refusal.
 */
export function pathUse(name: string, args: readonly string[]): PathAnalysis | null {
  const reader = Object.hasOwn(PATH_PROGRAMS, name) ? PATH_PROGRAMS[name] : undefined;
  return reader ? reader(name, args) : null;
}

/** Whether the checker knows how a program treats its path arguments. */
export function knowsPaths(name: string): boolean {
  return Object.hasOwn(PATH_PROGRAMS, name);
}
