/**
 * Whether a lease owner's process is still there. A dead owner's lease is taken at
 * once; only what this cannot answer (another host, no pid) falls back to the ttl.
 */
import { createHash } from 'node:crypto';
import { readFileSync, readlinkSync } from 'node:fs';
import { hostname } from 'node:os';

export type Liveness = 'alive' | 'dead' | 'unknown';

/**
 * Where a pid means one process: the host's name, tagged on Linux with a digest of the
 * kernel's boot id and this process's pid namespace. Two machines (or containers) that
 * share a name, and one machine after a reboot, are different hosts, so a pid that is
 * not running here never takes a lease held over there: only its ttl does.
 */
/** The name alone, as leases written before hosts were tagged name them: still this host. */
const NAME = hostname();

export const HOST = hostIdentity();

function hostIdentity(): string {
  const name = NAME;
  let boot = '';
  let namespace = '';
  try {
    boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    // Not Linux: the name is all there is.
  }
  try {
    namespace = readlinkSync('/proc/self/ns/pid');
  } catch {
    // No namespaces to tell apart.
  }
  if (boot === '' && namespace === '') return name;
  return `${name}#${createHash('sha256').update(`${boot}\n${namespace}`).digest('hex').slice(0, 8)}`;
}

/**
 * Whether the process `pid` on `host` is there, asked from `here` (the host the asker names
 * itself: {@link HOST} unless a supervisor was given another name). Only a lease held on
 * the asker's own host can be answered by its pid.
 */
export function processLiveness(pid: number | null, host: string | null, here: string = HOST): Liveness {
  const local = host === here || (here === HOST && host === NAME);
  if (pid === null || host === null || !local) return 'unknown';
  try {
    process.kill(pid, 0);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ESRCH') return 'dead';
    if (code === 'EPERM') return 'alive';
    return 'unknown';
  }
  // A killed child its parent has not reaped yet still answers kill(pid, 0).
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    if (state === 'Z' || state === 'X') return 'dead';
  } catch {
    // No /proc (not Linux): kill(pid, 0) is all we have.
  }
  return 'alive';
}
