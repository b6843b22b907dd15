/**
 * Content put at a path, and the content a path holds now, by the path as named with no
 * link followed on the way (./beneath.ts): how a planned change is made, and how a restore
 * point is taken before it and put back after. A directory on the way that changes under
 * the act (a command racing it) is refused, never followed.
 */
import { ErrorCode, HarnessError } from '../../errors.js';
import type { ToolResult } from '../tools/tool.js';
import { error, refusal, refusedResult } from './answers.js';
import { lookBeneath, removeBeneath, replaceBeneath } from './beneath.js';
import { message } from './diffs.js';
import { MAX_WRITE_BYTES } from './limits.js';
import { plainPath, type WorkspaceScope } from './paths.js';

/** What the filesystem says when a path changed under an act that found it whole a moment before. */
const MOVED_CODES: ReadonlySet<string> = new Set(['ENOENT', 'ENOTDIR', 'EISDIR', 'ELOOP', 'EEXIST', 'ENOTEMPTY']);

/**
 * Puts `content` at `path` (or deletes the file when null), by the path as given, with no
 * link followed on the way: a planned change's `after`, or a restore point put back.
 */
export function restoreAt(scope: WorkspaceScope, path: string, content: string | Uint8Array | null): ToolResult | null {
  const plain = plainPath(scope, path);
  if (!plain.ok) return plain.result;
  try {
    const done =
      content === null ? removeBeneath(scope.root, plain.path) : replaceBeneath(scope.root, plain.path, content);
    return done.ok ? null : refusedResult(done);
  } catch (problem) {
    // The plan found the way there; a directory on it gone, or turned into a file or a link,
    // since is the tree changing under the act (a command racing it): refused, never followed.
    const code = (problem as NodeJS.ErrnoException).code;
    if (code !== undefined && MOVED_CODES.has(code))
      return refusal(
        'fs.path-moved',
        `${path} was refused: the directories on the way to it changed while it was written (${code}), so nothing was written there. Leave them in place and try again.`,
      );
    throw new HarnessError(ErrorCode.Internal, `could not write ${path}: ${message(problem)}`, {
      cause: problem,
      details: { path },
    });
  }
}

/**
 * What `path` holds now, read by name with no link followed: the bytes a restore point
 * keeps (null when there is no file), or the refusal or error to answer instead.
 */
export function currentAt(
  scope: WorkspaceScope,
  path: string,
): { ok: true; content: Buffer | null } | { ok: false; result: ToolResult } {
  const plain = plainPath(scope, path);
  if (!plain.ok) return plain;
  let looked: ReturnType<typeof lookBeneath>;
  try {
    looked = lookBeneath(scope.root, plain.path, MAX_WRITE_BYTES, true);
  } catch (problem) {
    return { ok: false, result: error(`${path} cannot be read: ${message(problem)}.`) };
  }
  if (!looked.ok) return { ok: false, result: refusedResult(looked) };
  if (looked.kind === 'file') return { ok: true, content: looked.bytes };
  if (looked.kind === 'missing' || looked.kind === 'blocked') return { ok: true, content: null };
  return {
    ok: false,
    result: error(
      `${path} changed since it was read (it is now ${looked.kind === 'directory' ? 'a directory' : looked.kind === 'too-large' ? 'above the write limit' : 'not a regular file'}); nothing was written. Read it again.`,
    ),
  };
}
