/**
 * A change to one file, planned before anything is written: write_file, edit_file and
 * patch_file each give the whole file before and after, and their unified diff, so the
 * caller can record the diff and a restore point, and apply its policy, in between; a
 * refused or failed plan has touched nothing. The file's current text is read beneath the
 * root by its resolved path with no link followed, and protected names (`.git`, the
 * harness's configuration) are refused here, on that resolved path and as written.
 */
import { relative, resolve as resolvePath, sep } from 'node:path';
import type { StructuredPatch } from 'diff';
import type { ToolResult } from '../tools/tool.js';
import { binaryRefusal, error, hardLinkRefusal, refusal, refusedResult } from './answers.js';
import { lookBeneath, refuseProtected } from './beneath.js';
import { applyHunks, DEV_NULL, diffLib, diffStat, message, quote, recountHunks, unifiedDiff } from './diffs.js';
import { MAX_WRITE_BYTES } from './limits.js';
import { locate, type WorkspaceScope } from './paths.js';
import { decode, hasNul, SNIFF_BYTES } from './search.js';

/** One file's change: the whole file before and after, and their unified diff. */
export interface FileChange {
  /** Workspace-relative, with `/` separators. */
  path: string;
  /** `null`: the file did not exist. */
  before: string | null;
  /** `null`: the file is deleted. */
  after: string | null;
  /** The unified diff of the whole file (see {@link unifiedDiff}). */
  diff: string;
}

/**
 * A planned change, or the result to hand the model instead: a refusal, an error, or
 * (isError false) word that the change would leave the file as it is, so there is
 * nothing to record or apply.
 */
export type Planned = { ok: true; change: FileChange } | { ok: false; result: ToolResult };

export interface WriteArgs {
  path: string;
  content: string;
}
export interface EditArgs {
  path: string;
  old_string: string;
  new_string: string;
}
export interface PatchArgs {
  path: string;
  patch: string;
}

/** write_file: replace (or create) a whole file. */
export function planWrite(scope: WorkspaceScope, args: WriteArgs): Planned {
  const target = changeTarget(scope, args.path, 'write_file');
  if (!target.ok) return target;
  return plan(target.relative, target.before, args.content);
}

/** edit_file: replace the one occurrence of old_string with new_string. */
export function planEdit(scope: WorkspaceScope, args: EditArgs): Planned {
  const target = changeTarget(scope, args.path, 'edit_file');
  if (!target.ok) return target;
  const { relative: path, before } = target;
  if (before === null) {
    return { ok: false, result: error(`there is no file at ${path} to edit; use write_file to create it.`) };
  }
  if (args.old_string === '') {
    return {
      ok: false,
      result: error('old_string is empty; pass the exact text to replace, or use write_file to write a whole file.'),
    };
  }
  let oldString = args.old_string;
  let newString = args.new_string;
  let found = occurrences(before, oldString);
  if (found.count === 0 && before.includes('\r\n') && /(^|[^\r])\n/.test(oldString)) {
    // The file's lines end in CRLF and the model sent LF: match (and write) in the file's endings.
    const crlf = (text: string) => text.replace(/\r?\n/g, '\r\n');
    const retry = occurrences(before, crlf(oldString));
    if (retry.count > 0) {
      oldString = crlf(oldString);
      newString = crlf(newString);
      found = retry;
    }
  }
  if (found.count === 0) {
    return {
      ok: false,
      result: error(
        `old_string was not found in ${path}: ${quote(args.old_string, 60)} does not occur in it. Read the file with read_file and copy the text exactly, including whitespace and indentation.`,
      ),
    };
  }
  if (found.count > 1) {
    return {
      ok: false,
      result: error(
        `old_string occurs ${found.count} times in ${path}; it must occur exactly once. Include more of the surrounding lines in old_string (and new_string) so that it names one place.`,
      ),
    };
  }
  const after = before.slice(0, found.first) + newString + before.slice(found.first + oldString.length);
  return plan(path, before, after);
}

