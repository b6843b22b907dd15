// Wide fan-out, the peers' workload: a root spawns `children` agents at once (no cap
// below that), each makes 3 model calls at 200 ms latency (2 tool steps and an answer),
// every step committed; beside a raw Promise.all of fetch loops making the same calls
// (the root's first call, then the children's three each) with nothing durable. Each
// pass runs in a fresh process of its own, cold start included; the model is served over
// loopback HTTP by a third process. Prints the median wall and peak RSS of each, and the
// ratio of the medians. `node bench/wide-fanout.mjs 100` (or 1000); BENCH_ISOLATION=thread
// measures one thread per agent.
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

const children = Number(process.argv[2] ?? 100);
const latencyMs = Number(process.env.BENCH_LATENCY_MS ?? 200);
const passes = Number(process.env.BENCH_PASSES ?? 5);
const isolation = process.env.BENCH_ISOLATION ?? 'shared';
const here = (file) => fileURLToPath(new URL(file, import.meta.url));

const server = spawn(process.execPath, [here('./support/wide-server.mjs'), String(children), String(latencyMs)], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
const [line] = await once(server.stdout, 'data');
const url = String(line).trim();

function pass(file, ...args) {
  const out = spawnSync(process.execPath, [here(file), url, String(children), ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  if (out.status !== 0) throw new Error(`${file} failed with status ${out.status}`);
  return JSON.parse(out.stdout);
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};
const raw = [];
const tree = [];
for (let i = 0; i < passes; i++) {
  raw.push(pass('./support/wide-raw.mjs'));
  tree.push(pass('./support/wide-tree.mjs', isolation));
}
server.kill('SIGTERM');
const summary = (runs) => ({
  wallMs: Math.round(median(runs.map((run) => run.wallMs))),
  cpuMs: Math.round(median(runs.map((run) => run.cpuMs))),
  peakRssMb: Math.round(Math.max(...runs.map((run) => run.peakRssMb))),
  finished: Math.min(...runs.map((run) => run.finished)),
});
const rawSummary = summary(raw);
const treeSummary = summary(tree);
console.log(
  JSON.stringify({
    bench: 'wide-fanout',
    children,
    latencyMs,
    passes,
    isolation,
    raw: rawSummary,
    tree: treeSummary,
    ratio: +(treeSummary.wallMs / rawSummary.wallMs).toFixed(3),
    treeWalls: tree.map((run) => Math.round(run.wallMs)),
    rawWalls: raw.map((run) => Math.round(run.wallMs)),
  }),
);
