// The benchmarks' PostgreSQL: a throwaway cluster on loopback (scripts/pg-cluster.mjs), or
// the server IO_HARNESS_BENCH_POSTGRES names; and a fresh database of its own for each run.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { startCluster } from '../../scripts/pg-cluster.mjs';

/** The server to measure on, and how to stop it when the bench made it. */
export async function benchServer(settings = { synchronous_commit: 'off' }) {
  const given = process.env.IO_HARNESS_BENCH_POSTGRES;
  if (given) return { url: given, stop() {} };
  const cluster = await startCluster({ prefix: 'io-harness-bench-pg-', settings });
  return { url: cluster.url, stop: () => cluster.stop() };
}

/** An empty database on `server`, by URL. */
export async function freshDatabase(server) {
  const name = `bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(server);
  url.pathname = `/${name}`;
  return url.toString();
}
