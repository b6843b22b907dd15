/**
 * The rungs of containment this host offers, strongest first, each found by a real spawn
 * once per process:
 *
 * - `bubblewrap`: user, pid, ipc, uts and (for a run without egress) net namespaces, a
 *   fresh /proc, every capability dropped, nested user namespaces disabled, die-with-parent,
 *   a new session; the root read-only but for the grants; the Landlock helper inside it.
 * - `landlock`: the Landlock helper under `unshare` (mount, pid with a private /proc, and
 *   net for a run without egress); protected paths bind-mounted read-only by the helper
 *   (those that do not exist yet made empty first, as bubblewrap does, and removed after).
 * - `namespaces`: mount, pid and net namespaces under `unshare`, capabilities dropped with
 *   `setpriv`; where the helper was built (Landlock or not), it makes the same grants with
 *   mounts (the tree read-only but for the writable roots); without it the file system is
 *   not confined.
 * - `floor`: the command's own PID namespace or process group; nothing else is confined.
 */
import { spawn, spawnSync } from 'node:child_process';
import { findSystemProgram } from '../find-program.js';
import { type Helper, landlockHelper } from './helper.js';

export type RungName = 'bubblewrap' | 'landlock' | 'namespaces' | 'floor';

/** The rungs, strongest first. */
export const RUNGS: readonly RungName[] = ['bubblewrap', 'landlock', 'namespaces', 'floor'];

export type RungProbe = { ok: true; argv0: string } | { ok: false; reason: string };

export interface HostRungs {
  bubblewrap: RungProbe;
  landlock: RungProbe;
  namespaces: RungProbe;
  helper: Helper;
  /**
   * Whether the helper can make the namespaces rung's grants with mounts (the tree
   * read-only but for the writable roots, the protected paths bound read-only): true
   * where it was built and mount_setattr works, even with no Landlock to be had.
   */
  mounts: boolean;
  /** The helper's binary where it was built and runs, Landlock or not (for mounts, cgroups and the relay). */
  binary: string | null;
  /** `unshare` with its user namespace flags. */
  unshare: string[] | null;
  setpriv: string | null;
}

/** The flags bubblewrap is always given: everything it can take away, but the network and the binds. */
export const BWRAP_FLAGS: readonly string[] = [
  '--unshare-user',
  '--unshare-pid',
  '--unshare-ipc',
  '--unshare-uts',
  '--unshare-cgroup-try',
  '--die-with-parent',
  '--new-session',
  '--disable-userns',
  '--cap-drop',
  'ALL',
];

/** What setpriv is given on the namespaces rung: no capabilities, ever again, and no new privileges. */
export const SETPRIV_FLAGS: readonly string[] = [
  '--bounding-set=-all',
  '--inh-caps=-all',
  '--securebits=+noroot,+noroot_locked,+no_setuid_fixup,+no_setuid_fixup_locked',
  '--no-new-privs',
];

/** bubblewrap's argv up to its command: the flags, no network when `net` is false, the root read-only with a fresh /dev and /proc. */
export function bwrapPrefix(bwrap: string, net: boolean, systemView = false): string[] {
  return [
    bwrap,
    ...BWRAP_FLAGS,
    ...(net ? [] : ['--unshare-net']),
    ...(systemView ? SYSTEM_DIRS.flatMap((dir) => ['--ro-bind-try', dir, dir]) : ['--ro-bind', '/', '/']),
    '--dev',
    '/dev',
    '--proc',
    '/proc',
  ];
}

/**
 * What a program wrapped in the system's view sees of the host, read-only: the programs,
 * their libraries and the system's configuration (fonts among it), and nothing where a
 * host daemon keeps its socket (/run, /var, /tmp, home directories).
 */
export const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/etc', '/opt'] as const;

/**
 * `unshare`'s argv up to its command: user, mount, pid (a private /proc), uts and ipc
 * namespaces, and no network when `net` is false.
 */
export function unsharePrefix(unshare: readonly string[], net: boolean): string[] {
  const namespaces = ['--mount', '--pid', '--fork', '--kill-child', '--mount-proc', '--uts', '--ipc'];
  return [...unshare, ...namespaces, ...(net ? [] : ['--net']), '--'];
}

