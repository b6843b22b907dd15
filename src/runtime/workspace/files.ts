/**
 * The workspace file tools as pure operations: read_file, write_file, edit_file,
 * patch_file, grep and find over one directory tree. A change is first *planned*
 * (the whole file before and after, and its unified diff) and only then *applied*,
 * so the caller can record the diff and a restore point, and apply its policy, in
 * between; a refused or failed plan has touched nothing.
 *
 * Every path is checked against the workspace root's realpath after following
 * symbolic links (through the deepest ancestor that exists), so neither `../`, an
 * absolute path nor a link can reach outside. A change is then read, written and deleted
 * by that resolved path without following a link at any component (./beneath.ts), so a
 * link swapped in after the check is refused rather than followed, and protected names
 * (`.git`, the harness's configuration) are checked on that resolved path. Every refusal
 * and error is a {@link ToolResult} whose content says what happened and what to do
 * instead, because its reader is the model.
 */
import {
  closeSync,
  constants,
  type Dirent,
  lstatSync,
  openSync,
  readdirSync,
  readlinkSync,
  readSync,
  realpathSync,
  type Stats,
  statSync,
} from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve as resolvePath, sep } from 'node:path';
import { parsePatch, type StructuredPatch } from 'diff';
import { ErrorCode, HarnessError, InvalidArgumentError } from '../../errors.js';
import type { ArgumentSchema } from '../arguments.js';
import { compileGlob } from '../policy/globs.js';
import type { ToolResult } from '../tools/tool.js';
import {
  lookBeneath,
  type Refused,
  refuseProtected,
  removeBeneath,
  replaceBeneath,
  walksByDescriptor,
} from './beneath.js';
import { applyHunks, DEV_NULL, diffStat, message, quote, recountHunks, unifiedDiff } from './diffs.js';
import {
  decode,
  type FindOutcome,
  type FindTask,
  type GrepOutcome,
  type GrepTask,
  hasNul,
  readRegular,
  runSearch,
  type SearchOutcome,
  type SearchTask,
  SNIFF_BYTES,
} from './search.js';

export { applyHunks, diffStat, hunkHeader, reverseApply, unifiedDiff } from './diffs.js';

/** What the filesystem says when a path changed under an act that found it whole a moment before. */
const MOVED_CODES: ReadonlySet<string> = new Set(['ENOENT', 'ENOTDIR', 'EISDIR', 'ELOOP', 'EEXIST', 'ENOTEMPTY']);

/** The default ceiling on one read, in bytes. */
export const DEFAULT_MAX_READ_BYTES = 262144;
/**
 * The largest file a write may leave, in bytes (write_file, edit_file, patch_file), and
 * the most characters a content, old_string, new_string or patch argument may have.
 * Far above any source file; a write above it is refused before anything reaches the
 * store (the step's restore point and diff would otherwise hold it).
 */
export const MAX_WRITE_BYTES = 8 * 1024 * 1024;

/** The largest file read_file reads in parts (start_line, end_line): it is read whole to find the lines. */
export const MAX_RANGED_READ_BYTES = 64 * 1024 * 1024;
/** The most characters a path argument may have (Linux's PATH_MAX). */
export const MAX_PATH_CHARS = 4096;
/** The most characters a grep pattern, a grep glob or a find pattern may have. */
export const MAX_PATTERN_CHARS = 4096;
/** The default number of lines grep and find print. */
export const DEFAULT_MAX_RESULTS = 200;
/** Directories grep always skips, and find skips unless its pattern names them. */
const SKIPPED_DIRS = ['.git', 'node_modules'];

export interface WorkspaceOptions {
  /** The directory the tools work in; it must exist. */
  root: string;
  /** Single-file mode: the one path (relative to root) the tools may touch; grep and find are refused. */
  file?: string;
  /** A whole-file read above this many bytes is refused with the size and this ceiling (default 262144). */
  maxReadBytes?: number;
  /** grep and find print at most this many lines, and say how many there were (default 200). */
  maxResults?: number;
  /**
   * Whether a walked path may be shown (grep and find). The policy's read rules, applied
   * to every entry, so a deny below the search's starting point still holds. Default: all.
   */
  visible?: (relative: string) => boolean;
}

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

export type Resolved = { ok: true; absolute: string; relative: string } | { ok: false; result: ToolResult };

export interface ReadArgs {
  path: string;
  start_line?: number;
  end_line?: number;
}
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
export interface GrepArgs {
  pattern: string;
  path?: string;
  glob?: string;
  ignore_case?: boolean;
}
export interface FindArgs {
  pattern: string;
  path?: string;
}

/** One entry found by a walk: its workspace-relative path (through links as named), and what it is. */
interface Entry {
  relative: string;
  absolute: string;
  directory: boolean;
}

