// What the first agent on a thread costs beside later ones: 20 one-agent runs back to back
// in one process, on a model served over loopback HTTP by a process of its own (so the
// HTTP client is loaded and used as in production). With shared isolation on one thread
// the thread and its modules are paid once; with isolation 'thread' and idle threads
// ended at once (idleThreadMs: 0) every agent starts a thread of its own, as one thread
// per agent did. Prints, for each, the CPU (all threads of this process) and wall of the
// first run (Supervisor.start included) and the median of the others, and the RSS.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { OpenAI, Store, Supervisor } from 'io-harness';

const RUNS = Number(process.env.BENCH_RUNS ?? 20);
const server = spawn(
  process.execPath,
  [fileURLToPath(new URL('./support/wide-server.mjs', import.meta.url)), '0', '0'],
  {
    stdio: ['ignore', 'pipe', 'inherit'],
  },
);
const [line] = await once(server.stdout, 'data');
const provider = OpenAI.create({ model: 'scripted', baseUrl: `${String(line).trim()}/v1`, apiKey: 'bench-key' });

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

async function measure(options) {
  const dir = mkdtempSync(join(tmpdir(), 'io-harness-bench-'));
  const store = await Store.open(join(dir, 'runs.db'));
  const runs = [];
  let cpu = process.cpuUsage();
  let wall = performance.now();
  const supervisor = await Supervisor.start(store, options);
  for (let i = 0; i < RUNS; i++) {
    const result = await supervisor.run({ task: 'answer', provider }).result;
    if (result.status !== 'finished') throw new Error(`run ${i} ended ${result.status}`);
    const spent = process.cpuUsage(cpu);
    runs.push({
      cpuMs: (spent.user + spent.system) / 1000,
      wallMs: performance.now() - wall,
      rssMb: process.memoryUsage().rss / 2 ** 20,
    });
    cpu = process.cpuUsage();
    wall = performance.now();
  }
  await supervisor.close();
  store.close();
  rmSync(dir, { recursive: true, force: true });
  const rest = runs.slice(1);
  return {
    firstCpuMs: +runs[0].cpuMs.toFixed(1),
    laterCpuMs: +median(rest.map((run) => run.cpuMs)).toFixed(1),
    firstWallMs: +runs[0].wallMs.toFixed(1),
    laterWallMs: +median(rest.map((run) => run.wallMs)).toFixed(1),
    rssAfterFirstMb: +runs[0].rssMb.toFixed(1),
    rssAfterLastMb: +runs.at(-1).rssMb.toFixed(1),
  };
}

const shared = await measure({ threads: 1 });
const thread = await measure({ isolation: 'thread', idleThreadMs: 0 });
server.kill('SIGTERM');
console.log(JSON.stringify({ bench: 'first-agent', runs: RUNS, shared, thread }));
