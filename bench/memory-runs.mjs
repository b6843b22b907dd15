// Memory across runs: back-to-back runs of one agent in one process, each `STEPS` steps on
// a model that answers at once. Prints the process's RSS and the main thread's heap after
// each run (after a collection when run with --expose-gc), and the growth from the run
// after the warm-up to the last: a run that leaves something behind shows as steady growth.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Store, Supervisor } from 'io-harness';

const RUNS = Number(process.env.BENCH_RUNS ?? 50);
const STEPS = Number(process.env.BENCH_STEPS ?? 200);
const dir = mkdtempSync(join(tmpdir(), 'io-harness-bench-'));
const store = await Store.open(join(dir, 'runs.db'));
const supervisor = await Supervisor.start(store);
const provider = {
  kind: 'module',
  module: fileURLToPath(new URL('./support/loop-model.mjs', import.meta.url)),
  options: { steps: STEPS },
};
const samples = [];
for (let run = 0; run < RUNS; run++) {
  const result = await supervisor.run({ task: 'loop', provider }).result;
  if (result.status !== 'finished') throw new Error(`run ${run} ended ${result.status}`);
  globalThis.gc?.();
  const { rss, heapUsed } = process.memoryUsage();
  samples.push({ rssMb: +(rss / 2 ** 20).toFixed(1), heapMb: +(heapUsed / 2 ** 20).toFixed(1) });
}
await supervisor.close();
store.close();
rmSync(dir, { recursive: true, force: true });
const warm = samples[Math.min(4, samples.length - 1)];
const last = samples[samples.length - 1];
console.log(
  JSON.stringify({
    bench: 'memory-runs',
    runs: RUNS,
    steps: STEPS,
    rssMb: samples.map((s) => s.rssMb),
    heapMb: samples.map((s) => s.heapMb),
    rssGrowthAfterWarmupMb: +(last.rssMb - warm.rssMb).toFixed(1),
    heapGrowthAfterWarmupMb: +(last.heapMb - warm.heapMb).toFixed(1),
  }),
);
