/**
 * Unified diffs of whole files, and applying them hunk by hunk. A change the agent
 * makes is recorded as the diff of the whole file (`a/<path>` → `b/<path>`, with
 * `/dev/null` for a side that does not exist), so a restore point can be undone
 * from the diff alone, and a patch the model sends is applied as a unit: either
 * every hunk fits or nothing is written, and the one that does not fit is named by
 * its number and its `@@ ... @@` header so the model can fix that hunk.
 */
import type { StructuredPatch, StructuredPatchHunk } from 'diff';
import { requiredOnFirstUse } from '../lazy-require.js';

/**
 * The diff package, required at the first diff made or applied: the main thread of a
 * program that never shows or applies a patch (most) never loads it.
 */
export const diffLib = requiredOnFirstUse<typeof import('diff')>('diff');

/** The name a unified diff gives a side that does not exist. */
export const DEV_NULL = '/dev/null';

/**
 * The unified diff of one whole file, from `before` to `after`; `null` is a file that
 * does not exist (created: `--- /dev/null`; deleted: `+++ /dev/null`). Line endings are
 * kept as they are, so a CRLF file's diff carries its `\r`s and reverses exactly.
 */
export function unifiedDiff(path: string, before: string | null, after: string | null): string {
  return diffLib().createTwoFilesPatch(
    before === null ? DEV_NULL : `a/${path}`,
    after === null ? DEV_NULL : `b/${path}`,
    before ?? '',
    after ?? '',
    undefined,
    undefined,
    { headerOptions: diffLib().FILE_HEADERS_ONLY },
  );
}

/** Lines added and removed by a unified diff; a diff that cannot be parsed counts as nothing. */
export function diffStat(diff: string): { added: number; removed: number } {
  let added = 0;
  let removed = 0;
  let patches: StructuredPatch[];
  try {
    patches = diffLib().parsePatch(diff);
  } catch {
    return { added, removed };
  }
  for (const patch of patches) {
    for (const hunk of patch.hunks) {
      for (const line of hunk.lines) {
        if (line.startsWith('+')) added++;
        else if (line.startsWith('-')) removed++;
      }
    }
  }
  return { added, removed };
}

/** The `@@ -a,b +c,d @@` header of a parsed hunk, as a diff would print it. */
export function hunkHeader(hunk: StructuredPatchHunk): string {
  // parsePatch stores a zero-length side's start one higher than it is printed.
  const oldStart = hunk.oldLines === 0 ? hunk.oldStart - 1 : hunk.oldStart;
  const newStart = hunk.newLines === 0 ? hunk.newStart - 1 : hunk.newStart;
  return `@@ -${oldStart},${hunk.oldLines} +${newStart},${hunk.newLines} @@`;
}

/** Where a patch failed: the 1-based number of the hunk that does not fit, and why. */
export interface HunkFailure {
  ok: false;
  hunk: number;
  reason: string;
}

/**
 * Applies every hunk of `patch` to `source` with no fuzz, or names the first hunk that
 * does not fit. `applyPatch` only says whether the whole patch fitted, so on failure the
 * hunks are applied as growing prefixes: the first prefix that fails ends with the
 * culprit (hunks are placed in order, so a prefix fits exactly as it does in the whole).
 */
export function applyHunks(
  source: string,
  patch: StructuredPatch,
  autoConvertLineEndings: boolean,
): { ok: true; content: string } | HunkFailure {
  const options = { fuzzFactor: 0, autoConvertLineEndings };
  const whole = diffLib().applyPatch(source, patch, options);
  if (whole !== false) return { ok: true, content: whole };
  const count = patch.hunks.length;
  let failed = count;
  for (let k = 1; k < count; k++) {
    if (diffLib().applyPatch(source, { ...patch, hunks: patch.hunks.slice(0, k) }, options) === false) {
      failed = k;
      break;
    }
  }
  return { ok: false, hunk: failed, reason: whyNotFit(source, patch.hunks, failed) };
}

/** A sentence on why hunk `number` (1-based) does not fit `source`. */
function whyNotFit(source: string, hunks: StructuredPatchHunk[], number: number): string {
  const hunk = hunks[number - 1];
  if (!hunk) return 'it does not fit the file';
  const present = new Set(source.split('\n').map(stripCr));
  for (const line of hunk.lines) {
    if (!line.startsWith(' ') && !line.startsWith('-') && line !== '') continue;
    const text = stripCr(line.slice(1));
    if (!present.has(text)) {
      const kind = line.startsWith('-') ? 'a line it removes' : 'a context line';
      return `${kind}, ${quote(text)}, is not in the file`;
    }
  }
  if (hunk.lines.some((line) => line.startsWith('\\'))) {
    return 'its lines are in the file but not together in this order, or the file does not end the way its "\\ No newline at end of file" mark says';
  }
  if (number > 1) return `its lines are in the file but not together in this order after where hunk ${number - 1} fits`;
  return 'its lines are in the file but not together in this order';
}

