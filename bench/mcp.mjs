// node bench/mcp.mjs — what an MCP tool call costs beside the same function as an
// embedder's tool, in the same run: three workspace runs on a model that answers at once
// (in process), every step one call of `echo`:
//  - an embedder's tool that acts (journaled as an intent, as every MCP call is);
//  - the same, through an MCP server on stdio (the SDK's client and server, one process);
//  - an embedder's tool that only reads (no intent), for scale.
// p50 of the step gaps after the first 10% of steps. Then the catalogue: connecting to a
// server of 200 tools beside one of 1 (the difference is listing, checking and naming 199
// tools), and building the tree's tool definitions from them; p50 of 7 after 1. Last, what
// tool tiers buy with those 200 tools: the bytes of the first request's tool array (on the
// OpenAI wire, to the scripted model server) with every tool offered, and with the core only.
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { OpenAI, Policy, Store, Supervisor, TaskContract, tool } from 'io-harness';
import { McpServers } from 'io-harness/mcp';
import { ScriptedModelServer } from 'io-harness/testing';
import { z } from 'zod';
import { percentile, stepGaps } from './support/gaps.mjs';
import { tempDir } from './support/temp.mjs';

const STEPS = Number(process.env.BENCH_STEPS ?? 500);
const SERVER = fileURLToPath(new URL('./support/mcp-echo-server.mjs', import.meta.url));
const root = tempDir('io-harness-bench-mcp-');
const echo = (effect) =>
  tool({
    name: 'echo',
    description: 'Returns what it is given.',
    parameters: z.object({ text: z.string() }),
    effect,
    execute: ({ text }) => text,
  });

async function measure(name, tools) {
  const store = await Store.open(join(tempDir('io-harness-bench-'), 'runs.db'));
  const supervisor = await Supervisor.start(store);
  const marks = [];
  supervisor.observe((event) => {
    if (event.type === 'step-end') marks.push(performance.now());
  });
  const result = await supervisor.run({
    contract: TaskContract.workspace('call a tool', root),
    policy: Policy.default().layer('bench').allowTool('*'),
    tools,
    provider: {
      kind: 'module',
      module: fileURLToPath(new URL('./support/tool-model.mjs', import.meta.url)),
      options: { steps: STEPS, name, args: { text: 'a short text' } },
    },
  }).result;
  await supervisor.close();
  store.close();
  if (result.status !== 'finished') throw new Error(`the ${name} run ended ${result.status}`);
  const gaps = stepGaps(marks, STEPS);
  return { p50Ms: +percentile(gaps, 50).toFixed(3), p99Ms: +percentile(gaps, 99).toFixed(3) };
}

const acts = await measure('echo', [echo('acts')]);
const servers = await McpServers.connect([{ name: 'bench', command: ['node', SERVER] }]);
const mcp = await measure(
  'bench__echo',
  servers.tools().filter((item) => item.name === 'bench__echo'),
);
await servers.close();
const reads = await measure('echo', [echo('reads')]);

async function connectMs(count) {
  const samples = [];
  for (let round = 0; round < 8; round++) {
    const start = performance.now();
    const connected = await McpServers.connect([{ name: 'bench', command: ['node', SERVER, String(count)] }]);
    const definitions = connected.tools().map((item) => item.definition);
    const ms = performance.now() - start;
    if (definitions.length !== count + 1) throw new Error(`listed ${definitions.length}`);
    await connected.close();
    if (round > 0) samples.push(ms);
  }
  return +percentile(samples, 50).toFixed(2);
}
const one = await connectMs(0);
const many = await connectMs(199);

/** The bytes of the first request's tool array, with the 200 tools offered or kept back by tiers. */
async function firstToolBytes(tiered) {
  const connected = await McpServers.connect([{ name: 'bench', command: ['node', SERVER, '199'] }]);
  let bytes = null;
  const model = await ScriptedModelServer.start((call) => {
    bytes ??= Buffer.byteLength(JSON.stringify(call.body.tools ?? []));
    return { text: 'done' };
  });
  const store = await Store.open(join(tempDir('io-harness-bench-'), 'runs.db'));
  const supervisor = await Supervisor.start(store);
  const contract = TaskContract.workspace('look', root);
  const result = await supervisor.run({
    contract: tiered ? contract.withToolTiers() : contract,
    tools: connected.tools(),
    provider: OpenAI.create({ model: 'scripted', baseUrl: `${model.url}/v1`, apiKey: 'k' }),
  }).result;
  await supervisor.close();
  store.close();
  await model.close();
  await connected.close();
  if (result.status !== 'finished') throw new Error(`the tiers run ended ${result.status}`);
  return bytes;
}
const allBytes = await firstToolBytes(false);
const coreBytes = await firstToolBytes(true);
console.log(
  JSON.stringify({
    bench: 'mcp',
    steps: STEPS,
    stepP50Ms: { customActs: acts.p50Ms, mcpStdio: mcp.p50Ms, customReads: reads.p50Ms },
    stepP99Ms: { customActs: acts.p99Ms, mcpStdio: mcp.p99Ms, customReads: reads.p99Ms },
    mcpAddedMs: +(mcp.p50Ms - acts.p50Ms).toFixed(3),
    mcpOverCustom: +(mcp.p50Ms / acts.p50Ms).toFixed(2),
    connectP50Ms: { tools1: one, tools200: many },
    catalogue200Ms: +(many - one).toFixed(2),
    firstToolArrayBytes: { all: allBytes, tiered: coreBytes, ratio: +(allBytes / coreBytes).toFixed(1) },
  }),
);
