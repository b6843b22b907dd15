// Where a fan-out's slot time goes, on a SQLite file and on one PostgreSQL host: a root
// spawns N agents (BENCH_AGENTS, default 400) without waiting, each taking 3 steps on a
// scripted model with 200 ms latency, at C = 64. From the tree's events: how long a child
// runs (its run-start to its run-end), its first step, how long after run() the first
// child starts, and the slot time left idle per child (wall x C less the children's own
// time, over N): what admission costs between one child's end and the next one's start.
// `node bench/fanout-gaps.mjs` (after `npm run build`).
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Store, Supervisor } from 'io-harness';
import { PostgresStore } from 'io-harness/postgres';
import { benchServer, freshDatabase } from './support/postgres.mjs';
import { tempDir } from './support/temp.mjs';

const children = Number(process.env.BENCH_AGENTS ?? 400);
const C = 64;
const provider = {
  kind: 'module',
  module: fileURLToPath(new URL('./support/fanout-model.mjs', import.meta.url)),
  options: { children, steps: 3, latencyMs: 200 },
};

/** Every event of the store, oldest first. */
async function allEvents(store) {
  const events = [];
  for (let after = 0; ; ) {
    const page = await store.eventsAfter(after, 5000);
    if (page.length === 0) return events;
    events.push(...page);
    after = page.at(-1).eventId;
  }
}

async function measure(store, supervisor) {
  await supervisor.warm(C);
  const started = Date.now();
  const start = performance.now();
  const { rootId } = await supervisor.run({ task: 'fan out', provider, maxTotalAgents: children }).result;
  const wall = performance.now() - start;
  const runStart = new Map();
  const runEnd = new Map();
  const firstStep = new Map();
  for (const event of await allEvents(store)) {
    if (event.runId === rootId) continue;
    if (event.type === 'run-start' && !runStart.has(event.runId)) runStart.set(event.runId, event.at);
    if (event.type === 'run-end') runEnd.set(event.runId, event.at);
    if (event.type === 'step-end' && !firstStep.has(event.runId)) firstStep.set(event.runId, event.at);
  }
  let own = 0;
  let first = 0;
  for (const [runId, at] of runStart) {
    own += (runEnd.get(runId) ?? at) - at;
    first += (firstStep.get(runId) ?? at) - at;
  }
  const n = runStart.size;
  return {
    children: n,
    wallMs: Math.round(wall),
    childMs: Math.round(own / n),
    firstStepMs: Math.round(first / n),
    firstChildAfterMs: Math.min(...runStart.values()) - started,
    idleSlotMsPerChild: Math.round((wall * C - own) / n),
  };
}

const file = await Store.open(join(tempDir('io-harness-bench-'), 'runs.db'));
const onFile = await Supervisor.start(file, { maxConcurrentAgents: C });
const sqlite = await measure(file, onFile);
await onFile.close();
file.close();
let postgres;
const cluster = await benchServer();
try {
  const store = await PostgresStore.open(await freshDatabase(cluster.url));
  const supervisor = await Supervisor.start(store, { host: 'host-a', maxConcurrentAgents: C });
  postgres = await measure(store, supervisor);
  await supervisor.close();
  await store.close();
} finally {
  cluster.stop();
}
console.log(JSON.stringify({ bench: 'fanout-gaps', concurrency: C, sqlite, postgres }));
