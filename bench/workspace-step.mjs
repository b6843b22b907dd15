// Per-step overhead of a workspace run with the model's latency excluded: a 200-file
// repository, a model that answers at once, and every step a read_file plus an edit_file
// (policy decisions, restore point on first touch, whole-file diff, the commit holding
// it). The baseline is the plain agent loop (one read_messages per step) in the same run.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Policy, Store, Supervisor, TaskContract } from 'io-harness';
import { percentile, stepGaps } from './support/gaps.mjs';
import { tempDir } from './support/temp.mjs';

const STEPS = Number(process.env.BENCH_STEPS ?? 1000);
const FILES = 200;

function repository() {
  const root = tempDir('io-harness-bench-repo-');
  mkdirSync(join(root, 'src'));
  for (let i = 0; i < FILES; i++) {
    const lines = [`// module ${i}`, 'export const version = 0;'];
    for (let j = 0; j < 60; j++) lines.push(`export function f${j}(x) {\n  return x * ${j} + ${i};\n}`);
    writeFileSync(join(root, 'src', `module-${String(i).padStart(3, '0')}.js`), `${lines.join('\n')}\n`);
  }
  return root;
}

async function measure(options) {
  const store = await Store.open(join(tempDir('io-harness-bench-'), 'runs.db'));
  const supervisor = await Supervisor.start(store);
  const marks = [];
  supervisor.observe((event) => {
    if (event.type === 'step-end') marks.push(performance.now());
  });
  const result = await supervisor.run(options).result;
  await supervisor.close();
  store.close();
  const gaps = stepGaps(marks, STEPS);
  const pct = (p) => percentile(gaps, p);
  return { status: result.status, p50: pct(50), p99: pct(99) };
}

const model = (name) => ({
  kind: 'module',
  module: fileURLToPath(new URL(`./support/${name}.mjs`, import.meta.url)),
  options: { steps: STEPS, files: FILES },
});
const plain = await measure({ task: 'loop', provider: model('loop-model') });
const workspace = await measure({
  contract: TaskContract.workspace('touch every module', repository()),
  provider: model('workspace-model'),
  policy: Policy.permissive(),
});
console.log(
  JSON.stringify({
    bench: 'workspace-step',
    steps: STEPS,
    files: FILES,
    status: workspace.status,
    p50Ms: +workspace.p50.toFixed(3),
    p99Ms: +workspace.p99.toFixed(3),
    plainP50Ms: +plain.p50.toFixed(3),
    plainP99Ms: +plain.p99.toFixed(3),
    p50VsPlain: +(workspace.p50 / plain.p50).toFixed(2),
  }),
);
