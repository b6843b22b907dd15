/**
 * Files of this package that its code reads at run time (its package.json, the Landlock
 * helper's C source, the viewer's built page), found from the package's root rather than
 * relative to the module that asks: the same module runs from `dist/` as tsc writes it and
 * from `dist/bundle/` (what the package exports; scripts/bundle.mjs), at different depths.
 */
import { existsSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The nearest directory at or above `dir` that holds a package.json, or `dir` when none does. */
export function packageRootAbove(dir: string): string {
  for (let at = dir; ; at = dirname(at)) {
    if (existsSync(join(at, 'package.json'))) return at;
    if (dirname(at) === at) return dir;
  }
}

/** This package's root: the real directory, so a linked install names the files it really reads. */
export const PACKAGE_ROOT: string = packageRootAbove(dirname(realpathSync(fileURLToPath(import.meta.url))));

/** A file of this package by its path from the package's root, e.g. `packageFile('native', 'landlock-exec.c')`. */
export function packageFile(...parts: string[]): string {
  return join(PACKAGE_ROOT, ...parts);
}
