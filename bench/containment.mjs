// The wall time containment adds to a command: `true` run 200 times on each rung this
// host offers (bubblewrap with the Landlock helper, the helper under unshare, namespaces
// with setpriv) beside the same command spawned plainly (the direct executor, which puts
// it in a PID namespace of its own) in the same process, alternated. Each rung twice: as
// before the rule of trust (nothing hidden), and with what a run now gets — a store in the
// workspace hidden with its three journals, two directories and a file pattern the policy
// denies reading hidden, the trusted binaries kept read-only (`<rung>+kept`). Prints p50
// and p99 of each, and each one's p50 over the plain one's.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Policy } from 'io-harness';
import { ContainedExecutor } from '../dist/runtime/exec/containment/contained.js';
import { keepStoreFiles } from '../dist/runtime/exec/containment/kept.js';
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
// The plain rungs' boundaries made now, while nothing is kept: they stay as before the rule of trust.
for (const executor of Object.values(executors)) executor.boundary?.();
// The same rungs with something to hide.
const kept = tempDir('io-harness-bench-kept-');
for (const dir of ['secrets', 'private', 'src']) mkdirSync(join(kept, dir));
for (let i = 0; i < 20; i++) writeFileSync(join(kept, 'src', `f${i}.pem`), 'x');
writeFileSync(join(kept, 'runs.db'), '');
writeFileSync(join(kept, 'runs.db-wal'), '');
writeFileSync(join(kept, 'runs.db-shm'), '');
keepStoreFiles(join(kept, 'runs.db'));
const denying = Policy.default().layer('app').denyRead('secrets').denyRead('private').denyRead('**/*.pem');
for (const rung of ['bubblewrap', 'landlock', 'namespaces']) {
  if (!host[rung].ok) continue;
  executors[`${rung}+kept`] = new ContainedExecutor(directExecutor, {
    sandbox: { access: 'workspace-write', writableRoots: [], rung, caps: {} },
    root: kept,
    policy: denying,
  });
}
const times = Object.fromEntries(Object.keys(executors).map((name) => [name, []]));
const request = { argv: ['true'], purpose: 'exec', cwd: root, timeoutMs: 10_000, outputLimit: 1024, env };
const keptRequest = { ...request, cwd: kept };
for (let i = 0; i < RUNS + 10; i++) {
  for (const [name, executor] of Object.entries(executors)) {
    const start = performance.now();
    const result = await executor.run(name.endsWith('+kept') ? keptRequest : request);
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