/**
 * Undoes one recorded change: applies the reverse of `diff` (a {@link unifiedDiff}) to
 * the file's `current` content (`null`: it does not exist). A created file's reverse is
 * `null` (delete it); a deleted file's reverse is its old content. When the file has
 * moved on so the reverse no longer fits, says which hunk of the recorded diff does not
 * (hunk 0, header '', is the file as a whole: it exists when it should not, or the reverse).
 */
export function reverseApply(
  diff: string,
  current: string | null,
): { ok: true; content: string | null } | { ok: false; hunk: number; header: string; reason: string } {
  let patches: StructuredPatch[];
  try {
    patches = diffLib().parsePatch(diff);
  } catch (error) {
    return { ok: false, hunk: 0, header: '', reason: `the recorded diff cannot be parsed: ${message(error)}` };
  }
  const patch = patches[0];
  if (!patch || patches.length !== 1) {
    return { ok: false, hunk: 0, header: '', reason: `the recorded diff names ${patches.length} files, not one` };
  }
  const created = patch.oldFileName === DEV_NULL;
  const deleted = patch.newFileName === DEV_NULL;
  const header = (number: number) => {
    const hunk = patch.hunks[number - 1];
    return hunk ? hunkHeader(hunk) : '';
  };
  if (deleted) {
    if (current !== null) return { ok: false, hunk: 0, header: '', reason: 'the file was deleted but exists again' };
    const restored = applyHunks('', diffLib().reversePatch(patch), false);
    if (!restored.ok) return { ok: false, hunk: restored.hunk, header: header(restored.hunk), reason: restored.reason };
    return { ok: true, content: restored.content };
  }
  if (current === null) {
    return {
      ok: false,
      hunk: 0,
      header: '',
      reason: `the file was ${created ? 'created' : 'changed'} but no longer exists`,
    };
  }
  const reversed = applyHunks(current, diffLib().reversePatch(patch), false);
  if (!reversed.ok) return { ok: false, hunk: reversed.hunk, header: header(reversed.hunk), reason: reversed.reason };
  if (created) {
    if (reversed.content !== '') {
      const last = patch.hunks.length;
      return {
        ok: false,
        hunk: last,
        header: header(last),
        reason: 'the file was created but now holds content the change did not write',
      };
    }
    return { ok: true, content: null };
  }
  return { ok: true, content: reversed.content };
}

/**
 * Rewrites each hunk header's line counts from its body. Models often miscount, and
 * `parsePatch` rejects a hunk whose counts are off even when every line is right; the
 * lines themselves must still match the file exactly, so this loses no safety. Used only
 * after the patch as sent failed to parse; null when a hunk holds a line no count explains.
 */
export function recountHunks(text: string): string | null {
  const lines = text.split('\n');
  const out: string[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i] as string;
    const match = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@(.*)$/.exec(line);
    if (!match) {
      out.push(line);
      i++;
      continue;
    }
    const body: string[] = [];
    for (let j = i + 1; j < lines.length; j++) {
      const next = lines[j] as string;
      if (next.startsWith('@@') || next.startsWith('diff ') || next.startsWith('Index: ')) break;
      if (next.startsWith('--- ') && (lines[j + 1] ?? '').startsWith('+++ ')) break;
      if (next !== '' && !/^[ +\-\\]/.test(next)) return null; // not a hunk line: no count can fix that
      body.push(next);
    }
    while (body.length > 0 && body[body.length - 1] === '') body.pop();
    let old = 0;
    let added = 0;
    for (const item of body) {
      if (item.startsWith('\\')) continue;
      if (!item.startsWith('+')) old++;
      if (!item.startsWith('-')) added++;
    }
    out.push(`@@ -${match[1]},${old} +${match[2]},${added} @@${match[3]}`, ...body);
    i += 1 + body.length;
  }
  return out.join('\n');
}

function stripCr(line: string): string {
  return line.endsWith('\r') ? line.slice(0, -1) : line;
}

/** A short, JSON-quoted excerpt of `text` for a message. */
export function quote(text: string, max = 80): string {
  return text.length > max ? `${JSON.stringify(text.slice(0, max))}…` : JSON.stringify(text);
}

export function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
