// Where a step's commit on PostgreSQL spends its CPU: the server's (every postgres process
// of the bench's own cluster, read from /proc, so Linux only) and this process's (the
// writer and the `pg` client), per step, beside the wall time. One store actor's writer
// (PostgresBatchWriter) on the main thread commits the bench's step for `B` runs at once,
// batch after batch, as the store actor does under load: B = 1 (a lone commit) and B = 16.
// `node bench/commit-cpu.mjs` (BENCH_STEPS: steps timed per row, default 4,800).
import { readdirSync, readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { PostgresBatchWriter } from '../dist/store/postgres/batch.js';
import { PostgresStore } from '../dist/store/postgres/index.js';
import { benchServer, freshDatabase } from './support/postgres.mjs';
import { rootInput, stepInput } from './support/rows.mjs';

const STEPS = Number(process.env.BENCH_STEPS ?? 4_800);
const WARM = 200;
const TICK_MS = 10; // /proc counts CPU in clock ticks of 10 ms

/** CPU milliseconds used so far by every postgres process on this machine. */
function serverCpuMs() {
  let ticks = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (!readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('postgres')) continue;
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // Gone meanwhile.
    }
  }
  return ticks * TICK_MS;
}

async function measure(serverUrl, batch) {
  const url = await freshDatabase(serverUrl);
  const store = await PostgresStore.open(url, { max: 1 });
  const fences = [];
  for (let k = 0; k < batch; k++) {
    const runId = `run-${k}`;
    const { generation } = await store.call('createRoot', rootInput(runId, 'bench'));
    fences.push({ runId, generation, owner: 'bench' });
  }
  await store.close();
  const writer = await PostgresBatchWriter.open({ connectionString: url });
  const commit = async (seq) => {
    const done = await writer.run(fences.map((fence) => ({ op: 'commitStep', input: stepInput(fence, seq) })));
    if (!done.outcomes.every((outcome) => outcome.ok)) throw new Error(`a commit failed: ${JSON.stringify(done)}`);
  };
  const rounds = Math.ceil(STEPS / batch);
  for (let seq = 1; seq <= WARM; seq++) await commit(seq);
  const server0 = serverCpuMs();
  const client0 = process.cpuUsage();
  const start = performance.now();
  for (let seq = WARM + 1; seq <= WARM + rounds; seq++) await commit(seq);
  const wall = performance.now() - start;
  const client = process.cpuUsage(client0);
  const server = serverCpuMs() - server0;
  await writer.close();
  const steps = rounds * batch;
  return {
    batch,
    steps,
    wallMsPerStep: +(wall / steps).toFixed(3),
    serverCpuMsPerStep: +(server / steps).toFixed(3),
    clientCpuMsPerStep: +((client.user + client.system) / 1000 / steps).toFixed(3),
  };
}

const cluster = await benchServer();
try {
  const results = [];
  for (const batch of [1, 16]) results.push(await measure(cluster.url, batch));
  console.log(JSON.stringify({ bench: 'commit-cpu', results }));
} finally {
  cluster.stop();
}
