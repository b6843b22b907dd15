// One pass of the wide fan-out benchmark for io-harness, in a fresh process: a supervisor
// is started (cold: no thread is up before it) and the tree runs to its end, every step
// committed. Prints the wall time from before Supervisor.start to the settled tree, the
// CPU the process spent in that time (every thread), the peak RSS, and how many runs finished.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { OpenAI, Store, Supervisor } from 'io-harness';

const [url, childrenArg, isolation] = process.argv.slice(2);
const children = Number(childrenArg);
const dir = mkdtempSync(join(tmpdir(), 'io-harness-bench-'));
const store = await Store.open(join(dir, 'runs.db'));
let peak = process.memoryUsage().rss;
const sampler = setInterval(() => {
  peak = Math.max(peak, process.memoryUsage().rss);
}, 20);
const start = performance.now();
const cpuBefore = process.cpuUsage();
const supervisor = await Supervisor.start(store, {
  maxConcurrentAgents: children,
  maxTotalAgents: children,
  isolation,
});
const result = await supervisor.run({
  task: 'fan out',
  provider: OpenAI.create({ model: 'scripted', baseUrl: `${url}/v1`, apiKey: 'bench-key' }),
}).result;
const wallMs = performance.now() - start;
const cpu = process.cpuUsage(cpuBefore);
clearInterval(sampler);
peak = Math.max(peak, process.memoryUsage().rss);
await supervisor.close();
const finished = store.runs(result.rootId).filter((run) => run.status === 'finished').length;
store.close();
rmSync(dir, { recursive: true, force: true });
const cpuMs = (cpu.user + cpu.system) / 1000;
console.log(JSON.stringify({ wallMs, cpuMs, peakRssMb: peak / 2 ** 20, finished }));
