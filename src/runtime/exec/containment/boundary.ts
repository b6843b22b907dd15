/**
 * What a run's commands are granted, and how a rung enforces it. A run is granted reads
 * of the file system, writes to its workspace (unless read-only), to a temporary
 * directory and a home of its own (never the shared ones), to the detected toolchain's
 * caches and to the roots its contract declares, and nothing else; the protected paths
 * inside the workspace stay read-only even where they do not exist yet; a run whose
 * policy names no host has no network at all. What it hides from them is in ./masks.ts, the
 * mount points it makes on the host in ./mount-points.ts.
 */

import {
  type Dirent,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { deniesReads, type Policy, readDeniedBy } from '../../policy/policy.js';
import { harnessCheckouts } from '../../workspace/worktree.js';
import type { KeptPath } from './kept.js';
import { absoluteMasks, keptMasks, maskMounts, PROBE_NAME } from './masks.js';
import { makeMountPoints } from './mount-points.js';
import { components, holder, isDirectory, real } from './paths.js';
import { bwrapPrefix, type HostRungs, type RungName, SETPRIV_FLAGS, unsharePrefix } from './rungs.js';

/**
 * How much of the file system a run's commands may change: `read-only` (only their own
 * temporary directory and home), `workspace-write` (the default: the workspace too, and
 * the declared roots), `full` (everything the harness may: no containment but the floor).
 */
export type Access = 'read-only' | 'workspace-write' | 'full';

/** Limits a contained command is killed at (never throttled). */
export interface SandboxCaps {
  /**
   * Memory, in bytes: the limit of a memory cgroup where this host has one the harness may
   * make (the command killed past it, the whole tree counted), else the address space of
   * each process (RLIMIT_AS: allocations past it fail).
   */
  memoryBytes?: number;
  /** CPU time, in seconds (RLIMIT_CPU: SIGKILL past it). */
  cpuSecs?: number;
  /** Processes the command may have at once (a pids cgroup where this host delegates one, else RLIMIT_NPROC). */
  processes?: number;
  /**
   * The largest file the command may write, in bytes (RLIMIT_FSIZE: SIGXFSZ past it). On by
   * default ({@link DEFAULT_DISK_CAPS}); null lifts it.
   */
  fileBytes?: number | null;
  /**
   * What the run's commands may write to storage in all, in bytes: each command is killed
   * past what the run has left, and none is started once it is spent. On by default
   * ({@link DEFAULT_DISK_CAPS}); null lifts it.
   */
  writtenBytes?: number | null;
  /** What the command may print, both streams together, in bytes: killed, with all it started, past it. */
  outputBytes?: number;
  /** The command's wall clock, in seconds (the tool call's own timeout still applies when shorter): killed at it. */
  wallSecs?: number;
}

/**
 * The caps on the disk every contained command has unless its contract lifts them (sets
 * them to null): one file of 4 GiB, and 16 GiB written by all the run's commands together,
 * so that no run fills the disk by accident or on purpose.
 */
export const DEFAULT_DISK_CAPS = { fileBytes: 4 * 1024 ** 3, writtenBytes: 16 * 1024 ** 3 } as const;

/** The caps a command is held to: the contract's, the disk's defaults under them, none lifted. */
export type Caps = { [K in keyof SandboxCaps]?: number };

/** `caps` with the disk's defaults where the contract set none, and without those it lifted (null). */
export function capsOf(caps: SandboxCaps): Caps {
  const out: Caps = {};
  for (const [name, value] of Object.entries({ ...DEFAULT_DISK_CAPS, ...caps }))
    if (typeof value === 'number') out[name as keyof Caps] = value;
  return out;
}

/** The contract's sandbox, as stored. */
export interface SandboxData {
  access: Access;
  /** Absolute directories outside the workspace the commands may also write. */
  writableRoots: string[];
  /** A rung asked for by name: the run fails before its first step where it cannot be had. */
  rung: RungName | null;
  caps: SandboxCaps;
  /**
   * Whether the commands write the toolchains' caches of the harness's home (true) or
   * caches of the run's own, gone with it (false, the default): a shared cache is a place
   * a command can leave what a later build on the host reads and runs.
   */
  sharedCaches?: boolean;
}

/**
 * Whether a workspace's repository is kept from its processes: see boundaryFor's
 * `repository`. The object is a worktree's (see workspace/worktree.ts): its repository's
 * git directory, writable or not, and the checkout it was made from, hidden as there.
 */
export type RepositoryAccess = 'protected' | 'writable' | { gitDir: string; writable: boolean; from?: string };

export const DEFAULT_SANDBOX: SandboxData = {
  access: 'workspace-write',
  writableRoots: [],
  rung: null,
  caps: {},
  sharedCaches: false,
};

/**
 * Paths inside the workspace no command may change, whatever the grants: `dir` for a
 * directory, else a file; each kept read-only even before it exists (an empty directory
 * or file is mounted in its place). All of `.git`, not only its hooks and config: git
 * reads code to run from many places in it (`commondir`, `worktrees/`, `modules/`,
 * `config.worktree`, `info/`), and a repository is the user's history, not a scratch
 * space. The `.git` of every repository nested in the workspace when the run starts is
 * kept so too (see {@link scanWorkspace}).
 */
export const PROTECTED_PATHS: readonly { path: string; dir: boolean }[] = [
  { path: '.git', dir: true },
  { path: '.io-harness', dir: true },
  { path: 'io.toml', dir: false },
  { path: 'io.local.toml', dir: false },
];

/** Toolchain installations under the home directory, linked into a run's home (read). */
const TOOLCHAIN_HOMES: readonly string[] = [
  '.pyenv',
  '.rustup',
  '.cargo/bin',
  '.nvm',
  '.volta',
  '.bun/bin',
  '.deno/bin',
  '.local/bin',
  '.sdkman',
  '.rbenv',
  '.asdf',
  '.dotnet',
  'go/bin',
];

/** Caches under the home directory the toolchains fill, linked into a run's home and writable. */
const TOOLCHAIN_CACHES: readonly string[] = [
  '.npm',
  '.cache/node-gyp',
  '.cache/yarn',
  '.cache/pnpm',
  '.local/share/pnpm',
  '.bun/install/cache',
  '.cache/deno',
  '.cache/pip',
  '.cache/uv',
  '.cache/pypoetry',
  '.cargo/registry',
  '.cargo/git',
  'go/pkg/mod',
  '.cache/go-build',
  '.gradle',
  '.m2',
];

/** What one run's commands are granted, resolved to absolute paths. */
export interface Boundary {
  access: Access;
  root: string;
  /** Directories the commands may write (real paths). */
  writable: string[];
  /** Paths inside the workspace kept read-only (see {@link PROTECTED_PATHS}). */
  protectedPaths: { path: string; dir: boolean }[];
  /** An empty directory of the run's own, mounted read-only where a protected path does not exist yet. */
  empty: string;
  /**
   * Paths hidden from commands: a store's files and what the policy denies reading in so
   * many words (see {@link readMasks}). A directory is hidden with its names, a file by
   * its content; each is bound over from `maskSource` (`dir` and `file`, both mode 000).
   */
  masked: { path: string; dir: boolean }[];
  maskSource: string;
  /** False when the workspace was too large to look through whole for denied reads. */
  masksComplete: boolean;
  /**
   * Files in the workspace with another name somewhere (a hard link made before the run):
   * kept read-only, so a write through one cannot reach a file outside. `complete` is false
   * when the workspace was too large to look through whole.
   */
  hardLinks: { paths: string[]; complete: boolean };
  /**
   * `none`: a network namespace with no route out at all. `proxy`: the same, with the
   * run's egress proxy reached through the helper's relay on 127.0.0.1 (the policy's `net`
   * rules enforced there). `open`: the host's network.
   */
  network: 'none' | 'proxy' | 'open';
  /** The run's own directories: its commands' TMPDIR and HOME. */
  tmp: string;
  home: string;
  /** The caps, the disk's defaults included (see {@link capsOf}). */
  caps: Caps;
}

/** Whether a policy lets any host be dialled (allowed or asked about); a policy that names none denies egress. */
export function policyAllowsEgress(policy: Policy | null): boolean {
  if (!policy) return true;
  return policy.layers.some((layer) => layer.rules.some((rule) => rule.act === 'net' && rule.effect !== 'deny'));
}

/**
 * The run's home: the toolchains' installations of the harness's home linked in (read),
 * and with `shared` its caches too (writable); nothing else of it (no dotfiles, no
 * credentials by their usual names). Without `shared` the toolchains make their caches
 * in the run's home, and they go with it. Returns the caches granted.
 */
export function furnishHome(home: string, shared: boolean, realHome: string = homedir()): string[] {
  mkdirSync(home, { recursive: true, mode: 0o700 });
  const caches: string[] = [];
  const link = (entry: string): boolean => {
    const target = join(realHome, entry);
    if (!realHome || !existsSync(target)) return false;
    const at = join(home, entry);
    try {
      lstatSync(at);
      return true;
    } catch {
      // not linked yet
    }
    mkdirSync(dirname(at), { recursive: true, mode: 0o700 });
    symlinkSync(target, at);
    return true;
  };
  for (const entry of TOOLCHAIN_HOMES) link(entry);
  if (shared) for (const entry of TOOLCHAIN_CACHES) if (link(entry)) caches.push(real(join(realHome, entry)));
  return caches;
}

export function boundaryFor(options: {
  sandbox: SandboxData;
  root: string;
  tmp: string;
  home: string;
  empty: string;
  /** A directory of the run's own holding `dir` and `file`, both empty and mode 000: what masks are bound from. */
  maskSource: string;
  caches: string[];
  /** The network the run's rung gives its commands (see {@link Boundary.network}). */
  network: Boundary['network'];
  /** What the policy denies reading in so many words is hidden from commands (null: nothing is). */
  policy?: Policy | null;
  /** What the harness trusts and keeps from commands (see ./kept.ts). */
  kept?: readonly KeptPath[];
  /**
   * `writable`: the workspace's own repository (its `.git`) is left writable, for the git
   * tools' executor, whose argv is fixed; never a run's commands. Repositories inside it,
   * and everything else protected, stay so. An object, for a worktree: `writable` as
   * above, the repository's git directory outside the workspace writable too; and what the
   * policy hides of the checkout it was made from (`from`, whose files it denies in
   * relative words, `.env` say) hidden as it is there.
   */
  repository?: RepositoryAccess;
  /**
   * `unreadable`: every path of the workspace the policy does not let be read outright is
   * hidden (denied, asked about, or allowed by no rule), where `denied` hides what it denies
   * in so many words. For a process whose output reaches the model with no read check of
   * its own (a language server's answers).
   */
  hideReads?: 'denied' | 'unreadable';
}): Boundary {
  const { sandbox, root, tmp, home } = options;
  const realRoot = real(root);
  const policy = options.policy ?? null;
  const unreadable = policy !== null && options.hideReads === 'unreadable';
  const denies = policy !== null && (unreadable || deniesReads(policy));
  const writable = [
    ...(sandbox.access === 'read-only' ? [] : [realRoot]),
    real(tmp),
    real(home),
    ...options.caches,
    ...sandbox.writableRoots.map(real),
  ];
  // What the policy hides of the checkout at `at` (its relative patterns read from there).
  const hiding = (at: string) =>
    denies
      ? {
          denied: unreadable
            ? (path: string) => (policy as Policy).decide({ kind: 'read', path }, at).effect !== 'allow'
            : (path: string) => readDeniedBy(policy as Policy, path) !== null,
          // A directory not readable itself may hold files that are: hidden whole only when a name in it is not.
          ...(unreadable ? { wholeByName: false } : {}),
        }
      : {};
  const scan: WorkspaceScan =
    sandbox.access === 'read-only' && !denies
      ? { hardLinks: [], repositories: [], denied: [], complete: true }
      : scanWorkspace(realRoot, { links: sandbox.access !== 'read-only', ...hiding(realRoot) });
  const kept = options.kept ?? [];
  const repository = options.repository ?? 'protected';
  const gitWritable = repository === 'writable' || (typeof repository === 'object' && repository.writable);
  if (typeof repository === 'object' && repository.writable) writable.push(real(repository.gitDir));
  // A worktree's checkout of origin, and every checkout the harness made of the repository
  // (children's worktrees, git_worktree's), is the policy's too: what it hides in each, read
  // from that checkout's root, is hidden here (the workspace's own scan never enters .git).
  const gitDir = typeof repository === 'object' ? real(repository.gitDir) : join(realRoot, '.git');
  const checkouts = denies
    ? [typeof repository === 'object' ? repository.from : undefined, ...harnessCheckouts(gitDir)]
        .filter((path): path is string => path !== undefined)
        .map(real)
        .filter((path) => path !== realRoot)
    : [];
  const others = checkouts.map((path) => scanWorkspace(path, { links: false, ...hiding(path) }));
  const protectedKept = kept.filter((entry) => entry.how === 'protect').map((entry) => entry.path);
  return {
    access: sandbox.access,
    root: realRoot,
    writable: [...new Set(writable)],
    protectedPaths: resolveProtected(
      [
        ...PROTECTED_PATHS.filter((entry) => !(gitWritable && entry.path === '.git')).map((entry) => ({
          path: join(realRoot, entry.path),
          dir: entry.dir,
        })),
        ...scan.repositories.map((path) => ({ path, dir: true })),
        ...submodulePaths(realRoot).map((path) => ({ path: join(path, '.git'), dir: true })),
        ...protectedKept.map((path) => ({ path: real(path), dir: isDirectory(path) })),
      ],
      [...new Set(writable)],
    ),
    empty: options.empty,
    masked: [
      ...keptMasks(kept, [...new Set(writable)]),
      ...scan.denied,
      ...others.flatMap((other) => other.denied),
      ...(denies ? absoluteMasks(policy as Policy, realRoot) : []),
    ],
    maskSource: options.maskSource,
    masksComplete: scan.complete && others.every((other) => other.complete),
    hardLinks: { paths: scan.hardLinks, complete: scan.complete },
    network: options.network,
    tmp: real(tmp),
    home: real(home),
    caps: capsOf(sandbox.caps),
  };
}

/** The directories `.gitmodules` names for submodules (inside the workspace): each one's `.git`, made or not, is protected. */
function submodulePaths(root: string): string[] {
  let text: string;
  try {
    text = readFileSync(join(root, '.gitmodules'), 'utf8');
  } catch {
    return [];
  }
  const paths: string[] = [];
  for (const match of text.matchAll(/^\s*path\s*=\s*(.+?)\s*$/gm)) {
    const path = resolve(root, match[1] as string);
    if (path.startsWith(`${root}/`) && paths.length < MAX_KEPT) paths.push(path);
  }
  return paths;
}

/**
 * The protected paths with what they lead to, where that is writable too: the target of a
 * protected path that is a symbolic link (`.git -> .store/root.git`, `io.toml ->
 * conf/io.toml`), the gitdir a `.git` file names (`gitdir: …`, a worktree's or a
 * separate git dir), and the common directory a repository's `commondir` names; each
 * followed again, a few levels deep. A protection attached to a name would otherwise leave
 * what git reads through it open.
 */
function resolveProtected(
  paths: { path: string; dir: boolean }[],
  writable: readonly string[],
): { path: string; dir: boolean }[] {
  const out = new Map<string, { path: string; dir: boolean }>();
  const queue = paths.map((entry) => ({ ...entry, depth: 0 }));
  const follow = (from: string, named: string, depth: number) => {
    let target: string;
    try {
      target = realpathSync(resolve(from, named.trim()));
    } catch {
      return;
    }
    if (holder(target, writable) === null) return;
    let dir = true;
    try {
      dir = statSync(target).isDirectory();
    } catch {
      return;
    }
    queue.push({ path: target, dir, depth: depth + 1 });
  };
  while (queue.length > 0) {
    const entry = queue.shift() as { path: string; dir: boolean; depth: number };
    if (out.has(entry.path) || out.size >= MAX_KEPT) continue;
    out.set(entry.path, { path: entry.path, dir: entry.dir });
    if (entry.depth >= 4) continue;
    let stat: ReturnType<typeof lstatSync>;
    try {
      stat = lstatSync(entry.path);
    } catch {
      continue;
    }
    if (stat.isSymbolicLink()) follow(dirname(entry.path), readlinkSync(entry.path), entry.depth);
    else if (stat.isFile() && basename(entry.path) === '.git') {
      const gitdir = /^gitdir:\s*(.+)$/m.exec(readSmall(entry.path))?.[1];
      if (gitdir) follow(dirname(entry.path), gitdir, entry.depth);
    } else if (stat.isDirectory()) {
      const common = readSmall(join(entry.path, 'commondir'));
      if (common.trim() !== '') follow(entry.path, common.split('\n')[0] as string, entry.depth);
    }
  }
  return [...out.values()];
}

/** A small file's text ('' where it cannot be read). */
function readSmall(path: string): string {
  try {
    return readFileSync(path, 'utf8').slice(0, 4096);
  } catch {
    return '';
  }
}

/** The most entries looked at, and the most files and repositories kept read-only. */
const WALK_LIMIT = 100_000;
const MAX_KEPT = 2_000;

/** What a walk of the workspace found that a command must not change, or see. */
export interface WorkspaceScan {
  /** Regular files with more than one name (a hard link made before the run). */
  hardLinks: string[];
  /** The `.git` of each repository nested below the workspace's root (a directory or a gitfile). */
  repositories: string[];
  /**
   * What the policy denies reading: a directory all of whose contents are denied (hidden
   * with its names), else each denied file or directory itself.
   */
  denied: { path: string; dir: boolean }[];
  /** False when the workspace was too large to look through whole. */
  complete: boolean;
}

/**
 * Walks `root`, following no link, not into any `.git`, and stopping at
 * {@link WALK_LIMIT} entries: the files with another name (with `links`), the nested
 * repositories, and what `denied` says of each entry's workspace-relative path. Inside
 * the boundary no command can link a file from outside in (the rest of the tree is
 * another, read-only mount, and Landlock refuses the reference), so the links that
 * matter are the ones that were there when the run began.
 */
export function scanWorkspace(
  root: string,
  options: { links?: boolean; denied?: (path: string) => boolean; wholeByName?: boolean } = {},
): WorkspaceScan {
  const links = options.links ?? true;
  const denied = options.denied;
  const wholeByName = options.wholeByName ?? true;
  const scan: WorkspaceScan = { hardLinks: [], repositories: [], denied: [], complete: true };
  const stack = [root];
  let seen = 0;
  const hide = (path: string, dir: boolean): boolean => {
    if (scan.denied.length === MAX_KEPT) return false;
    scan.denied.push({ path, dir });
    return true;
  };
  while (stack.length > 0) {
    const dir = stack.pop() as string;
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      continue;
    }
    for (const entry of entries) {
      if (++seen > WALK_LIMIT) return { ...scan, complete: false };
      const path = join(dir, entry.name);
      const relativePath = denied ? relative(root, path).normalize('NFC') : '';
      if (entry.name === '.git') {
        if (dir !== root && (entry.isDirectory() || entry.isFile() || entry.isSymbolicLink()))
          scan.repositories.push(path);
        if (scan.repositories.length > MAX_KEPT) return { ...scan, complete: false };
      } else if (entry.isDirectory()) {
        // A directory denied itself, or all of whose contents a rule denies: hidden whole, names too.
        if (denied && ((wholeByName && denied(relativePath)) || denied(`${relativePath}/${PROBE_NAME}`))) {
          if (!hide(path, true)) return { ...scan, complete: false };
        } else stack.push(path);
      } else if (entry.isFile()) {
        if (denied?.(relativePath) && !hide(path, false)) return { ...scan, complete: false };
        if (!links) continue;
        try {
          if (lstatSync(path).nlink > 1) {
            if (scan.hardLinks.length === MAX_KEPT) return { ...scan, complete: false };
            scan.hardLinks.push(path);
          }
        } catch {
          // gone meanwhile
        }
      }
    }
  }
  return scan;
}

