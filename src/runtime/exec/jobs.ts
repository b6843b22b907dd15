/**
 * Long-lived commands (shell_start): a command started in the background whose output
 * is kept, bounded, until polled. Killing a job kills everything it started, contained
 * the way runCommand contains a command (its PID namespace, else its process
 * group), so a dev server's children go with it even when they left its group.
 */
import { spawn } from 'node:child_process';
import { commandEnvironment, commandSpawnOptions, containedSpawn, killCommand, readCounted } from './run-command.js';

export interface Job {
  /** Output since the last poll (bounded; the cut stated), and whether it still runs. */
  poll(): string;
  /** Resolves when the job has ended, or after `ms`, whichever is first. */
  settle(ms: number): Promise<void>;
  kill(): void;
}

export function startJob(
  argv: readonly string[],
  cwd: string,
  limit: number,
  env: NodeJS.ProcessEnv = commandEnvironment(),
  bare = false,
  /** Called, when the job has ended, with what its wrapper reported on descriptor 3 (see CommandOptions.counted). */
  counted?: (report: string) => void,
): Job {
  const spawned = containedSpawn(argv, cwd, env, bare);
  let pending = '';
  let dropped = 0;
  let ended: string | null = null;
  if (!spawned.ok) return notStarted(spawned.error);
  const child = spawn(spawned.file, spawned.args, commandSpawnOptions(cwd, env, counted !== undefined));
  if (counted) void readCounted(child).then(counted);
  const keep = (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    const room = limit - pending.length;
    if (room <= 0) {
      dropped += text.length;
      return;
    }
    pending += text.slice(0, room);
    dropped += Math.max(0, text.length - room);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const done = new Promise<void>((resolve) => {
    child.once('error', (error) => {
      ended = `could not start: ${error.message}`;
      resolve();
    });
    child.once('close', (code, signal) => {
      ended = signal ? `killed by ${signal}` : `exited with status ${code}`;
      resolve();
    });
  });
  return {
    poll() {
      const cut = dropped > 0 ? `\n(${dropped} more characters were not kept)` : '';
      const out = `${ended === null ? 'running' : ended}\n--- output since the last poll:\n${pending}${cut}`;
      pending = '';
      dropped = 0;
      return out;
    },
    async settle(ms) {
      if (ended !== null || ms <= 0) return;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([done, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
      clearTimeout(timer);
    },
    kill() {
      if (ended !== null) return;
      killCommand(child.pid);
    },
  };
}

/** A job whose program could not be found: it ended before it began, and says why. */
/** A job that could not be started: its poll says why. */
export function notStarted(error: string): Job {
  return {
    poll: () => `could not start: ${error}\n--- output since the last poll:\n`,
    settle: async () => {},
    kill: () => {},
  };
}
