/**
 * Runs one command from a fixed argv — never a shell string — in a directory, with
 * both output streams bounded (the truncation is stated, never silent), an exit
 * status, and a timeout that kills the command's whole process group. A command that
 * cannot start at all (no such program) is reported as such, apart from one that ran
 * and failed: a gate calls the first "errored" and the second "failed".
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';

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
}

export interface CommandOptions {
  cwd: string;
  timeoutMs: number;
  /** Bytes kept per stream. */
  outputLimit: number;
  signal?: AbortSignal;
  env?: NodeJS.ProcessEnv;
}

/** Variables the shipped providers read their keys from: a command the agent runs does not inherit them. */
const CREDENTIAL = /(^|_)(API_KEY|APIKEY|KEY|TOKEN|SECRET|SECRET_KEY|ACCESS_KEY|PASSWORD|PASSWD|CREDENTIALS)$/i;

/**
 * The environment a command starts with: the caller's, without credentials — every
 * variable named like one, and every variable in `secrets` (the ones the run's provider
 * specs read their keys from, whatever they are called).
 */
export function commandEnvironment(
  base: NodeJS.ProcessEnv = process.env,
  secrets: readonly string[] = [],
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(base)) {
    if (!CREDENTIAL.test(name) && !secrets.includes(name)) env[name] = value;
  }
  return env;
}

/** The longest a command may be given: timers beyond about 24.8 days overflow to 1 ms. */
export const MAX_TIMEOUT_MS = 24 * 60 * 60 * 1000;

function notStarted(error: string): CommandResult {
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

export function runCommand(argv: readonly string[], options: CommandOptions): Promise<CommandResult> {
  if (options.signal?.aborted) return Promise.resolve(notStarted('the run was cancelled before the command started'));
  if (!existsSync(options.cwd)) {
    return Promise.resolve(
      notStarted(`the working directory ${options.cwd} does not exist (was the workspace moved or deleted?)`),
    );
  }
  return new Promise((resolve) => {
    const [program, ...args] = argv;
    const out = new Bounded(options.outputLimit);
    const err = new Bounded(options.outputLimit);
    let timedOut = false;
    let settled = false;
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn(program as string, args, {
        cwd: options.cwd,
        env: options.env ?? commandEnvironment(),
        stdio: ['ignore', 'pipe', 'pipe'],
        // Its own process group, so a timeout or a cancel kills what it started too.
        detached: true,
      });
    } catch (error) {
      // An argv Node refuses outright (a NUL byte in an argument) is a command that could not start.
      resolve(notStarted(`the command cannot be started: ${(error as Error).message}`));
      return;
    }
    const killGroup = () => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    };
    const timer = setTimeout(
      () => {
        timedOut = true;
        killGroup();
      },
      Math.min(Math.max(1, options.timeoutMs), MAX_TIMEOUT_MS),
    );
    const onAbort = () => killGroup();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    child.stdout?.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr?.on('data', (chunk: Buffer) => err.push(chunk));
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
        error:
          error.code === 'ENOENT'
            ? `the program ${JSON.stringify(program)} was not found (is it installed and on PATH?)`
            : error.message,
        exitStatus: null,
        signal: null,
        timedOut: false,
      });
    });
    child.once('close', (code, signal) => {
      finish({ started: true, error: null, exitStatus: code, signal, timedOut });
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

/** A command's result as an observation a model can read; truncation stated. */
export function describeCommand(argv: readonly string[], result: CommandResult): string {
  if (!result.started) return `could not run ${argv.join(' ')}: ${result.error}`;
  const status = result.timedOut
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
