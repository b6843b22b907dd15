// Fan-out: 1,000 agents, 3 steps each, a scripted model with 200 ms latency, at a
// given concurrency. Prints wall time over the ideal ceil(1000 / C) x 3 x 200 ms, peak
// RSS and RSS per live actor (peak minus the RSS before the run, over C).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Store, Supervisor } from '../dist/index.js';

const concurrency = Number(process.argv[2] ?? 16);
const children = Number(process.env.BENCH_AGENTS ?? 1000);
const steps = 3;
const latencyMs = Number(process.env.BENCH_LATENCY_MS ?? 200);
const store = await Store.open(join(mkdtempSync(join(tmpdir(), 'io-harness-bench-')), 'runs.db'));
const supervisor = await Supervisor.start(store, { maxConcurrentAgents: concurrency, maxTotalAgents: children });
const before = process.memoryUsage().rss;
let peak = before;
const sampler = setInterval(() => {
  peak = Math.max(peak, process.memoryUsage().rss);
}, 50);
const start = performance.now();
const result = await supervisor.run({
  task: 'fan out',
  provider: {
    kind: 'module',
    module: fileURLToPath(new URL('./support/fanout-model.mjs', import.meta.url)),
    options: { children, steps, latencyMs },
  },
}).result;
const wallMs = performance.now() - start;
clearInterval(sampler);
await supervisor.close();
const finished = store.runs(result.rootId).filter((run) => run.status === 'finished').length;
store.close();
const idealMs = Math.ceil(children / concurrency) * steps * latencyMs;
console.log(
  JSON.stringify({
    bench: 'fanout',
    agents: children,
    concurrency,
    finished,
    wallMs: Math.round(wallMs),
    idealMs,
    ratio: +(wallMs / idealMs).toFixed(3),
    peakRssMb: +(peak / 2 ** 20).toFixed(1),
    rssPerActorMb: +((peak - before) / 2 ** 20 / concurrency).toFixed(2),
  }),
);
