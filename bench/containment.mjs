// The wall time containment adds to a command: `true` run 200 times on each rung this
// host offers (bubblewrap with the Landlock helper, the helper under unshare, namespaces
// with setpriv) beside the same command spawned plainly (the direct executor, which puts
// it in a PID namespace of its own) in the same process, alternated. Prints p50 and p99
// of each, and each rung's p50 over the plain one's.
import { performance } from 'node:perf_hooks';
import { Policy } from 'io-harness';
import { ContainedExecutor } from '../dist/runtime/exec/containment/contained.js';
import { hostRungs } from '../dist/runtime/exec/containment/rungs.js';
import { directExecutor } from '../dist/runtime/exec/executor.js';
import { commandEnvironment } from '../dist/runtime/exec/run-command.js';
import { tempDir } from './support/temp.mjs';

const RUNS = Number(process.env.BENCH_RUNS ?? 200);
const root = tempDir('io-harness-bench-ws-');
const env = commandEnvironment();
const host = hostRungs();
const executors = { plain: directExecutor };
for (const rung of ['bubblewrap', 'landlock', 'namespaces']) {
  if (!host[rung].ok) {
    console.error(`${rung}: not on this host (${host[rung].reason})`);
    continue;
  }
  executors[rung] = new ContainedExecutor(directExecutor, {
    sandbox: { access: 'workspace-write', writableRoots: [], rung, caps: {} },
    root,
    policy: Policy.default(),
  });
}
const times = Object.fromEntries(Object.keys(executors).map((name) => [name, []]));
const request = { argv: ['true'], purpose: 'exec', cwd: root, timeoutMs: 10_000, outputLimit: 1024, env };
for (let i = 0; i < RUNS + 10; i++) {
  for (const [name, executor] of Object.entries(executors)) {
    const start = performance.now();
    const result = await executor.run(request);
    const ms = performance.now() - start;
    if (result.exitStatus !== 0) throw new Error(`${name}: true exited ${result.exitStatus}: ${result.stderr}`);
    if (i >= 10) times[name].push(ms);
  }
}
for (const executor of Object.values(executors)) await executor.close?.();
const pct = (values, p) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))];
const plain = pct(times.plain, 0.5);
const rungs = Object.fromEntries(
  Object.entries(times).map(([name, values]) => [
    name,
    {
      p50Ms: +pct(values, 0.5).toFixed(2),
      p99Ms: +pct(values, 0.99).toFixed(2),
      overPlain: +(pct(values, 0.5) / plain).toFixed(2),
    },
  ]),
);
console.log(JSON.stringify({ bench: 'containment', runs: RUNS, rungs }));