/**
 * A workspace: the root an agent's file tools work in, and the operations they run.
 *
 * @example
 * ```ts
 * const workspace = new Workspace({ root: '/repo' });
 * const planned = workspace.planEdit({ path: 'src/a.js', old_string: 'let x', new_string: 'const x' });
 * if (planned.ok) {
 *   store.record(planned.change.diff); // the caller's restore point
 *   workspace.apply(planned.change);
 *   return { content: describeChange(planned.change), isError: false };
 * }
 * return planned.result; // refusal, error, or "nothing changed": the file is untouched
 * ```
 */
export class Workspace {
  /** The realpath of the root; every path the tools touch is inside it. */
  readonly root: string;
  /** Single-file mode: the one workspace-relative path the tools may touch; otherwise `null`. */
  readonly file: string | null;
  readonly #maxReadBytes: number;
  readonly #maxResults: number;
  readonly #visible: (relative: string) => boolean;
  #withheld = 0;

  constructor(options: WorkspaceOptions) {
    const given = resolvePath(options.root);
    let real: string;
    let stats: Stats;
    try {
      real = realpathSync(given);
      stats = statSync(real);
    } catch (error) {
      throw new HarnessError(
        ErrorCode.WorkspaceNotFound,
        `the workspace root ${given} does not exist (${message(error)}); pass root: the path of an existing directory, the repository the agent is to work on.`,
        { details: { root: given } },
      );
    }
    if (!stats.isDirectory()) {
      throw new HarnessError(
        ErrorCode.WorkspaceNotFound,
        `the workspace root ${given} is a file, not a directory; pass root: the directory the agent is to work in, and file: the one file it may touch if it is to touch only one.`,
        { details: { root: given } },
      );
    }
    this.root = real;
    this.#maxReadBytes = positiveInteger('maxReadBytes', options.maxReadBytes, DEFAULT_MAX_READ_BYTES);
    this.#maxResults = positiveInteger('maxResults', options.maxResults, DEFAULT_MAX_RESULTS);
    this.#visible = options.visible ?? (() => true);
    this.file = null;
    if (options.file !== undefined) {
      const located = this.#locate(options.file, false);
      if (!located.ok) {
        throw new InvalidArgumentError(
          `file ${JSON.stringify(options.file)} cannot be the workspace's one file: ${located.result.content}`,
        );
      }
      if (statOrNull(located.absolute)?.isDirectory()) {
        throw new InvalidArgumentError(
          `file ${JSON.stringify(options.file)} is a directory; pass file: the path of one file under ${real}, or pass root: ${located.absolute} without file.`,
        );
      }
      this.file = located.relative;
    }
  }

  /**
   * Where `path` (relative to the root, or absolute) is, once `..` and symbolic links
   * are followed: its absolute realpath and its workspace-relative path; or the refusal
   * when it is outside the root, is the root itself, or (single-file mode) is not the file.
   */
  resolve(path: string): Resolved {
    return this.#locate(path, false);
  }