/**
 * What keeps the protected paths read-only, walked component by component from the root:
 * - every directory on the way (`.git` for `.git/hooks`) is bound over itself, writable:
 *   a mount point cannot be renamed or removed, so the protected path cannot be moved
 *   aside with its parent and made again (`mv .git old; mkdir -p .git/hooks`);
 * - an existing protected file or directory is bound read-only over itself; a file in the
 *   way of a deeper path (a worktree's `.git` file) is bound so and the walk stops;
 * - a symbolic link stops the walk (what it names, where that is writable, is a protected
 *   path of its own: see resolveProtected);
 * - the first missing component of a protected path gets an empty read-only directory
 *   mounted in its place, a missing file too (the mount points, empty, are removed after
 *   the run; git lists no empty directory, so none shows as untracked meanwhile).
 * `existingOnly` keeps to what exists.
 */
export function protectedMounts(
  boundary: Boundary,
  existingOnly: boolean,
): { pin: string[]; bind: string[]; empty: string[] } {
  const pin = new Set<string>();
  const bind = new Set<string>();
  const empty = new Set<string>();
  for (const entry of boundary.protectedPaths) {
    // Walked from the writable root that holds it (the workspace, or a declared root a gitdir is in).
    const base = holder(entry.path, [boundary.root, ...boundary.writable]);
    if (base === null || base === entry.path) continue;
    for (const { at, last, stat } of components(base, entry.path)) {
      if (stat === null) {
        // An empty directory, for a file too: nothing can be made in it or in its place, and
        // git shows no empty directory as untracked while the run is on.
        if (!existingOnly) empty.add(at);
        break;
      }
      if (stat.isSymbolicLink()) break;
      if (last || !stat.isDirectory()) {
        bind.add(at);
        break;
      }
      pin.add(at);
    }
  }
  // A path already covered by a mount above it needs none of its own.
  const covered = (path: string) => [...bind, ...empty].some((other) => other !== path && path.startsWith(`${other}/`));
  return {
    // Shallowest first: a mount inside a pinned directory goes on top of it.
    pin: [...pin].filter((path) => !bind.has(path)).sort((a, b) => a.length - b.length),
    bind: [...bind].filter((path) => !covered(path)),
    empty: [...empty].filter((path) => !covered(path)),
  };
}

