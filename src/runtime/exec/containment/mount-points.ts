/**
 * The mount points the containment makes on the host for paths that are not there yet (an
 * empty directory for a protected path, an empty file for a kept one), noted in a registry
 * under the temporary directory so that whichever run closes last removes them, and a
 * crashed run's are removed by the next run there.
 */
import { createHash } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { threadId } from 'node:worker_threads';

/**
 * Makes, in the workspace itself, the mount points for protected paths that do not exist
 * yet (an empty directory) and for kept files that are to be masked even where missing (an
 * empty file), so that they can be bound over. The paths made, to go when the run's
 * session closes.
 */
export function makeMountPoints(mounts: { bind: string[]; empty: string[] }, files: readonly string[] = []): string[] {
  // Those another run made and this one binds too: removed by whichever of them closes last.
  const made: string[] = mounts.bind.filter((path) => existsSync(registryEntry(path)));
  for (const [paths, dir] of [
    [mounts.empty, true],
    [files, false],
  ] as const) {
    for (const path of paths) {
      try {
        if (dir) mkdirSync(path);
        else writeFileSync(path, '', { flag: 'wx' });
        registerMountPoint(path);
        made.push(path);
      } catch {
        // Made by another run meanwhile (this run removes it too, if it is the last to close), or the parent went.
        if (existsSync(registryEntry(path))) made.push(path);
      }
    }
  }
  return made;
}

/**
 * Where the harness notes the mount points it made, by the hash of their path, so that
 * whichever run closes last removes one another run made (and a crashed run's, the next
 * run on that workspace): an empty file of the user's own is never taken for one.
 */
function registryEntry(path: string): string {
  return join(REGISTRY, createHash('sha256').update(path).digest('hex').slice(0, 32));
}

const REGISTRY = join(tmpdir(), 'io-harness-mount-points');

/**
 * Drops the entries whose mount point is gone with what held it (a workspace removed while
 * a run had one made there, or after a crash): they name nothing left to remove, and would
 * otherwise stay in the temporary directory for good.
 */
function pruneRegistry(): void {
  let names: string[];
  try {
    names = readdirSync(REGISTRY);
  } catch {
    return;
  }
  for (const name of names) {
    if (name.includes('.')) continue; // one being written
    const entry = join(REGISTRY, name);
    try {
      if (!existsSync(readFileSync(entry, 'utf8'))) rmSync(entry, { force: true });
    } catch {
      // removed meanwhile by the run that made it
    }
  }
}

function registerMountPoint(path: string): void {
  const entry = registryEntry(path);
  mkdirSync(dirname(entry), { recursive: true, mode: 0o700 });
  // Whole or not at all (written aside, then renamed): a prune never reads half a path.
  const aside = `${entry}.${process.pid}.${threadId}`;
  writeFileSync(aside, path);
  renameSync(aside, entry);
}

/**
 * Removes the empty directories and files made to mount over protected paths that did not
 * exist, newest first; one that is no longer empty stays. Left by a crash, they are empty
 * and harmless (an empty `.git` is no repository to git, an empty `.git/config` a valid one).
 */
export function removeMountPoints(paths: string[]): void {
  if (paths.length === 0) return;
  const inUse = mountedElsewhere();
  for (const path of [...new Set(paths)].reverse()) {
    // Another run's command still mounts on it (the same workspace, in another run): removing
    // it would detach that command's protection, and the path could be made there. Left for
    // the last run to close.
    if (inUse.has(path)) continue;
    try {
      const stat = lstatSync(path);
      if (stat.isDirectory()) rmdirSync(path);
      else if (stat.isFile() && stat.size === 0) rmSync(path);
    } catch {
      // not empty, busy, or gone
    }
    if (!existsSync(path)) rmSync(registryEntry(path), { force: true });
  }
  pruneRegistry();
}

/**
 * The mount points of every mount namespace but this process's own, read from
 * /proc/<pid>/mountinfo once per namespace (the paths as the kernel escapes them: a space
 * is \\040). Where /proc cannot be read, nothing is known to be in use.
 */
function mountedElsewhere(): Set<string> {
  const points = new Set<string>();
  let own = '';
  try {
    own = readlinkSync('/proc/self/ns/mnt');
  } catch {
    return points;
  }
  const seen = new Set<string>([own]);
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((name) => /^[0-9]+$/.test(name));
  } catch {
    return points;
  }
  for (const pid of pids) {
    try {
      const namespace = readlinkSync(`/proc/${pid}/ns/mnt`);
      if (seen.has(namespace)) continue;
      seen.add(namespace);
      for (const line of readFileSync(`/proc/${pid}/mountinfo`, 'utf8').split('\n')) {
        const point = line.split(' ')[4];
        if (point)
          points.add(
            point.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8))),
          );
      }
    } catch {
      // gone, or not ours to read
    }
  }
  return points;
}