  /**
   * read_file: the exact text of a file, or of lines start_line..end_line (1-based,
   * inclusive). `decided`: the resolved path a policy allowed (see {@link resolve}); a path
   * that resolves elsewhere now (a link swapped in on the way since) is refused, not read.
   */
  read(args: ReadArgs, decided?: string): ToolResult {
    const located = this.#locate(args.path, false);
    if (!located.ok) return located.result;
    const { absolute, relative: path } = located;
    if (decided !== undefined && path !== decided)
      return refusal(
        'fs.path-moved',
        `${args.path} led to ${decided} when the policy decided on it and leads to ${path} now (a link on the way changed), so it was not read; read it again.`,
      );
    for (const name of ['start_line', 'end_line'] as const) {
      const value = args[name];
      if (value !== undefined && (!Number.isInteger(value) || value < 1)) {
        return error(`${name} must be a whole number of at least 1 (lines are counted from 1); it was ${value}.`);
      }
    }
    const stats = statOrNull(absolute);
    if (!stats) return error(`there is no file at ${path}; use find to look for it.`);
    if (stats.isDirectory()) {
      return error(`${path} is a directory, not a file; use find with path ${JSON.stringify(path)} to list it.`);
    }
    if (!stats.isFile()) return error(`${path} is not a regular file (a device, socket or pipe) and cannot be read.`);
    if (stats.nlink > 1) return hardLinkRefusal(path, stats.nlink, 'read');
    const ranged = args.start_line !== undefined || args.end_line !== undefined;
    if (hasNul(sniff(absolute)))
      return binaryRefusal('read.binary', path, stats.size, 'read_file returns text only, so it was not read');
    if (!ranged && stats.size > this.#maxReadBytes) {
      return refusal(
        'read.ceiling',
        `${path} is ${stats.size} bytes, above the read ceiling of ${this.#maxReadBytes} bytes, so it was not read; read it in parts with start_line and end_line (for example start_line 1, end_line 1000), or use grep to find the lines you need.`,
      );
    }
    let text: string | null;
    try {
      const limit = ranged ? MAX_RANGED_READ_BYTES : this.#maxReadBytes;
      // Opened beneath the root by the path just resolved, no link followed: one a command
      // swapped in since (to a file the policy denies) is refused, not read.
      const read = walksByDescriptor() ? this.#readBeneath(path, limit) : readRegular(absolute, limit);
      if ('result' in read) return read.result;
      if ('problem' in read) {
        if (read.problem === 'linked') return hardLinkRefusal(path, read.size, 'read');
        if (read.problem === 'not-regular')
          return error(`${path} is not a regular file (a device, socket or pipe) and cannot be read.`);
        return refusal(
          'read.ceiling',
          `${path} is ${read.size} bytes, above the ${ranged ? `limit of ${MAX_RANGED_READ_BYTES} bytes for a file read in parts` : `read ceiling of ${this.#maxReadBytes} bytes`}, so it was not read; use grep to find the lines you need${ranged ? '' : ', or read it in parts with start_line and end_line'}.`,
        );
      }
      text = decode(read.bytes);
    } catch (problem) {
      return error(`${path} cannot be read: ${message(problem)}.`);
    }
    if (text === null)
      return binaryRefusal('read.binary', path, stats.size, 'read_file returns text only, so it was not read');
    if (!ranged) return { content: text, isError: false };

    const lines = splitLines(text);
    const total = lines.length;
    const start = args.start_line ?? 1;
    const end = args.end_line ?? total;
    if (args.start_line !== undefined && args.end_line !== undefined && start > end) {
      return error(`start_line ${start} is after end_line ${end}; pass start_line no greater than end_line.`);
    }
    if (start > total) {
      return error(
        `start_line ${start} is past the end of ${path}, which has ${total} line${total === 1 ? '' : 's'}${total === 0 ? ' (it is empty)' : ''}.`,
      );
    }
    const last = Math.min(end, total);
    const selected = lines.slice(start - 1, last).join('');
    const bytes = Buffer.byteLength(selected);
    if (bytes > this.#maxReadBytes) {
      return refusal(
        'read.ceiling',
        `lines ${start}-${last} of ${path} are ${bytes} bytes, above the read ceiling of ${this.#maxReadBytes} bytes, so they were not read; ask for fewer lines.`,
      );
    }
    const clamped = end > total ? ` (end_line ${end} is past the end: the file has ${total} lines)` : '';
    return { content: `lines ${start}-${last} of ${total}${clamped}:\n${selected}`, isError: false };
  }

  /** A file's bytes read beneath the root (see read), in readRegular's terms, or the call's refusal. */
  #readBeneath(path: string, limit: number): ReturnType<typeof readRegular> | { result: ToolResult } {
    const looked = lookBeneath(this.root, path, limit, false, false);
    if (!looked.ok) return { result: refusal(looked.rule, looked.reason) };
    switch (looked.kind) {
      case 'file':
        return { bytes: looked.bytes };
      case 'linked':
        return { problem: 'linked', size: looked.names };
      case 'too-large':
        return { problem: 'too-large', size: looked.size };
      case 'missing':
      case 'blocked':
        return { result: error(`there is no file at ${path}; use find to look for it.`) };
      default:
        return { problem: 'not-regular', size: 0 };
    }
  }

  /** write_file: replace (or create) a whole file. */
  planWrite(args: WriteArgs): Planned {
    const target = this.#target(args.path, 'write_file');
    if (!target.ok) return target;
    return this.#plan(target.relative, target.before, args.content);
  }

  /** edit_file: replace the one occurrence of old_string with new_string. */
  planEdit(args: EditArgs): Planned {
    const target = this.#target(args.path, 'edit_file');
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
    return this.#plan(path, before, after);
  }

