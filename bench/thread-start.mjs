// What an agent thread's start costs: a fresh worker thread imports the agent worker's
// entry (dist/actors/agent-worker.js) and says so, `BENCH_PASSES` (11) times one after the
// other; prints the median and the spread, in milliseconds, beside an empty worker's start
// (the thread itself, measured the same way in the same run), and beside a thread that has
// also loaded what its first model call needs (the vendors' HTTP client), which the agent
// worker starts loading as the thread starts.
// `node bench/thread-start.mjs` (after `npm run build`).
import { Worker } from 'node:worker_threads';

const PASSES = Number(process.env.BENCH_PASSES ?? 11);
const entry = new URL('../dist/actors/agent-worker.js', import.meta.url).href;
const http = new URL('../dist/runtime/providers/http.js', import.meta.url).href;

async function start(body) {
  const began = performance.now();
  const worker = new Worker(`${body}.then(() => require('node:worker_threads').parentPort.postMessage('up'))`, {
    eval: true,
  });
  await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  const ms = performance.now() - began;
  await worker.terminate();
  return ms;
}

const arms = {
  empty: 'Promise.resolve()',
  agent: `import(${JSON.stringify(entry)})`,
  withClient: `import(${JSON.stringify(entry)}).then(() => import(${JSON.stringify(http)})).then((http) => http.loadHttpClient())`,
};
const times = { empty: [], agent: [], withClient: [] };
for (let pass = 0; pass < PASSES; pass++)
  for (const [name, body] of Object.entries(arms)) times[name].push(await start(body));
const summary = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    medianMs: +sorted[Math.floor(sorted.length / 2)].toFixed(1),
    minMs: +sorted[0].toFixed(1),
    maxMs: +sorted.at(-1).toFixed(1),
  };
};
console.log(
  JSON.stringify({
    bench: 'thread-start',
    passes: PASSES,
    empty: summary(times.empty),
    agent: summary(times.agent),
    withClient: summary(times.withClient),
  }),
);
