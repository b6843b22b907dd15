// Fan-out: 1,000 agents, 3 steps each, a scripted model with 200 ms latency, at a
// given concurrency. Prints wall time over the ideal ceil(1000 / C) x 3 x 200 ms, for a
// cold thread pool (every slot's thread starts during the run) and a warm one
// (supervisor.warm(C) before the run), with peak RSS and RSS per live actor (peak minus
// the RSS before the run, over C).
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Store, Supervisor } from 'io-harness';
import { tempDir } from './support/temp.mjs';

const concurrency = Number(process.argv[2] ?? 16);
const children = Number(process.env.BENCH_AGENTS ?? 1000);
const steps = 3;
const latencyMs = Number(process.env.BENCH_LATENCY_MS ?? 200);
const idealMs = Math.ceil(children / concurrency) * steps * latencyMs;

async function once(warm) {
  const store = await Store.open(join(tempDir('io-harness-bench-'), 'runs.db'));
  const supervisor = await Supervisor.start(store, { maxConcurrentAgents: concurrency, maxTotalAgents: children });
  const before = process.memoryUsage().rss;
  if (warm) await supervisor.warm(concurrency);
  let peak = process.memoryUsage().rss;
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
  return {
    pool: warm ? 'warm' : 'cold',
    finished,
    wallMs: Math.round(wallMs),
    ratio: +(wallMs / idealMs).toFixed(3),
    peakRssMb: +(peak / 2 ** 20).toFixed(1),
    rssPerActorMb: +((peak - before) / 2 ** 20 / concurrency).toFixed(2),
  };
}

const cold = await once(false);
const warm = await once(true);
console.log(JSON.stringify({ bench: 'fanout', agents: children, concurrency, steps, latencyMs, idealMs, cold, warm }));
