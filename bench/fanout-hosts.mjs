// Fan-out on PostgreSQL, on one host and on two: a root spawns 1,000 agents without
// waiting; each takes 3 steps on a scripted model with 200 ms latency; the tree's cap is C
// (default 64) across every host. Each figure is wall time from run() to the settled tree
// over the ideal ceil(1000 / C) x 3 x 200 ms, pools warmed first. Beside it, in the same
// run, the same tree on a SQLite file. The second host is a process of its own
// (support/fanout-host.mjs) under its own host name: on one machine the two share its
// cores, so two hosts here measure the cost of sharing the work, not the gain of a
// second machine. Says how many agents each host drove, from the lease rows.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Store, Supervisor } from 'io-harness';
import { PostgresStore } from 'io-harness/postgres';
import { benchServer, freshDatabase } from './support/postgres.mjs';
import { tempDir } from './support/temp.mjs';

const concurrency = Number(process.argv[2] ?? 64);
const children = Number(process.env.BENCH_AGENTS ?? 1000);
const steps = 3;
const latencyMs = Number(process.env.BENCH_LATENCY_MS ?? 200);
const idealMs = Math.ceil(children / concurrency) * steps * latencyMs;
const modelOptions = { children, steps, latencyMs };
const provider = {
  kind: 'module',
  module: fileURLToPath(new URL('./support/fanout-model.mjs', import.meta.url)),
  options: modelOptions,
};

/** Runs the tree on `store` from `supervisor`, `beforeWait(rootId)` once it is started; wall time and who drove it. */
async function timed(store, supervisor, beforeWait = async () => undefined) {
  await supervisor.warm(concurrency);
  const start = performance.now();
  const handle = supervisor.run({ task: 'fan out', provider, maxTotalAgents: children });
  await beforeWait(handle.rootId);
  const result = await handle.result;
  const wallMs = performance.now() - start;
  const runs = await store.runs(result.rootId);
  const byHost = {};
  for (const run of runs) if (run.parentId) byHost[run.lease.host] = (byHost[run.lease.host] ?? 0) + 1;
  return {
    finished: runs.filter((run) => run.status === 'finished').length,
    wallMs: Math.round(wallMs),
    ratio: +(wallMs / idealMs).toFixed(3),
    byHost,
  };
}

async function sqlite() {
  const store = await Store.open(join(tempDir('io-harness-bench-'), 'runs.db'));
  const supervisor = await Supervisor.start(store, { maxConcurrentAgents: concurrency });
  try {
    return await timed(store, supervisor);
  } finally {
    await supervisor.close();
    store.close();
  }
}

async function postgres(url, hosts) {
  const store = await PostgresStore.open(url);
  const supervisor = await Supervisor.start(store, { host: 'host-a', maxConcurrentAgents: concurrency });
  let second = null;
  try {
    if (hosts === 2) {
      const child = spawn(
        process.execPath,
        [
          fileURLToPath(new URL('./support/fanout-host.mjs', import.meta.url)),
          url,
          String(concurrency),
          JSON.stringify(modelOptions),
        ],
        { stdio: ['pipe', 'pipe', 'inherit'] },
      );
      const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
      second = { child, lines, exited: new Promise((resolve) => child.once('exit', resolve)) };
      const ready = JSON.parse((await lines.next()).value ?? '{}');
      if (!ready.ready) throw new Error('the second host did not start');
    }
    const figures = await timed(store, supervisor, async (rootId) => {
      if (!second) return;
      // The second host joins once the root is stored (join() refuses a tree it cannot find).
      while (!(await store.run(rootId))) await new Promise((resolve) => setTimeout(resolve, 5));
      second.child.stdin.write(`${rootId}\n`);
    });
    if (second) {
      const done = JSON.parse((await second.lines.next()).value ?? '{}');
      figures.secondHost = done.done ?? 'no answer';
    }
    return figures;
  } finally {
    second?.child.stdin.end();
    if (second) await second.exited;
    await supervisor.close();
    await store.close();
  }
}

const baseline = await sqlite();
const server = await benchServer();
try {
  const one = await postgres(await freshDatabase(server.url), 1);
  const two = await postgres(await freshDatabase(server.url), 2);
  console.log(
    JSON.stringify({
      bench: 'fanout-hosts',
      agents: children,
      concurrency,
      steps,
      latencyMs,
      idealMs,
      sqlite: baseline,
      postgresOneHost: one,
      postgresTwoHosts: two,
      oneHostOverSqlite: +(one.wallMs / baseline.wallMs).toFixed(3),
      twoHostsOverOne: +(two.wallMs / one.wallMs).toFixed(3),
    }),
  );
} finally {
  server.stop();
}