/** Where a command reaches the run's egress proxy: the relay's port inside its namespace, the proxy's socket outside. */
export interface Relay {
  port: number;
  socket: string;
}

/** The helper's options that carry the egress proxy into the command's network namespace. */
function relayArgs(relay: Relay | null): string[] {
  return relay ? ['--relay-port', String(relay.port), '--relay-socket', relay.socket] : [];
}

/** Which of a command's caps a cgroup it joins already holds (the helper then sets no rlimit for them). */
export interface JoinedCgroups {
  pids: boolean;
  memory: boolean;
}

/**
 * What a command may still write (the run's `writtenBytes` less what its commands wrote;
 * null: no cap), and whether the helper reports its count on descriptor 3. A long-lived
 * program another spawner speaks to may be wrapped with more (see {@link ProgramWrapping}).
 */
export interface Written extends ProgramWrapping {
  left: number | null;
  report: boolean;
}

/**
 * How a long-lived program (a browser) is wrapped beyond a command: the descriptors from 3
 * it is spawned with stay its own (its pipe to the harness), and, on the bubblewrap rung
 * only, it sees the system's directories and the run's own rather than the whole tree, so
 * it may make UNIX sockets (a browser's singleton) with no host daemon's socket in reach.
 */
export interface ProgramWrapping {
  passFds?: number;
  systemView?: boolean;
  /** With {@link systemView}: a directory bound read-only into the view (a program's workspace, see src/runtime/codeact/). */
  readOnly?: string;
}

