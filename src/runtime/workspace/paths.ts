/**
 * Where a path the model names is, checked against the workspace root. A path is checked
 * on its realpath after following symbolic links (through the deepest ancestor that
 * exists), so neither `../`, an absolute path nor a link can reach outside; an act that
 * names its path instead takes it by name alone, no link followed ({@link plainPath}),
 * and is then carried out beneath the root without following one (./beneath.ts).
 */
import { lstatSync, readlinkSync, realpathSync, type Stats, statSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve as resolvePath, sep } from 'node:path';
import type { ToolResult } from '../tools/tool.js';
import { boundary, error, refusal } from './answers.js';
import { message } from './diffs.js';

/** What a path is checked against: the root's realpath and, in single-file mode, the one file. */
export interface WorkspaceScope {
  /** The realpath of the root; every path the tools touch is inside it. */
  readonly root: string;
  /** Single-file mode: the one workspace-relative path the tools may touch; otherwise `null`. */
  readonly file: string | null;
}

export type Resolved = { ok: true; absolute: string; relative: string } | { ok: false; result: ToolResult };

/** The refusal of a path other than the one file a single-file workspace is limited to; null when it may be used. */
function outsideSingleFile(scope: WorkspaceScope, input: string, path: string): ToolResult | null {
  if (scope.file === null || path === scope.file) return null;
  return refusal(
    'workspace.single-file',
    `${input} was refused: this workspace is limited to the single file ${scope.file}. Work on ${scope.file} only.`,
  );
}

/** `input` as a workspace-relative path by name alone, no link followed: the path an act names. */
export function plainPath(
  scope: WorkspaceScope,
  input: string,
): { ok: true; path: string } | { ok: false; result: ToolResult } {
  if (typeof input !== 'string' || input === '' || input.includes('\0')) {
    return {
      ok: false,
      result: error(`path ${JSON.stringify(input)} is not a path; pass a path relative to the workspace root.`),
    };
  }
  const inside = relative(scope.root, resolvePath(scope.root, input));
  if (inside === '' || inside === '..' || inside.startsWith(`..${sep}`) || isAbsolute(inside)) {
    return boundary(`${input} is not a file inside the workspace ${scope.root}; name a file inside it.`);
  }
  const path = inside.split(sep).join('/');
  const single = outsideSingleFile(scope, input, path);
  if (single) return { ok: false, result: single };
  return { ok: true, path };
}

/** Resolves `input` and checks it against the root, the root itself and single-file mode. */
export function locate(scope: WorkspaceScope, input: string, allowRoot: boolean): Resolved {
  if (typeof input !== 'string' || input === '') {
    return { ok: false, result: error('path is empty; pass a path relative to the workspace root.') };
  }
  if (input.includes('\0')) {
    return { ok: false, result: error(`path ${JSON.stringify(input)} contains a NUL character; pass a real path.`) };
  }
  const lexical = resolvePath(scope.root, input);
  let real: string;
  try {
    real = realpathDeep(lexical);
  } catch (problem) {
    const code = (problem as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') {
      return boundary(
        `${input} goes through a loop of symbolic links, so where it leads cannot be checked; it was refused.`,
      );
    }
    return { ok: false, result: error(`${input} cannot be resolved: ${message(problem)}.`) };
  }
  const inside = relative(scope.root, real);
  if (inside === '..' || inside.startsWith(`..${sep}`) || isAbsolute(inside)) {
    const viaLink = real !== lexical && inLexically(scope.root, lexical);
    return boundary(
      `${input} is outside the workspace${viaLink ? ' (a symbolic link on the way leads out of it)' : ''}; only paths inside ${scope.root} can be used. Pass a path relative to the workspace root.`,
    );
  }
  if (inside === '' && !allowRoot) {
    return boundary(`${input} is the workspace root itself, a directory; name a file inside it.`);
  }
  const path = inside === '' ? '.' : inside.split(sep).join('/');
  const single = outsideSingleFile(scope, input, path);
  if (single) return { ok: false, result: single };
  return { ok: true, absolute: real, relative: path };
}

/**
 * The realpath of `path`, for a path that may not exist yet: the realpath of its deepest
 * existing ancestor with the rest appended. A dangling symbolic link is followed to
 * where it points, so a link to a missing file outside the root cannot be written through.
 */
function realpathDeep(path: string, hops = 0): string {
  if (hops > 40) throw Object.assign(new Error(`too many symbolic links at ${path}`), { code: 'ELOOP' });
  try {
    return realpathSync(path);
  } catch (problem) {
    const code = (problem as NodeJS.ErrnoException).code;
    // EINVAL is realpath's own readlink finding no link where its lstat saw one: the path was
    // swapped between the two (a command racing the check). Like a part that is missing, it
    // is walked here, a part at a time, each looked at again.
    if (code !== 'ENOENT' && code !== 'ENOTDIR' && code !== 'EINVAL') throw problem;
  }
  let stats: Stats | undefined;
  try {
    stats = lstatSync(path);
  } catch {
    stats = undefined;
  }
  if (stats?.isSymbolicLink()) {
    let target: string;
    try {
      target = readlinkSync(path);
    } catch {
      // Gone or replaced since the lstat (a command racing the check): look again, counted as a hop.
      return realpathDeep(path, hops + 1);
    }
    return realpathDeep(resolvePath(dirname(path), target), hops + 1);
  }
  const parent = dirname(path);
  if (parent === path) return path;
  return join(realpathDeep(parent, hops), basename(path));
}

/** Whether `path` is `root` or under it, by name alone. */
export function inLexically(root: string, path: string): boolean {
  const inside = relative(root, path);
  return !(inside === '..' || inside.startsWith(`..${sep}`) || isAbsolute(inside));
}

export function statOrNull(path: string): Stats | null {
  try {
    return statSync(path);
  } catch {
    return null;
  }
}
