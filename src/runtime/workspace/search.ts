/**
 * The matching half of grep and find: a regular expression or a glob from the model run
 * over files and paths the caller has already walked (and filtered by the policy). It is
 * kept apart from the walk so it can run on a worker thread that can be stopped: a
 * pattern that backtracks catastrophically would otherwise hold the agent's thread for
 * good, since nothing can interrupt a regular expression on the thread running it.
 *
 * Everything here is plain data in and out (a task crosses a thread as a structured
 * clone), and imports nothing that is not needed to match.
 */
import { closeSync, constants, fstatSync, openSync, readFileSync, readlinkSync } from 'node:fs';
import { minimatch } from 'minimatch';

/** How much of a file is searched for a NUL byte to call it binary. */
export const SNIFF_BYTES = 8192;
/** grep prints at most this many characters of a matching line. */
const LINE_CUT = 300;

/** A grep over files already walked: the glob and the pattern are applied here. */
export interface GrepTask {
  kind: 'grep';
  /** The regular expression's source and flags, as the model gave them (already checked to compile). */
  pattern: string;
  flags: string;
  /** Only files whose path matches this glob (relative to the workspace or to `base`). */
  glob: string | null;
  /** Where the search started, workspace-relative (`.` for the root). */
  base: string;
  /** The files to search, sorted by `relative`. */
  files: { relative: string; absolute: string }[];
  maxReadBytes: number;
  maxResults: number;
}

export interface GrepOutcome {
  kind: 'grep';
  /** The first `maxResults` matching lines, as `path:line:text`. */
  lines: string[];
  /** How many lines matched in all. */
  total: number;
  searched: number;
  /** Files skipped as binary, oversized or unreadable. */
  skipped: number;
  /** Files skipped because they have several names (hard links), as read_file refuses them. */
  linked: number;
}

/** A find over entries already walked: the glob is applied here. */
export interface FindTask {
  kind: 'find';
  pattern: string;
  base: string;
  matchBase: boolean;
  entries: { relative: string; directory: boolean }[];
}

export type FindOutcome = { kind: 'find'; matched: string[] } | { kind: 'find'; error: string };

export type SearchTask = GrepTask | FindTask;
export type SearchOutcome = GrepOutcome | FindOutcome;

/** Runs a task on the calling thread. */
export function runSearch(task: SearchTask): SearchOutcome {
  return task.kind === 'grep' ? grepFiles(task) : findPaths(task);
}

function grepFiles(task: GrepTask): GrepOutcome {
  const pattern = new RegExp(task.pattern, task.flags);
  const lines: string[] = [];
  let total = 0;
  let searched = 0;
  let skipped = 0;
  let linked = 0;
  for (const entry of task.files) {
    if (task.glob !== null && !globMatches(entry.relative, task.base, task.glob, true)) continue;
    const text = searchable(entry.absolute, task.maxReadBytes);
    if (text === 'linked') {
      linked++;
      continue;
    }
    if (text === null) {
      skipped++;
      continue;
    }
    searched++;
    const fileLines = text.split('\n');
    if (text.endsWith('\n')) fileLines.pop();
    fileLines.forEach((raw, index) => {
      const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
      if (!pattern.test(line)) return;
      total++;
      if (lines.length < task.maxResults) lines.push(`${entry.relative}:${index + 1}:${cut(line)}`);
    });
  }
  return { kind: 'grep', lines, total, searched, skipped, linked };
}

function findPaths(task: FindTask): FindOutcome {
  try {
    const matched = task.entries
      .filter((entry) => globMatches(entry.relative, task.base, task.pattern, task.matchBase))
      .map((entry) => (entry.directory ? `${entry.relative}/` : entry.relative))
      .sort(compare);
    return { kind: 'find', matched };
  } catch (problem) {
    return { kind: 'find', error: problem instanceof Error ? problem.message : String(problem) };
  }
}

/** A glob matched against the workspace-relative path, or the path relative to where the search starts. */
function globMatches(path: string, base: string, glob: string, matchBase: boolean): boolean {
  const options = { dot: true, matchBase };
  if (minimatch(path, glob, options)) return true;
  return base !== '.' && path.startsWith(`${base}/`) && minimatch(path.slice(base.length + 1), glob, options);
}

/**
 * A file's text for grep, or null when it is binary, above the read ceiling or
 * unreadable, or `linked` when it has several names (hard links): read_file would refuse
 * it, so grep does not show its lines either.
 */
function searchable(absolute: string, maxReadBytes: number): string | null | 'linked' {
  try {
    // The listing found it by a path with no link on it: a file that is elsewhere when it is
    // opened (a directory on the way swapped for a link since) is not read.
    const read = readRegular(absolute, maxReadBytes, true);
    if ('problem' in read) return read.problem === 'linked' ? 'linked' : null;
    return hasNul(read.bytes.subarray(0, SNIFF_BYTES)) ? null : decode(read.bytes);
  } catch {
    return null;
  }
}

/**
 * A regular file's bytes, read through one descriptor: opened without blocking (a pipe
 * swapped in after the stat would otherwise hold the thread for good) and checked on the
 * descriptor itself, so what is read is the file that was checked. Null with the reason
 * when it is not a regular file with one name, or is above `limit` bytes.
 */
export function readRegular(
  path: string,
  limit: number,
  exact = false,
): { bytes: Buffer } | { problem: 'not-regular' | 'linked' | 'too-large' | 'moved'; size: number } {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | (exact ? constants.O_NOFOLLOW : 0));
  try {
    // `exact`: what was opened must be at `path` itself (where the kernel can say: /proc/self/fd).
    if (exact && openedElsewhere(fd, path)) return { problem: 'moved', size: 0 };
    const stats = fstatSync(fd);
    if (!stats.isFile()) return { problem: 'not-regular', size: stats.size };
    if (stats.nlink > 1) return { problem: 'linked', size: stats.nlink };
    if (stats.size > limit) return { problem: 'too-large', size: stats.size };
    return { bytes: readFileSync(fd) };
  } finally {
    closeSync(fd);
  }
}

/** Whether descriptor `fd` is open on a file other than the one at `path` (false where /proc cannot say). */
function openedElsewhere(fd: number, path: string): boolean {
  try {
    return readlinkSync(`/proc/self/fd/${fd}`) !== path;
  } catch {
    return false;
  }
}

const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export function hasNul(bytes: Uint8Array): boolean {
  return bytes.includes(0);
}

/** The UTF-8 text of `bytes` (a byte order mark kept), or null when they are not valid UTF-8. */
export function decode(bytes: Uint8Array): string | null {
  try {
    return decoder.decode(bytes);
  } catch {
    return null;
  }
}

function cut(line: string): string {
  return line.length > LINE_CUT
    ? `${line.slice(0, LINE_CUT)} … [line cut at ${LINE_CUT} of ${line.length} characters]`
    : line;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