let found: HostRungs | undefined;
let probing: Promise<HostRungs> | undefined;

/** What this host offers, found once (by {@link probeHostRungs} if it has finished, else here, blocking the thread). */
export function hostRungs(): HostRungs {
  found ??= probeSync(probe());
  return found;
}

/**
 * What this host offers, found with the same spawns as {@link hostRungs}, each awaited
 * rather than blocking the thread: a thread about to host its first workspace run starts
 * this beside loading the workspace's modules, so the probes' 25 ms or so of waiting on
 * children overlap that work instead of following it.
 */
export function probeHostRungs(): Promise<HostRungs> {
  if (found) return Promise.resolve(found);
  probing ??= probeAsync(probe()).then((host) => {
    found ??= host;
    return found;
  });
  return probing;
}

/** One spawn a probe makes: its stderr read when `stderr`, its stdout read when `stdout`. */
export interface ProbeSpawn {
  file: string;
  args: string[];
  stdout: boolean;
  stderr: boolean;
}

/** What came of a probe's spawn. */
export interface ProbeResult {
  status: number | null;
  stderr: string;
  error?: Error;
}

const PROBE_TIMEOUT_MS = 10_000;

function probeSync(steps: Generator<ProbeSpawn, HostRungs, ProbeResult>): HostRungs {
  let step = steps.next();
  while (!step.done) {
    const { file, args, stdout, stderr } = step.value;
    const result = spawnSync(file, args, {
      stdio: ['ignore', stdout ? 'pipe' : 'ignore', stderr ? 'pipe' : 'ignore'],
      timeout: PROBE_TIMEOUT_MS,
    });
    step = steps.next({
      status: result.status,
      stderr: result.stderr?.toString() ?? '',
      ...(result.error ? { error: result.error } : {}),
    });
  }
  return step.value;
}

async function probeAsync(steps: Generator<ProbeSpawn, HostRungs, ProbeResult>): Promise<HostRungs> {
  let step = steps.next();
  while (!step.done) step = steps.next(await spawnProbe(step.value));
  return step.value;
}

/**
 * A probe's spawn, awaited, answered as `spawnSync` answers it: its exit status (null when
 * it did not start or was killed), its stderr, and the error that kept it from starting.
 * Past the deadline the child is killed and its pipes closed, so a grandchild holding
 * them open cannot keep the answer back; the answer is given once.
 */
export function spawnProbe(
  { file, args, stdout, stderr }: ProbeSpawn,
  timeoutMs: number = PROBE_TIMEOUT_MS,
): Promise<ProbeResult> {
  return new Promise((resolve) => {
    const errors: Buffer[] = [];
    let failed: Error | undefined;
    let answered = false;
    let deadline: NodeJS.Timeout | undefined;
    const answer = (result: ProbeResult) => {
      if (answered) return;
      answered = true;
      clearTimeout(deadline);
      resolve(result);
    };
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn(file, args, { stdio: ['ignore', stdout ? 'pipe' : 'ignore', stderr ? 'pipe' : 'ignore'] });
    } catch (error) {
      // Refused before any process was made (an argument list too long, say): not started.
      answer({ status: null, stderr: '', error: error as Error });
      return;
    }
    deadline = setTimeout(() => {
      child.kill('SIGKILL');
      child.stdout?.destroy();
      child.stderr?.destroy();
      answer({ status: null, stderr: Buffer.concat(errors).toString(), error: new Error('the probe timed out') });
    }, timeoutMs);
    child.stdout?.resume();
    child.stderr?.on('data', (chunk: Buffer) => errors.push(chunk));
    child.on('error', (error) => {
      failed = error;
      // A spawn that never started has no close to wait for.
      if (child.pid === undefined) answer({ status: null, stderr: '', error });
    });
    child.on('close', (code) =>
      answer({ status: code, stderr: Buffer.concat(errors).toString(), ...(failed ? { error: failed } : {}) }),
    );
  });
}

