/**
 * Ends a long-lived command the harness spawned itself and speaks to over its stdio (an
 * MCP server), so that nothing it started is left running once the end returns.
 *
 * What is spawned is the rung's launcher (bubblewrap, unshare), not the command: its child
 * is the first process of the command's PID namespace. The launcher's end alone says
 * nothing about the namespace when the launcher was the one killed: it dies at once, and
 * the kernel tears the namespace down after it (the first process, killed by its parent's
 * death, waits in its exit for every other process of the namespace to be gone). So the
 * end waits for that first process too: once it is gone, or a zombie, the kernel has
 * released every other process of its namespace. Uncontained, the launcher is the
 * command, and its children are waited for the same way.
 *
 * The command is asked first (its stdin closed), then its namespace is killed from the
 * inside (the first process by its host pid, and the process group), then the launcher.
 * Each wait is bounded: what is still running past them is returned, never waited on.
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { childrenOf, killCommand } from './run-command.js';

/** How long an ended command is given at each stage. */
export interface EndBounds {
  /** After its stdin is closed, to exit on its own. */
  graceMs: number;
  /** After its namespace (or process group) is killed, for the kernel to finish. */
  killMs: number;
}

export const END_BOUNDS: EndBounds = { graceMs: 2_000, killMs: 5_000 };

/** A process as the host sees it: its pid and its start time, so that a reused pid is not mistaken for it. */
interface Known {
  pid: number;
  start: string;
}

/** The fields of /proc/<pid>/stat after the name (which is in parentheses and may hold spaces). */
function statFields(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

function known(pid: number): Known | null {
  const fields = statFields(pid);
  // The start time is the 22nd field of stat, the 20th after the name.
  return fields ? { pid, start: fields[19] ?? '' } : null;
}

/** Whether the process still runs: there, the same one, and not a zombie (nor dead, waiting to be released). */
function running(item: Known): boolean {
  const fields = statFields(item.pid);
  if (!fields || fields[19] !== item.start) return false;
  return fields[0] !== 'Z' && fields[0] !== 'X';
}

/**
 * Ends `child` and what it started (see the module's comment): resolves once the launcher
 * has exited and its first processes are gone, or with the host pids still running once
 * the bounds have passed.
 */
export async function endCommand(child: ChildProcess, bounds: EndBounds = END_BOUNDS): Promise<number[]> {
  const pid = child.pid;
  if (pid === undefined) return [];
  let exited = child.exitCode !== null || child.signalCode !== null;
  if (!exited) child.once('exit', () => (exited = true));
  // Known now, while the launcher still holds them: once it is reaped, its children are no one's.
  const first = childrenOf(pid)
    .map(known)
    .filter((item): item is Known => item !== null);
  const left = () => first.filter(running).map((item) => item.pid);
  const ended = async (ms: number): Promise<boolean> => {
    const until = Date.now() + ms;
    for (;;) {
      if (exited && left().length === 0) return true;
      if (Date.now() >= until) return false;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  try {
    child.stdin?.end();
  } catch {
    // already closed
  }
  if (await ended(bounds.graceMs)) return [];
  // Its namespace's first process, then its process group; the launcher only after them, so its end still means theirs.
  killCommand(pid);
  for (const item of first.filter(running)) {
    try {
      process.kill(item.pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
  if (await ended(bounds.killMs)) return [];
  if (!exited) child.kill('SIGKILL');
  if (await ended(Math.min(bounds.killMs, 1_000))) return [];
  return exited ? left() : [pid, ...left()];
}
