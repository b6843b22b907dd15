// A newcomer's one-tool program, run as a process of its own by bench/cold-start.mjs: import,
// open a store, one runWith whose model calls the tool once and answers, the steps committed
// (the AI SDK's bench/ai-sdk/hello.mjs, with a store).
// It closes nothing and ends when its event loop empties. Prints the reply and the time from
// the process's start to the result, and its peak RSS.
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { OpenAI, Policy, runWith, Store, TaskContract } from 'io-harness';
import { forecast } from './forecast.mjs';

// A third argument, `in-process`, runs it with no worker thread (`isolation: 'in-process'`).
const [url, dir, isolation] = process.argv.slice(2);
const store = await Store.open(join(dir, 'runs.db'));
const result = await runWith(
  TaskContract.workspace('What is the weather in Oslo?', dir),
  OpenAI.create({ model: 'scripted', baseUrl: `${url}/v1`, apiKey: 'bench-key' }),
  store,
  Policy.default(),
  undefined,
  { tools: [forecast], ...(isolation === 'in-process' ? { supervisor: { isolation } } : {}) },
);
if (result.outcome.kind !== 'finished') throw new Error(`the run ended ${result.outcome.kind}`);
console.log(
  JSON.stringify({ reply: result.reply, resultMs: performance.now(), maxRssMb: process.resourceUsage().maxRSS / 1024 }),
);
