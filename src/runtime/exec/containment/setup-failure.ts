/**
 * What a sandbox says when it could not start a command (its setup failed, not the
 * command), and whether that failure was a race the run may simply try again: a path
 * masked when the command was wrapped (a store's journal, removed by SQLite as another
 * handle on that store closed) gone before bubblewrap mounted over it, which it then
 * cannot create in a read-only directory; or a protected path's mount point, removed by
 * another run's end on the same workspace, which neither bubblewrap nor the helper mounts
 * (the helper fails rather than leave the path writable).
 */
import type { CommandResult } from '../run-command.js';
import { present } from './paths.js';
import type { RungName } from './rungs.js';

/** The first line of what a sandbox said when it could not start a command, or null when the command itself ran. */
export function setupFailure(rung: RungName, result: CommandResult): string | null {
  if (!result.started || result.exitStatus === null) return null;
  const first = result.stderr.split('\n')[0] ?? '';
  // util-linux's unshare says this, and exits 1, when its command was killed by a signal: the command ran.
  if (first.startsWith('unshare: sigprocmask unblock failed')) return null;
  const prefixes =
    rung === 'bubblewrap' ? ['bwrap: ', 'landlock-exec: '] : ['unshare: ', 'landlock-exec: ', 'setpriv: '];
  return [1, 125, 127].includes(result.exitStatus) && prefixes.some((prefix) => first.startsWith(prefix))
    ? first
    : null;
}

/** How often a command is wrapped and started when the sandbox's setup lost a race with a masked path going. */
export const SETUP_ATTEMPTS = 3;

/** Whether `failed` (a setup failure) names one of `masked` that is gone now: wrapped again, it is hidden or protected anew. */
export function lostMaskRace(failed: string, masked: readonly string[]): boolean {
  return masked.some((path) => failed.includes(path) && !present(path));
}
