// Harness overhead per step with the model's latency excluded: one agent on a scripted
// model that answers at once, so the gap between two committed steps is all harness
// (context assembly, dispatch, the commit through the store actor, the event back).
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Store, Supervisor } from 'io-harness';
import { percentile, stepGaps } from './support/gaps.mjs';
import { tempDir } from './support/temp.mjs';

const STEPS = Number(process.env.BENCH_STEPS ?? 2000);
const store = await Store.open(join(tempDir('io-harness-bench-'), 'runs.db'));
const supervisor = await Supervisor.start(store);
const marks = [];
supervisor.observe((event) => {
  if (event.type === 'step-end') marks.push(performance.now());
});
const result = await supervisor.run({
  task: 'loop',
  provider: {
    kind: 'module',
    module: fileURLToPath(new URL('./support/loop-model.mjs', import.meta.url)),
    options: { steps: STEPS },
  },
}).result;
await supervisor.close();
store.close();
// Skip the warm-up (first 10% of steps: module loading, JIT).
const gaps = stepGaps(marks, STEPS);
const pct = (p) => percentile(gaps, p);
console.log(
  JSON.stringify({
    bench: 'step-overhead',
    steps: STEPS,
    status: result.status,
    p50Ms: +pct(50).toFixed(3),
    p99Ms: +pct(99).toFixed(3),
    meanMs: +(gaps.reduce((s, g) => s + g, 0) / gaps.length).toFixed(3),
  }),
);
