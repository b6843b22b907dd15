// node bench/context.mjs — what fitting requests to a window costs, and what it keeps cached.
//  - Per step: measuring a request and checking that it extends the one before it (what
//    the agent loop adds to every step: the step's two new entries measured into the
//    running size, the rest compared by identity), at 200 transcript entries, beside the
//    same work as it was before running sizes (support/assembly-before.mjs, every entry
//    measured twice and the tool list serialised three times) and beside serialising the
//    same request as JSON (what the wire does to it anyway). p50 of 2,001 after 200 warm.
//    How the per-step cost grows with the run: bench/context-growth.mjs.
//  - Planning a fold at 200 entries, p50 of 2,001.
//  - Cache share: a 50-step run over the scripted model server, a 16,000-token window at a
//    share of 0.8, every request recorded. A vendor's prefix cache is modelled as serving
//    the bytes a request shares with the one before it, from the start (tool definitions,
//    then the messages, as the vendors order them); the share is the cached bytes over all
//    bytes sent. Beside it, the same 50 steps assembled by a sliding window (the latest
//    steps that fit, the oldest dropped from the head each request: what a harness without
//    folds does to stay under a window), measured the same way.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { OpenAI, Policy, runWith, Store, TaskContract } from 'io-harness';
import { ScriptedModelServer } from 'io-harness/testing';
import { planFold, prefixBreak } from '../dist/runtime/context/assembler.js';
import { RunningSize } from '../dist/runtime/context/running-size.js';
import { AssemblyBefore } from './support/assembly-before.mjs';
import { tempDir } from './support/temp.mjs';

const p50 = (list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)];
const timed = (body, rounds = 2001, warm = 200) => {
  const samples = [];
  for (let round = 0; round < warm + rounds; round++) {
    const start = performance.now();
    body();
    if (round >= warm) samples.push(performance.now() - start);
  }
  return p50(samples) * 1000;
};

// A transcript of 200 entries: an opening, then 66 steps of a call and its 1.5 KB result, and a steer each few.
const system = 'You are agent "root". '.repeat(40);
const tools = Array.from({ length: 12 }, (_, n) => ({
  name: `tool_${n}`,
  description: 'Does one thing to the workspace. '.repeat(4),
  parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
}));
const transcript = [{ role: 'user', text: 'migrate the tests' }];
for (let step = 0; transcript.length < 200; step++) {
  transcript.push({
    role: 'assistant',
    text: `step ${step}`,
    toolCalls: [{ id: `c${step}`, name: 'read_file', args: { path: `src/f${step}.ts` } }],
  });
  transcript.push({ role: 'tool', callId: `c${step}`, name: 'read_file', content: 'x'.repeat(1500), isError: false });
}
// A step: the last two entries arrive (fresh objects each round, so each is measured), the
// request is measured and checked against the one that ended before them.
const running = new RunningSize();
const [lastCall, lastResult] = transcript.slice(-2);
const sent = { system, tools, length: transcript.length - 2 };
const assembleUs = timed(() => {
  transcript.splice(-2, 2, { ...lastCall }, { ...lastResult });
  running.chars(system, tools, transcript);
  prefixBreak(sent, { system, tools, transcript }, running.takeReplaced());
});
const assembledBefore = new AssemblyBefore();
const beforeUs = timed(() => assembledBefore.step(system, tools, transcript));
const serialiseUs = timed(() => JSON.stringify({ system, tools, messages: transcript }));
const steps = transcript
  .flatMap((entry, index) => (entry.role === 'assistant' && index > 0 ? [index] : []))
  .map((_, n) => n + 1);
const planUs = timed(() => planFold(transcript, 0, steps, 40_000));

// The 50-step run, every request's body kept.
const root = tempDir('io-harness-bench-context-');
writeFileSync(join(root, 'big.txt'), `${'line of the file to read, thirty-odd characters\n'.repeat(40)}`);
let answered = 0;
const server = await ScriptedModelServer.start((call) => {
  if (JSON.stringify(call.body.messages.at(-1)?.content ?? '').includes('Your context is nearly full'))
    return { text: 'notes: big.txt read many times; keep reading.' };
  answered++;
  return answered <= 50
    ? { text: `read ${answered}`, toolCalls: [{ id: `r${answered}`, name: 'read_file', args: { path: 'big.txt' } }] }
    : { text: 'done' };
});
const store = await Store.open(join(tempDir(), 'runs.db'));
const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
const window = 16_000;
const contract = TaskContract.workspace('read big.txt fifty times', root)
  .withBudget({ steps: 60 })
  .withContext({ window });
const result = await runWith(contract, provider, store, Policy.default());
if (result.outcome.kind !== 'finished') throw new Error(`the run ended ${result.outcome.kind}`);
const bodies = server.calls.map((call) => call.body);
await server.close();

const vendorView = (body) => JSON.stringify(body.tools ?? []) + body.messages.map((m) => JSON.stringify(m)).join('');
const common = (a, b) => {
  let n = 0;
  while (n < a.length && n < b.length && a.charCodeAt(n) === b.charCodeAt(n)) n++;
  return n;
};
const share = (views) => {
  let cached = 0;
  let sent = 0;
  views.forEach((view, index) => {
    sent += view.length;
    if (index > 0) cached += common(views[index - 1], view);
  });
  return cached / sent;
};
const folded = share(bodies.map(vendorView));

// The sliding window: the same steps, the latest that fit under the same limit, as one grows.
const last = bodies.filter((body) => !JSON.stringify(body.messages.at(-1)?.content ?? '').includes('nearly full'));
const [head, opening] = last[0].messages;
const stepsSeen = [];
for (const body of last) {
  const messages = body.messages;
  const tail = messages.slice(-2);
  if (tail[0]?.role === 'assistant') stepsSeen.push(tail);
}
const limitChars = window * 0.8 * 4;
const sliding = [];
for (let upTo = 0; upTo <= stepsSeen.length; upTo++) {
  let kept = stepsSeen.slice(0, upTo);
  const size = (list) => vendorView({ tools: last[0].tools, messages: [head, opening, ...list.flat()] }).length;
  while (kept.length > 0 && size(kept) > limitChars) kept = kept.slice(1);
  sliding.push(vendorView({ tools: last[0].tools, messages: [head, opening, ...kept.flat()] }));
}
const slidingShare = share(sliding);

const out = {
  bench: 'context',
  entries: transcript.length,
  assemble_us_p50: Number(assembleUs.toFixed(2)),
  assemble_before_us_p50: Number(beforeUs.toFixed(1)),
  assemble_over_before: Number((assembleUs / beforeUs).toFixed(4)),
  serialise_us_p50: Number(serialiseUs.toFixed(1)),
  assemble_over_serialise: Number((assembleUs / serialiseUs).toFixed(3)),
  plan_fold_us_p50: Number(planUs.toFixed(1)),
  run_requests: bodies.length,
  folds: bodies.length - last.length,
  cache_share_folded: Number(folded.toFixed(3)),
  cache_share_sliding_window: Number(slidingShare.toFixed(3)),
};
store.close();
console.log(JSON.stringify(out));
