// The viewer's page load over a store of 1,000 trees, beside the same over a store of one,
// in the same run: the page's files and the tree list it reads first (what a browser
// fetches before it shows anything), over HTTP on loopback. p50 of 50 loads after 5 warm.
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Store, Supervisor } from 'io-harness';
import { viewer } from 'io-harness/viewer';
import { tempDir } from './support/temp.mjs';

const TREES = Number(process.env.BENCH_TREES ?? 1000);
const LOADS = 50;

async function storeOf(trees) {
  const store = await Store.open(join(tempDir('io-harness-bench-'), 'runs.db'));
  const supervisor = await Supervisor.start(store, { maxConcurrentAgents: 16 });
  const provider = {
    kind: 'module',
    module: fileURLToPath(new URL('./support/loop-model.mjs', import.meta.url)),
    options: { steps: 1 },
  };
  for (let done = 0; done < trees; done += 50)
    await Promise.all(
      Array.from(
        { length: Math.min(50, trees - done) },
        (_, i) => supervisor.run({ task: `tree ${done + i}`, provider }).result,
      ),
    );
  await supervisor.close();
  return store;
}

async function load(url) {
  const started = performance.now();
  const page = await (await fetch(url)).text();
  const assets = [...page.matchAll(/(?:src|href)="\.\/([^"]+)"/g)].map((match) => match[1]);
  await Promise.all(assets.map(async (asset) => (await fetch(new URL(asset, url))).arrayBuffer()));
  const list = await (await fetch(new URL('api/trees', url))).json();
  return { ms: performance.now() - started, trees: list.total };
}

async function measure(store) {
  const served = await viewer(store);
  const times = [];
  let trees = 0;
  for (let i = 0; i < LOADS + 5; i++) {
    const { ms, trees: total } = await load(served.url);
    trees = total;
    if (i >= 5) times.push(ms);
  }
  await served.close();
  times.sort((a, b) => a - b);
  return { trees, p50Ms: times[Math.floor(times.length / 2)] };
}

const small = await storeOf(1);
const big = await storeOf(TREES);
const one = await measure(small);
const many = await measure(big);
small.close();
big.close();
console.log(
  JSON.stringify({
    bench: 'viewer',
    one: { trees: one.trees, p50Ms: +one.p50Ms.toFixed(2) },
    many: { trees: many.trees, p50Ms: +many.p50Ms.toFixed(2) },
    ratio: +(many.p50Ms / one.p50Ms).toFixed(2),
  }),
);
