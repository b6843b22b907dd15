/**
 * The harness's own file acts beneath a workspace root — the file tools' writes and
 * deletes, the reads their restore points take, and the rewinds' restores and deletes —
 * done without following a symbolic link at any component, so a link a command plants or
 * swaps in between the check and the act cannot carry the act into `.git` or out of the
 * workspace.
 *
 * On Linux the path is walked one component at a time from an open descriptor of the
 * root: each next directory is opened as `/proc/self/fd/<parent>/<name>` with O_DIRECTORY
 * and O_NOFOLLOW. The kernel resolves `/proc/self/fd/<parent>` to the directory already
 * open, not to a path, so nothing already checked is looked up again, and a name that is a
 * link at the moment of the open is refused. The last component is then opened, created
 * (O_EXCL, O_NOFOLLOW), renamed over or unlinked through its parent's descriptor; rename
 * and unlink act on the name itself, never on what a link there leads to. Before the act,
 * the parent's descriptor is asked where it now is (its identity): a directory moved
 * away since it was opened refuses the act.
 *
 * Where /proc/self/fd is not there (not Linux), the same walk is done by path with lstat:
 * a link in place at the walk is refused, but one swapped in after it is not seen. The
 * guide (docs/guides/workspace.md) says so.
 *
 * A refusal is data ({@link Refused}) with a named rule; the caller turns it into the
 * refusal its reader gets (a tool result, or a rewind's error). A failure of the file
 * system itself is thrown, as the fs call threw it.
 */
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  existsSync,
  fchmodSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  type Stats,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { isAbsolute, join, relative, sep } from 'node:path';
import { PROTECTED_PATHS } from '../exec/containment/boundary.js';

/** The rule of a refusal because a component of the path is a symbolic link. */
const LINK_IN_PATH = 'fs.link-in-path';
/** The rule of a refusal because a directory on the path moved between its open and the act. */
const PATH_MOVED = 'fs.path-moved';
/** The rule of a refusal because the path is (or is under) a protected one: `fs.protected-path .git`. */
export const protectedRule = (name: string): string => `fs.protected-path ${name}`;

/** An act refused before anything was changed: the rule, and what to tell the reader. */
export interface Refused {
  ok: false;
  rule: string;
  reason: string;
}

/**
 * The protected path (see PROTECTED_PATHS) `path` is or is under, or null. A protected
 * directory counts at any depth (a nested repository's `.git` is git's as much as the
 * root's), a protected file at the root only; names are compared without regard to case,
 * like the policy's deny rules.
 *
 * @example
 * protectedName('vendor/lib/.git/config'); // '.git'
 * protectedName('docs/io.toml'); // null: only the root's io.toml configures the run
 */
export function protectedName(path: string): string | null {
  const parts = path
    .split(/[\\/]+/)
    .filter((part) => part !== '' && part !== '.')
    .map((part) => part.toLowerCase());
  for (const entry of PROTECTED_PATHS) {
    const own = entry.path.toLowerCase().split('/');
    if (entry.dir) {
      for (let at = 0; at + own.length <= parts.length; at++) {
        if (own.every((part, index) => parts[at + index] === part)) return entry.path;
      }
    } else if (parts.length === own.length && own.every((part, index) => parts[index] === part)) {
      return entry.path;
    }
  }
  return null;
}

/** The refusal of a protected path, or null when `path` is none. */
export function refuseProtected(path: string): Refused | null {
  const name = protectedName(path);
  if (name === null) return null;
  return {
    ok: false,
    rule: protectedRule(name),
    reason: `${path} is ${path.toLowerCase() === name.toLowerCase() ? '' : 'under '}${name}, a protected path no run may change (git, or the harness, reads it to decide what runs), so nothing was written there.`,
  };
}

let byDescriptor: boolean | undefined;

/**
 * Whether acts are walked through descriptors (/proc/self/fd, Linux): true. False: by
 * path, where a link swapped in after the walk is not seen.
 */
