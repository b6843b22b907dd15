/**
 * Files of this package that its code reads at run time (its package.json, the Landlock
 * helper's C source, the viewer's built page), found from the package's root rather than
 * relative to the module that asks: the same module runs from `dist/` as tsc writes it and
 * from `dist/bundle/` (what the package exports; scripts/bundle.mjs), at different depths.
 */
import { existsSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The nearest package.json at or above `dir`, or null when there is none up to the root. */
export function manifestOf(dir: string): string | null {
  for (let at = dir; ; at = dirname(at)) {
    const path = join(at, 'package.json');
    if (existsSync(path)) return path;
    if (dirname(at) === at) return null;
  }
}

const HERE = dirname(realpathSync(fileURLToPath(import.meta.url)));

/** This package's root: the real directory of its package.json, so a linked install names the files it really reads. */
export const PACKAGE_ROOT: string = dirname(manifestOf(HERE) ?? join(HERE, 'package.json'));

/** A file of this package by its path from the package's root, e.g. `packageFile('native', 'landlock-exec.c')`. */
export function packageFile(...parts: string[]): string {
  return join(PACKAGE_ROOT, ...parts);
}