const NOT_COUNTED: Written = { left: null, report: false };

function helperArgs(
  boundary: Boundary,
  extra: { protect: boolean; cgroups: JoinedCgroups; relay: Relay | null; written: Written },
): string[] {
  const args = ['--read', '/'];
  for (const path of boundary.writable) args.push('--write', path);
  if (extra.protect) {
    const mounts = protectedMounts(boundary, true);
    for (const path of mounts.pin) args.push('--pin', path);
    for (const path of mounts.bind) args.push('--protect', path);
    // A file with another name that is gone meanwhile has no other name left to reach.
    for (const path of boundary.hardLinks.paths) args.push('--protect-if-present', path);
    const masks = maskMounts(boundary);
    for (const path of masks.pin) args.push('--pin', path);
    for (const path of [...masks.dirs, ...masks.files]) args.push('--mask', path);
    if (masks.dirs.length + masks.files.length > 0) args.push('--mask-source', boundary.maskSource);
  }
  if (boundary.network === 'open') args.push('--net');
  // Through the proxy: TCP connects only to the relay's port (Landlock ABI 4 and later), the relay forked before Landlock.
  if (boundary.network === 'proxy' && extra.relay)
    args.push('--connect-port', String(extra.relay.port), ...relayArgs(extra.relay));
  const caps = boundary.caps;
  if (caps.cpuSecs !== undefined) args.push('--cpu-secs', String(caps.cpuSecs));
  if (caps.fileBytes !== undefined) args.push('--file-bytes', String(caps.fileBytes));
  if (extra.written.left !== null) args.push('--written-bytes', String(extra.written.left));
  if (extra.written.passFds) args.push('--pass-fds', String(3 + extra.written.passFds));
  if (extra.written.report) args.push('--written-fd', String(3 + (extra.written.passFds ?? 0)));
  // Memory and processes: a cgroup where the host has one (joined in front of the rung); else RLIMIT_AS and RLIMIT_NPROC.
  if (caps.memoryBytes !== undefined && !extra.cgroups.memory) args.push('--memory-bytes', String(caps.memoryBytes));
  if (caps.processes !== undefined && !extra.cgroups.pids) args.push('--processes', String(caps.processes));
  return args;
}