export function walksByDescriptor(): boolean {
  if (byDescriptor === undefined) {
    byDescriptor = false;
    if (process.platform === 'linux' && existsSync('/proc/self/fd')) {
      let fd: number | undefined;
      try {
        fd = openSync('/', constants.O_RDONLY | constants.O_DIRECTORY);
        byDescriptor = readlinkSync(`/proc/self/fd/${fd}`) === '/' && existsSync(`/proc/self/fd/${fd}/.`);
      } catch {
        byDescriptor = false;
      } finally {
        if (fd !== undefined) closeSync(fd);
      }
    }
  }
  return byDescriptor;
}

/** An open directory on the walk: its descriptor (null when walking by path) and where it should be. */
class Directory {
  constructor(
    readonly fd: number | null,
    readonly path: string,
  ) {}

  /** The name to give an fs call for `name` in this directory: resolved from the descriptor, not the path. */
  child(name: string): string {
    return this.fd === null ? join(this.path, name) : `/proc/self/fd/${this.fd}/${name}`;
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
  }
}

type Walk =
  | { kind: 'at'; parent: Directory; name: string }
  /** A directory on the way does not exist (and was not to be made). */
  | { kind: 'missing' }
  /** A component on the way is a file, not a directory. */
  | { kind: 'blocked'; at: string }
  | { kind: 'refused'; refused: Refused };

const DIRECTORY_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/**
 * Walks to the parent directory of `path` (workspace-relative, `/` separators) beneath
 * `root` (a realpath), opening each directory without following a link and making the
 * missing ones when `create`. The caller closes the parent it gets.
 */
function walk(root: string, path: string, create: boolean, protect = true): Walk {
  const parts = path.split('/');
  if (parts.some((part) => part === '' || part === '.' || part === '..' || part.includes('\0'))) {
    return {
      kind: 'refused',
      refused: {
        ok: false,
        rule: 'workspace.boundary',
        reason: `${path} is not a plain path inside the workspace; name a file by its path relative to the root.`,
      },
    };
  }
  const refused = protect ? refuseProtected(path) : null;
  if (refused) return { kind: 'refused', refused };
  const descriptors = walksByDescriptor();
  let directory = new Directory(descriptors ? openSync(root, DIRECTORY_FLAGS) : null, root);
  try {
    for (let index = 0; index < parts.length - 1; index++) {
      const name = parts[index] as string;
      const at = parts.slice(0, index + 1).join('/');
      const next = enter(directory, name, create);
      if (next === 'missing') {
        directory.close();
        return { kind: 'missing' };
      }
      if (next === 'link' || next === 'file' || next === 'unsteady') {
        directory.close();
        if (next === 'file') return { kind: 'blocked', at };
        return { kind: 'refused', refused: next === 'link' ? linkRefusal(root, at) : unsteadyRefusal(path, at) };
      }
      directory.close();
      directory = next;
    }
    // The parent's identity: where its descriptor is now must be where the path says.
    if (directory.fd !== null) {
      const expected = join(root, ...parts.slice(0, -1));
      const now = readlinkSync(`/proc/self/fd/${directory.fd}`);
      if (now !== expected) {
        directory.close();
        return {
          kind: 'refused',
          refused: {
            ok: false,
            rule: PATH_MOVED,
            reason: `${path} was refused: its directory moved while the harness was writing (it is now ${describeAt(root, now)}), so where the write would land cannot be trusted; nothing was written. Leave the directories in place and try again.`,
          },
        };
      }
    }
    return { kind: 'at', parent: directory, name: parts[parts.length - 1] as string };
  } catch (problem) {
    directory.close();
    throw problem;
  }
}

/** How often a walk looks again at a name that changed between two calls, before it gives up. */
const STEADY_ATTEMPTS = 8;

/**
 * Opens directory `name` of `directory` without following a link, making it first when
 * missing and `create`. `unsteady`: the name kept changing under the walk (made, removed,
 * swapped) between the calls that look at it.
 */
