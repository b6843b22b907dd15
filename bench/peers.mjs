// The peers' workloads, each io-harness figure beside a raw loop measured in the same run.
//
// Sequential (in this process, passes alternated): one agent takes `BENCH_STEPS` (200)
// tool steps against a model served over loopback HTTP on the OpenAI wire by a process of
// its own, answering at once, every step committed, on a supervisor held across passes (as
// an embedder keeps one) — once with the embedder's no-op tool, once with `read_file`;
// beside a raw loop making the same calls with `fetch` and appending to its transcript,
// bare and with one SQLite insert per step (better-sqlite3, WAL, synchronous=NORMAL).
// The same two on a supervisor with `isolation: 'in-process'` (every actor on this thread).
// Wall and client CPU (every thread of this process; the model server is another process)
// per step, medians of `BENCH_PASSES` (5), and each as a ratio of the bare loop's.
//
// Fan-out: `node bench/wide-fanout.mjs <width>` for each width in `BENCH_WIDTHS`
// ("100,1000"; "" skips it): each pass a fresh process, cold start included, beside a raw
// Promise.all of fetch loops; its JSON is printed as it comes.
//
// `node bench/peers.mjs` (after `npm run build`).
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { OpenAI, Policy, Store, Supervisor, TaskContract, tool } from 'io-harness';

const STEPS = Number(process.env.BENCH_STEPS ?? 200);
const PASSES = Number(process.env.BENCH_PASSES ?? 5);
const WIDTHS = (process.env.BENCH_WIDTHS ?? '100,1000').split(',').filter(Boolean).map(Number);
const here = (file) => fileURLToPath(new URL(file, import.meta.url));

const server = spawn(process.execPath, [here('./support/peers-server.mjs'), String(STEPS)], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
const [line] = await once(server.stdout, 'data');
const url = String(line).trim();
const provider = OpenAI.create({ model: 'scripted', baseUrl: `${url}/v1`, apiKey: 'bench-key' });
const root = mkdtempSync(join(tmpdir(), 'io-harness-peers-repo-'));
writeFileSync(join(root, 'notes.txt'), 'a short file\n');

const noop = tool({
  name: 'noop',
  description: 'Does nothing.',
  parameters: { type: 'object', properties: {}, additionalProperties: false },
  effect: 'reads',
  execute: () => 'ok',
});

/** Wall and CPU of `work`, in milliseconds. */
async function timed(work) {
  const cpu = process.cpuUsage();
  const start = performance.now();
  await work();
  const wallMs = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return { wallMs, cpuMs: (used.user + used.system) / 1000 };
}

/** The raw loop: the same calls with fetch, its transcript kept, and one SQLite insert a step when `durable`. */
async function raw(durable) {
  const dir = mkdtempSync(join(tmpdir(), 'io-harness-peers-'));
  const db = durable ? new Database(join(dir, 'raw.db')) : null;
  db?.pragma('journal_mode = WAL');
  db?.pragma('synchronous = NORMAL');
  db?.exec('CREATE TABLE steps (seq INTEGER PRIMARY KEY, completion TEXT NOT NULL, observation TEXT NOT NULL)');
  const insert = db?.prepare('INSERT INTO steps (seq, completion, observation) VALUES (?, ?, ?)');
  const messages = [
    { role: 'system', content: 'You are agent "root".' },
    { role: 'user', content: 'work' },
  ];
  const figure = await timed(async () => {
    for (let seq = 1; ; seq++) {
      const response = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer bench-key' },
        body: JSON.stringify({ model: 'scripted', messages }),
      });
      const message = (await response.json()).choices[0].message;
      messages.push(message);
      const observations = (message.tool_calls ?? []).map((call) => ({ call: call.id, content: 'ok' }));
      for (const item of observations) messages.push({ role: 'tool', tool_call_id: item.call, content: item.content });
      insert?.run(seq, JSON.stringify(message), JSON.stringify(observations));
      if (observations.length === 0) break;
    }
  });
  db?.close();
  rmSync(dir, { recursive: true, force: true });
  return figure;
}

/** One run of the agent on the held supervisor: with the embedder's no-op tool, or a workspace's read_file. */
async function agent(supervisor, kind) {
  let result;
  const figure = await timed(async () => {
    result = await supervisor.run(
      kind === 'noop'
        ? { task: 'work', provider, tools: [noop] }
        : { contract: TaskContract.workspace('read the notes', root), policy: Policy.default(), provider },
    ).result;
  });
  if (result.status !== 'finished') throw new Error(`the ${kind} run ended ${result.status}: ${result.reason ?? ''}`);
  return figure;
}

const dir = mkdtempSync(join(tmpdir(), 'io-harness-peers-'));
const store = await Store.open(join(dir, 'runs.db'));
const supervisor = await Supervisor.start(store);
// The same, every actor on this thread: the in-process host as a speed option.
const inProcessStore = await Store.open(join(dir, 'in-process.db'));
const inProcess = await Supervisor.start(inProcessStore, { isolation: 'in-process' });
const kinds = {
  raw: () => raw(false),
  'raw+sqlite': () => raw(true),
  'io-harness, no-op tool': () => agent(supervisor, 'noop'),
  'io-harness, read_file': () => agent(supervisor, 'read_file'),
  'io-harness in-process, no-op tool': () => agent(inProcess, 'noop'),
  'io-harness in-process, read_file': () => agent(inProcess, 'read_file'),
};
const figures = Object.fromEntries(Object.keys(kinds).map((name) => [name, []]));
// One unmeasured pass of each: module loading, the JIT, the pool's threads.
for (const run of Object.values(kinds)) await run();
for (let pass = 0; pass < PASSES; pass++) {
  for (const [name, run] of Object.entries(kinds)) figures[name].push(await run());
}
await supervisor.close();
store.close();
await inProcess.close();
inProcessStore.close();
rmSync(dir, { recursive: true, force: true });
server.kill('SIGTERM');
rmSync(root, { recursive: true, force: true });

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const calls = STEPS + 1;
const perStep = (name, key) => median(figures[name].map((figure) => figure[key])) / calls;
const baseWall = perStep('raw', 'wallMs');
const baseCpu = perStep('raw', 'cpuMs');
const sequential = Object.keys(kinds).map((name) => ({
  name,
  wallPerStepMs: +perStep(name, 'wallMs').toFixed(3),
  cpuPerStepMs: +perStep(name, 'cpuMs').toFixed(3),
  wallRatio: +(perStep(name, 'wallMs') / baseWall).toFixed(2),
  cpuRatio: +(perStep(name, 'cpuMs') / baseCpu).toFixed(2),
}));
console.log(JSON.stringify({ bench: 'peers', workload: 'sequential', steps: STEPS, passes: PASSES, sequential }));
for (const width of WIDTHS) {
  const out = spawnSync(process.execPath, [here('./wide-fanout.mjs'), String(width)], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, BENCH_PASSES: String(PASSES) },
  });
  if (out.status !== 0) throw new Error(`wide-fanout ${width} failed with status ${out.status}`);
  console.log(out.stdout.trim());
}
