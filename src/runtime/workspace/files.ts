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
 *
 * {@link Workspace} is the one object the tools hold; each of its concerns is a module of
 * its own: where a path is (./paths.ts), reading (./reading.ts), planning a change
 * (./changes.ts), putting content at a path and reading it back for a restore point
 * (./restoring.ts), the walk and report of grep and find (./finding.ts, with the matching
 * in ./search.ts), the ceilings (./limits.ts) and the tools' argument schemas
 * (./tool-parameters.ts).
 */
import { realpathSync, type Stats, statSync } from 'node:fs';
import { resolve as resolvePath } from 'node:path';
import { ErrorCode, HarnessError, InvalidArgumentError } from '../../errors.js';
import type { ToolResult } from '../tools/tool.js';
import {
  type EditArgs,
  type FileChange,
  type PatchArgs,
  type Planned,
  planEdit,
  planPatch,
  planWrite,
  type WriteArgs,
} from './changes.js';
import { message } from './diffs.js';
import { type FindArgs, Finder, type GrepArgs } from './finding.js';
import { DEFAULT_MAX_READ_BYTES, DEFAULT_MAX_RESULTS } from './limits.js';
import { locate, type Resolved, statOrNull } from './paths.js';
import { type ReadArgs, readFile, readWhole } from './reading.js';
import { currentAt, restoreAt } from './restoring.js';
import { type FindOutcome, type GrepOutcome, runSearch, type SearchOutcome, type SearchTask } from './search.js';

export {
  describeChange,
  type EditArgs,
  type FileChange,
  type PatchArgs,
  type Planned,
  type WriteArgs,
} from './changes.js';
export { applyHunks, diffStat, hunkHeader, reverseApply, unifiedDiff } from './diffs.js';
export type { FindArgs, GrepArgs } from './finding.js';
export {
  DEFAULT_MAX_READ_BYTES,
  DEFAULT_MAX_RESULTS,
  MAX_PATH_CHARS,
  MAX_PATTERN_CHARS,
  MAX_RANGED_READ_BYTES,
  MAX_WRITE_BYTES,
} from './limits.js';
export type { Resolved } from './paths.js';
export type { ReadArgs } from './reading.js';
export { FILE_TOOL_DESCRIPTIONS, FILE_TOOL_PARAMETERS } from './tool-parameters.js';

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
  readonly #finder: Finder;

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
    this.#finder = new Finder(this, {
      maxReadBytes: this.#maxReadBytes,
      maxResults: positiveInteger('maxResults', options.maxResults, DEFAULT_MAX_RESULTS),
      visible: options.visible ?? (() => true),
    });
    this.file = null;
    if (options.file !== undefined) {
      const located = locate(this, options.file, false);
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
    return locate(this, path, false);
  }

  /**
   * read_file: the exact text of a file, or of lines start_line..end_line (1-based,
   * inclusive). `decided`: the resolved path a policy allowed (see {@link resolve}); a path
   * that resolves elsewhere now (a link swapped in on the way since) is refused, not read.
   */
  read(args: ReadArgs, decided?: string): ToolResult {
    return readFile(this, this.#maxReadBytes, args, decided);
  }

  /** A whole file's bytes, at most `limit`, read as read_file reads (see readWhole in ./reading.ts). */
  readBytes(path: string, limit: number, decided?: string): { bytes: Buffer; path: string } | ToolResult {
    return readWhole(this, path, limit, decided);
  }

  /** write_file: replace (or create) a whole file. */
  planWrite(args: WriteArgs): Planned {
    return planWrite(this, args);
  }

  /** edit_file: replace the one occurrence of old_string with new_string. */
  planEdit(args: EditArgs): Planned {
    return planEdit(this, args);
  }

  /** patch_file: apply a unified diff for one file, all hunks or none. */
  planPatch(args: PatchArgs): Planned {
    return planPatch(this, args);
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
    return restoreAt(this, path, content);
  }

  /**
   * What `path` holds now, read by name with no link followed: the bytes a restore point
   * keeps (null when there is no file), or the refusal or error to answer instead.
   */
  current(path: string): { ok: true; content: Buffer | null } | { ok: false; result: ToolResult } {
    return currentAt(this, path);
  }

  /** grep: lines matching a JavaScript regular expression, as `path:line:text`, paths sorted. */
  grep(args: GrepArgs): ToolResult {
    const prepared = this.#finder.prepareGrep(args);
    return prepared.ok ? prepared.report(runSearch(prepared.task) as GrepOutcome) : prepared.result;
  }

  /** find: paths matching a glob, sorted; directories end in `/`. */
  find(args: FindArgs): ToolResult {
    const prepared = this.#finder.prepareFind(args);
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
    const prepared =
      name === 'grep' ? this.#finder.prepareGrep(args as GrepArgs) : this.#finder.prepareFind(args as FindArgs);
    if (!prepared.ok) return prepared.result;
    const outcome = await match(prepared.task);
    if ('content' in outcome) return outcome;
    return (prepared.report as (outcome: SearchOutcome) => ToolResult)(outcome);
  }
}

function positiveInteger(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 1) {
    throw new InvalidArgumentError(
      `${name} must be a whole number of at least 1; it was ${value}. Omit it for ${fallback}.`,
    );
  }
  return value;
}
