/**
 * Containment around an executor: every command of a run is wrapped for the strongest
 * rung this host offers that can enforce what the run was granted (see ./rungs.ts and
 * ./boundary.ts), its environment given the run's own HOME and TMPDIR, and what applied
 * is reported once, as the run's `contained` event.
 */
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { ContainmentUnavailableError } from '../../../errors.js';
import { dropWithheldAssignments } from '../../policy/commands/index.js';
import type { Policy } from '../../policy/policy.js';
import type { CommandRequest, Executor, JobRequest } from '../executor.js';
import { findProgram } from '../find-program.js';
import { type Job, notStarted as jobNotStarted } from '../jobs.js';
import {
  type CommandResult,
  type Containment,
  isWithheldVariable,
  notStarted,
  processContainment,
} from '../run-command.js';
import {
  type Access,
  type Boundary,
  boundaryFor,
  type Caps,
  capsOf,
  DEFAULT_SANDBOX,
  furnishHome,
  type ProgramWrapping,
  policyAllowsEgress,
  type Relay,
  type RepositoryAccess,
  type SandboxCaps,
  type SandboxData,
  type Written,
  wrapForRung,
} from './boundary.js';
import { type KeptPath, keptPaths } from './kept.js';
import { removeMountPoints } from './mount-points.js';
import { type ProbeReport, probeContainment } from './probe.js';
import { type CommandOrigin, type EgressGate, EgressProxy, type LookupAll, PROBE_TOOL, policyGate } from './proxy.js';
import { type HostRungs, hostRungs, RUNGS, type RungName } from './rungs.js';
import { lostMaskRace, SETUP_ATTEMPTS, setupFailure } from './setup-failure.js';

/** The port the egress proxy is reached at from inside a command's network namespace (its own loopback). */
export const RELAY_PORT = 3128;

/** What a command's environment gets to send its requests to the egress proxy. */
function proxyEnvironment(port: number): NodeJS.ProcessEnv {
  const url = `http://127.0.0.1:${port}`;
  return {
    HTTP_PROXY: url,
    HTTPS_PROXY: url,
    http_proxy: url,
    https_proxy: url,
    ALL_PROXY: url,
    all_proxy: url,
    // Node's own fetch reads the variables only when asked to.
    NODE_USE_ENV_PROXY: '1',
  };
}

/** What a run's commands got, as the trace, the result and the agent's prompt say it. */
export type ContainedReport = {
  /** The rung the commands run on; `full-access` when the contract asked for no containment. */
  rung: RungName | 'full-access';
  /** The rung the contract asked for by name, if it did. */
  requested: RungName | null;
  access: Access;
  /** Writes outside the grants: refused by the kernel (`enforced`), or not (`not established`). */
  filesystem: 'enforced' | 'not established';
  /** The protected paths, those that do not exist yet too: read-only to commands (`enforced`), or not. */
  protectedPaths: 'enforced' | 'not established';
  /**
   * Reads: what the policy denies reading in so many words, and the store, hidden from
   * commands (`enforced`); `partial` where the workspace was too large to look through
   * whole for them; `not established` on a rung that cannot hide a path (the floor, full
   * access, the namespaces rung without its helper): there commands read what the
   * harness's user may.
   */
  reads: 'enforced' | 'partial' | 'not established';
  /** The network the commands have: none at all, only the run's egress proxy, or the host's. */
  network: 'none' | 'proxy' | 'host';
  /**
   * Whether the policy's `net` rules hold for commands: `denied` with no network,
   * `proxy` when the egress proxy is their only route out, `not established` on the host's network.
   */
  egress: 'denied' | 'proxy' | 'not established';
  /** What keeps everything a command started from outliving it. */
  processes: 'pid-namespace' | 'process-group';
  landlockAbi: number | null;
  /** The stronger rungs this host did not offer, and why. */
  passedOver: { rung: RungName; reason: string }[];
  /** How each cap the contract set is applied, or why it is not. */
  caps: Partial<Record<keyof SandboxCaps, string>>;
  /** What the canary found on this rung before the run's first command (see ./probe.ts). */
  probe?: ProbeReport;
};