  /** patch_file: apply a unified diff for one file, all hunks or none. */
  planPatch(args: PatchArgs): Planned {
    const target = this.#target(args.path, 'patch_file');
    if (!target.ok) return target;
    const { relative: path, before } = target;
    const fail = (text: string): Planned => ({ ok: false, result: error(`the patch was not applied: ${text}`) });

    let patches: StructuredPatch[];
    try {
      patches = parsePatch(args.patch);
    } catch (first) {
      try {
        // Only miscounted hunks are forgiven; any other malformation is reported as sent.
        const recounted = recountHunks(args.patch);
        if (recounted === null) throw first;
        patches = parsePatch(recounted);
      } catch {
        return fail(
          `it is not a unified diff (${message(first)}). Send hunks that start with "@@ -a,b +c,d @@" followed by lines that begin with " ", "-" or "+".`,
        );
      }
    }
    patches = patches.filter((patch, index) => index === 0 || patch.hunks.length > 0 || patch.oldFileName);
    const patch = patches[0];
    if (!patch || patches.length !== 1) {
      return fail(
        `it names ${patches.length} files; patch_file changes one file per call, so send one patch per file.`,
      );
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
      if (name === undefined || name === DEV_NULL || this.#names(name, path)) continue;
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
      return this.#plan(path, before, null);
    }
    return this.#plan(path, before, applied.content);
  }

  /**
   * Carries out a planned change: writes `after` (creating parent directories) through a
   * temporary file in the same directory renamed over the target, so a reader never sees
   * half a file; or deletes the file when `after` is null. The change's path is acted on
   * as planned, component by component, without following a link: one put in the way
   * since the plan refuses the change, and so does a protected name. Throws an
   * InvalidArgumentError naming the rule (`details.rule`) when refused, a HarnessError
   * when the filesystem fails; {@link applyOrRefuse} answers a refusal instead.
   */
  apply(change: FileChange): void {
    const refused = this.applyOrRefuse(change);
    if (refused) {
      throw new InvalidArgumentError(`cannot apply a change to ${change.path}: ${refused.content}`, {
        details: { path: change.path, rule: refused.refusal?.rule ?? null },
      });
    }
  }

  /**
   * {@link apply}, answering the refusal (a {@link ToolResult} naming its rule) instead of
   * throwing it, and null once the change is made. Throws only when the filesystem fails.
   */
  applyOrRefuse(change: FileChange): ToolResult | null {
    return this.restore(change.path, change.after);
  }

  /**
   * Puts `content` at `path` (or deletes the file when null), as {@link applyOrRefuse}
   * does: by the path as given, with no link followed on the way.
   */
  restore(path: string, content: string | Uint8Array | null): ToolResult | null {
    const plain = this.#plain(path);
    if (!plain.ok) return plain.result;
    try {
      const done =
        content === null ? removeBeneath(this.root, plain.path) : replaceBeneath(this.root, plain.path, content);
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

  /** The refusal of a path other than the one file a single-file workspace is limited to; null when it may be used. */
  #outsideSingleFile(input: string, path: string): ToolResult | null {
    if (this.file === null || path === this.file) return null;
    return refusal(
      'workspace.single-file',
      `${input} was refused: this workspace is limited to the single file ${this.file}. Work on ${this.file} only.`,
    );
  }

  /** `input` as a workspace-relative path by name alone, no link followed: the path an act names. */
  #plain(input: string): { ok: true; path: string } | { ok: false; result: ToolResult } {
    if (typeof input !== 'string' || input === '' || input.includes('\0')) {
      return {
        ok: false,
        result: error(`path ${JSON.stringify(input)} is not a path; pass a path relative to the workspace root.`),
      };
    }
    const inside = relative(this.root, resolvePath(this.root, input));
    if (inside === '' || inside === '..' || inside.startsWith(`..${sep}`) || isAbsolute(inside)) {
      return boundary(`${input} is not a file inside the workspace ${this.root}; name a file inside it.`);
    }
    const path = inside.split(sep).join('/');
    const single = this.#outsideSingleFile(input, path);
    if (single) return { ok: false, result: single };
    return { ok: true, path };
  }

  /**
   * What `path` holds now, read by name with no link followed: the bytes a restore point
   * keeps (null when there is no file), or the refusal or error to answer instead.
   */
  current(path: string): { ok: true; content: Buffer | null } | { ok: false; result: ToolResult } {
    const plain = this.#plain(path);
    if (!plain.ok) return plain;
    let looked: ReturnType<typeof lookBeneath>;
    try {
      looked = lookBeneath(this.root, plain.path, MAX_WRITE_BYTES, true);
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

  /** grep: lines matching a JavaScript regular expression, as `path:line:text`, paths sorted. */
  grep(args: GrepArgs): ToolResult {
    const prepared = this.#prepareGrep(args);
    return prepared.ok ? prepared.report(runSearch(prepared.task) as GrepOutcome) : prepared.result;
  }

  /** find: paths matching a glob, sorted; directories end in `/`. */
  find(args: FindArgs): ToolResult {
    const prepared = this.#prepareFind(args);
    return prepared.ok ? prepared.report(runSearch(prepared.task) as FindOutcome) : prepared.result;
  }

  /**
   * grep or find with the matching (the model's regular expression or glob) handed to
   * `match`, which may run it elsewhere and stop it: the result is the one `grep` and
   * `find` give, or the result `match` gives instead (the search was stopped).
   */
  async search(
    name: 'grep' | 'find',
    args: GrepArgs | FindArgs,
    match: (task: SearchTask) => Promise<SearchOutcome | ToolResult>,
  ): Promise<ToolResult> {
    const prepared = name === 'grep' ? this.#prepareGrep(args as GrepArgs) : this.#prepareFind(args as FindArgs);
    if (!prepared.ok) return prepared.result;
    const outcome = await match(prepared.task);
    if ('content' in outcome) return outcome;
    return (prepared.report as (outcome: SearchOutcome) => ToolResult)(outcome);
  }

  /** grep up to the matching: the pattern checked, the files walked (and withheld) and the report to make of the matches. */
  #prepareGrep(
    args: GrepArgs,
  ): { ok: true; task: GrepTask; report: (outcome: GrepOutcome) => ToolResult } | { ok: false; result: ToolResult } {
    if (this.file !== null) return { ok: false, result: this.#singleFileRefusal('grep') };
    const flags = args.ignore_case ? 'i' : '';
    try {
      new RegExp(args.pattern, flags);
    } catch (problem) {
      return {
        ok: false,
        result: error(
          `the pattern ${JSON.stringify(args.pattern)} is not a valid JavaScript regular expression: ${message(problem)}.`,
        ),
      };
    }
    const base = this.#base(args.path);
    if (!base.ok) return base;
    if (args.glob !== undefined) {
      const compiled = compileGlob(args.glob, { dot: true, matchBase: true });
      if (!compiled.ok) {
        return { ok: false, result: error(`the glob ${quote(args.glob, 60)} cannot be used: ${compiled.problem}.`) };
      }
    }
    const files = base.directory
      ? this.#walk(base.absolute, base.relative, () => false).filter((entry) => !entry.directory)
      : [{ relative: base.relative, absolute: base.absolute, directory: false }];
    const glob = args.glob;
    const task: GrepTask = {
      kind: 'grep',
      pattern: args.pattern,
      flags,
      glob: glob ?? null,
      base: base.relative,
      files: files
        .map((entry) => ({ relative: entry.relative, absolute: entry.absolute }))
        .sort((a, b) => compare(a.relative, b.relative)),
      maxReadBytes: this.#maxReadBytes,
      maxResults: this.#maxResults,
    };
    const where = base.relative === '.' ? 'the workspace' : base.relative;
    const withheld = this.#withheldNote();
    const report = ({ lines, total, searched, skipped, linked }: GrepOutcome): ToolResult => {
      const linkedNote =
        linked > 0
          ? `; ${linked} file${linked === 1 ? '' : 's'} with several names (hard links) skipped: one name may lie outside the workspace or under a denied path`
          : '';
      const skippedNote = `${skipped > 0 ? `; ${skipped} binary or oversized file${skipped === 1 ? '' : 's'} skipped` : ''}${linkedNote}${withheld}`;
      if (total === 0) {
        return {
          content: `no matches for /${args.pattern}/${args.ignore_case ? 'i' : ''} in ${where}${glob === undefined ? '' : ` (files matching ${glob})`}: ${searched} file${searched === 1 ? '' : 's'} searched${skippedNote}.`,
          isError: false,
        };
      }
      const shown = [...lines];
      if (total > shown.length) {
        shown.push(
          `(output cut: showing the first ${shown.length} of ${total} matching lines${skippedNote}; narrow the pattern, path or glob to see the rest.)`,
        );
      } else if (withheld || linkedNote) {
        shown.push(`(${`${linkedNote}${withheld}`.slice(2)})`);
      }
      return { content: shown.join('\n'), isError: false };
    };
    return { ok: true, task, report };
  }

  /** find up to the matching: the entries walked (and withheld) and the report to make of the matches. */
  #prepareFind(
    args: FindArgs,
  ): { ok: true; task: FindTask; report: (outcome: FindOutcome) => ToolResult } | { ok: false; result: ToolResult } {
    if (this.file !== null) return { ok: false, result: this.#singleFileRefusal('find') };
    const base = this.#base(args.path);
    if (!base.ok) return base;
    const pattern = args.pattern.replace(/^\.\//, '');
    if (!base.directory) {
      return {
        ok: false,
        result: error(`${base.relative} is a file, not a directory; pass path: the directory to search under.`),
      };
    }
    const compiled = compileGlob(pattern, { dot: true, matchBase: !pattern.includes('/') });
    if (!compiled.ok) {
      return {
        ok: false,
        result: error(`the pattern ${quote(args.pattern, 60)} cannot be used: ${compiled.problem}.`),
      };
    }
    const descend = (name: string) => pattern.includes(name);
    const task: FindTask = {
      kind: 'find',
      pattern,
      base: base.relative,
      matchBase: !pattern.includes('/'),
      entries: this.#walk(base.absolute, base.relative, descend).map((entry) => ({
        relative: entry.relative,
        directory: entry.directory,
      })),
    };
    const where = base.relative === '.' ? 'the workspace' : base.relative;
    const withheld = this.#withheldNote();
    const report = (outcome: FindOutcome): ToolResult => {
      if ('error' in outcome) {
        return error(`the pattern ${JSON.stringify(args.pattern)} is not a usable glob: ${outcome.error}.`);
      }
      const matched = outcome.matched;
      if (matched.length === 0)
        return { content: `no paths match ${args.pattern} under ${where}${withheld}.`, isError: false };
      const shown = matched.slice(0, this.#maxResults);
      if (withheld) shown.push(`(${withheld.slice(2)})`);
      if (matched.length > shown.length) {
        shown.push(
          `(output cut: showing the first ${shown.length} of ${matched.length} paths; narrow the pattern or path to see the rest.)`,
        );
      }
      return { content: shown.join('\n'), isError: false };
    };
    return { ok: true, task, report };
  }

  /** What the last walk left out because the policy does not let it be read. */
  #withheldNote(): string {
    return this.#withheld > 0
      ? `; ${this.#withheld} path${this.#withheld === 1 ? '' : 's'} withheld by the policy`
      : '';
  }

  /** Resolves `input` and checks it against the root, the root itself and single-file mode. */
  #locate(input: string, allowRoot: boolean): Resolved {
    if (typeof input !== 'string' || input === '') {
      return { ok: false, result: error('path is empty; pass a path relative to the workspace root.') };
    }
    if (input.includes('\0')) {
      return { ok: false, result: error(`path ${JSON.stringify(input)} contains a NUL character; pass a real path.`) };
    }
    const lexical = resolvePath(this.root, input);
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
    const inside = relative(this.root, real);
    if (inside === '..' || inside.startsWith(`..${sep}`) || isAbsolute(inside)) {
      const viaLink = real !== lexical && inLexically(this.root, lexical);
      return boundary(
        `${input} is outside the workspace${viaLink ? ' (a symbolic link on the way leads out of it)' : ''}; only paths inside ${this.root} can be used. Pass a path relative to the workspace root.`,
      );
    }
    if (inside === '' && !allowRoot) {
      return boundary(`${input} is the workspace root itself, a directory; name a file inside it.`);
    }
    const path = inside === '' ? '.' : inside.split(sep).join('/');
    const single = this.#outsideSingleFile(input, path);
    if (single) return { ok: false, result: single };
    return { ok: true, absolute: real, relative: path };
  }

