// node bench/codeact.mjs — a twelve-file task (read twelve files of about 2 KB, write a
// summary) done as one program (`run_program`, in Python and in JavaScript) and as twelve
// read_file calls and a write_file, each a model turn, against the same scripted model on
// loopback, in the same run: model calls, the characters of every request sent (what a
// vendor bills as input; tokens estimated at four characters each), and wall time.
// BENCH_ROUNDS (5) each after one unmeasured; medians.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Policy, runWith, Store, TaskContract } from '../dist/index.js';
import { assistantTurns, ScriptedModelServer } from '../dist/testing/index.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const names = Array.from({ length: 12 }, (_, i) => `notes/${String(i + 1).padStart(2, '0')}.txt`);

const PROGRAMS = {
  python: [
    'lines = []',
    `for name in ${JSON.stringify(names)}:`,
    '    text = read_file(name)',
    '    lines.append("%s: %d words" % (name, len(text.split())))',
    'write_file("summary.txt", "\\n".join(lines) + "\\n")',
    'print("\\n".join(lines))',
  ].join('\n'),
  javascript: [
    'const lines = [];',
    `for (const name of ${JSON.stringify(names)}) lines.push(name + ': ' + read_file(name).split(/\\s+/).filter(Boolean).length + ' words');`,
    "write_file('summary.txt', lines.join('\\n') + '\\n');",
    "console.log(lines.join('\\n'));",
  ].join('\n'),
};

function answers(way) {
  if (way !== 'tool calls')
    return [{ toolCalls: [{ name: 'run_program', args: { language: way, source: PROGRAMS[way] } }] }];
  return [
    ...names.map((path) => ({ toolCalls: [{ name: 'read_file', args: { path } }] })),
    { toolCalls: [{ name: 'write_file', args: { path: 'summary.txt', content: 'the summary\n' } }] },
  ];
}

async function once(way) {
  const root = mkdtempSync(join(tmpdir(), 'io-harness-codeact-bench-'));
  for (const [i, name] of names.entries()) {
    const words = Array.from({ length: 300 }, (_, j) => `word${(i * 300 + j) % 997}`).join(' ');
    if (i === 0) mkdirSync(join(root, 'notes'));
    writeFileSync(join(root, name), `${words}\n`);
  }
  const steps = [...answers(way), { text: 'done' }];
  const server = await ScriptedModelServer.start((call) => steps[Math.min(assistantTurns(call), steps.length - 1)]);
  const store = await Store.open(join(root, '..', `${root.split('/').pop()}.db`));
  const provider = { kind: 'openai', model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' };
  let contract = TaskContract.workspace('summarise the notes', root);
  if (way !== 'tool calls') contract = contract.withCodeAct({ languages: [way] });
  const started = performance.now();
  const result = await runWith(contract, provider, store, Policy.default());
  const wall = performance.now() - started;
  if (result.outcome.kind !== 'finished') throw new Error(`${way}: ${JSON.stringify(result.outcome)}`);
  const chars = server.calls.reduce((sum, call) => sum + JSON.stringify(call.body).length, 0);
  const calls = server.calls.length;
  await server.close();
  store.close();
  rmSync(root, { recursive: true, force: true });
  rmSync(`${root}.db`, { force: true });
  for (const suffix of ['-wal', '-shm']) rmSync(`${root}.db${suffix}`, { force: true });
  return { wall, chars, calls };
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const rows = [];
for (const way of ['tool calls', 'python', 'javascript']) {
  await once(way);
  const runs = [];
  for (let round = 0; round < ROUNDS; round++) runs.push(await once(way));
  rows.push({ way, calls: runs[0].calls, chars: runs[0].chars, wall: median(runs.map((r) => r.wall)) });
}
const base = rows[0];
console.log('| done as | model calls | request characters (≈ input tokens) | wall, median | against tool calls |');
console.log('| --- | --- | --- | --- | --- |');
for (const row of rows)
  console.log(
    `| ${row.way === 'tool calls' ? '13 tool calls' : `one ${row.way} program`} | ${row.calls} | ${row.chars} (≈ ${Math.round(row.chars / 4)}) | ${row.wall.toFixed(1)} ms | ${(row.wall / base.wall).toFixed(2)}× wall, ${(row.chars / base.chars).toFixed(2)}× input |`,
  );
