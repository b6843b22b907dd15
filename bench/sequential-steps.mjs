// One agent, 200 sequential tool steps (read_file of a short file) against a model served
// over loopback HTTP that answers at once, every step committed; beside a raw loop in the
// same process making the same 201 calls with fetch, appending to its transcript as the
// agent does, with one SQLite insert per step (better-sqlite3, WAL, synchronous=NORMAL)
// and nothing else. Three alternating passes; prints each wall and the ratio of medians,
// for a supervisor started for each run (cold threads) and for one kept across runs.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { OpenAI, Policy, Store, Supervisor, TaskContract } from 'io-harness';
import { workspaceTools } from '../dist/runtime/tools/families/workspace.js';
import { registryFor } from '../dist/runtime/tools/registry.js';

const STEPS = Number(process.env.BENCH_STEPS ?? 200);
const PASSES = Number(process.env.BENCH_PASSES ?? 3);
const server = spawn(
  process.execPath,
  [fileURLToPath(new URL('./support/sequential-server.mjs', import.meta.url)), String(STEPS)],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
const [line] = await once(server.stdout, 'data');
const url = String(line).trim();
const root = mkdtempSync(join(tmpdir(), 'io-harness-bench-repo-'));
writeFileSync(join(root, 'notes.txt'), 'a short file\n');

/**
 * One run of the agent on a supervisor: a fresh one started for the run (`cold`: its
 * threads load their modules and warm their JIT inside the pass), or the one supervisor
 * every warm pass shares, as an embedder's process keeps one.
 */
async function tree(shared) {
  const dir = shared ? null : mkdtempSync(join(tmpdir(), 'io-harness-bench-'));
  const store = shared?.store ?? (await Store.open(join(dir, 'runs.db')));
  const supervisor = shared?.supervisor ?? (await Supervisor.start(store));
  if (!shared) await supervisor.warm(1);
  const start = performance.now();
  const result = await supervisor.run({
    contract: TaskContract.workspace('read the notes', root),
    policy: Policy.default(),
    provider: OpenAI.create({ model: 'scripted', baseUrl: `${url}/v1`, apiKey: 'bench-key' }),
  }).result;
  const wallMs = performance.now() - start;
  if (!shared) {
    await supervisor.close();
    store.close();
    rmSync(dir, { recursive: true, force: true });
  }
  if (result.status !== 'finished') throw new Error(`the run ended ${result.status}`);
  return wallMs;
}

/** The tool definitions a workspace agent sends, on the OpenAI wire: for the raw loop that sends what the agent sends. */
const WORKSPACE_TOOLS = registryFor({ mode: 'workspace', workspaceTools })
  .definitions()
  .map((definition) => ({ type: 'function', function: definition }));

/**
 * The raw loop: `same` sends the request the agent sends (its tool definitions, a stream
 * asked for and read to its end) rather than a bare one answered with one JSON body.
 */
async function raw(same = false) {
  const dir = mkdtempSync(join(tmpdir(), 'io-harness-bench-'));
  const db = new Database(join(dir, 'raw.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec('CREATE TABLE steps (seq INTEGER PRIMARY KEY, completion TEXT NOT NULL, observation TEXT NOT NULL)');
  const insert = db.prepare('INSERT INTO steps (seq, completion, observation) VALUES (?, ?, ?)');
  const messages = [
    { role: 'system', content: 'You are agent "root".' },
    { role: 'user', content: 'read the notes' },
  ];
  const start = performance.now();
  for (let seq = 1; ; seq++) {
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer bench-key' },
      body: JSON.stringify({
        model: 'scripted',
        messages,
        ...(same ? { tools: WORKSPACE_TOOLS, stream: true, stream_options: { include_usage: true } } : {}),
      }),
    });
    const message = same ? await streamedMessage(response) : (await response.json()).choices[0].message;
    messages.push(message);
    const observations = (message.tool_calls ?? []).map((call) => ({ call: call.id, content: 'a short file\n' }));
    for (const observation of observations) {
      messages.push({ role: 'tool', tool_call_id: observation.call, content: observation.content });
    }
    insert.run(seq, JSON.stringify(message), JSON.stringify(observations));
    if (observations.length === 0) break;
  }
  const wallMs = performance.now() - start;
  db.close();
  rmSync(dir, { recursive: true, force: true });
  return wallMs;
}

/** A streamed answer read to its end, its text and tool calls put together from the deltas. */
async function streamedMessage(response) {
  const text = await response.text();
  const message = { role: 'assistant', content: '' };
  const calls = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
    const delta = JSON.parse(line.slice(6)).choices?.[0]?.delta;
    if (!delta) continue;
    if (delta.content) message.content += delta.content;
    for (const call of delta.tool_calls ?? []) {
      calls[call.index] ??= { id: call.id, type: 'function', function: { name: '', arguments: '' } };
      if (call.function?.name) calls[call.index].function.name += call.function.name;
      if (call.function?.arguments) calls[call.index].function.arguments += call.function.arguments;
    }
  }
  if (calls.length > 0) message.tool_calls = calls;
  return message;
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const trees = [];
const warmTrees = [];
const raws = [];
const sameRaws = [];
// A pass of each first, unmeasured: module loading and the JIT.
await raw();
await raw(true);
await tree();
const sharedDir = mkdtempSync(join(tmpdir(), 'io-harness-bench-'));
const sharedStore = await Store.open(join(sharedDir, 'runs.db'));
const shared = { store: sharedStore, supervisor: await Supervisor.start(sharedStore) };
await tree(shared);
for (let i = 0; i < PASSES; i++) {
  raws.push(await raw());
  sameRaws.push(await raw(true));
  trees.push(await tree());
  warmTrees.push(await tree(shared));
}
await shared.supervisor.close();
sharedStore.close();
rmSync(sharedDir, { recursive: true, force: true });
server.kill('SIGTERM');
rmSync(root, { recursive: true, force: true });
console.log(
  JSON.stringify({
    bench: 'sequential-steps',
    steps: STEPS,
    rawMs: raws.map(Math.round),
    sameRequestRawMs: sameRaws.map(Math.round),
    coldTreeMs: trees.map(Math.round),
    warmTreeMs: warmTrees.map(Math.round),
    coldRatio: +(median(trees) / median(raws)).toFixed(3),
    warmRatio: +(median(warmTrees) / median(raws)).toFixed(3),
    warmVsSameRequest: +(median(warmTrees) / median(sameRaws)).toFixed(3),
  }),
);
