// What a cold start costs, measured side by side in one run on a model served over loopback
// HTTP by a process of its own (a first answer calling one tool, then the answer):
//
// 1. In this process, alternating (each pass starting at the next arm), the same one-tool
//    contract run on a supervisor held across runs (`held`), with runWith on the store's
//    shared supervisor (`runWith`), and with runWith given options that cannot share, so it
//    starts and closes a supervisor of its own as every call did before (`own`). The first
//    runWith call, which starts the shared supervisor, is printed on its own.
// 2. A fresh `node` process per pass, alternating: the newcomer's one-tool program
//    (support/hello-agent.mjs: import, store open, runWith, the steps committed, exit with
//    nothing closed; and the same with `isolation: 'in-process'`, no worker thread) against a raw fetch loop making the same two calls and committing one
//    SQLite row (support/hello-raw.mjs), and, when it is installed for the comparison
//    (`npm install --prefix bench/ai-sdk`), the AI SDK's own (bench/ai-sdk/hello.mjs:
//    generateText with the same tool, nothing stored). Wall from spawn to exit; for ours and
//    the raw loop's also from the process's start to its result, and the highest peak RSS.
//
// Medians of BENCH_PASSES (default 7) passes each. `node bench/cold-start.mjs`
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { OpenAI, Policy, runWith, Store, Supervisor, systemClock, TaskContract } from 'io-harness';
import { forecast } from './support/forecast.mjs';
import { tempDir } from './support/temp.mjs';

const PASSES = Number(process.env.BENCH_PASSES ?? 7);
const here = (file) => fileURLToPath(new URL(file, import.meta.url));
const server = spawn(process.execPath, [here('./support/hello-server.mjs')], { stdio: ['ignore', 'pipe', 'inherit'] });
const [line] = await once(server.stdout, 'data');
const url = String(line).trim();

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const round = (value) => +value.toFixed(1);

// 1. In this process.
const dir = tempDir();
const store = await Store.open(join(dir, 'runs.db'));
const provider = OpenAI.create({ model: 'scripted', baseUrl: `${url}/v1`, apiKey: 'bench-key' });
const policy = Policy.default();
const contract = () => TaskContract.workspace('What is the weather in Oslo?', dir);
const held = await Supervisor.start(store);

async function timed(body) {
  const start = performance.now();
  const status = await body();
  if (status !== 'finished') throw new Error(`a run ended ${status}`);
  return performance.now() - start;
}
const arms = {
  held: () =>
    timed(async () => (await held.run({ contract: contract(), provider, policy, tools: [forecast] }).result).status),
  runWith: () =>
    timed(
      async () => (await runWith(contract(), provider, store, policy, undefined, { tools: [forecast] })).outcome.kind,
    ),
  own: () =>
    timed(
      async () =>
        (
          await runWith(contract(), provider, store, policy, undefined, {
            tools: [forecast],
            supervisor: { clock: systemClock },
          })
        ).outcome.kind,
    ),
};
// One unmeasured pass of the held supervisor (its threads' modules and JIT); the first runWith starts the shared one.
await arms.held();
const firstRunWithMs = await arms.runWith();
const inProcess = { held: [], runWith: [], own: [] };
// Each pass starts at the next arm, so none always follows `own`'s start and close.
const names = Object.keys(arms);
for (let i = 0; i < PASSES; i++) {
  for (let k = 0; k < names.length; k++) {
    const name = names[(i + k) % names.length];
    inProcess[name].push(await arms[name]());
  }
}
await held.close();
store.close();

// 2. A process per pass.
function processPass([file, ...args]) {
  const passDir = tempDir();
  const start = performance.now();
  const out = spawnSync(process.execPath, [here(file), url, passDir, ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const wallMs = performance.now() - start;
  if (out.status !== 0) throw new Error(`${file} failed with status ${out.status}`);
  // The AI SDK's program prints neither (it is its own, unchanged).
  const { resultMs = null, maxRssMb = null } = JSON.parse(out.stdout);
  return { wallMs, resultMs, maxRssMb };
}
// The AI SDK's own hello-world, when it is installed for the comparison (bench/ai-sdk/package.json).
const withAiSdk = existsSync(here('./ai-sdk/node_modules/ai/package.json'));
const programs = {
  raw: ['./support/hello-raw.mjs'],
  agent: ['./support/hello-agent.mjs'],
  agentInProcess: ['./support/hello-agent.mjs', 'in-process'],
  ...(withAiSdk ? { aiSdk: ['./ai-sdk/hello.mjs'] } : {}),
};
const processes = Object.fromEntries(Object.keys(programs).map((name) => [name, []]));
for (let i = 0; i < PASSES; i++) {
  for (const [name, argv] of Object.entries(programs)) processes[name].push(processPass(argv));
}
server.kill('SIGTERM');

const medians = Object.fromEntries(Object.entries(inProcess).map(([name, walls]) => [name, round(median(walls))]));
const perProcess = (runs) =>
  runs[0].resultMs === null
    ? { wallMs: round(median(runs.map((run) => run.wallMs))) }
    : {
        wallMs: round(median(runs.map((run) => run.wallMs))),
        resultMs: round(median(runs.map((run) => run.resultMs))),
        peakRssMb: round(Math.max(...runs.map((run) => run.maxRssMb))),
      };
const agent = perProcess(processes.agent);
const agentInProcess = perProcess(processes.agentInProcess);
const raw = perProcess(processes.raw);
const aiSdk = withAiSdk ? perProcess(processes.aiSdk) : null;
console.log(
  JSON.stringify({
    bench: 'cold-start',
    passes: PASSES,
    inProcessMs: { ...medians, firstRunWith: round(firstRunWithMs) },
    runWithOverHeld: +(medians.runWith / medians.held).toFixed(3),
    ownOverHeld: +(medians.own / medians.held).toFixed(3),
    helloWorld: { agent, agentInProcess, raw, aiSdk },
    inProcessHelloOverAiSdk: aiSdk ? +(agentInProcess.wallMs / aiSdk.wallMs).toFixed(3) : null,
    helloOverRaw: {
      wall: +(agent.wallMs / raw.wallMs).toFixed(3),
      toResult: +(agent.resultMs / raw.resultMs).toFixed(3),
    },
    helloOverAiSdk: aiSdk ? +(agent.wallMs / aiSdk.wallMs).toFixed(3) : null,
  }),
);