function enter(
  directory: Directory,
  name: string,
  create: boolean,
): Directory | 'missing' | 'link' | 'file' | 'unsteady' {
  const path = join(directory.path, name);
  for (let attempt = 0; attempt < STEADY_ATTEMPTS; attempt++) {
    if (directory.fd === null) {
      const stats = lstatSync(path, { throwIfNoEntry: false });
      if (stats?.isSymbolicLink()) return 'link';
      if (stats && !stats.isDirectory()) return 'file';
      if (stats) return new Directory(null, path);
    } else {
      try {
        return new Directory(openSync(directory.child(name), DIRECTORY_FLAGS), path);
      } catch (problem) {
        const code = (problem as NodeJS.ErrnoException).code;
        if (code !== 'ENOENT' && code !== 'ENOTDIR' && code !== 'ELOOP') throw problem;
        // O_NOFOLLOW with O_DIRECTORY answers ENOTDIR for a link (ELOOP on some kernels): lstat tells them apart.
        const stats = lstatSync(directory.child(name), { throwIfNoEntry: false });
        if (stats?.isSymbolicLink()) return 'link';
        if (stats && !stats.isDirectory()) return 'file';
        if (stats) continue; // a directory again since the open: open it
      }
    }
    if (!create) return 'missing';
    try {
      // mkdir makes the name itself: a link already there fails it (EEXIST), never followed.
      mkdirSync(directory.child(name));
    } catch (problem) {
      if ((problem as NodeJS.ErrnoException).code !== 'EEXIST') throw problem;
    }
  }
  return 'unsteady';
}

function linkRefusal(root: string, at: string): Refused {
  let where = '';
  try {
    const target = realpathSync(join(root, at));
    const inside = relative(root, target);
    where =
      inside === '..' || inside.startsWith(`..${sep}`) || isAbsolute(inside)
        ? ' (it leads outside the workspace)'
        : ` (to ${inside.split(sep).join('/') || 'the workspace root'})`;
  } catch {
    // Dangling, or gone again: say only that it is a link.
  }
  return {
    ok: false,
    rule: LINK_IN_PATH,
    reason: `${at} is a symbolic link${where}; the harness does not write or delete through a link on the way (one may have been put there since the path was checked), so nothing was changed. Remove the link, or name the file by its real path.`,
  };
}

function unsteadyRefusal(path: string, at: string): Refused {
  return {
    ok: false,
    rule: PATH_MOVED,
    reason: `${path} was refused: ${at} kept changing (made, removed or swapped for a link) while the harness walked it, so where the write would land cannot be trusted; nothing was written. Leave the directories in place and try again.`,
  };
}

function describeAt(root: string, path: string): string {
  const inside = relative(root, path);
  return inside === '..' || inside.startsWith(`..${sep}`) || isAbsolute(inside)
    ? 'outside the workspace'
    : inside.split(sep).join('/');
}

/** What is at a path, looked at without following a link. */
export type Looked =
  | { ok: true; kind: 'missing' }
  | { ok: true; kind: 'blocked'; at: string }
  | { ok: true; kind: 'directory' }
  | { ok: true; kind: 'special' }
  | { ok: true; kind: 'too-large'; size: number }
  /** A regular file with more than one name (a hard link), not read. */
  | { ok: true; kind: 'linked'; names: number }
  /** A regular file's bytes, read through the descriptor that was checked. */
  | { ok: true; kind: 'file'; bytes: Buffer }
  | Refused;

/**
 * What is at `path` beneath `root`: a regular file's bytes (up to `limit`), or what it is
 * instead; refused when a component is a link, or (with `protect`, for a change) the path
 * is protected. A file with several names is read only when `readLinked` (its other names
 * cannot be found from this one, and one may lie where the reader may not look).
 */
