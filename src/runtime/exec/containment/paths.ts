/**
 * Paths as the containment walks them: real where they exist, held by the deepest of a
 * set of roots, and taken one component at a time with what is there, never following a
 * link (the protected paths, the masks and the mount points made for both).
 */
import { lstatSync, realpathSync, type Stats, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/** The real path of `path`, or `path` itself where it does not exist. */
export function real(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/** Whether `path` is a directory, following links; false where nothing is there. */
export function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** The directory within `roots` that holds `path`, the deepest; null when none does. */
export function holder(path: string, roots: readonly string[]): string | null {
  let best: string | null = null;
  for (const root of roots)
    if ((path === root || path.startsWith(`${root}/`)) && (best === null || root.length > best.length)) best = root;
  return best;
}

/**
 * Each component of `path` below `base` (`path` itself when no `base` holds it), with what
 * lstat finds there (null: nothing), shallowest first; the caller stops where it likes.
 */
export function* components(
  base: string | null,
  path: string,
): Generator<{ at: string; last: boolean; stat: Stats | null }> {
  const parts = base === null || base === path ? [path] : relative(base, path).split('/');
  let at = base === null || base === path ? '' : base;
  for (const [index, part] of parts.entries()) {
    at = at === '' ? part : join(at, part);
    let stat: Stats | null = null;
    try {
      stat = lstatSync(at);
    } catch {
      stat = null;
    }
    yield { at, last: index === parts.length - 1, stat };
  }
}

/** Whether anything is at `path`, a link included (one that leads nowhere counts). */
export function present(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}
