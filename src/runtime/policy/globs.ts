/**
 * Compiling a glob the model or a policy author wrote, with the limits that keep it
 * cheap: a glob is matched against every path a decision or a search looks at, so one
 * that expands into a hundred thousand alternatives (`{a,b}{c,d}...`) or runs to
 * megabytes would make every later match slow. Policy rules are compiled with it when
 * they are added, grep and find before they walk, so a bad glob is refused up front.
 */
import { braceExpand, Minimatch, type MinimatchOptions } from 'minimatch';

/** The most characters a glob (a policy pattern, a grep glob, a find pattern) may have. */
export const MAX_GLOB_CHARS = 4096;
/** The most alternatives a glob's braces may expand into (`{a,b}{c,d}` is four). */
export const MAX_GLOB_ALTERNATIVES = 256;

export type CompiledGlob = { ok: true; glob: Minimatch } | { ok: false; problem: string };

/** `pattern` compiled, or what is wrong with it, in words for whoever wrote it. */
export function compileGlob(pattern: string, options: MinimatchOptions): CompiledGlob {
  if (pattern.length > MAX_GLOB_CHARS) {
    return { ok: false, problem: `it is ${pattern.length} characters long, above the limit of ${MAX_GLOB_CHARS}` };
  }
  try {
    // Expanded with a cap one above the limit: the expansion stops there instead of running on.
    const alternatives = braceExpand(pattern, { ...options, braceExpandMax: MAX_GLOB_ALTERNATIVES + 1 }).length;
    if (alternatives > MAX_GLOB_ALTERNATIVES) {
      return {
        ok: false,
        problem: `its braces expand into more than ${MAX_GLOB_ALTERNATIVES} alternatives; write fewer {a,b} groups (or several rules)`,
      };
    }
    const glob = new Minimatch(pattern, { ...options, braceExpandMax: MAX_GLOB_ALTERNATIVES + 1 });
    // Compile the matcher now, not at the first match.
    glob.match('');
    return { ok: true, glob };
  } catch (error) {
    return { ok: false, problem: `it cannot be compiled as a glob (${(error as Error).message})` };
  }
}