/** The strongest rung that can give what is asked; a rung asked for by name, or an error naming why it cannot be had. */
export function selectRung(
  sandbox: SandboxData,
  host: HostRungs = hostRungs(),
): { rung: RungName | 'full-access'; passedOver: { rung: RungName; reason: string }[] } {
  if (sandbox.access === 'full') return { rung: 'full-access', passedOver: [] };
  const passedOver: { rung: RungName; reason: string }[] = [];
  for (const rung of RUNGS) {
    if (rung === 'floor') break;
    const probe = host[rung];
    if (probe.ok && (sandbox.rung === null || sandbox.rung === rung)) return { rung, passedOver };
    if (!probe.ok) passedOver.push({ rung, reason: probe.reason });
  }
  if (sandbox.rung !== null && sandbox.rung !== 'floor') {
    const reason = passedOver.find((item) => item.rung === sandbox.rung)?.reason ?? 'it is not offered here';
    throw new ContainmentUnavailableError(
      `the contract asks for the ${sandbox.rung} rung of containment, which this host cannot give: ${reason}. Install what it needs, ask for another rung (or none, to take the strongest there is), or run with full access.`,
      { rung: sandbox.rung, reason },
    );
  }
  return { rung: 'floor', passedOver };
}

/** What a run with this sandbox and policy would get on this host, before it runs. */
export function describeContainment(
  sandbox: SandboxData,
  policy: Policy | null,
  host: HostRungs = hostRungs(),
): ContainedReport {
  const { rung, passedOver } = selectRung(sandbox, host);
  const noEgress = !policyAllowsEgress(policy) && sandbox.access !== 'full';
  const namespaced = rung === 'bubblewrap' || rung === 'landlock' || rung === 'namespaces';
  // The namespaces rung confines the file system where the helper makes its grants with mounts.
  const confined = rung === 'bubblewrap' || rung === 'landlock' || (rung === 'namespaces' && host.mounts);
  // The relay into the namespace is the helper's: Landlock's on the first two rungs, the mounts' on the third.
  const relayed = rung === 'namespaces' ? host.mounts : host.helper.ok;
  const network =
    namespaced && noEgress ? 'none' : namespaced && sandbox.access !== 'full' && relayed ? 'proxy' : 'host';
  return {
    rung,
    requested: sandbox.rung,
    access: sandbox.access,
    filesystem: confined ? 'enforced' : 'not established',
    protectedPaths: confined ? 'enforced' : 'not established',
    reads: confined ? 'enforced' : 'not established',
    network,
    egress: network === 'none' ? 'denied' : network === 'proxy' ? 'proxy' : 'not established',
    processes: namespaced ? 'pid-namespace' : processContainment().mechanism,
    landlockAbi: (rung === 'bubblewrap' || rung === 'landlock') && host.helper.ok ? host.helper.report.abi : null,
    passedOver,
    caps: capsApplied(capsOf(sandbox.caps), rung, host),
  };
}

/** How each cap is applied on `rung`: by the helper's rlimits, the processes by a pids cgroup where one can be made. */
function capsApplied(
  caps: Caps,
  rung: RungName | 'full-access',
  host: HostRungs,
): Partial<Record<keyof SandboxCaps, string>> {
  const applied: Partial<Record<keyof SandboxCaps, string>> = {};
  const helped = rung === 'bubblewrap' || rung === 'landlock' || (rung === 'namespaces' && host.mounts);
  const memory = cgroupRoot('memory');
  const how: Record<keyof SandboxCaps, string> = {
    cpuSecs: 'RLIMIT_CPU (SIGXCPU at the cap)',
    fileBytes: 'RLIMIT_FSIZE (SIGXFSZ past it)',
    writtenBytes:
      "the helper's count of what the command's processes write to storage, every tenth of a second; killed past what the run has left, none started once it is spent",
    memoryBytes: memory ? `a memory cgroup (${memory.file}: killed past it)` : 'RLIMIT_AS (allocations past it fail)',
    outputBytes: "counted by the harness on both streams; the command's namespace killed past it",
    wallSecs: "the harness's timer; the command's namespace killed at it",
    processes: cgroupRoot('pids')
      ? 'a pids cgroup (pids.max)'
      : process.getuid?.() === 0
        ? 'RLIMIT_NPROC, which the kernel does not enforce for root: not established'
        : 'RLIMIT_NPROC',
  };
  for (const name of Object.keys(caps) as (keyof SandboxCaps)[]) {
    const harness = name === 'outputBytes' || name === 'wallSecs';
    applied[name] = helped || harness ? how[name] : `not established: the ${rung} rung has no helper to apply it`;
  }
  return applied;
}

