/**
 * One id per test run, so the stores the tests make (under the temp directory, named by
 * it) can all be removed when the run ends, and no other run's are. A throwaway
 * PostgreSQL cluster for the tests that need one, unless IO_HARNESS_TEST_POSTGRES names a
 * server already; when none can be started, the reason is kept for those tests to fail on.
 *
 * The id names the run's process, so a run killed before its teardown (its directories
 * and its cluster left behind) is swept by the next run's setup once that process is gone.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Cluster, ERROR_VARIABLE, startTestCluster, URL_VARIABLE } from './postgres.js';

/** A run's directories: `io-harness-test-<id>-…` (stores) and `io-harness-pg-<id>-…` (its cluster), the id `p<pid>r<hex>`. */
const LEFT_BY_RUN = /^io-harness-(test|pg)-p(\d+)r[0-9a-f]{8}-/;

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Removes what runs whose process has gone left in the temp directories, stopping a cluster's server first. */
function sweepDeadRuns(): void {
  for (const dir of new Set([tmpdir(), '/tmp'])) {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      continue;
    }
    for (const name of names) {
      const match = LEFT_BY_RUN.exec(name);
      if (!match || running(Number(match[2]))) continue;
      const path = join(dir, name);
      const postmaster = join(path, 'data', 'postmaster.pid');
      if (match[1] === 'pg' && existsSync(postmaster)) {
        const [first, data] = readFileSync(postmaster, 'utf8').split('\n');
        const pid = Number(first);
        // Only that cluster's server: a postgres process, its pid file naming this data directory.
        const comm = existsSync(`/proc/${pid}/comm`) ? readFileSync(`/proc/${pid}/comm`, 'utf8').trim() : '';
        if (Number.isInteger(pid) && pid > 0 && comm.startsWith('postgres') && data === join(path, 'data')) {
          try {
            process.kill(pid, 'SIGQUIT');
          } catch {
            // Gone already.
          }
        }
      }
      rmSync(path, { recursive: true, force: true });
    }
  }
}

export default async function setup(): Promise<() => void> {
  // Each project of vitest.config.ts runs the global setup: the first one's run, and server, serve all.
  if (process.env.IO_HARNESS_TEST_RUN) return () => undefined;
  sweepDeadRuns();
  const id = `p${process.pid}r${randomBytes(4).toString('hex')}`;
  process.env.IO_HARNESS_TEST_RUN = id;
  let cluster: Cluster | null = null;
  if (!process.env[URL_VARIABLE]) {
    try {
      cluster = await startTestCluster();
      process.env[URL_VARIABLE] = cluster.url;
    } catch (error) {
      process.env[ERROR_VARIABLE] = (error as Error).message;
    }
  }
  return () => {
    cluster?.stop();
    const prefix = `io-harness-test-${id}-`;
    for (const name of readdirSync(tmpdir())) {
      if (name.startsWith(prefix)) rmSync(join(tmpdir(), name), { recursive: true, force: true });
    }
  };
}