/** patch_file: apply a unified diff for one file, all hunks or none. */
export function planPatch(scope: WorkspaceScope, args: PatchArgs): Planned {
  const target = changeTarget(scope, args.path, 'patch_file');
  if (!target.ok) return target;
  const { relative: path, before } = target;
  const fail = (text: string): Planned => ({ ok: false, result: error(`the patch was not applied: ${text}`) });

  let patches: StructuredPatch[];
  try {
    patches = diffLib().parsePatch(args.patch);
  } catch (first) {
    try {
      // Only miscounted hunks are forgiven; any other malformation is reported as sent.
      const recounted = recountHunks(args.patch);
      if (recounted === null) throw first;
      patches = diffLib().parsePatch(recounted);
    } catch {
      return fail(
        `it is not a unified diff (${message(first)}). Send hunks that start with "@@ -a,b +c,d @@" followed by lines that begin with " ", "-" or "+".`,
      );
    }
  }
  patches = patches.filter((patch, index) => index === 0 || patch.hunks.length > 0 || patch.oldFileName);
  const patch = patches[0];
  if (!patch || patches.length !== 1) {
    return fail(`it names ${patches.length} files; patch_file changes one file per call, so send one patch per file.`);
  }
  if (patch.isBinary || patch.isRename || patch.isCopy) {
    return fail('it is a binary, rename or copy patch; patch_file only changes the text of one file in place.');
  }
  if (patch.hunks.length === 0) {
    return fail('it has no hunks; a hunk starts with a line like "@@ -10,4 +10,5 @@".');
  }
  const empty = patch.hunks.findIndex((hunk) => hunk.lines.length === 0);
  if (empty !== -1) return fail(`hunk ${empty + 1} is empty; each hunk needs its context, removed and added lines.`);
  for (const name of [patch.oldFileName, patch.newFileName]) {
    if (name === undefined || name === DEV_NULL || names(scope, name, path)) continue;
    return fail(
      `its header names ${JSON.stringify(name)} but path is ${JSON.stringify(path)}; the --- and +++ lines must name the file being patched (or leave them out).`,
    );
  }
  const creates = patch.oldFileName === DEV_NULL || patch.isCreate === true;
  const deletes = patch.newFileName === DEV_NULL || patch.isDelete === true;
  if (creates && before !== null) {
    return fail(
      `it creates ${path} (--- /dev/null) but ${path} already exists; write the patch against its current content, or use write_file.`,
    );
  }
  if (!creates && before === null) {
    const pure = patch.hunks.every((hunk) => hunk.oldLines === 0);
    if (!pure) {
      return fail(
        `there is no file at ${path}; to create it send a patch whose header is "--- /dev/null" and "+++ b/${path}", or use write_file.`,
      );
    }
  }
  const headers = args.patch.split('\n').filter((line) => /^@@\s/.test(line));
  const applied = applyHunks(before ?? '', patch, true);
  if (!applied.ok) {
    const hunk = patch.hunks[applied.hunk - 1];
    const header = (headers[applied.hunk - 1] ?? '').replace(/\r$/, '');
    return fail(
      `hunk ${applied.hunk} of ${patch.hunks.length} (${header}) does not fit ${path}: ${applied.reason}. Nothing was written. Read the file around line ${hunk?.oldStart ?? 1} with read_file and send the whole patch again.`,
    );
  }
  if (deletes) {
    if (applied.content !== '') {
      return fail(`it deletes ${path} (+++ /dev/null) but does not remove all of its lines.`);
    }
    return plan(path, before, null);
  }
  return plan(path, before, applied.content);
}

/**
 * A path to change and its current text; refusals for a protected path (as resolved, or
 * as written), a link on the way, a directory, a special file or a binary file.
 */
