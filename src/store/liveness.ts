/**
 * Whether a lease owner's process is still there. A dead owner's lease is taken at
 * once; only what this cannot answer (another host, no pid) falls back to the ttl.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';

export type Liveness = 'alive' | 'dead' | 'unknown';

export const HOST = hostname();

export function processLiveness(pid: number | null, host: string | null): Liveness {
  if (pid === null || host === null || host !== HOST) return 'unknown';
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
