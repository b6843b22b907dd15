// node bench/request-body.mjs — what serialising a step's request body costs as the run grows.
// Each transcript entry's message (and each tool's definition) is serialised the first time
// it is sent and kept, so a step's request serialises what the step added and joins the
// rest; before, every step serialised the whole transcript again. Both measured in the same
// loop on the OpenAI and Anthropic wires: the request for step k with every earlier entry
// already sent (now), and the same request with every entry a fresh object (as if none had
// been sent: what every step cost before). Steps are an assistant turn with one read_file
// call and a 1.5 KB result, with the workspace's 15 tool definitions. Medians of 41 runs
// after 5 to warm up, in µs per request.
import { performance } from 'node:perf_hooks';
import { anthropicWire } from '../dist/runtime/providers/anthropic-wire.js';
import { openAiWire } from '../dist/runtime/providers/openai-wire.js';
import { workspaceTools } from '../dist/runtime/tools/families/workspace.js';
import { registryFor } from '../dist/runtime/tools/registry.js';

const RUNS = 41;
const WARM = 5;
const AT = [10, 100, 500];
const tools = registryFor({ mode: 'workspace', workspaceTools }).definitions();
const config = {
  name: 'bench',
  baseUrl: 'http://127.0.0.1:9/v1',
  model: 'm',
  headers: {},
  maxTokens: null,
  promptCacheKey: false,
  systemCacheMarker: false,
  extraBody: {},
  images: true,
  web: null,
};
const metadata = { runId: 'r', rootId: 'r', address: 'root', parentAddress: null, depth: 0, seq: 1 };
const result = 'x'.repeat(1500);
const stepEntries = (step) => [
  {
    role: 'assistant',
    text: 'reading',
    toolCalls: [{ id: `c${step}`, name: 'read_file', args: { path: `f${step}.txt` } }],
  },
  { role: 'tool', callId: `c${step}`, name: 'read_file', content: result, isError: false },
];
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

const out = { bench: 'request-body', runs: RUNS };
for (const [name, wire] of [
  ['openai', openAiWire],
  ['anthropic', anthropicWire],
]) {
  for (const steps of AT) {
    const now = [];
    const fresh = [];
    for (let run = 0; run < RUNS + WARM; run++) {
      const transcript = [{ role: 'user', text: 'read them all' }];
      for (let step = 1; step < steps; step++) transcript.push(...stepEntries(step));
      // Every entry before this step already sent once.
      wire.request({ system: 's', transcript, tools, metadata }, config);
      transcript.push(...stepEntries(steps));
      const copies = transcript.map((entry) => ({ ...entry }));
      const toolCopies = tools.map((tool) => ({ ...tool }));
      const timeOf = (request) => {
        const began = performance.now();
        wire.request(request, config);
        return (performance.now() - began) * 1000;
      };
      const a = timeOf({ system: 's', transcript, tools, metadata });
      const b = timeOf({ system: 's', transcript: copies, tools: toolCopies, metadata });
      if (run >= WARM) {
        now.push(a);
        fresh.push(b);
      }
    }
    out[`${name}_now_us_step_${steps}`] = +median(now).toFixed(1);
    out[`${name}_every_entry_us_step_${steps}`] = +median(fresh).toFixed(1);
  }
}
console.log(JSON.stringify(out));
