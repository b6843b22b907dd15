// node bench/before-after.mjs <baseline checkout> [rounds] — runs the step and fan-out
// benchmarks of this checkout and of another (built: `npm run build` there) alternately,
// `rounds` times each (default 3), and prints each figure's median per build and their
// ratio. Each build runs its own benchmark files (their internal imports follow its
// layout); alternating the builds spreads the machine's drift over both.
import { spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const baseline = process.argv[2];
if (!baseline) {
  console.error('usage: node bench/before-after.mjs <baseline checkout, built> [rounds]');
  process.exit(2);
}
const rounds = Number(process.argv[3] ?? 3);
const here = resolve(fileURLToPath(new URL('..', import.meta.url)));
/** Which figures of each benchmark's JSON line to compare: lower is better for all of them. */
const benches = [
  {
    name: 'sequential-steps',
    args: [],
    figures: { warmTreeMs: (r) => median(r.warmTreeMs), warmRatio: (r) => r.warmRatio },
  },
  { name: 'workspace-step', args: [], figures: { p50Ms: (r) => r.p50Ms, p50VsPlain: (r) => r.p50VsPlain } },
  { name: 'wide-fanout', args: ['100'], figures: { treeWallMs: (r) => r.tree.wallMs, ratio: (r) => r.ratio } },
];

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

const trees = { before: resolve(baseline), after: here };

const results = { before: {}, after: {} };
for (let round = 0; round < rounds; round++) {
  for (const build of round % 2 === 0 ? ['before', 'after'] : ['after', 'before']) {
    for (const bench of benches) {
      const out = spawnSync(process.execPath, [join(trees[build], 'bench', `${bench.name}.mjs`), ...bench.args], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      if (out.status !== 0) throw new Error(`${bench.name} (${build}) failed with status ${out.status}`);
      const line = JSON.parse(out.stdout.trim().split('\n').pop());
      for (const [figure, read] of Object.entries(bench.figures)) {
        const key = `${bench.name} ${figure}`;
        results[build][key] = [...(results[build][key] ?? []), read(line)];
      }
    }
  }
}
for (const key of Object.keys(results.after)) {
  const before = median(results.before[key]);
  const after = median(results.after[key]);
  console.log(
    JSON.stringify({
      figure: key,
      before: results.before[key],
      after: results.after[key],
      medianBefore: before,
      medianAfter: after,
      afterOverBefore: +(after / before).toFixed(3),
    }),
  );
}
