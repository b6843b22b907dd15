// Fan-out on PostgreSQL, on one host and on several: a root spawns 1,000 agents without
// waiting; each takes 3 steps on a scripted model with 200 ms latency. Each figure is wall
// time from run() to the settled tree over the ideal, pools warmed first. Beside it, in the
// same run, the same tree on a SQLite file. Every host but the first is a process of its
// own (support/fanout-host.mjs) under its own host name: on one machine they share its
// cores, so several hosts here measure the cost of sharing the work, not the gain of more
// machines. Says how many agents each host drove, from the lease rows.
//
// `node bench/fanout-hosts.mjs [C]`: the tree's cap is C (default 64) across every host;
// one host and two; the ideal is ceil(1000 / C) x 3 x 200 ms.
// `BENCH_PER_HOST=32 node bench/fanout-hosts.mjs`: each host has a cap of its own
// (maxHostAgents 32) and the tree none below its size, so the hosts' caps and not the
// store bound the work; one, two and three hosts, each against its own ideal
// ceil(1000 / (32 x hosts)) x 3 x 200 ms, and SQLite with C = 32.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Store, Supervisor } from 'io-harness';
import { PostgresStore } from 'io-harness/postgres';
import { benchServer, freshDatabase } from './support/postgres.mjs';
import { tempDir } from './support/temp.mjs';

const perHost = process.env.BENCH_PER_HOST ? Number(process.env.BENCH_PER_HOST) : null;
const concurrency = perHost ?? Number(process.argv[2] ?? 64);
const children = Number(process.env.BENCH_AGENTS ?? 1000);
const steps = 3;
const latencyMs = Number(process.env.BENCH_LATENCY_MS ?? 200);
/** The ideal wall for `hosts` hosts: the tree's cap bounds it, or with per-host caps their sum. */
const idealFor = (hosts) => Math.ceil(children / (perHost ? perHost * hosts : concurrency)) * steps * latencyMs;
const idealMs = idealFor(1);
const modelOptions = { children, steps, latencyMs };
const provider = {
  kind: 'module',
  module: fileURLToPath(new URL('./support/fanout-model.mjs', import.meta.url)),
  options: modelOptions,
};

/** Runs the tree on `store` from `supervisor`, `beforeWait(rootId)` once it is started; wall time and who drove it. */
async function timed(store, supervisor, beforeWait = async () => undefined, hosts = 1) {
  await supervisor.warm(concurrency);
  const start = performance.now();
  // With caps per host the tree has none below its size on PostgreSQL; a SQLite file has one host, capped at C.
  const treeCap = perHost && store instanceof PostgresStore ? { maxConcurrentAgents: children } : {};
  const handle = supervisor.run({ task: 'fan out', provider, maxTotalAgents: children, ...treeCap });
  await beforeWait(handle.rootId);
  const result = await handle.result;
  const wallMs = performance.now() - start;
  const runs = await store.runs(result.rootId);
  const byHost = {};
  for (const run of runs) if (run.parentId) byHost[run.lease.host] = (byHost[run.lease.host] ?? 0) + 1;
  return {
    finished: runs.filter((run) => run.status === 'finished').length,
    wallMs: Math.round(wallMs),
    idealMs: idealFor(hosts),
    ratio: +(wallMs / idealFor(hosts)).toFixed(3),
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

/** A host of its own process, joined to the tree once its root is stored. */
async function otherHost(url, name) {
  const child = spawn(
    process.execPath,
    [
      fileURLToPath(new URL('./support/fanout-host.mjs', import.meta.url)),
      url,
      String(concurrency),
      JSON.stringify(modelOptions),
      name,
      perHost ? String(perHost) : '',
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const host = { name, child, lines, exited: new Promise((resolve) => child.once('exit', resolve)) };
  const ready = JSON.parse((await lines.next()).value ?? '{}');
  if (!ready.ready) throw new Error(`host ${name} did not start`);
  return host;
}

async function postgres(url, hosts) {
  const store = await PostgresStore.open(url);
  const supervisor = await Supervisor.start(store, {
    host: 'host-a',
    maxConcurrentAgents: perHost ? children : concurrency,
    ...(perHost ? { maxHostAgents: perHost } : {}),
  });
  const others = [];
  try {
    for (let i = 1; i < hosts; i++) others.push(await otherHost(url, `host-${String.fromCharCode(97 + i)}`));
    const figures = await timed(
      store,
      supervisor,
      async (rootId) => {
        if (others.length === 0) return;
        // The other hosts join once the root is stored (join() refuses a tree it cannot find).
        while (!(await store.run(rootId))) await new Promise((resolve) => setTimeout(resolve, 5));
        for (const other of others) other.child.stdin.write(`${rootId}\n`);
      },
      hosts,
    );
    for (const other of others) {
      const done = JSON.parse((await other.lines.next()).value ?? '{}');
      figures[other.name] = done.done ?? 'no answer';
    }
    return figures;
  } finally {
    for (const other of others) other.child.stdin.end();
    await Promise.all(others.map((other) => other.exited));
    await supervisor.close();
    await store.close();
  }
}

const baseline = await sqlite();
const server = await benchServer();
try {
  const one = await postgres(await freshDatabase(server.url), 1);
  const two = await postgres(await freshDatabase(server.url), 2);
  const three = perHost ? await postgres(await freshDatabase(server.url), 3) : null;
  console.log(
    JSON.stringify({
      bench: 'fanout-hosts',
      agents: children,
      ...(perHost ? { capPerHost: perHost } : { concurrency }),
      steps,
      latencyMs,
      idealMs,
      sqlite: baseline,
      postgresOneHost: one,
      postgresTwoHosts: two,
      ...(three ? { postgresThreeHosts: three } : {}),
      oneHostOverSqlite: +(one.wallMs / baseline.wallMs).toFixed(3),
      twoHostsOverOne: +(two.wallMs / one.wallMs).toFixed(3),
      ...(three ? { threeHostsOverOne: +(three.wallMs / one.wallMs).toFixed(3) } : {}),
    }),
  );
} finally {
  server.stop();
}
