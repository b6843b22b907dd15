/**
 * Runs one command from a fixed argv — never a shell string — in a directory, with
 * both output streams bounded (the truncation is stated, never silent), an exit
 * status, and a timeout that kills everything the command started. A command that
 * cannot start at all (no such program) is reported as such, apart from one that ran
 * and failed: a gate calls the first "errored" and the second "failed".
 *
 * Where Linux allows it, each command is the first process of its own PID namespace
 * (util-linux `unshare --pid --fork --kill-child`): when that process exits or is
 * killed, the kernel kills every process left in the namespace, whatever group or
 * session it moved to. Elsewhere the command's process group is killed, which a
 * process that calls setsid or setpgid leaves.
 */
import { type SpawnOptions, spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { TOOLCHAIN_VARIABLES } from '../workspace/toolchain.js';
import { findProgram, findSystemProgram } from './find-program.js';

export interface CommandResult {
  /** False when the program could not be started at all; `error` says why. */
  started: boolean;
  error: string | null;
  exitStatus: number | null;
  signal: string | null;
  timedOut: boolean;
  stdout: string;
  stderr: string;
  /** Bytes each stream printed beyond the limit, dropped. */
  droppedStdout: number;
  droppedStderr: number;
  /** The sandbox cap that ended the command, when one did (see SandboxCaps). */
  capReached?: {
    cap: 'cpuSecs' | 'fileBytes' | 'writtenBytes' | 'processes' | 'memoryBytes' | 'outputBytes' | 'wallSecs';
    limit: number;
  };
  /**
   * What the command's wrapper reported on descriptor 3 when it ended (with
   * {@link CommandOptions.counted}): the containment helper's count of the bytes written.
   */
  counted?: string;
  /** True when the command was killed for printing more than `killAfterOutputBytes`. */
  outputKilled?: boolean;
}

export interface CommandOptions {
  cwd: string;
  timeoutMs: number;
  /** Bytes kept per stream. */
  outputLimit: number;
  /** Kills the command (and all it started) once it has printed more than this many bytes on both streams together. */
  killAfterOutputBytes?: number;
  signal?: AbortSignal;
  env?: NodeJS.ProcessEnv;
  /**
   * Spawn argv exactly as given, its program already found: a wrapper (a sandbox rung)
   * has put its own namespaces around it, so the PID namespace prefix is not added.
   */
  bare?: boolean;
  /**
   * Opens descriptor 3 of the spawned process as a pipe the wrapper reports on when the
   * command ends (the containment helper's count of what it wrote): read into
   * {@link CommandResult.counted}.
   */
  counted?: boolean;
}

/**
 * The variables every command gets from the harness's environment, when set: what a
 * shell and most programs need to find themselves (PATH, HOME, the locale, the terminal,
 * the temp dir, who the user is) and nothing that holds a credential.
 */
export const BASE_ENVIRONMENT: readonly string[] = [
  'PATH',
  'LANG',
  'TERM',
  'TZ',
  'HOME',
  'TMPDIR',
  'USER',
  'LOGNAME',
  'SHELL',
];

/**
 * Variables no contained command is handed, by the harness or by the model on an argv
 * (`env LD_PRELOAD=... cmd`): the loader's and the shells' code-loading ones, the
 * interpreters' startup hooks, git's configuration injection, npm's configuration and the
 * proxy settings (the run's own are set after).
 */
const WITHHELD: readonly RegExp[] = [
  /^(LD_|DYLD_)/,
  /^BASH_FUNC_/,
  /^(BASH_ENV|ENV|SHELLOPTS|BASHOPTS|PS4|PROMPT_COMMAND)$/,
  /^NODE_(OPTIONS|PATH|REPL_EXTERNAL_MODULE)$/,
  /^PYTHON(PATH|STARTUP|HOME|USERBASE|EXECUTABLE|INSPECT)$/,
  /^PERL(5OPT|5LIB|LIB|5DB)$/,
  /^RUBY(OPT|LIB)$/,
  /^GIT_/i,
  /^npm_config_/i,
  /^(JAVA_TOOL_OPTIONS|_JAVA_OPTIONS|JDK_JAVA_OPTIONS|GCONV_PATH)$/,
  /^(https?|all|ftp|no|socks)_proxy$/i,
];

/** Whether a contained command may not be handed the variable `name` (see {@link WITHHELD}). */
export function isWithheldVariable(name: string): boolean {
  return WITHHELD.some((pattern) => pattern.test(name));
}

/** A variable name a run may declare: letters, digits and underscores, not starting with a digit. */
export const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The environment a command starts with, built from an allow-list: {@link BASE_ENVIRONMENT},
 * every `LC_*`, the toolchain table's variables, and the names the run declared
 * (`inherited`). Every other variable of the harness stays behind, whatever it is
 * called. The variables in `secrets` (the ones the run's models read their keys from)
 * never reach a command, even when declared.
 */
export function commandEnvironment(
  base: NodeJS.ProcessEnv = process.env,
  secrets: readonly string[] = [],
  inherited: readonly string[] = [],
): NodeJS.ProcessEnv {
  const allowed = new Set([...BASE_ENVIRONMENT, ...TOOLCHAIN_VARIABLES, ...inherited]);
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(base)) {
    if (value === undefined || secrets.includes(name)) continue;
    if (allowed.has(name) || name.startsWith('LC_')) env[name] = value;
  }
  return env;
}

/** The longest a command may be given: timers beyond about 24.8 days overflow to 1 ms. */
export const MAX_TIMEOUT_MS = 24 * 60 * 60 * 1000;

/** The result of a command that could not be started, saying why. */
export function notStarted(error: string): CommandResult {
  return {
    started: false,
    error,
    exitStatus: null,
    signal: null,
    timedOut: false,
    stdout: '',
    stderr: '',
    droppedStdout: 0,
    droppedStderr: 0,
  };
}

/** How the commands of this process are kept from outliving their end. */
export type Containment =
  | { mechanism: 'pid-namespace'; prefix: readonly string[] }
  | { mechanism: 'process-group'; reason: string };

let probed: Containment | undefined;

/**
 * Which containment this process can use, found once by a real spawn of `unshare` (as
 * root without a user namespace, otherwise inside one that maps the user to itself or
 * to root) and cached. Falls back to the process group, saying why.
 */
export function processContainment(): Containment {
  if (probed === undefined) probed = probeContainment();
  return probed;
}

function probeContainment(): Containment {
  if (process.platform !== 'linux') return { mechanism: 'process-group', reason: `${process.platform} is not Linux` };
  const unshare = findSystemProgram('unshare');
  if (unshare.kind !== 'found') return { mechanism: 'process-group', reason: 'util-linux unshare is not on PATH' };
  const variants: string[][] = [
    ['--user', '--map-current-user'],
    ['--user', '--map-root-user'],
  ];
  if (process.getuid?.() === 0) variants.unshift([]);
  const failures: string[] = [];
  for (const variant of variants) {
    const prefix = [unshare.path, ...variant, '--pid', '--fork', '--kill-child', '--'];
    const probe = spawnSync(prefix[0] as string, [...prefix.slice(1), 'true'], {
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: 10_000,
    });
    if (probe.status === 0) return { mechanism: 'pid-namespace', prefix };
    failures.push(probe.error?.message ?? (probe.stderr?.toString('utf8').trim() || `exit status ${probe.status}`));
  }
  return { mechanism: 'process-group', reason: `PID namespaces are not available: ${failures.join('; ')}` };
}

function programNotFound(program: string): string {
  return `the program ${JSON.stringify(program)} was not found (is it installed and on PATH?)`;
}

/**
 * What to spawn for `argv`: `argv` itself under the process group, or `argv` behind the
 * `unshare` prefix. With the prefix in front, a program that does not exist would only be
 * unshare's exit status 127, so it is looked up first and reported as a command that
 * could not start, as spawn reports it without the prefix.
 */
export function containedSpawn(
  argv: readonly string[],
  cwd: string,
  env: NodeJS.ProcessEnv,
  bare = false,
): { ok: true; file: string; args: string[]; containment: Containment } | { ok: false; error: string } {
  const [program, ...args] = argv as [string, ...string[]];
  if (bare) return { ok: true, file: program, args, containment: { mechanism: 'pid-namespace', prefix: [] } };
  const containment = processContainment();
  if (containment.mechanism === 'process-group') return { ok: true, file: program, args, containment };
  const located = findProgram(program, env.PATH, cwd);
  if (located.kind === 'missing') return { ok: false, error: programNotFound(program) };
  if (located.kind === 'not-executable') return { ok: false, error: `spawn ${program} EACCES` };
  const [file, ...rest] = containment.prefix as [string, ...string[]];
  return { ok: true, file, args: [...rest, program, ...args], containment };
}

/** Spawn options shared by every command: no stdin, both streams piped, its own process group. */
export function commandSpawnOptions(cwd: string, env: NodeJS.ProcessEnv, counted = false): SpawnOptions {
  // Its own process group as well, so a timeout or a cancel kills what it started even
  // where there is no PID namespace (and the namespace's first process with it).
  return { cwd, env, stdio: ['ignore', 'pipe', 'pipe', ...(counted ? (['pipe'] as const) : [])], detached: true };
}

/** What a wrapper writes on descriptor 3 of `child`, bounded: handed to `done` once the pipe closes. */
export function readCounted(child: ReturnType<typeof spawn>): Promise<string> {
  const pipe = child.stdio[3] as NodeJS.ReadableStream | null | undefined;
  if (!pipe) return Promise.resolve('');
  let text = '';
  pipe.on('data', (chunk: Buffer) => {
    if (text.length < 256) text += chunk.toString('utf8');
  });
  return new Promise((resolve) => {
    pipe.once('end', () => resolve(text.slice(0, 256)));
    pipe.once('error', () => resolve(text.slice(0, 256)));
  });
}

/**
 * Kills a started command and everything it started. The namespace's first process is
 * killed by its pid on the host (the kernel then kills the rest of the namespace): the
 * parent-death signal `--kill-child` sets is cleared when that process changes its user
 * or group, so it cannot be left to unshare's death. Then the process group, as before.
 */
export function killCommand(pid: number | undefined): void {
  if (pid === undefined) return;
  for (const child of childrenOf(pid)) {
    try {
      process.kill(child, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** The children of a process (unshare's is the namespace's first process), from /proc. */
export function childrenOf(pid: number): number[] {
  try {
    const listed = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
    return listed === '' ? [] : listed.split(/\s+/).map(Number);
  } catch {
    // Without the children file, every process's parent is read.
  }
  const children: number[] = [];
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return children;
  }
  for (const entry of entries) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The parent is the second field after the name, which is in parentheses and may hold spaces.
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (parent === pid) children.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return children;
}

/** unshare's own words when it could not execute the program (126, 127). */
const UNSHARE_EXEC_FAILED = /^unshare: failed to execute [^\n]*/;

export function runCommand(argv: readonly string[], options: CommandOptions): Promise<CommandResult> {
  if (options.signal?.aborted) return Promise.resolve(notStarted('the run was cancelled before the command started'));
  if (!existsSync(options.cwd)) {
    return Promise.resolve(
      notStarted(`the working directory ${options.cwd} does not exist (was the workspace moved or deleted?)`),
    );
  }
  return new Promise((resolve) => {
    const program = argv[0] as string;
    const out = new Bounded(options.outputLimit);
    const err = new Bounded(options.outputLimit);
    let timedOut = false;
    let outputKilled = false;
    let printed = 0;
    let settled = false;
    let child: ReturnType<typeof spawn>;
    const env = options.env ?? commandEnvironment();
    let spawned: ReturnType<typeof containedSpawn>;
    try {
      spawned = containedSpawn(argv, options.cwd, env, options.bare);
      if (!spawned.ok) {
        resolve(notStarted(spawned.error));
        return;
      }
      child = spawn(spawned.file, spawned.args, commandSpawnOptions(options.cwd, env, options.counted));
    } catch (error) {
      // An argv Node refuses outright (a NUL byte in an argument) is a command that could not start.
      resolve(notStarted(`the command cannot be started: ${(error as Error).message}`));
      return;
    }
    const contained = spawned.containment.mechanism === 'pid-namespace' && !options.bare;
    const report = options.counted ? readCounted(child) : Promise.resolve('');
    const killGroup = () => killCommand(child.pid);
    const timer = setTimeout(
      () => {
        timedOut = true;
        killGroup();
      },
      Math.min(Math.max(1, options.timeoutMs), MAX_TIMEOUT_MS),
    );
    const onAbort = () => killGroup();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    const counted = (chunk: Buffer) => {
      printed += chunk.length;
      const cap = options.killAfterOutputBytes;
      if (cap !== undefined && printed > cap && !outputKilled) {
        outputKilled = true;
        killGroup();
      }
    };
    child.stdout?.on('data', (chunk: Buffer) => {
      counted(chunk);
      out.push(chunk);
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      counted(chunk);
      err.push(chunk);
    });
    const finish = (result: Omit<CommandResult, 'stdout' | 'stderr' | 'droppedStdout' | 'droppedStderr'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      resolve({
        ...result,
        stdout: out.text(),
        stderr: err.text(),
        droppedStdout: out.dropped,
        droppedStderr: err.dropped,
      });
    };
    child.once('error', (error: NodeJS.ErrnoException) => {
      finish({
        started: false,
        error: error.code === 'ENOENT' ? programNotFound(program) : error.message,
        exitStatus: null,
        signal: null,
        timedOut: false,
      });
    });
    child.once('close', (code, signal) => {
      // The program vanished between the lookup and unshare's exec: still a command that did not start.
      const failed = contained && (code === 126 || code === 127) ? UNSHARE_EXEC_FAILED.exec(err.text()) : null;
      if (failed) {
        finish({ started: false, error: failed[0], exitStatus: null, signal: null, timedOut: false });
        return;
      }
      // 'close' comes once every stdio stream has ended, the count's pipe with them.
      void report.then((counted) =>
        finish({
          started: true,
          error: null,
          exitStatus: code,
          signal,
          timedOut,
          ...(outputKilled ? { outputKilled } : {}),
          ...(options.counted ? { counted } : {}),
        }),
      );
    });
  });
}

/** Keeps the first `limit` bytes of a stream and counts the rest. */
class Bounded {
  readonly #limit: number;
  readonly #chunks: Buffer[] = [];
  #kept = 0;
  dropped = 0;

  constructor(limit: number) {
    this.#limit = limit;
  }

  push(chunk: Buffer): void {
    const room = this.#limit - this.#kept;
    if (room <= 0) {
      this.dropped += chunk.length;
      return;
    }
    const kept = chunk.length <= room ? chunk : chunk.subarray(0, room);
    this.#chunks.push(kept);
    this.#kept += kept.length;
    this.dropped += chunk.length - kept.length;
  }

  text(): string {
    return Buffer.concat(this.#chunks).toString('utf8');
  }
}

/** What a cap's stop adds to the observation, where there is more to say than its name. */
const CAP_SAYS: Partial<Record<NonNullable<CommandResult['capReached']>['cap'], string>> = {
  cpuSecs: ': SIGXCPU',
  fileBytes: ': SIGXFSZ',
  writtenBytes: ": the run's commands wrote that much to disk in all",
};

/** A command's result as an observation a model can read; truncation stated. */
export function describeCommand(argv: readonly string[], result: CommandResult): string {
  if (!result.started) return `could not run ${argv.join(' ')}: ${result.error}`;
  const status = result.capReached
    ? `was stopped by its ${result.capReached.cap} cap (${result.capReached.limit})${CAP_SAYS[result.capReached.cap] ?? ''}`
    : result.timedOut
      ? 'timed out and was killed'
      : result.signal
        ? `was killed by ${result.signal}`
        : `exited with status ${result.exitStatus}`;
  const parts = [`${argv.join(' ')} ${status}`];
  parts.push(section('stdout', result.stdout, result.droppedStdout));
  parts.push(section('stderr', result.stderr, result.droppedStderr));
  return parts.join('\n');
}

function section(name: string, text: string, dropped: number): string {
  if (text === '' && dropped === 0) return `--- ${name}: (empty)`;
  const cut = dropped > 0 ? `\n--- ${name} cut: ${dropped} more bytes were not kept` : '';
  return `--- ${name}:\n${text}${cut}`;
}
