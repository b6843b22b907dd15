/**
 * One id per test run, so the stores the tests make (under the temp directory, named by
 * it) can all be removed when the run ends, and no other run's are. A throwaway
 * PostgreSQL cluster for the tests that need one, unless IO_HARNESS_TEST_POSTGRES names a
 * server already; when none can be started, the reason is kept for those tests to fail on.
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Cluster, ERROR_VARIABLE, startTestCluster, URL_VARIABLE } from './postgres.js';

export default async function setup(): Promise<() => void> {
  // Each project of vitest.config.ts runs the global setup: the first one's run, and server, serve all.
  if (process.env.IO_HARNESS_TEST_RUN) return () => undefined;
  const id = randomBytes(4).toString('hex');
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
