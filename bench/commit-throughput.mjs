// Step commits per second through the store actor from 1, 16 and 64 concurrent actors
// (each a worker thread awaiting its own commits), beside raw better-sqlite3: the same
// rows, one transaction per step, on the main thread, in the same run. Then the same on
// PostgreSQL (a throwaway cluster on loopback, or IO_HARNESS_BENCH_POSTGRES): through the
// store actor, beside the same rows written by the same statements over one pg
// connection, one transaction per step, on the main thread. The cluster commits with
// synchronous_commit off, as SQLite's NORMAL does: a crash of the process loses nothing,
// a loss of power may lose the last commits. Last, 16 actors on PostgreSQL through one,
// two and four store actors (as many hosts), each tree its own.
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { MessageChannel, Worker } from 'node:worker_threads';
import { StoreClient, startStoreWorker } from '../dist/actors/store.js';
import { PostgresStore } from '../dist/store/postgres/index.js';
import { openWriter } from '../dist/store/sqlite/schema.js';
import { sqliteWriter } from '../dist/store/sqlite/writer.js';
import { benchServer, freshDatabase } from './support/postgres.mjs';
import { rootInput, stepInput } from './support/rows.mjs';
import { tempDir } from './support/temp.mjs';

const TOTAL = Number(process.env.BENCH_COMMITS ?? 12_000);
const fresh = () => join(tempDir('io-harness-bench-'), 'runs.db');

function raw() {
  const db = openWriter(fresh());
  const writer = sqliteWriter(db);
  const { generation } = writer.call('createRoot', rootInput('raw', 'bench'));
  const fence = { runId: 'raw', generation, owner: 'bench' };
  const commit = db.transaction((seq) => writer.call('commitStep', stepInput(fence, seq)));
  const start = performance.now();
  for (let seq = 1; seq <= TOTAL; seq++) commit.immediate(seq);
  const seconds = (performance.now() - start) / 1000;
  db.close();
  return TOTAL / seconds;
}

/**
 * Commits per second from `actors` actors, each on a tree of its own, through `hosts` store
 * actors (on PostgreSQL each one a host's: its own connection), the actors dealt among them.
 */
async function throughActor(actors, postgres = null, total = TOTAL, hosts = 1) {
  const path = postgres ? '' : fresh();
  if (!postgres) openWriter(path).close();
  const target = postgres ? { kind: 'postgres', ...postgres } : { kind: 'sqlite', path, synchronous: 'NORMAL' };
  const storeWorkers = [];
  for (let h = 0; h < hosts; h++) storeWorkers.push(await startStoreWorker({ target, killAt: null }));
  const main = new StoreClient(storeWorkers[0]);
  const steps = Math.ceil(total / actors);
  const workers = [];
  for (let i = 0; i < actors; i++) {
    const runId = `run-${i}`;
    const { generation } = await main.call('createRoot', rootInput(runId, 'bench'));
    const channel = new MessageChannel();
    const storeWorker = storeWorkers[i % hosts];
    storeWorker.postMessage({ type: 'attach', port: channel.port1 }, [channel.port1]);
    const worker = new Worker(new URL('./support/commit-actor.mjs', import.meta.url), {
      workerData: { port: channel.port2, fence: { runId, generation, owner: 'bench' }, steps },
      transferList: [channel.port2],
    });
    await new Promise((resolve) => worker.once('message', resolve));
    workers.push(worker);
  }
  const start = performance.now();
  await Promise.all(
    workers.map(
      (worker) =>
        new Promise((resolve) => {
          worker.once('message', resolve);
          worker.postMessage('go');
        }),
    ),
  );
  const seconds = (performance.now() - start) / 1000;
  await Promise.all(workers.map((worker) => worker.terminate()));
  await Promise.all(storeWorkers.map((storeWorker) => storeWorker.terminate()));
  return (steps * actors) / seconds;
}

const results = [];
for (const actors of [1, 16, 64]) {
  const baseline = raw();
  const actor = await throughActor(actors);
  results.push({
    actors,
    actorPerSecond: Math.round(actor),
    rawPerSecond: Math.round(baseline),
    ratio: +(actor / baseline).toFixed(2),
  });
}

/** A database of its own on the bench's server. */

/** The same rows by the same statements, one transaction per step, awaited on the main thread. */
async function rawPostgres(url, total) {
  const store = await PostgresStore.open(url, { max: 1 });
  const { generation } = await store.call('createRoot', rootInput('raw', 'bench'));
  const fence = { runId: 'raw', generation, owner: 'bench' };
  const start = performance.now();
  for (let seq = 1; seq <= total; seq++) await store.call('commitStep', stepInput(fence, seq));
  const seconds = (performance.now() - start) / 1000;
  await store.close();
  return total / seconds;
}

let postgres = null;
let cluster = null;
try {
  cluster = await benchServer();
  const server = cluster.url;
  // Fewer commits: PostgreSQL's are round trips on loopback, not calls into a library.
  const total = Number(process.env.BENCH_PG_COMMITS ?? 3_000);
  postgres = { commits: total, results: [] };
  for (const actors of [1, 16, 64]) {
    const baseline = await rawPostgres(await freshDatabase(server), total);
    const actor = await throughActor(actors, { connectionString: await freshDatabase(server) }, total);
    const sqliteActor = results.find((result) => result.actors === actors)?.actorPerSecond ?? null;
    postgres.results.push({
      actors,
      actorPerSecond: Math.round(actor),
      rawPgPerSecond: Math.round(baseline),
      ratioToRawPg: +(actor / baseline).toFixed(2),
      ratioToSqliteActor: sqliteActor ? +(actor / sqliteActor).toFixed(2) : null,
    });
  }
  // Several hosts, each its own store actor and connection, 16 actors on trees of their own
  // dealt among them: what one host's commits leave to another's.
  postgres.hosts = [];
  for (const hosts of [1, 2, 4]) {
    const rate = await throughActor(16, { connectionString: await freshDatabase(server) }, total, hosts);
    postgres.hosts.push({ hosts, actors: 16, perSecond: Math.round(rate) });
  }
} catch (error) {
  postgres = { skipped: `no PostgreSQL to measure: ${error.message}` };
} finally {
  cluster?.stop();
}
console.log(JSON.stringify({ bench: 'commit-throughput', commits: TOTAL, results, postgres }));