export function lookBeneath(root: string, path: string, limit: number, readLinked = false, protect = true): Looked {
  const walked = walk(root, path, false, protect);
  if (walked.kind === 'refused') return walked.refused;
  if (walked.kind === 'missing') return { ok: true, kind: 'missing' };
  if (walked.kind === 'blocked') return { ok: true, kind: 'blocked', at: walked.at };
  const { parent, name } = walked;
  let fd: number;
  try {
    // Without blocking: a pipe swapped in would otherwise hold the thread for good.
    fd = openSync(parent.child(name), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (problem) {
    const code = (problem as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { ok: true, kind: 'missing' };
    if (code === 'ELOOP') return linkRefusal(root, path);
    throw problem;
  } finally {
    parent.close();
  }
  try {
    const stats = fstatSync(fd);
    if (stats.isDirectory()) return { ok: true, kind: 'directory' };
    if (!stats.isFile()) return { ok: true, kind: 'special' };
    if (stats.nlink > 1 && !readLinked) return { ok: true, kind: 'linked', names: stats.nlink };
    if (stats.size > limit) return { ok: true, kind: 'too-large', size: stats.size };
    return { ok: true, kind: 'file', bytes: readFileSync(fd) };
  } finally {
    closeSync(fd);
  }
}

/**
 * Replaces (or creates) the file at `path` beneath `root` with `content`, making missing
 * directories: a temporary file made next to it (O_EXCL, O_NOFOLLOW) is renamed over the
 * name, keeping the old file's mode. A reader never sees half a file, and the name is
 * replaced rather than written through, so another name of the old file (a hard link)
 * keeps its content. Throws when a component on the way is a file or the target is a
 * directory (ENOTDIR, EISDIR).
 */
export function replaceBeneath(root: string, path: string, content: string | Uint8Array): { ok: true } | Refused {
  const walked = walk(root, path, true);
  if (walked.kind === 'refused') return walked.refused;
  if (walked.kind === 'missing') throw fsError('ENOENT', `a directory on the way to ${path} could not be made`);
  if (walked.kind === 'blocked') throw fsError('ENOTDIR', `${walked.at} is a file, not a directory`);
  const { parent, name } = walked;
  try {
    const existing = lstatSync(parent.child(name), { throwIfNoEntry: false });
    if (existing?.isSymbolicLink()) return linkRefusal(root, path);
    if (existing?.isDirectory()) throw fsError('EISDIR', `${path} is a directory`);
    const temporary = `.${name}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
    const fd = openSync(
      parent.child(temporary),
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      0o666,
    );
    try {
      try {
        writeFileSync(fd, content);
        if (existing) fchmodSync(fd, existing.mode & 0o7777);
      } finally {
        closeSync(fd);
      }
      renameSync(parent.child(temporary), parent.child(name));
    } catch (problem) {
      try {
        unlinkSync(parent.child(temporary));
      } catch {
        // Already gone.
      }
      throw problem;
    }
    return { ok: true };
  } finally {
    parent.close();
  }
}

/**
 * Removes the file at `path` beneath `root` through its parent's descriptor: `removed`
 * false when there was none. A link at the name is refused, not removed: it was not the
 * file the harness wrote. Throws for a directory (EISDIR).
 */
export function removeBeneath(root: string, path: string): { ok: true; removed: boolean } | Refused {
  const walked = walk(root, path, false);
  if (walked.kind === 'refused') return walked.refused;
  if (walked.kind !== 'at') return { ok: true, removed: false };
  const { parent, name } = walked;
  try {
    const existing: Stats | undefined = lstatSync(parent.child(name), { throwIfNoEntry: false });
    if (!existing) return { ok: true, removed: false };
    if (existing.isSymbolicLink()) return linkRefusal(root, path);
    if (existing.isDirectory()) throw fsError('EISDIR', `${path} is a directory`);
    try {
      // unlink removes the name itself: a link swapped in after the lstat is removed, never followed.
      unlinkSync(parent.child(name));
    } catch (problem) {
      if ((problem as NodeJS.ErrnoException).code === 'ENOENT') return { ok: true, removed: false };
      throw problem;
    }
    return { ok: true, removed: true };
  } finally {
    parent.close();
  }
}

function fsError(code: string, message: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: ${message}`), { code });
}
