/**
 * One id per test run, so the stores the tests make (under the temp directory, named by
 * it) can all be removed when the run ends, and no other run's are. A throwaway
 * PostgreSQL cluster for the tests that need one, unless IO_HARNESS_TEST_POSTGRES names a
 * server already; when none can be started, the reason is kept for those tests to fail on.
 * The run says, once, which PostgreSQL it uses and, for the main suite, which Chromium and
 * which rung of containment: the host's own where it has them, else what the dev
 * dependencies ship (support/postgres.ts, support/chromium.ts).
 *
 * The id names the run's process, so a run killed before its teardown (its directories
 * and its cluster left behind) is swept by the next run's setup once that process is gone.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { describeChromium, testChromium } from './chromium.js';
import { type Cluster, ERROR_VARIABLE, startTestCluster, URL_VARIABLE } from './postgres.js';

/**
 * A run's directories: `io-harness-test-<id>-…` (stores) and `io-harness-pg-<id>-…` (its
 * cluster), the id `p<pid>n<namespace>r<hex>`: a pid means one process only within its pid
 * namespace, so only runs of this namespace are judged by it (another container's are left).
 */
const LEFT_BY_RUN = /^io-harness-(test|pg)-p(\d+)n([0-9a-f]{6})r[0-9a-f]{8}-/;

function pidNamespace(): string {
  let link = '';
  try {
    link = readlinkSync('/proc/self/ns/pid');
  } catch {
    // No namespaces to tell apart.
  }
  return createHash('sha256').update(link).digest('hex').slice(0, 6);
}

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
  const namespace = pidNamespace();
  // As root the cluster is made under /tmp, wherever TMPDIR points (scripts/pg-cluster.mjs).
  for (const dir of new Set([tmpdir(), ...(process.getuid?.() === 0 ? ['/tmp'] : [])])) {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      continue;
    }
    for (const name of names) {
      const match = LEFT_BY_RUN.exec(name);
      if (!match || match[3] !== namespace || running(Number(match[2]))) continue;
      const path = join(dir, name);
      try {
        sweep(path, match[1] === 'pg');
      } catch {
        // Not ours to stop or remove (another user's, under a shared /tmp): left.
      }
    }
  }
}

/** Stops the server of a cluster's directory, if one runs there, and removes the directory. */
function sweep(path: string, cluster: boolean): void {
  const postmaster = join(path, 'data', 'postmaster.pid');
  if (cluster && existsSync(postmaster)) {
    const [first, data] = readFileSync(postmaster, 'utf8').split('\n');
    const pid = Number(first);
    // Only that cluster's server: a live postgres whose command line names this data directory.
    let command = '';
    try {
      command = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      // Not running.
    }
    if (data === join(path, 'data') && /postgres/.test(command) && command.includes(join(path, 'data'))) {
      try {
        process.kill(pid, 'SIGQUIT');
      } catch {
        // Gone already.
      }
    }
  }
  rmSync(path, { recursive: true, force: true });
}

/** The line that names the run's PostgreSQL: the cluster's binaries, or the server named, or why there is none. */
async function postgresLine(cluster: Cluster | null): Promise<string> {
  if (cluster) {
    const { source, version, bin, user } = cluster.server;
    return `PostgreSQL: ${source} ${version} (${bin}${user ? `, run as ${user}` : ''})`;
  }
  const url = process.env[URL_VARIABLE];
  if (!url) return `PostgreSQL: none (${process.env[ERROR_VARIABLE]}); the tests that need it fail`;
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  try {
    await client.connect();
    const { rows } = await client.query<{ server_version: string }>('SHOW server_version');
    return `PostgreSQL: the server ${URL_VARIABLE} names (${rows[0]?.server_version})`;
  } catch (error) {
    return `PostgreSQL: the server ${URL_VARIABLE} names, which does not answer (${(error as Error).message})`;
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function chromiumLine(): Promise<string> {
  try {
    return describeChromium(await testChromium());
  } catch (error) {
    return `Chromium: none (${(error as Error).message}); the browser tests fail`;
  }
}

/** The rung a run with the default sandbox gets on this host, as the compiled package finds it. */
async function containmentLine(): Promise<string> {
  try {
    const { selectBackend } = await import('../../dist/index.js');
    const report = selectBackend({});
    const helper = report.landlockAbi === null ? '' : ` with the Landlock helper (ABI ${report.landlockAbi})`;
    const passed = report.passedOver.map(({ rung, reason }) => `${rung}: ${reason}`).join('; ');
    return `containment: ${report.rung}${helper}, file system ${report.filesystem}${passed ? `; passed over ${passed}` : ''}`;
  } catch (error) {
    return `containment: not known (${(error as Error).message})`;
  }
}

/**
 * The run's setup: its id, its PostgreSQL, and (with `browser` and `containment`) the
 * Chromium and the rung it says it uses; returns the teardown.
 */
export async function setupRun(say: { browser: boolean; containment: boolean }): Promise<() => void> {
  // Each project of vitest.config.ts runs the global setup: the first one's run, and server, serve all.
  if (process.env.IO_HARNESS_TEST_RUN) return () => undefined;
  sweepDeadRuns();
  const id = `p${process.pid}n${pidNamespace()}r${randomBytes(4).toString('hex')}`;
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
  const lines = [await postgresLine(cluster)];
  if (say.browser) lines.push(await chromiumLine());
  if (say.containment) lines.push(await containmentLine());
  console.log(lines.join('\n'));
  return () => {
    cluster?.stop();
    const prefix = `io-harness-test-${id}-`;
    for (const name of readdirSync(tmpdir())) {
      if (name.startsWith(prefix)) rmSync(join(tmpdir(), name), { recursive: true, force: true });
    }
  };
}

export default function setup(): Promise<() => void> {
  return setupRun({ browser: true, containment: true });
}