  /**
   * A path to change and its current text; refusals for a protected path (as resolved, or
   * as written), a link on the way, a directory, a special file or a binary file.
   */
  #target(
    input: string,
    tool: string,
  ): { ok: true; relative: string; before: string | null } | { ok: false; result: ToolResult } {
    const located = this.#locate(input, false);
    if (!located.ok) return located;
    const path = located.relative;
    const written = relative(this.root, resolvePath(this.root, input)).split(sep).join('/');
    const guarded = refuseProtected(path) ?? refuseProtected(written);
    if (guarded) return { ok: false, result: refusedResult(guarded) };
    let looked: ReturnType<typeof lookBeneath>;
    try {
      // Read by the resolved path with no link followed: a link swapped in since is refused, not read through.
      looked = lookBeneath(this.root, path, MAX_WRITE_BYTES);
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
  #plan(path: string, before: string | null, after: string | null): Planned {
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
  #names(name: string, path: string): boolean {
    const candidates = [name];
    if (/^[ab]\//.test(name)) candidates.push(name.slice(2));
    return candidates.some((candidate) => {
      const located = this.#locate(candidate, false);
      return located.ok && located.relative === path;
    });
  }

  /** The directory (or file) grep and find start from; the root when `path` is not given. */
  #base(
    input: string | undefined,
  ): { ok: true; absolute: string; relative: string; directory: boolean } | { ok: false; result: ToolResult } {
    const located = this.#locate(input ?? '.', true);
    if (!located.ok) return located;
    const stats = statOrNull(located.absolute);
    if (!stats)
      return { ok: false, result: error(`there is nothing at ${located.relative}; use find to look for it.`) };
    return { ok: true, absolute: located.absolute, relative: located.relative, directory: stats.isDirectory() };
  }

  /**
   * Every file and directory under `absolute`, named through `relative`, skipping
   * `.git` and `node_modules` unless `enter(name)` says otherwise, and never following a
   * link whose target is outside the root (or a directory already walked: no cycles).
   */
  #walk(absolute: string, relativeBase: string, enter: (name: string) => boolean): Entry[] {
    const entries: Entry[] = [];
    this.#withheld = 0;
    const seen = new Set<string>();
    // Symbolic links to directories are entered last, and only when their target was not
    // walked already: each directory is walked once, under its own name when it has one.
    const links: { absolute: string; relative: string }[] = [];
    const visit = (directory: string, prefix: string) => {
      let real: string;
      try {
        real = realpathSync(directory);
      } catch {
        return;
      }
      if (seen.has(real)) return;
      seen.add(real);
      let children: Dirent[];
      try {
        children = readdirSync(directory, { withFileTypes: true });
      } catch {
        return;
      }
      for (const child of children) {
        const name = child.name;
        const childAbsolute = join(directory, name);
        const childRelative = prefix === '.' ? name : `${prefix}/${name}`;
        let isDirectory = child.isDirectory();
        let isFile = child.isFile();
        const link = child.isSymbolicLink();
        if (link) {
          let target: string;
          try {
            target = realpathSync(childAbsolute);
          } catch {
            continue; // a dangling link
          }
          if (!inLexically(this.root, target)) continue;
          const stats = statOrNull(target);
          isDirectory = stats?.isDirectory() ?? false;
          isFile = stats?.isFile() ?? false;
        }
        if (!this.#visible(childRelative)) {
          this.#withheld++;
          continue;
        }
        if (isDirectory) {
          if (SKIPPED_DIRS.includes(name) && !enter(name)) continue;
          entries.push({ relative: childRelative, absolute: childAbsolute, directory: true });
          if (link) links.push({ absolute: childAbsolute, relative: childRelative });
          else visit(childAbsolute, childRelative);
        } else if (isFile) {
          entries.push({ relative: childRelative, absolute: childAbsolute, directory: false });
        }
      }
    };
    visit(absolute, relativeBase);
    while (links.length > 0) {
      links.sort((a, b) => compare(b.relative, a.relative));
      const next = links.pop() as { absolute: string; relative: string };
      visit(next.absolute, next.relative);
    }
    return entries;
  }

  #singleFileRefusal(tool: string): ToolResult {
    return refusal(
      'workspace.single-file',
      `${tool} was refused: this workspace is limited to the single file ${this.file}, so there is nothing to search. Use read_file on ${this.file}.`,
    );
  }
}