function changeTarget(
  scope: WorkspaceScope,
  input: string,
  tool: string,
): { ok: true; relative: string; before: string | null } | { ok: false; result: ToolResult } {
  const located = locate(scope, input, false);
  if (!located.ok) return located;
  const path = located.relative;
  const written = relative(scope.root, resolvePath(scope.root, input)).split(sep).join('/');
  const guarded = refuseProtected(path) ?? refuseProtected(written);
  if (guarded) return { ok: false, result: refusedResult(guarded) };
  let looked: ReturnType<typeof lookBeneath>;
  try {
    // Read by the resolved path with no link followed: a link swapped in since is refused, not read through.
    looked = lookBeneath(scope.root, path, MAX_WRITE_BYTES);
  } catch (problem) {
    return { ok: false, result: error(`${path} cannot be read: ${message(problem)}.`) };
  }
  if (!looked.ok) return { ok: false, result: refusedResult(looked) };
  switch (looked.kind) {
    case 'missing':
      return { ok: true, relative: path, before: null };
    case 'blocked':
      return { ok: false, result: error(`${path} cannot be created: ${looked.at} is a file, not a directory.`) };
    case 'directory':
      return { ok: false, result: error(`${path} is a directory, not a file; ${tool} changes one file.`) };
    case 'special':
      return {
        ok: false,
        result: error(`${path} is not a regular file (a device, socket or pipe); ${tool} changes text files.`),
      };
    // Refused before its content is read: the diff and the restore point would hold it.
    case 'linked':
      return { ok: false, result: hardLinkRefusal(path, looked.names, 'write') };
    // A file above the write limit is not read: its diff and restore point would not fit either.
    case 'too-large':
      return {
        ok: false,
        result: refusal(
          'write.ceiling',
          `${path} is ${looked.size} bytes, above the write limit of ${MAX_WRITE_BYTES} bytes, so ${tool} does not change it; a source file is far smaller.`,
        ),
      };
  }
  const before = hasNul(looked.bytes.subarray(0, SNIFF_BYTES)) ? null : decode(looked.bytes);
  if (before === null) {
    return {
      ok: false,
      result: binaryRefusal(
        'write.binary',
        path,
        looked.bytes.length,
        `${tool} changes text files only, so nothing was changed`,
      ),
    };
  }
  return { ok: true, relative: path, before };
}

/** The change from `before` to `after`, or word that there is none. */
function plan(path: string, before: string | null, after: string | null): Planned {
  if (before === after) {
    return { ok: false, result: { content: `${path} already has this content; nothing changed.`, isError: false } };
  }
  // Checked before the diff is made: a refused write leaves nothing to store.
  const size = after === null ? 0 : Buffer.byteLength(after);
  if (size > MAX_WRITE_BYTES) {
    return {
      ok: false,
      result: refusal(
        'write.ceiling',
        `the write would leave ${path} at ${size} bytes, above the write limit of ${MAX_WRITE_BYTES} bytes, so nothing was written; a source file is far smaller. Write smaller files.`,
      ),
    };
  }
  return { ok: true, change: { path, before, after, diff: unifiedDiff(path, before, after) } };
}

/** Whether a patch header's file name names `path` (with or without its `a/`/`b/` prefix). */
function names(scope: WorkspaceScope, name: string, path: string): boolean {
  const candidates = [name];
  if (/^[ab]\//.test(name)) candidates.push(name.slice(2));
  return candidates.some((candidate) => {
    const located = locate(scope, candidate, false);
    return located.ok && located.relative === path;
  });
}

/** A one-line account of a change, for a log or an observation: `wrote src/a.js (+3 -1)`. */
export function describeChange(change: FileChange): string {
  const { added, removed } = diffStat(change.diff);
  if (change.before === null) return `created ${change.path} (+${added})`;
  if (change.after === null) return `deleted ${change.path} (-${removed})`;
  return `wrote ${change.path} (+${added} -${removed})`;
}

/** How often `needle` occurs in `haystack` (overlapping occurrences counted), and where first. */
function occurrences(haystack: string, needle: string): { count: number; first: number } {
  const first = haystack.indexOf(needle);
  let count = 0;
  for (let at = first; at !== -1; at = haystack.indexOf(needle, at + 1)) count++;
  return { count, first };
}