function said(result: ProbeResult): string {
  const text = (result.stderr || result.error?.message || `exit status ${result.status}`).trim();
  return text.split('\n')[0] ?? text;
}

/** The probes, as the spawns they make: run by {@link probeSync} or {@link probeAsync}. */
function* probe(): Generator<ProbeSpawn, HostRungs, ProbeResult> {
  const none = (reason: string): RungProbe => ({ ok: false, reason });
  if (process.platform !== 'linux') {
    const reason = `${process.platform} is not Linux: only the floor is built there`;
    return {
      bubblewrap: none(reason),
      landlock: none(reason),
      namespaces: none(reason),
      helper: { ok: false, reason },
      mounts: false,
      binary: null,
      unshare: null,
      setpriv: null,
    };
  }
  const helper = landlockHelper();
  const bwrap = findSystemProgram('bwrap');
  let bubblewrap: RungProbe;
  if (bwrap.kind !== 'found') bubblewrap = none('bubblewrap (bwrap) is not installed');
  else if (!helper.ok) bubblewrap = none(`the Landlock helper is not available: ${helper.reason}`);
  else {
    const [file, ...args] = [...bwrapPrefix(bwrap.path, false), '--', helper.path, '--read', '/', '--report'];
    const result = yield { file: file as string, args, stdout: true, stderr: true };
    bubblewrap =
      result.status === 0 ? { ok: true, argv0: bwrap.path } : none(`bubblewrap cannot start: ${said(result)}`);
  }
  const unshareFound = findSystemProgram('unshare');
  let unshare: string[] | null = null;
  let unshareReason = "util-linux unshare is not in the system's directories";
  if (unshareFound.kind === 'found') {
    // A user namespace even as root: capabilities there hold over nothing of the host's
    // (open_by_handle_at, sethostname and the like need the host's own).
    const variants: string[][] = [['--user', '--map-root-user']];
    for (const variant of variants) {
      const argv = [
        ...variant,
        '--mount',
        '--pid',
        '--fork',
        '--kill-child',
        '--mount-proc',
        '--uts',
        '--ipc',
        '--net',
      ];
      argv.push('--', 'true');
      const result = yield { file: unshareFound.path, args: argv, stdout: false, stderr: true };
      if (result.status === 0) {
        unshare = [unshareFound.path, ...variant];
        break;
      }
      unshareReason = `mount, pid and net namespaces are not available: ${said(result)}`;
    }
  }
  let landlock: RungProbe;
  if (!helper.ok) landlock = none(`the Landlock helper is not available: ${helper.reason}`);
  else if (!unshare) landlock = none(unshareReason);
  else {
    const [file, ...args] = [...unsharePrefix(unshare, false), helper.path, '--read', '/', '--report'];
    const result = yield { file: file as string, args, stdout: true, stderr: true };
    landlock =
      result.status === 0 ? { ok: true, argv0: helper.path } : none(`the helper cannot start: ${said(result)}`);
  }
  const setprivFound = findSystemProgram('setpriv');
  const setpriv = setprivFound.kind === 'found' ? setprivFound.path : null;
  let namespaces: RungProbe;
  if (!unshare) namespaces = none(unshareReason);
  else if (!setpriv) namespaces = none("util-linux setpriv is not in the system's directories");
  else {
    const [file, ...args] = [...unsharePrefix(unshare, false), setpriv, ...SETPRIV_FLAGS, '--', 'true'];
    const result = yield { file: file as string, args, stdout: false, stderr: true };
    namespaces =
      result.status === 0 ? { ok: true, argv0: setpriv } : none(`setpriv cannot drop capabilities: ${said(result)}`);
  }
  const binary = helper.ok ? helper.path : (helper.binary ?? null);
  let mounts = false;
  if (binary && unshare && namespaces.ok) {
    const [file, ...args] = [...unsharePrefix(unshare, false), binary, '--mounts-only', '--report'];
    mounts = (yield { file: file as string, args, stdout: false, stderr: false }).status === 0;
  }
  return { bubblewrap, landlock, namespaces, helper, mounts, binary, unshare, setpriv };
}
