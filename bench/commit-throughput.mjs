// Step commits per second through the store actor from 1, 16 and 64 concurrent actors
// (each a worker thread awaiting its own commits), beside raw better-sqlite3: the same
// rows, one transaction per step, on the main thread, in the same run.
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { MessageChannel, Worker } from 'node:worker_threads';
import { StoreClient, startStoreWorker } from '../dist/actors/store.js';
import { openWriter } from '../dist/store/schema.js';
import { StoreWriter } from '../dist/store/writer.js';
import { rootInput, stepInput } from './support/rows.mjs';
import { tempDir } from './support/temp.mjs';

const TOTAL = Number(process.env.BENCH_COMMITS ?? 12_000);
const fresh = () => join(tempDir('io-harness-bench-'), 'runs.db');

function raw() {
  const db = openWriter(fresh());
  const writer = new StoreWriter(db);
  const { generation } = writer.createRoot(rootInput('raw', 'bench'));
  const fence = { runId: 'raw', generation, owner: 'bench' };
  const commit = db.transaction((seq) => writer.commitStep(stepInput(fence, seq)));
  const start = performance.now();
  for (let seq = 1; seq <= TOTAL; seq++) commit.immediate(seq);
  const seconds = (performance.now() - start) / 1000;
  db.close();
  return TOTAL / seconds;
}

async function throughActor(actors) {
  const path = fresh();
  openWriter(path).close();
  const storeWorker = await startStoreWorker({ path, synchronous: 'NORMAL', killAt: null });
  const main = new StoreClient(storeWorker);
  const steps = Math.ceil(TOTAL / actors);
  const workers = [];
  for (let i = 0; i < actors; i++) {
    const runId = `run-${i}`;
    const { generation } = await main.call('createRoot', rootInput(runId, 'bench'));
    const channel = new MessageChannel();
    storeWorker.postMessage({ type: 'attach', port: channel.port1 }, [channel.port1]);
    const worker = new Worker(new URL('./support/commit-actor.mjs', import.meta.url), {
      workerData: { port: channel.port2, fence: { runId, generation, owner: 'bench' }, steps },
      transferList: [channel.port2],
    });
    await new Promise((resolve) => worker.once('message', resolve));
    workers.push(worker);
  }
  const start = performance.now();
  await Promise.all(
    workers.map(
      (worker) =>
        new Promise((resolve) => {
          worker.once('message', resolve);
          worker.postMessage('go');
        }),
    ),
  );
  const seconds = (performance.now() - start) / 1000;
  await Promise.all(workers.map((worker) => worker.terminate()));
  await storeWorker.terminate();
  return (steps * actors) / seconds;
}

const results = [];
for (const actors of [1, 16, 64]) {
  const baseline = raw();
  const actor = await throughActor(actors);
  results.push({
    actors,
    actorPerSecond: Math.round(actor),
    rawPerSecond: Math.round(baseline),
    ratio: +(actor / baseline).toFixed(2),
  });
}
console.log(JSON.stringify({ bench: 'commit-throughput', commits: TOTAL, results }));
