/**
 * Containment around an executor: every command of a run is wrapped for the strongest
 * rung this host offers that can enforce what the run was granted (see ./rungs.ts and
 * ./boundary.ts), its environment given the run's own HOME and TMPDIR, and what applied
 * is reported once, as the run's `contained` event.
 */
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { join } from 'node:path';
import { ContainmentUnavailableError } from '../../../errors.js';
import type { Policy } from '../../policy/policy.js';
import type { CommandRequest, Executor, JobRequest } from '../executor.js';
import { findProgram } from '../find-program.js';
import type { Job } from '../jobs.js';
import { type CommandResult, type Containment, notStarted, processContainment } from '../run-command.js';
import {
  type Access,
  type Boundary,
  boundaryFor,
  DEFAULT_SANDBOX,
  furnishHome,
  policyAllowsEgress,
  type Relay,
  type SandboxCaps,
  type SandboxData,
  wrapForRung,
} from './boundary.js';

import { type ProbeReport, probeContainment } from './probe.js';
import { type CommandOrigin, type EgressGate, EgressProxy, type LookupAll, PROBE_TOOL, policyGate } from './proxy.js';
import { type HostRungs, hostRungs, RUNGS, type RungName } from './rungs.js';

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
  /** The protected paths: all of them, only those that exist, or none. */
  protectedPaths: 'enforced' | 'existing only' | 'not established';
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
  const network =
    namespaced && noEgress ? 'none' : namespaced && sandbox.access !== 'full' && host.helper.ok ? 'proxy' : 'host';
  return {
    rung,
    requested: sandbox.rung,
    access: sandbox.access,
    filesystem: rung === 'bubblewrap' || rung === 'landlock' ? 'enforced' : 'not established',
    protectedPaths:
      sandbox.access === 'read-only' && (rung === 'bubblewrap' || rung === 'landlock')
        ? 'enforced'
        : rung === 'bubblewrap'
          ? 'enforced'
          : rung === 'landlock'
            ? 'existing only'
            : 'not established',
    network,
    egress: network === 'none' ? 'denied' : network === 'proxy' ? 'proxy' : 'not established',
    processes: namespaced ? 'pid-namespace' : processContainment().mechanism,
    landlockAbi: (rung === 'bubblewrap' || rung === 'landlock') && host.helper.ok ? host.helper.report.abi : null,
    passedOver,
    caps: capsApplied(sandbox.caps, rung),
  };
}

/** How each cap is applied on `rung`: by the helper's rlimits, the processes by a pids cgroup where one can be made. */
function capsApplied(caps: SandboxCaps, rung: RungName | 'full-access'): Partial<Record<keyof SandboxCaps, string>> {
  const applied: Partial<Record<keyof SandboxCaps, string>> = {};
  const helped = rung === 'bubblewrap' || rung === 'landlock';
  const how: Record<keyof SandboxCaps, string> = {
    cpuSecs: 'RLIMIT_CPU (SIGXCPU at the cap)',
    fileBytes: 'RLIMIT_FSIZE (SIGXFSZ past it)',
    memoryBytes: 'RLIMIT_AS (allocations past it fail)',
    processes: pidsCgroupRoot()
      ? 'a pids cgroup (pids.max)'
      : process.getuid?.() === 0
        ? 'RLIMIT_NPROC, which the kernel does not enforce for root: not established'
        : 'RLIMIT_NPROC',
  };
  for (const name of Object.keys(caps) as (keyof SandboxCaps)[]) {
    applied[name] = helped ? how[name] : `not established: the ${rung} rung has no helper to apply it`;
  }
  return applied;
}

let pidsRoot: string | null | undefined;

/**
 * A cgroup directory this process may make children in with a pids controller: the v1
 * pids hierarchy, or the v2 one where the process's own cgroup is delegated to it. Found
 * once, by making and removing a directory there.
 */
export function pidsCgroupRoot(): string | null {
  if (pidsRoot !== undefined) return pidsRoot;
  pidsRoot = null;
  if (process.platform !== 'linux') return pidsRoot;
  const candidates: string[] = ['/sys/fs/cgroup/pids'];
  try {
    const own = readFileSync('/proc/self/cgroup', 'utf8')
      .split('\n')
      .find((line) => line.startsWith('0::'));
    if (own && readFileSync('/sys/fs/cgroup/cgroup.controllers', 'utf8').includes('pids'))
      candidates.push(join('/sys/fs/cgroup', own.slice(3)));
  } catch {
    // no v2 hierarchy here
  }
  for (const candidate of candidates) {
    const probe = join(candidate, `io-harness-probe-${process.pid}`);
    try {
      mkdirSync(probe);
      const usable = existsSync(join(probe, 'pids.max'));
      rmdirSync(probe);
      if (usable) {
        pidsRoot = candidate;
        break;
      }
    } catch {
      // not ours to make cgroups in
    }
  }
  return pidsRoot;
}

