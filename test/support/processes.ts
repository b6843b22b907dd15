/** Child processes for the crash and lease tests: real processes, real signals. */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const DRIVER = fileURLToPath(new URL('./driver.mjs', import.meta.url));

/** Whether a killed process is gone, waiting a bounded while for the kernel to reap it. */
export async function processGone(pid: number): Promise<boolean> {
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  for (let i = 0; i < 250 && alive(); i++) await new Promise((resolve) => setTimeout(resolve, 20));
  return !alive();
}

/**
 * The host pids of the live processes (zombies aside) working in `root` or under it. A
 * contained command has a /proc of its own, so the pid it sees is not the host's; where
 * it works is the same directory from either side, and that is how the host finds it.
 */
export function processesUnder(root: string): number[] {
  const real = realpathSync(root);
  return processesWhere((cwd) => cwd === real || cwd.startsWith(`${real}/`));
}

/**
 * The host pids of the live processes (zombies aside) whose working directory and program,
 * as the host reads them (`/proc/<pid>/cwd`, `/proc/<pid>/exe`), `match` accepts.
 */
export function processesWhere(match: (cwd: string, exe: string) => boolean): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      const cwd = readlinkSync(`/proc/${entry}/cwd`);
      if (!match(cwd, exeOf(entry))) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      if (state !== 'Z' && state !== 'X') found.push(Number(entry));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

/** A process's program as the host reads it; '' where it cannot (a kernel thread, another user's). */
function exeOf(pid: string): string {
  try {
    return readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return '';
  }
}

/** Waits a bounded while for every process working under `root` to be gone; true when none is left. */
export async function noneLeftUnder(root: string): Promise<boolean> {
  for (let i = 0; i < 150 && processesUnder(root).length > 0; i++)
    await new Promise((resolve) => setTimeout(resolve, 20));
  return processesUnder(root).length === 0;
}

/** Kills whatever still works under `root` (a test's cleanup, whatever its outcome). */
export function killUnder(root: string): void {
  for (const pid of processesUnder(root)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
}

/** A store path in a new temp directory, named by the test run so the run's end removes it (global-setup.ts). */
export function tempStorePath(prefix = 'io-harness-test-'): string {
  const run = process.env.IO_HARNESS_TEST_RUN;
  return join(mkdtempSync(join(tmpdir(), run ? `${prefix}${run}-` : prefix)), 'runs.db');
}

export interface DriverConfig {
  store: string;
  /** PostgresStore.open's options, for a postgres:// store. */
  storeOptions?: Record<string, unknown>;
  /** `join`: take part in a tree another process drives (PostgreSQL). */
  mode: 'run' | 'resume' | 'join';
  rootId?: string;
  script?: string;
  /** `file#export`: a ModelScript factory under scripts/, served over HTTP by the driver. */
  wireScript?: string;
  options?: Record<string, unknown>;
  killAt?: string | null;
  supervisor?: Record<string, unknown>;
  run?: Record<string, unknown>;
  task?: string;
  /** Run a workspace contract over `root` instead of a plain task. */
  workspace?: {
    goal: string;
    root: string;
    policy?: 'permissive' | 'default';
    context?: Record<string, unknown>;
    memory?: Record<string, unknown>;
    budget?: { steps?: number; tokens?: number };
    codeact?: Record<string, unknown>;
  };
  /** How the driver's approver answers every ask. */
  approver?: 'defer' | 'approve' | 'deny';
  /** `file#export`: the tools that export of scripts/<file>.mjs makes, given to run and resume. */
  tools?: string;
  toolOptions?: Record<string, unknown>;
  /** Install the hooks of the configuration of `root` with this user file. */
  hooks?: { root: string; userFile: string };
}

export interface DriverLine {
  rootId?: string;
  pid?: number;
  owner?: string;
  ack?: [string, number];
  /** The worker threads the driver's process ran when its first step committed. */
  workers?: number;
  /** Another host took this run over. */
  lost?: string;
  result?: {
    rootId: string;
    status: string;
    reply: string | null;
    spent: { steps: number; tokens: number };
    runs: number;
  };
  error?: { code: string; message: string; details: Record<string, unknown> | null };
}

export class Driver {
  readonly child: ChildProcess;
  readonly lines: DriverLine[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  #listeners: (() => void)[] = [];
  /** Set once the process has exited and its output has all been read ('close', not 'exit': a line written just before exiting is in). */
  #gone = false;
  stderr = '';

  constructor(config: DriverConfig) {
    this.child = spawn(process.execPath, [DRIVER, JSON.stringify(config)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let buffer = '';
    this.child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      buffer += chunk;
      let newline = buffer.indexOf('\n');
      while (newline >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + 1);
        if (line.trim()) this.lines.push(JSON.parse(line) as DriverLine);
        newline = buffer.indexOf('\n');
        for (const listener of this.#listeners) listener();
      }
    });
    this.child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr += chunk;
    });
    this.exited = new Promise((resolve) => {
      this.child.on('close', (code, signal) => {
        this.#gone = true;
        for (const listener of this.#listeners) listener();
        resolve({ code, signal });
      });
    });
  }

  /** Resolves when a line satisfying `predicate` has arrived; rejects if the process exits first. */
  waitFor(predicate: (line: DriverLine) => boolean): Promise<DriverLine> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.lines.find(predicate);
        if (found) {
          this.#listeners = this.#listeners.filter((fn) => fn !== check);
          resolve(found);
        } else if (this.#gone) {
          this.#listeners = this.#listeners.filter((fn) => fn !== check);
          const last = JSON.stringify(this.lines.slice(-3));
          reject(
            new Error(
              `driver exited before the line arrived; its last lines: ${last}; stderr: ${this.stderr.slice(-2000)}`,
            ),
          );
        }
      };
      this.#listeners.push(check);
      check();
    });
  }

  get acks(): [string, number][] {
    return this.lines.flatMap((line) => (line.ack ? [line.ack] : []));
  }

  get workers(): number | undefined {
    return this.lines.find((line) => line.workers !== undefined)?.workers;
  }

  get rootId(): string | undefined {
    return this.lines.find((line) => line.rootId)?.rootId;
  }

  get result(): DriverLine['result'] {
    return this.lines.find((line) => line.result)?.result;
  }

  get error(): DriverLine['error'] {
    return this.lines.find((line) => line.error)?.error;
  }
}