/** The controllers a command's caps use, and the file that sets each one's limit on cgroup v1 and v2. */
type Controller = 'pids' | 'memory';
const LIMIT_FILES: Record<Controller, readonly string[]> = {
  pids: ['pids.max'],
  memory: ['memory.limit_in_bytes', 'memory.max'],
};
const cgroupRoots: Partial<Record<Controller, { dir: string; file: string } | null>> = {};

/**
 * A cgroup directory this process may make children in with `controller`: its v1
 * hierarchy, or the v2 one where the process's own cgroup is delegated to it; with the
 * file that sets the limit there. Found once, by making and removing a directory there.
 */
export function cgroupRoot(controller: Controller): { dir: string; file: string } | null {
  const known = cgroupRoots[controller];
  if (known !== undefined) return known;
  cgroupRoots[controller] = null;
  if (process.platform !== 'linux') return null;
  const candidates: string[] = [`/sys/fs/cgroup/${controller}`];
  try {
    const own = readFileSync('/proc/self/cgroup', 'utf8')
      .split('\n')
      .find((line) => line.startsWith('0::'));
    if (own && readFileSync('/sys/fs/cgroup/cgroup.controllers', 'utf8').split(/\s+/).includes(controller))
      candidates.push(join('/sys/fs/cgroup', own.slice(3)));
  } catch {
    // no v2 hierarchy here
  }
  for (const candidate of candidates) {
    const probe = join(candidate, `io-harness-probe-${process.pid}`);
    try {
      mkdirSync(probe);
      const file = LIMIT_FILES[controller].find((name) => existsSync(join(probe, name)));
      rmdirSync(probe);
      if (file) {
        cgroupRoots[controller] = { dir: candidate, file };
        break;
      }
    } catch {
      // not ours to make cgroups in
    }
  }
  return cgroupRoots[controller] ?? null;
}

let cgroupCount = 0;

/** The cgroups one command joins for its caps (pids for `processes`, memory for `memoryBytes`), where this host has them. */
interface CommandCgroups {
  dirs: string[];
  pids: string | null;
  memory: string | null;
}

/** Makes a cgroup under `controller`'s root with its limit set; null where none can be made. */
function makeCgroup(controller: Controller, limit: number): string | null {
  const root = cgroupRoot(controller);
  if (!root) return null;
  const dir = join(root.dir, `io-harness-${process.pid}-${++cgroupCount}`);
  try {
    mkdirSync(dir);
    writeFileSync(join(dir, root.file), String(limit));
    if (controller === 'memory') {
      // No swap past the cap (v1 counts it with memory.memsw, v2 apart), and on v2 the whole group killed at once.
      for (const [file, value] of [
        ['memory.memsw.limit_in_bytes', String(limit)],
        ['memory.swap.max', '0'],
        ['memory.oom.group', '1'],
      ] as const) {
        if (existsSync(join(dir, file))) writeFileSync(join(dir, file), value);
      }
    }
    return dir;
  } catch {
    try {
      rmdirSync(dir);
    } catch {
      // never made
    }
    return null;
  }
}

const NO_CGROUPS: CommandCgroups = { dirs: [], pids: null, memory: null };

/** The cgroups for a command's caps; none where the host has no helper to join them or no controller to make them in. */
function commandCgroups(caps: SandboxCaps, helper: string | null): CommandCgroups {
  if (!helper) return NO_CGROUPS;
  const pids = caps.processes !== undefined ? makeCgroup('pids', caps.processes) : null;
  const memory = caps.memoryBytes !== undefined ? makeCgroup('memory', caps.memoryBytes) : null;
  return { dirs: [pids, memory].filter((dir): dir is string => dir !== null), pids, memory };
}

