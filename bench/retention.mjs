// node bench/retention.mjs — what deleting a session costs. A store holds twelve sessions,
// each one turn whose run has 1,000 committed steps (with their draws, events and model
// calls), written as the store writes them. On a fresh copy of that file each time:
// store.deleteSession of one session, a raw DELETE of the same rows by hand-written
// statements in one transaction (the floor), ten deleteSession calls, one
// sweepSessions of the same ten, and the floor of each of those two: ten raw deletions
// one transaction each, and one raw deletion of all ten together. Seven rounds after one
// unmeasured; p50 of each, and the ratios against the raw DELETE and against ten
// deletions, from the same run.
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Store } from '../dist/index.js';

const SESSIONS = 12;
const STEPS = 1000;
const ROUNDS = 7;
const dir = mkdtempSync(join(tmpdir(), 'io-harness-bench-retention-'));
const template = join(dir, 'template.db');

(await Store.open(template)).close();
const db = new Database(template);
const now = Date.now();
db.transaction(() => {
  for (let s = 0; s < SESSIONS; s++) {
    const session = `session-${s}`;
    const run = `run-${s}`;
    db.prepare('INSERT INTO sessions (session_id, root, head, created_at) VALUES (?, ?, ?, ?)').run(
      session,
      '/tmp/repo',
      `turn-${s}`,
      now - 1000 + s,
    );
    db.prepare(
      `INSERT INTO turns (turn_id, session_id, parent, seq, run_id, user_text, reply, status, created_at, ended_at)
       VALUES (?, ?, NULL, 1, ?, 'fix the tests', 'done', 'finished', ?, ?)`,
    ).run(`turn-${s}`, session, run, now, now);
    db.prepare(
      `INSERT INTO runs (run_id, root_id, parent_id, address, depth, ancestry, status, task, spec, created_at, last_seq, generation)
       VALUES (?, ?, NULL, 'root', 0, '[]', 'finished', 'fix the tests', '{}', ?, ?, 1)`,
    ).run(run, run, now, STEPS);
    db.prepare(
      `INSERT INTO ledger (run_id, root_id, steps_spent, tokens_spent, started_at, max_wait_secs)
       VALUES (?, ?, ?, ?, ?, 60)`,
    ).run(run, run, STEPS, STEPS * 1200, now);
    const step = db.prepare(
      'INSERT INTO steps (run_id, seq, generation, completion, observations, usage, at) VALUES (?, ?, 1, ?, ?, ?, ?)',
    );
    const draw = db.prepare(
      'INSERT INTO draws (draw_id, root_id, run_id, seq, generation, steps, tokens, at) VALUES (?, ?, ?, ?, 1, 1, 1200, ?)',
    );
    const event = db.prepare(
      'INSERT INTO events (root_id, run_id, seq, generation, type, data, at) VALUES (?, ?, ?, 1, ?, ?, ?)',
    );
    const call = db.prepare(
      `INSERT INTO model_calls (root_id, run_id, seq, attempt, generation, provider, model, outcome, input_tokens, output_tokens,
         cache_read_tokens, cache_write_tokens, reasoning_tokens, at) VALUES (?, ?, ?, 0, 1, 'openai', 'm', 'ok', 1000, 200, 0, 0, 0, ?)`,
    );
    const completion = JSON.stringify({
      text: 'reading the file',
      toolCalls: [{ id: 'c1', name: 'read_file', args: { path: 'src/a.js' } }],
    });
    const observations = JSON.stringify([
      { callId: 'c1', name: 'read_file', content: 'x'.repeat(400), isError: false },
    ]);
    for (let seq = 1; seq <= STEPS; seq++) {
      step.run(run, seq, completion, observations, '{"inputTokens":1000,"outputTokens":200}', now);
      draw.run(`${run}:${seq}`, run, run, seq, now);
      event.run(run, run, seq, 'tool-call', '{"name":"read_file"}', now);
      event.run(run, run, seq, 'step-committed', '{}', now);
      call.run(run, run, seq, now);
    }
  }
})();
db.close();

/**
 * The rows of the sessions `indexes` deleted by hand-written statements in one
 * transaction on one connection: what any code deleting them must at least do.
 */
function rawDelete(path, indexes) {
  const raw = new Database(path);
  const runs = indexes.map((index) => `run-${index}`);
  const sessions = indexes.map((index) => `session-${index}`);
  const list = indexes.map(() => '?').join(', ');
  raw
    .transaction(() => {
      for (const table of ['steps', 'checkpoints', 'intents', 'drafts', 'step_images', 'steers'])
        raw.prepare(`DELETE FROM ${table} WHERE run_id IN (${list})`).run(...runs);
      for (const table of [
        'ledger',
        'draws',
        'events',
        'mailbox',
        'spawn_queue',
        'model_calls',
        'restore_points',
        'file_changes',
        'questions',
      ])
        raw.prepare(`DELETE FROM ${table} WHERE root_id IN (${list})`).run(...runs);
      raw.prepare(`DELETE FROM runs WHERE root_id IN (${list})`).run(...runs);
      raw.prepare(`DELETE FROM turns WHERE session_id IN (${list})`).run(...sessions);
      raw.prepare(`DELETE FROM sessions WHERE session_id IN (${list})`).run(...sessions);
    })
    .immediate();
  raw.close();
}

async function timed(body) {
  const path = join(dir, 'copy.db');
  rmSync(path, { force: true });
  rmSync(`${path}-wal`, { force: true });
  copyFileSync(template, path);
  const store = await Store.open(path);
  const start = performance.now();
  body(store, path);
  const ms = performance.now() - start;
  store.close();
  return ms;
}

const TEN = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
const cases = {
  raw: (_store, path) => rawDelete(path, [0]),
  rawTen: (_store, path) => {
    for (const index of TEN) rawDelete(path, [index]);
  },
  rawSweep: (_store, path) => rawDelete(path, TEN),
  deleteSession: (store) => store.deleteSession('session-0'),
  tenDeletes: (store) => {
    for (let s = 0; s < 10; s++) store.deleteSession(`session-${s}`);
  },
  sweepOfTen: (store) => store.sweepSessions({ before: now - 1000 + 10 }),
};
const samples = Object.fromEntries(Object.keys(cases).map((name) => [name, []]));
for (let round = 0; round <= ROUNDS; round++) {
  for (const [name, body] of Object.entries(cases)) {
    const ms = await timed(body);
    if (round > 0) samples[name].push(ms);
  }
}
const p50 = (list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)];
const figures = Object.fromEntries(Object.entries(samples).map(([name, list]) => [name, Number(p50(list).toFixed(2))]));
console.log(
  JSON.stringify({
    bench: 'retention',
    steps: STEPS,
    p50Ms: figures,
    deleteOverRaw: Number((figures.deleteSession / figures.raw).toFixed(2)),
    tenDeletesOverSweep: Number((figures.tenDeletes / figures.sweepOfTen).toFixed(2)),
    rawTenOverRawSweep: Number((figures.rawTen / figures.rawSweep).toFixed(2)),
    sweepOverRawSweep: Number((figures.sweepOfTen / figures.rawSweep).toFixed(2)),
  }),
);
rmSync(dir, { recursive: true, force: true });
