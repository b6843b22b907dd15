// One agent, 200 sequential tool steps (read_file of a short file) against a model served
// over loopback HTTP that answers at once, every step committed; beside a raw loop in the
// same process making the same 201 calls with fetch, appending to its transcript as the
// agent does, with one SQLite insert per step (better-sqlite3, WAL, synchronous=NORMAL)
// and nothing else. Three alternating passes; prints each wall and the ratio of medians.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { OpenAI, Policy, Store, Supervisor, TaskContract } from 'io-harness';

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

async function tree() {
  const dir = mkdtempSync(join(tmpdir(), 'io-harness-bench-'));
  const store = await Store.open(join(dir, 'runs.db'));
  const supervisor = await Supervisor.start(store);
  await supervisor.warm(1);
  const start = performance.now();
  const result = await supervisor.run({
    contract: TaskContract.workspace('read the notes', root),
    policy: Policy.default(),
    provider: OpenAI.create({ model: 'scripted', baseUrl: `${url}/v1`, apiKey: 'bench-key' }),
  }).result;
  const wallMs = performance.now() - start;
  await supervisor.close();
  store.close();
  rmSync(dir, { recursive: true, force: true });
  if (result.status !== 'finished') throw new Error(`the run ended ${result.status}`);
  return wallMs;
}

async function raw() {
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
      body: JSON.stringify({ model: 'scripted', messages }),
    });
    const message = (await response.json()).choices[0].message;
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

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const trees = [];
const raws = [];
// A pass of each first, unmeasured: module loading and the JIT.
await raw();
await tree();
for (let i = 0; i < PASSES; i++) {
  raws.push(await raw());
  trees.push(await tree());
}
server.kill('SIGTERM');
rmSync(root, { recursive: true, force: true });
console.log(
  JSON.stringify({
    bench: 'sequential-steps',
    steps: STEPS,
    rawMs: raws.map(Math.round),
    treeMs: trees.map(Math.round),
    ratio: +(median(trees) / median(raws)).toFixed(3),
  }),
);