/** A one-line account of a change, for a log or an observation: `wrote src/a.js (+3 -1)`. */
export function describeChange(change: FileChange): string {
  const { added, removed } = diffStat(change.diff);
  if (change.before === null) return `created ${change.path} (+${added})`;
  if (change.after === null) return `deleted ${change.path} (-${removed})`;
  return `wrote ${change.path} (+${added} -${removed})`;
}

const pathProperty = (what: string): ArgumentSchema => ({
  type: 'string',
  minLength: 1,
  maxLength: MAX_PATH_CHARS,
  description: `${what} Relative to the workspace root (absolute paths inside it work too). At most ${MAX_PATH_CHARS} characters.`,
});

/** A text argument a write carries, up to {@link MAX_WRITE_BYTES} characters. */
const textProperty = (description: string, minLength?: number): ArgumentSchema => ({
  type: 'string',
  ...(minLength === undefined ? {} : { minLength }),
  maxLength: MAX_WRITE_BYTES,
  description: `${description} At most ${MAX_WRITE_BYTES} characters.`,
});

/** A search pattern, up to {@link MAX_PATTERN_CHARS} characters. */
const patternProperty = (description: string): ArgumentSchema => ({
  type: 'string',
  minLength: 1,
  maxLength: MAX_PATTERN_CHARS,
  description: `${description} At most ${MAX_PATTERN_CHARS} characters.`,
});