/** Removes a command's cgroup once its processes are gone (the kernel refuses while any is left). */
async function removeCgroup(dir: string): Promise<void> {
  for (let attempt = 0; attempt < 50; attempt++) {
    try {
      rmdirSync(dir);
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

/** Whether a cgroup's events file counts one of `key` (`max` for pids, `oom_kill` for memory). */
function counted(dir: string | null, files: readonly string[], key: string): boolean {
  if (!dir) return false;
  for (const file of files) {
    try {
      if (new RegExp(`^${key} [1-9]`, 'm').test(readFileSync(join(dir, file), 'utf8'))) return true;
    } catch {
      // not on this kernel
    }
  }
  return false;
}

/** The cap a command's end shows it reached: the signal the cap sends, a kill by the memory cgroup, or a fork the pids cgroup refused. */
function capReached(
  result: CommandResult,
  caps: Caps,
  cgroups: CommandCgroups,
  walled: boolean,
): CommandResult['capReached'] {
  if (result.timedOut)
    return walled && caps.wallSecs !== undefined ? { cap: 'wallSecs', limit: caps.wallSecs } : undefined;
  if (result.outputKilled && caps.outputBytes !== undefined) return { cap: 'outputBytes', limit: caps.outputBytes };
  if (caps.writtenBytes !== undefined && / capped$/.test((result.counted ?? '').trim()))
    return { cap: 'writtenBytes', limit: caps.writtenBytes };
  // A rung's first process reports its command's death by a signal as 128 + the signal's number.
  const signal =
    result.signal ??
    (result.exitStatus !== null && result.exitStatus > 128
      ? (Object.entries(constants.signals).find(([, number]) => number === (result.exitStatus as number) - 128)?.[0] ??
        null)
      : null);
  if (signal === 'SIGXCPU' && caps.cpuSecs !== undefined) return { cap: 'cpuSecs', limit: caps.cpuSecs };
  if (signal === 'SIGXFSZ' && caps.fileBytes !== undefined) return { cap: 'fileBytes', limit: caps.fileBytes };
  // v1 keeps the count in memory.oom_control, v2 in memory.events.
  if (caps.memoryBytes !== undefined && counted(cgroups.memory, ['memory.oom_control', 'memory.events'], 'oom_kill'))
    return { cap: 'memoryBytes', limit: caps.memoryBytes };
  if (caps.processes !== undefined && counted(cgroups.pids, ['pids.events'], 'max'))
    return { cap: 'processes', limit: caps.processes };
  return undefined;
}

/** What the agent is told of its commands' containment: one line of its opening turn. */
export function containmentLine(report: ContainedReport): string {
  if (report.rung === 'full-access') return 'Commands run with full access: nothing contains them.';
  const writes =
    report.filesystem === 'enforced'
      ? report.access === 'read-only'
        ? 'they may write only their own TMPDIR and HOME'
        : 'they may write the workspace and their own TMPDIR and HOME (the toolchain caches are there), and nothing else'
      : 'what they write is not confined';
  const network =
    report.network === 'none'
      ? 'they have no network'
      : report.network === 'proxy'
        ? "they reach the network only through the run's egress proxy (HTTP_PROXY and HTTPS_PROXY are set), which lets through only the hosts the policy allows"
        : 'they share the host network';
  const protectedPaths =
    report.protectedPaths === 'enforced'
      ? "; the workspace's .git is read-only to them (git log, diff and status work; add, commit and init do not)"
      : '';
  return `Commands run contained (${report.rung}): ${writes}; ${network}${protectedPaths}.`;
}

/**
 * What a run of `contract` under `policy` would get on this host, before it runs: the
 * rung, what it enforces, and the stronger rungs passed over and why. Throws
 * {@link ContainmentUnavailableError} where the contract asks for a rung by name that
 * this host cannot give, as the run itself would be refused.
 */
export function selectBackend(
  contract: { toJSON(): { sandbox?: SandboxData } } | { sandbox?: SandboxData },
  policy: Policy | null = null,
): ContainedReport {
  const data =
    'toJSON' in contract && typeof contract.toJSON === 'function'
      ? contract.toJSON()
      : (contract as { sandbox?: SandboxData });
  return describeContainment(data.sandbox ?? DEFAULT_SANDBOX, policy);
}

/** An executor whose every command runs on the run's rung (see the module's comment). */
export class ContainedExecutor implements Executor {
  readonly #base: Executor;
  readonly #host: HostRungs;
  readonly #report: ContainedReport;
  readonly #sandbox: SandboxData;
  readonly #root: string;
  readonly #policy: Policy | null;
  readonly #gate: EgressGate;
  #boundary: Boundary | null = null;
  #dir: string | null = null;
  #proxy: EgressProxy | null = null;
  #sockets = 0;

  /**
   * Throws {@link ContainmentUnavailableError} when the sandbox asks for a rung this host
   * cannot give. `egress` decides the connections the run's commands ask the egress proxy
   * for (the policy alone, asks refused, when not given).
   */
  constructor(
    base: Executor,
    options: {
      sandbox?: SandboxData;
      root: string;
      policy: Policy | null;
      host?: HostRungs;
      egress?: EgressGate;
      lookup?: LookupAll;
      /** `writable`: the workspace's own `.git` is not protected (the git tools' executor; see boundaryFor). */
      repository?: RepositoryAccess;
      /** `unreadable`: every workspace path the policy does not let be read outright is hidden (the language servers'; see boundaryFor). */
      hideReads?: 'denied' | 'unreadable';
    },
  ) {
    this.#repository = options.repository ?? 'protected';
    this.#hideReads = options.hideReads ?? 'denied';
    this.#base = base;
    this.#host = options.host ?? hostRungs();
    this.#sandbox = options.sandbox ?? DEFAULT_SANDBOX;
    this.#root = options.root;
    this.#policy = options.policy;
    this.#report = describeContainment(this.#sandbox, this.#policy, this.#host);
    this.#gate = options.egress ?? policyGate(this.#policy, this.#root);
    this.#lookup = options.lookup;
  }

  readonly #lookup: LookupAll | undefined;
  readonly #repository: RepositoryAccess;
  readonly #hideReads: 'denied' | 'unreadable';

  /**
   * A listener of the run's egress proxy for one command, where its commands go through
   * one: the relay the helper is to run, and the listener's end. Null on the other rungs.
   */
  #relay(origin: CommandOrigin | null): { relay: Relay; close(): Promise<void> } | null {
    if (this.#report.network !== 'proxy') return null;
    this.boundary();
    const socket = join(this.#dir as string, `net-${++this.#sockets}.sock`);
    const listening = this.#egress().listen(socket, origin);
    return {
      relay: { port: RELAY_PORT, socket },
      close: async () => (await listening).close(),
    };
  }

  #egress(): EgressProxy {
    this.#proxy ??= new EgressProxy({
      gate: this.#gate,
      ownPorts: [RELAY_PORT],
      ...(this.#lookup ? { lookup: this.#lookup } : {}),
    });
    return this.#proxy;
  }

  /**
   * Where the run's commands reach the network only through its egress proxy, a way for
   * the harness's own connections made for the run (an HTTP MCP server's) to go the same
   * way: admitted by the proxy (see {@link EgressProxy.dialer}), which starts at the first
   * connection. Null on the other rungs, whose connections go as the policy alone decided.
   */
  dialer(origin: CommandOrigin | null): ReturnType<EgressProxy['dialer']> | null {
    if (this.#report.network !== 'proxy') return null;
    let dial: ReturnType<EgressProxy['dialer']> | undefined;
    return (target, options) => {
      dial ??= this.#egress().dialer(origin);
      return dial(target, options);
    };
  }

  /** What the run's commands get. */
  contained(): ContainedReport {
    if (this.#report.reads !== 'enforced') return this.#report;
    // Whether every denied path was found is known once the workspace has been looked through.
    return this.boundary().masksComplete ? this.#report : { ...this.#report, reads: 'partial' };
  }

  #probed: Promise<ProbeReport> | null = null;

  /** The canary's findings on this run's rung, found once, before the run's first command. */
  probe(): Promise<ProbeReport> {
    this.#probed ??= (async () => {
      const boundary = this.boundary();
      const inside = join(
        boundary.access === 'read-only' ? boundary.tmp : boundary.root,
        `.io-harness-probe-${process.pid}-${Date.now()}`,
      );
      return probeContainment(
        (argv, env) =>
          this.run({
            argv,
            env,
            purpose: 'probe',
            origin: { callId: '', tool: PROBE_TOOL },
            cwd: boundary.root,
            timeoutMs: 10_000,
            outputLimit: 16 * 1024,
          }),
        inside,
      );
    })();
    return this.#probed;
  }

  /** The grants, with the run's own directories made on first use. */
  boundary(): Boundary {
    if (this.#boundary) return this.#boundary;
    const dir = runDirectory();
    this.#dir = dir;
    const home = join(dir, 'home');
    const tmp = join(dir, 'tmp');
    const empty = join(dir, 'empty');
    const maskSource = join(dir, 'mask');
    const caches = furnishHome(home, this.#sandbox.sharedCaches === true);
    mkdirSync(tmp, { mode: 0o700 });
    mkdirSync(empty, { mode: 0o500 });
    // What a mask is bound from: an empty directory and an empty file no one may read.
    mkdirSync(maskSource, { mode: 0o700 });
    mkdirSync(join(maskSource, 'dir'), { mode: 0o000 });
    writeFileSync(join(maskSource, 'file'), '', { mode: 0o000 });
    this.#boundary = boundaryFor({
      sandbox: this.#sandbox,
      root: this.#root,
      tmp,
      home,
      empty,
      maskSource,
      caches,
      network: this.#report.network === 'host' ? 'open' : this.#report.network,
      policy: this.#policy,
      kept: [...keptPaths(), ...harnessBinaries(this.#host)],
      repository: this.#repository,
      hideReads: this.#hideReads,
    });
    return this.#boundary;
  }

  get #rung(): RungName | null {
    const rung = this.#report.rung;
    return rung === 'full-access' || rung === 'floor' ? null : rung;
  }

  /** The run's environment, with its own HOME and TMPDIR, and the egress proxy's address where there is one. */
  #env(env: NodeJS.ProcessEnv | undefined, relay: Relay | null = null): NodeJS.ProcessEnv {
    const boundary = this.boundary();
    const base: NodeJS.ProcessEnv = { ...(env ?? {}), HOME: boundary.home, TMPDIR: boundary.tmp };
    if (!relay) return base;
    // No exception list: every host goes to the proxy, which decides.
    for (const name of ['NO_PROXY', 'no_proxy']) delete base[name];
    return { ...base, ...proxyEnvironment(relay.port) };
  }

  /** The caps the run's commands are held to, the disk's defaults included. */
  get #caps(): Caps {
    return capsOf(this.#sandbox.caps);
  }

  /** What the run's commands have written to storage so far, by the helper's count of each. */
  #written = 0;

  /** What a command may still write: the run's `writtenBytes` less what its commands wrote (null: no cap). */
  #left(): number | null {
    const cap = this.#caps.writtenBytes;
    return cap === undefined ? null : Math.max(0, cap - this.#written);
  }

  /** Adds a command's count (the helper's report: the bytes, then ` capped` if it was stopped). */
  #count(report: string | undefined): void {
    const bytes = /^(\d+)/.exec((report ?? '').trim())?.[1];
    if (bytes !== undefined) this.#written += Number(bytes);
  }

  /** The refusal of a command once the run's commands have written all they may. */
  #spent(): CommandResult | null {
    if (this.#left() !== 0) return null;
    const cap = this.#caps.writtenBytes as number;
    return notStarted(
      `the run's commands have written ${this.#written} bytes to disk, their writtenBytes cap (${cap}), so no more commands are started; a contract that needs more raises the cap (withSandbox({ caps: { writtenBytes } })) or lifts it (null)`,
    );
  }

  async run(original: CommandRequest): Promise<CommandResult> {
    const caps = this.#caps;
    // The harness's own caps, on every rung: the wall clock (the call's timeout where it is
    // the shorter) and the output, past which the command is killed.
    const walled = caps.wallSecs !== undefined && caps.wallSecs * 1000 < original.timeoutMs;
    const request: CommandRequest = {
      ...original,
      ...(walled ? { timeoutMs: (caps.wallSecs as number) * 1000 } : {}),
      ...(caps.outputBytes !== undefined ? { killAfterOutputBytes: caps.outputBytes } : {}),
    };
    const rung = this.#rung;
    if (rung === null) {
      const result = await this.#base.run(request);
      const reached = capReached(result, caps, NO_CGROUPS, walled);
      return reached ? { ...result, capReached: reached } : result;
    }
    const [program, ...args] = request.argv as [string, ...string[]];
    const located = findProgram(program, request.env?.PATH, request.cwd);
    if (located.kind === 'missing')
      return notStarted(`the program ${JSON.stringify(program)} was not found (is it installed and on PATH?)`);
    if (located.kind === 'not-executable') return notStarted(`spawn ${program} EACCES`);
    const spent = this.#spent();
    if (spent) return spent;
    for (let attempt = 1; ; attempt++) {
      const { argv, env, cgroups, listener, masked } = this.#wrap(rung, request, [located.path, ...args], {
        left: this.#left(),
        report: true,
      });
      try {
        const result = await this.#base.run({ ...request, argv, env, bare: true, counted: true });
        this.#count(result.counted);
        const failed = setupFailure(rung, result);
        // A path masked when the command was wrapped went before the sandbox mounted over it:
        // wrapped again, without it. The command never started, so nothing of it runs twice.
        if (failed && attempt < SETUP_ATTEMPTS && lostMaskRace(failed, masked)) continue;
        if (failed) return notStarted(`the ${rung} sandbox could not start the command: ${failed}`);
        const reached = capReached(result, caps, cgroups, walled);
        return reached ? { ...result, capReached: reached } : result;
      } finally {
        await listener?.close();
        await Promise.all(cgroups.dirs.map(removeCgroup));
      }
    }
  }

  /**
   * A command (its program found) wrapped for `rung`: what to spawn and with what
   * environment, the cgroups its caps made, and its listener of the egress proxy.
   */
  #wrap(
    rung: RungName,
    request: { cwd: string; env?: NodeJS.ProcessEnv | undefined; origin?: CommandOrigin | undefined },
    argv: string[],
    written: Written,
  ) {
    const caps = this.#caps;
    const listener = this.#relay(request.origin ?? null);
    const relay = listener?.relay ?? null;
    const cgroups = commandCgroups(caps, this.#host.binary);
    const joined = { pids: cgroups.pids !== null, memory: cgroups.memory !== null };
    // What the model hands an `env` on the argv is held to the same rules as what the harness hands down.
    const command = dropWithheldAssignments(argv, isWithheldVariable);
    const wrapped = wrapForRung(rung, this.#host, this.boundary(), request.cwd, command, joined, relay, written);
    this.#madeMountPoints.push(...wrapped.madeMountPoints);
    return {
      masked: wrapped.masked,
      argv: this.#joining(cgroups.dirs, wrapped.argv),
      env: this.#env(request.env, relay),
      cgroups,
      listener,
    };
  }

  /** `argv` started inside `dirs`: the helper joins them, then executes the wrapper, so everything the command starts is in them. */
  #joining(dirs: string[], argv: string[]): string[] {
    if (!this.#host.binary || dirs.length === 0) return argv;
    return [this.#host.binary, '--join-only', ...dirs.flatMap((dir) => ['--cgroup', dir]), '--', ...argv];
  }

  start(request: JobRequest): Job {
    const rung = this.#rung;
    if (rung === null) return this.#base.start(request);
    const [program, ...args] = request.argv as [string, ...string[]];
    const located = findProgram(program, request.env?.PATH, request.cwd);
    const path = located.kind === 'found' ? located.path : program;
    // A background command's listener lives as long as the run: ended when the run's session closes.
    // What it writes counts against the run when it ends; it may not write past what was left when it started.
    const spent = this.#spent();
    if (spent) return jobNotStarted(spent.error ?? '');
    const { argv, env, cgroups } = this.#wrap(rung, request, [path, ...args], { left: this.#left(), report: true });
    this.#cgroups.push(...cgroups.dirs);
    return this.#base.start({ ...request, argv, env, bare: true, counted: (report) => this.#count(report) });
  }

  /**
   * A long-lived command another spawner starts and speaks to over its stdio (an MCP
   * server): its argv and environment wrapped for the rung, as a background command's
   * are. What the wrapping made (cgroups, the egress listener) ends with close(). On a
   * rung that contains nothing (full access, the floor), the command as it is, with the
   * run's HOME and TMPDIR. `options`: see {@link ProgramWrapping}.
   */
  wrapCommand(
    argv: readonly string[],
    cwd: string,
    env: NodeJS.ProcessEnv,
    options: ProgramWrapping = {},
  ): { argv: string[]; env: NodeJS.ProcessEnv } {
    const rung = this.#rung;
    if (rung === null) return { argv: [...argv], env: this.#env(env) };
    const [program, ...args] = argv as [string, ...string[]];
    const located = findProgram(program, env.PATH, cwd);
    // A program not found is left for the spawner to report, naming it.
    const path = located.kind === 'found' ? located.path : program;
    // A server is held to what the run had left when it started; what it writes is not counted back.
    const written = { left: this.#left(), report: false, ...options };
    const wrapped = this.#wrap(rung, { cwd, env }, [path, ...args], written);
    this.#cgroups.push(...wrapped.cgroups.dirs);
    if (wrapped.listener) this.#listeners.push(wrapped.listener);
    return { argv: wrapped.argv, env: wrapped.env };
  }

  /** The egress listeners of wrapped commands, closed with the executor. */
  readonly #listeners: { close(): Promise<void> }[] = [];

  /**
   * The mount points made for the run's commands, removed only when the run's
   * session closes: removing one while another command of the run still mounts on it
   * would detach that command's protection.
   */
  readonly #madeMountPoints: string[] = [];
  /** The cgroups of background commands, removed when the run's session closes. */
  readonly #cgroups: string[] = [];

  containment(): Containment {
    if (this.#rung === null) return this.#base.containment();
    return { mechanism: 'pid-namespace', prefix: [] };
  }

  async close(): Promise<void> {
    removeMountPoints(this.#madeMountPoints.splice(0));
    await Promise.all(this.#cgroups.splice(0).map(removeCgroup));
    await Promise.all(this.#listeners.splice(0).map((listener) => listener.close().catch(() => undefined)));
    await this.#proxy?.close();
    this.#proxy = null;
    if (this.#dir) {
      try {
        chmodSync(join(this.#dir, 'mask', 'dir'), 0o700);
      } catch {
        // never made
      }
      rmSync(this.#dir, { recursive: true, force: true });
    }
    this.#dir = null;
    this.#boundary = null;
    await this.#base.close?.();
  }
}

/**
 * The binaries the harness runs itself to contain a command (bubblewrap, unshare, setpriv,
 * the helper and the directory it is cached in), by their real paths: kept read-only to
 * every command wherever they sit, so none can be replaced from inside a run for the next
 * command, or the next process, to run uncontained.
 */
function harnessBinaries(host: HostRungs): KeptPath[] {
  const paths = [
    host.bubblewrap.ok ? host.bubblewrap.argv0 : null,
    host.unshare?.[0] ?? null,
    host.setpriv ?? null,
    host.binary,
    host.binary ? dirname(host.binary) : null,
  ];
  return paths
    .filter((path): path is string => typeof path === 'string' && path.startsWith('/'))
    .map((path) => ({ path, how: 'protect' as const }));
}

/** The run directories' names: the prefix, the owning process's pid, a dash. */
const RUN_DIR_PREFIX = 'io-harness-run-';
let swept = false;

/**
 * A directory of this process's own in the temporary directory, named by its pid: removed
 * by whoever made it, or, once this process is gone (killed outright), by the next one to
 * make one ({@link sweepRunDirs}).
 */
export function runDirectory(): string {
  sweepRunDirs();
  return mkdtempSync(join(tmpdir(), `${RUN_DIR_PREFIX}${process.pid}-`));
}

/**
 * Removes, once per process, the run directories a process that no longer exists left in
 * the temporary directory (one killed outright cannot remove its own): a run that crashed
 * leaves nothing behind past the next one's start. A directory whose pid is alive, or
 * whose name has none, is left.
 */
function sweepRunDirs(): void {
  if (swept) return;
  swept = true;
  let names: string[];
  try {
    names = readdirSync(tmpdir());
  } catch {
    return;
  }
  for (const name of names) {
    const pid = name.startsWith(RUN_DIR_PREFIX) ? Number.parseInt(name.slice(RUN_DIR_PREFIX.length), 10) : Number.NaN;
    if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) continue;
    try {
      process.kill(pid, 0);
      continue;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') continue;
    }
    rmSync(join(tmpdir(), name), { recursive: true, force: true });
  }
}
