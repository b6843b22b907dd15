// node bench/cold-start-ab.mjs <baseline checkout, built> [passes] — the newcomer's one-tool
// program (support/hello-agent.mjs: import, store open, one runWith, exit) as a fresh process
// from this checkout and from the baseline, alternately (each pass starting with the other
// build), against one model server; prints each build's median wall from spawn to exit,
// threaded and with `isolation: 'in-process'`, and their ratio. Alternating spreads the
// machine's drift over both builds.
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { tempDir } from './support/temp.mjs';

const baseline = process.argv[2];
if (!baseline) {
  console.error('usage: node bench/cold-start-ab.mjs <baseline checkout, built> [passes]');
  process.exit(2);
}
const passes = Number(process.argv[3] ?? 15);
const here = resolve(fileURLToPath(new URL('..', import.meta.url)));
const builds = { baseline: resolve(baseline), current: here };
const server = spawn(process.execPath, [join(here, 'bench/support/hello-server.mjs')], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
const [line] = await once(server.stdout, 'data');
const url = String(line).trim();

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const figures = {};
for (const isolation of ['thread', 'in-process']) {
  const walls = { baseline: [], current: [] };
  for (let pass = 0; pass < passes; pass++) {
    const order = pass % 2 === 0 ? ['baseline', 'current'] : ['current', 'baseline'];
    for (const build of order) {
      const dir = tempDir('io-harness-bench-');
      const start = performance.now();
      const out = spawnSync(
        process.execPath,
        [
          join(builds[build], 'bench/support/hello-agent.mjs'),
          url,
          dir,
          ...(isolation === 'thread' ? [] : [isolation]),
        ],
        { encoding: 'utf8' },
      );
      walls[build].push(performance.now() - start);
      if (out.status !== 0) throw new Error(`${build}: ${out.stderr}`);
    }
  }
  const baselineMs = median(walls.baseline);
  const currentMs = median(walls.current);
  figures[isolation] = {
    baselineMs: +baselineMs.toFixed(1),
    currentMs: +currentMs.toFixed(1),
    ratio: +(currentMs / baselineMs).toFixed(3),
  };
}
server.kill('SIGTERM');
console.log(JSON.stringify({ bench: 'cold-start-ab', passes, baseline: builds.baseline, ...figures }));