/** The argument schemas of the file tools. */
export const FILE_TOOL_PARAMETERS: Record<
  'read_file' | 'write_file' | 'edit_file' | 'patch_file' | 'grep' | 'find',
  ArgumentSchema
> = {
  read_file: {
    type: 'object',
    properties: {
      path: pathProperty('The file to read.'),
      start_line: {
        type: 'integer',
        minimum: 1,
        description: 'First line to return, counting from 1. Give a range to read a file above the read ceiling.',
      },
      end_line: {
        type: 'integer',
        minimum: 1,
        description: 'Last line to return, inclusive; past the end means to the end.',
      },
    },
    required: ['path'],
    additionalProperties: false,
  },
  write_file: {
    type: 'object',
    properties: {
      path: pathProperty('The file to write; it and its parent directories are created if missing.'),
      content: textProperty('The whole new content of the file, exactly.'),
    },
    required: ['path', 'content'],
    additionalProperties: false,
  },
  edit_file: {
    type: 'object',
    properties: {
      path: pathProperty('The file to edit; it must exist.'),
      old_string: textProperty(
        'The exact text to replace, including whitespace and indentation; it must occur exactly once in the file, so include enough surrounding lines to make it unique.',
        1,
      ),
      new_string: textProperty('The text to put in its place (empty to delete it).'),
    },
    required: ['path', 'old_string', 'new_string'],
    additionalProperties: false,
  },
  patch_file: {
    type: 'object',
    properties: {
      path: pathProperty('The file the patch changes.'),
      patch: textProperty(
        'A unified diff for this one file: hunks starting "@@ -a,b +c,d @@" with lines beginning " " (context), "-" (removed) or "+" (added). "---"/"+++" header lines are optional; use "--- /dev/null" to create a file.',
        1,
      ),
    },
    required: ['path', 'patch'],
    additionalProperties: false,
  },
  grep: {
    type: 'object',
    properties: {
      pattern: patternProperty('A JavaScript regular expression, matched line by line.'),
      path: pathProperty('The directory (or file) to search; the whole workspace when omitted.'),
      glob: patternProperty(
        'Search only files whose path matches this glob, for example "*.ts" or "src/**/*.test.js".',
      ),
      ignore_case: { type: 'boolean', description: 'Match without regard to case.' },
    },
    required: ['pattern'],
    additionalProperties: false,
  },
  find: {
    type: 'object',
    properties: {
      pattern: patternProperty(
        'A glob such as "**/*.ts" or "src/*.js"; a pattern without "/" matches file and directory names anywhere, for example "*.md".',
      ),
      path: pathProperty('The directory to search under; the whole workspace when omitted.'),
    },
    required: ['pattern'],
    additionalProperties: false,
  },
};