/** A command wrapped for its rung: what to spawn, and the mount points bubblewrap made that are to go after it. */
export interface Wrapped {
  argv: string[];
  /** Empty directories and files made to mount over protected paths that did not exist; removed after the run. */
  madeMountPoints: string[];
  /**
   * The paths the sandbox mounts over that may go before it does, as they were when the
   * command was wrapped: bubblewrap's masks (a store's journal SQLite removed as the store
   * closed), the helper's protected paths (a mount point another run removed as it closed).
   * One gone by the time it mounts makes the sandbox fail to start the command, and the
   * command is wrapped again (see ContainedExecutor).
   */
  masked: string[];
}

/**
 * `program` (a path, already found) and its arguments, wrapped for `rung`. The floor and
 * full access are not wrapped here: the direct executor's own containment applies.
 */
export function wrapForRung(
  rung: RungName,
  host: HostRungs,
  boundary: Boundary,
  cwd: string,
  argv: readonly string[],
  cgroups: JoinedCgroups = { pids: false, memory: false },
  relay: Relay | null = null,
  written: Written = NOT_COUNTED,
): Wrapped {
  const helper = host.helper.ok ? host.helper.path : '';
  // UNIX sockets are let be made only where no host daemon's socket (nor, with a network of
  // its own, any abstract one) is in view: bubblewrap's narrowed view, a network namespace.
  if (written.systemView && (rung !== 'bubblewrap' || boundary.network === 'open'))
    throw new Error(
      `the system's view is bubblewrap's alone, with no network of the host's; not the ${rung} rung with network ${boundary.network}`,
    );
  if (rung === 'bubblewrap') {
    const args = bwrapPrefix(
      host.bubblewrap.ok ? host.bubblewrap.argv0 : 'bwrap',
      boundary.network === 'open',
      written.systemView === true,
    );
    // In the system's view the helper and the egress relay's socket are not there unless bound.
    if (written.systemView) {
      if (helper !== '') args.push('--ro-bind', helper, helper);
      if (relay) args.push('--ro-bind', relay.socket, relay.socket);
      // Before the masks, which are bound over what it holds.
      if (written.readOnly) args.push('--ro-bind', written.readOnly, written.readOnly);
    }
    // The shared /tmp stays read-only: the run's own directory is its TMPDIR.
    for (const path of boundary.writable) args.push('--bind', path, path);
    // Files with another name outside: read-only, so no write reaches that other name.
    for (const path of boundary.hardLinks.paths) args.push('--ro-bind-try', path, path);
    const masks = maskMounts(boundary);
    let madeMountPoints: string[] = [];
    let protectedBinds: string[] = [];
    if (boundary.access !== 'read-only') {
      // Nothing there yet: an empty directory is made in its place and bound read-only, so nothing can be made in it.
      madeMountPoints = makeMountPoints(protectedMounts(boundary, false), masks.make);
      const mounts = protectedMounts(boundary, false);
      for (const path of mounts.pin) args.push('--bind', path, path);
      for (const path of mounts.bind) args.push('--ro-bind', path, path);
      protectedBinds = mounts.bind;
      // Made and gone again meanwhile (another run closed): bubblewrap makes its own.
      for (const path of mounts.empty) args.push('--ro-bind', boundary.empty, path);
      madeMountPoints.push(...mounts.empty, ...masks.make);
    } else madeMountPoints = makeMountPoints({ bind: [], empty: [] }, masks.make);
    // Hidden: what the harness trusts and what the policy denies reading, with their names for a directory.
    for (const path of masks.pin) args.push('--bind', path, path);
    for (const path of masks.dirs) args.push('--ro-bind', join(boundary.maskSource, 'dir'), path);
    for (const path of masks.files) args.push('--ro-bind', join(boundary.maskSource, 'file'), path);
    args.push('--chdir', cwd, '--', helper, ...helperArgs(boundary, { protect: false, cgroups, relay, written }));
    if (written.systemView && !written.readOnly) args.push('--unix-sockets');
    // /dev is bubblewrap's own, a few device nodes: /dev/null and the like stay writable.
    args.push('--write', '/dev', '--', ...argv);
    return { argv: args, madeMountPoints, masked: [...masks.dirs, ...masks.files, ...protectedBinds] };
  }
  const unshare = host.unshare ?? ['unshare'];
  const namespaces = unsharePrefix(unshare, boundary.network === 'open');
  // The helper mounts them itself, in the mount namespace unshare gave it (bubblewrap's are its own),
  // over mount points made here first for the protected paths not there yet.
  const mountPoints = () =>
    makeMountPoints(
      boundary.access !== 'read-only' ? protectedMounts(boundary, false) : { bind: [], empty: [] },
      maskMounts(boundary).make,
    );
  if (rung === 'landlock') {
    const madeMountPoints = mountPoints();
    // The grants with mounts as well as Landlock: a read-only mount refuses what Landlock has no right for
    // (chmod, utimes, xattrs of a file outside), and no device node outside /dev/null and its kind opens.
    const args = ['--confine-mounts', ...helperArgs(boundary, { protect: true, cgroups, relay, written })];
    return {
      argv: [...namespaces, helper, ...args, '--write', '/dev/null', '--', ...argv],
      madeMountPoints,
      masked: protectedMounts(boundary, true).bind,
    };
  }
  if (rung === 'namespaces') {
    // No helper: only the namespaces, and setpriv to drop the capabilities. Else the helper
    // makes the grants with mounts, carries the relay, sets the limits, drops them itself.
    if (!host.mounts || !host.binary) {
      return {
        argv: [...namespaces, host.setpriv ?? 'setpriv', ...SETPRIV_FLAGS, '--', ...argv],
        madeMountPoints: [],
        masked: [],
      };
    }
    const madeMountPoints = mountPoints();
    const args = helperArgs(boundary, { protect: true, cgroups, relay, written });
    const masked = protectedMounts(boundary, true).bind;
    return { argv: [...namespaces, host.binary, '--mounts-only', ...args, '--', ...argv], madeMountPoints, masked };
  }
  return { argv: [...argv], madeMountPoints: [], masked: [] };
}