let cgroupCount = 0;

/** A pids cgroup for one command, capped at `max` processes; null where none can be made. */
function commandCgroup(max: number): string | null {
  const root = pidsCgroupRoot();
  if (!root) return null;
  const dir = join(root, `io-harness-${process.pid}-${++cgroupCount}`);
  try {
    mkdirSync(dir);
    writeFileSync(join(dir, 'pids.max'), String(max));
    return dir;
  } catch {
    return null;
  }
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

/** The cap a command's end shows it reached: the signal the cap sends, or a fork the pids cgroup refused. */
function capReached(result: CommandResult, caps: SandboxCaps, cgroup: string | null): CommandResult['capReached'] {
  if (result.timedOut) return undefined;
  // A rung's first process reports its command's death by a signal as 128 + the signal's number.
  const signal =
    result.signal ??
    (result.exitStatus !== null && result.exitStatus > 128
      ? (Object.entries(constants.signals).find(([, number]) => number === (result.exitStatus as number) - 128)?.[0] ??
        null)
      : null);
  if (signal === 'SIGXCPU' && caps.cpuSecs !== undefined) return { cap: 'cpuSecs', limit: caps.cpuSecs };
  if (signal === 'SIGXFSZ' && caps.fileBytes !== undefined) return { cap: 'fileBytes', limit: caps.fileBytes };
  if (cgroup && caps.processes !== undefined) {
    try {
      const events = readFileSync(join(cgroup, 'pids.events'), 'utf8');
      if (/^max [1-9]/m.test(events)) return { cap: 'processes', limit: caps.processes };
    } catch {
      // no events file on this kernel
    }
  }
  return undefined;
}

/** What the agent is told of its commands' containment: one line of its opening turn. */
export function containmentLine(report: ContainedReport): string {
  if (report.rung === 'full-access') return 'Commands run with full access: nothing contains them.';
  const writes =
    report.filesystem === 'enforced'
      ? report.access === 'read-only'
        ? 'they may write only their own TMPDIR and HOME'
        : 'they may write the workspace, their own TMPDIR and HOME, and the toolchain caches, and nothing else'
      : 'what they write is not confined';
  const network =
    report.network === 'none'
      ? 'they have no network'
      : report.network === 'proxy'
        ? "they reach the network only through the run's egress proxy (HTTP_PROXY and HTTPS_PROXY are set), which lets through only the hosts the policy allows"
        : 'they share the host network';
  return `Commands run contained (${report.rung}): ${writes}; ${network}; the workspace's .git/hooks and .git/config are read-only.`;
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

/** The first line of what a sandbox said when it could not start a command, or null when the command itself ran. */
function setupFailure(rung: RungName, result: CommandResult): string | null {
  if (!result.started || result.exitStatus === null) return null;
  const first = result.stderr.split('\n')[0] ?? '';
  const prefixes =
    rung === 'bubblewrap' ? ['bwrap: ', 'landlock-exec: '] : ['unshare: ', 'landlock-exec: ', 'setpriv: '];
  return [1, 125, 127].includes(result.exitStatus) && prefixes.some((prefix) => first.startsWith(prefix))
    ? first
    : null;
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
    },
  ) {
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

  /**
   * A listener of the run's egress proxy for one command, where its commands go through
   * one: the relay the helper is to run, and the listener's end. Null on the other rungs.
   */
  #relay(origin: CommandOrigin | null): { relay: Relay; close(): Promise<void> } | null {
    if (this.#report.network !== 'proxy') return null;
    this.boundary();
    this.#proxy ??= new EgressProxy({
      gate: this.#gate,
      ownPorts: [RELAY_PORT],
      ...(this.#lookup ? { lookup: this.#lookup } : {}),
    });
    const socket = join(this.#dir as string, `net-${++this.#sockets}.sock`);
    const listening = this.#proxy.listen(socket, origin);
    return {
      relay: { port: RELAY_PORT, socket },
      close: async () => (await listening).close(),
    };
  }

  /** What the run's commands get. */
  contained(): ContainedReport {
    return this.#report;
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
    sweepRunDirs();
    const dir = mkdtempSync(join(tmpdir(), `${RUN_DIR_PREFIX}${process.pid}-`));
    this.#dir = dir;
    const home = join(dir, 'home');
    const tmp = join(dir, 'tmp');
    const empty = join(dir, 'empty');
    const caches = furnishHome(home);
    mkdirSync(tmp, { mode: 0o700 });
    mkdirSync(empty, { mode: 0o500 });
    this.#boundary = boundaryFor({
      sandbox: this.#sandbox,
      root: this.#root,
      tmp,
      home,
      empty,
      caches,
      network: this.#report.network === 'host' ? 'open' : this.#report.network,
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

  async run(request: CommandRequest): Promise<CommandResult> {
    const rung = this.#rung;
    if (rung === null) return this.#base.run(request);
    const [program, ...args] = request.argv as [string, ...string[]];
    const located = findProgram(program, request.env?.PATH, request.cwd);
    if (located.kind === 'missing')
      return notStarted(`the program ${JSON.stringify(program)} was not found (is it installed and on PATH?)`);
    if (located.kind === 'not-executable') return notStarted(`spawn ${program} EACCES`);
    const { argv, env, cgroup, listener } = this.#wrap(rung, request, [located.path, ...args]);
    try {
      const result = await this.#base.run({ ...request, argv, env, bare: true });
      const failed = setupFailure(rung, result);
      if (failed) return notStarted(`the ${rung} sandbox could not start the command: ${failed}`);
      const reached = capReached(result, this.#sandbox.caps, cgroup);
      return reached ? { ...result, capReached: reached } : result;
    } finally {
      await listener?.close();
      if (cgroup) await removeCgroup(cgroup);
    }
  }

  /**
   * A command (its program found) wrapped for `rung`: what to spawn and with what
   * environment, the cgroup its processes cap made, and its listener of the egress proxy.
   */
  #wrap(
    rung: RungName,
    request: { cwd: string; env?: NodeJS.ProcessEnv | undefined; origin?: CommandOrigin | undefined },
    argv: string[],
  ) {
    const caps = this.#sandbox.caps;
    const listener = this.#relay(request.origin ?? null);
    const relay = listener?.relay ?? null;
    const cgroup = caps.processes !== undefined ? commandCgroup(caps.processes) : null;
    const wrapped = wrapForRung(rung, this.#host, this.boundary(), request.cwd, argv, cgroup !== null, relay);
    this.#madeMountPoints.push(...wrapped.madeMountPoints);
    return {
      argv: cgroup ? this.#joining(cgroup, wrapped.argv) : wrapped.argv,
      env: this.#env(request.env, relay),
      cgroup,
      listener,
    };
  }

  /** `argv` started inside `cgroup`: the helper joins it, then executes the wrapper, so everything the command starts is in it. */
  #joining(cgroup: string, argv: string[]): string[] {
    if (!this.#host.helper.ok) return argv;
    return [this.#host.helper.path, '--join-only', '--cgroup', cgroup, '--', ...argv];
  }

  start(request: JobRequest): Job {
    const rung = this.#rung;
    if (rung === null) return this.#base.start(request);
    const [program, ...args] = request.argv as [string, ...string[]];
    const located = findProgram(program, request.env?.PATH, request.cwd);
    const path = located.kind === 'found' ? located.path : program;
    // A background command's listener lives as long as the run: ended when the run's session closes.
    const { argv, env, cgroup } = this.#wrap(rung, request, [path, ...args]);
    if (cgroup) this.#cgroups.push(cgroup);
    return this.#base.start({ ...request, argv, env, bare: true });
  }

  /**
   * The mount points bubblewrap made for the run's commands, removed only when the run's
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
    await this.#proxy?.close();
    this.#proxy = null;
    if (this.#dir) rmSync(this.#dir, { recursive: true, force: true });
    this.#dir = null;
    this.#boundary = null;
    await this.#base.close?.();
  }
}

/** The run directories' names: the prefix, the owning process's pid, a dash. */
const RUN_DIR_PREFIX = 'io-harness-run-';
let swept = false;

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

/**
 * Removes the empty directories and files bubblewrap made to mount over protected paths
 * that did not exist, newest first; one that is no longer empty stays. Left by a crash,
 * they are empty and harmless (an empty `.git` is no repository to git, an empty
 * `.git/config` a valid one).
 */
function removeMountPoints(paths: string[]): void {
  for (const path of [...new Set(paths)].reverse()) {
    try {
      const stat = lstatSync(path);
      if (stat.isDirectory()) rmdirSync(path);
      else if (stat.isFile() && stat.size === 0) rmSync(path);
    } catch {
      // not empty, busy, or gone
    }
  }
}