/** What each file tool does, for the model. */
export const FILE_TOOL_DESCRIPTIONS: Record<keyof typeof FILE_TOOL_PARAMETERS, string> = {
  read_file:
    'Read a text file of the workspace, exactly as it is, or a range of its lines (start_line..end_line, counted from 1). A file above the read ceiling must be read in ranges; binary files cannot be read.',
  write_file:
    'Write a whole file, replacing its content or creating it (and its directories). Prefer edit_file or patch_file for a small change to a large file.',
  edit_file:
    'Replace one exact piece of text in a file: old_string must occur exactly once, and is replaced by new_string. Read the file first and copy old_string exactly.',
  patch_file:
    'Apply a unified diff to one file. All hunks are applied or none; if a hunk does not fit, the error names it and nothing is written.',
  grep: 'Search the text files of the workspace for lines matching a regular expression; prints path:line:text, paths sorted. Skips .git, node_modules and binary files.',
  find: 'List the files and directories whose paths match a glob, sorted; directories end in "/". Skips .git and node_modules unless the pattern names them.',
};

function positiveInteger(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 1) {
    throw new InvalidArgumentError(
      `${name} must be a whole number of at least 1; it was ${value}. Omit it for ${fallback}.`,
    );
  }
  return value;
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
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw problem;
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
function inLexically(root: string, path: string): boolean {
  const inside = relative(root, path);
  return !(inside === '..' || inside.startsWith(`..${sep}`) || isAbsolute(inside));
}

function statOrNull(path: string): Stats | null {
  try {
    return statSync(path);
  } catch {
    return null;
  }
}

/** The first bytes of a file, to look for a NUL. */
function sniff(path: string): Buffer {
  const buffer = Buffer.alloc(SNIFF_BYTES);
  let fd: number | undefined;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
    const read = readSync(fd, buffer, 0, SNIFF_BYTES, 0);
    return buffer.subarray(0, read);
  } catch {
    return Buffer.alloc(0);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** Lines with their endings, so joining a slice gives the exact text; a final line may have none. */
function splitLines(text: string): string[] {
  const lines = text.split(/(?<=\n)/);
  return lines.length === 1 && lines[0] === '' ? [] : lines;
}

/** How often `needle` occurs in `haystack` (overlapping occurrences counted), and where first. */
function occurrences(haystack: string, needle: string): { count: number; first: number } {
  const first = haystack.indexOf(needle);
  let count = 0;
  for (let at = first; at !== -1; at = haystack.indexOf(needle, at + 1)) count++;
  return { count, first };
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function error(content: string): ToolResult {
  return { content, isError: true };
}

function refusal(rule: string, reason: string): ToolResult {
  return { content: reason, isError: true, refusal: { rule, reason } };
}

/** A refusal of the file acts beneath the root (a link on the way, a protected path), for the model. */
function refusedResult(refused: Refused): ToolResult {
  return {
    content: refused.reason,
    isError: true,
    refusal: { rule: refused.rule, reason: refused.reason, layer: 'runtime' },
  };
}

function boundary(reason: string): { ok: false; result: ToolResult } {
  return { ok: false, result: refusal('workspace.boundary', reason) };
}

/**
 * A regular file with more than one name. The other names cannot be found from this one,
 * and one may lie outside the workspace or under a path the policy denies, so the file
 * tools neither read nor write it.
 */
function hardLinkRefusal(path: string, names: number, act: 'read' | 'write'): ToolResult {
  const reason = `${path} has ${names} names (hard links); one may lie outside the workspace or under a denied path, so the file tools do not ${act} it. Remove the extra link or copy the file.`;
  return { content: reason, isError: true, refusal: { rule: 'fs.hard-link', reason, layer: 'runtime' } };
}

function binaryRefusal(rule: string, path: string, size: number, why: string): ToolResult {
  return refusal(rule, `${path} is a binary file (${size} bytes, not UTF-8 text); ${why}.`);
}
