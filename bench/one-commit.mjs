// One step commit at a time on PostgreSQL, on the main thread (`store.call`: a transaction
// of its own, committed alone), on a throwaway cluster (or IO_HARNESS_BENCH_POSTGRES):
// the median and p90 of 800 commits after 300 warm, one connection. What one commit's
// round trips cost, with no group commit and no thread between.
import { performance } from 'node:perf_hooks';
import { PostgresStore } from '../dist/store/postgres/index.js';
import { benchServer, freshDatabase } from './support/postgres.mjs';
import { rootInput, stepInput } from './support/rows.mjs';

const WARM = 300;
const TIMED = 800;
const cluster = await benchServer();
try {
  const store = await PostgresStore.open(await freshDatabase(cluster.url), { max: 1 });
  const { generation } = await store.call('createRoot', rootInput('r', 'bench'));
  const fence = { runId: 'r', generation, owner: 'bench' };
  const times = [];
  for (let seq = 1; seq <= WARM + TIMED; seq++) {
    const start = performance.now();
    await store.call('commitStep', stepInput(fence, seq));
    if (seq > WARM) times.push(performance.now() - start);
  }
  await store.close();
  times.sort((a, b) => a - b);
  const at = (share) => +(times[Math.floor(times.length * share)] ?? 0).toFixed(3);
  console.log(JSON.stringify({ bench: 'one-commit', commits: TIMED, medianMs: at(0.5), p90Ms: at(0.9) }));
} finally {
  cluster.stop();
}
