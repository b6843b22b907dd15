/**
 * The walking half of grep and find (./search.ts is the matching half): the pattern or
 * glob checked, the tree under the starting point walked with the policy's read rules
 * applied to every entry, and the report the model reads made of what matched. The walk
 * never follows a link out of the root, nor into a directory it has walked already.
 */
import { type Dirent, readdirSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { compileGlob } from '../policy/globs.js';
import type { ToolResult } from '../tools/tool.js';
import { error, refusal } from './answers.js';
import { message, quote } from './diffs.js';
import { inLexically, locate, statOrNull, type WorkspaceScope } from './paths.js';
import type { FindOutcome, FindTask, GrepOutcome, GrepTask } from './search.js';

/** Directories grep always skips, and find skips unless its pattern names them. */
const SKIPPED_DIRS = ['.git', 'node_modules'];

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

/** What a search is held to: its ceilings, and which walked paths the policy lets it show. */
export interface FinderOptions {
  /** A file above this many bytes is skipped by grep. */
  maxReadBytes: number;
  /** grep and find print at most this many lines. */
  maxResults: number;
  /** Whether a walked path may be shown: the policy's read rules. */
  visible: (relative: string) => boolean;
}

/**
 * grep and find of one workspace up to the matching. It keeps what the last walk withheld,
 * for the report made of that walk's matches.
 */
export class Finder {
  readonly #scope: WorkspaceScope;
  readonly #maxReadBytes: number;
  readonly #maxResults: number;
  readonly #visible: (relative: string) => boolean;
  #withheld = 0;

  constructor(scope: WorkspaceScope, options: FinderOptions) {
    this.#scope = scope;
    this.#maxReadBytes = options.maxReadBytes;
    this.#maxResults = options.maxResults;
    this.#visible = options.visible;
  }

  /** grep up to the matching: the pattern checked, the files walked (and withheld) and the report to make of the matches. */
  prepareGrep(
    args: GrepArgs,
  ): { ok: true; task: GrepTask; report: (outcome: GrepOutcome) => ToolResult } | { ok: false; result: ToolResult } {
    if (this.#scope.file !== null) return { ok: false, result: this.#singleFileRefusal('grep') };
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
  prepareFind(
    args: FindArgs,
  ): { ok: true; task: FindTask; report: (outcome: FindOutcome) => ToolResult } | { ok: false; result: ToolResult } {
    if (this.#scope.file !== null) return { ok: false, result: this.#singleFileRefusal('find') };
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

  /** The directory (or file) grep and find start from; the root when `path` is not given. */
  #base(
    input: string | undefined,
  ): { ok: true; absolute: string; relative: string; directory: boolean } | { ok: false; result: ToolResult } {
    const located = locate(this.#scope, input ?? '.', true);
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
          if (!inLexically(this.#scope.root, target)) continue;
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
      `${tool} was refused: this workspace is limited to the single file ${this.#scope.file}, so there is nothing to search. Use read_file on ${this.#scope.file}.`,
    );
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
