// node bench/context-growth.mjs — what measuring a request costs a step as the run grows.
// A step's request is measured to fit it to the window, and checked against the one before
// it (checkWindow: `fit`'s measure, then `toSend`). Before running sizes both measured the
// whole transcript and serialised the tool list every step, so a step cost more the longer
// the run; now each entry is measured once, when it arrives, and the tool list once.
//
// Runs of 500 steps (each an assistant turn with one read_file call and a 1.5 KB result,
// the workspace's 15 tool definitions, a large window so nothing folds), every step's
// measuring timed for the current Assembly and, side by side in the same loop, for the
// code before the change (support/assembly-before.mjs, a copy of it). A step's cost at
// step k is the mean over steps k−4..k+5 of one run; the figure is the median over 41
// runs, after 5 runs to warm up. The order of the two alternates from run to run.
import { performance } from 'node:perf_hooks';
import { Assembly } from '../dist/actors/agent/assembly.js';
import { measured } from '../dist/runtime/context/assembler.js';
import { workspaceTools } from '../dist/runtime/tools/families/workspace.js';
import { registryFor } from '../dist/runtime/tools/registry.js';
import { AssemblyBefore } from './support/assembly-before.mjs';

const STEPS = 500;
const RUNS = 41;
const WARM = 5;
const AT = [10, 100, 500];

const system = 'You are agent "root". '.repeat(40);
const tools = registryFor({ mode: 'workspace', workspaceTools }).definitions();
const restored = { shown: [], lastRequest: null, foldSeq: null, replaced: [], compactedLast: false };
const result = 'x'.repeat(1500);

const stepEntries = (step) => [
  {
    role: 'assistant',
    text: `step ${step}`,
    toolCalls: [{ id: `c${step}`, name: 'read_file', args: { path: `src/f${step}.ts` } }],
  },
  { role: 'tool', callId: `c${step}`, name: 'read_file', content: result, isError: false },
];

/** One run of both, step by step: each step's measuring time in µs, and the entries measured, for each. */
function run(newFirst) {
  const now = { transcript: [{ role: 'user', text: 'migrate the tests' }], times: [], entries: [] };
  const before = { transcript: [{ role: 'user', text: 'migrate the tests' }], times: [] };
  const assembly = new Assembly({ tokens: 1e9, source: 'stated' }, 0.8, restored, now.transcript, 0);
  const assemblyBefore = new AssemblyBefore();
  const timeNow = () => {
    const counted = measured.entries;
    const start = performance.now();
    assembly.measure(system, tools, now.transcript);
    assembly.toSend(system, tools);
    now.times.push((performance.now() - start) * 1000);
    now.entries.push(measured.entries - counted);
  };
  const timeBefore = () => {
    const start = performance.now();
    assemblyBefore.step(system, tools, before.transcript);
    before.times.push((performance.now() - start) * 1000);
  };
  for (let step = 1; step <= STEPS; step++) {
    if (newFirst) timeNow();
    timeBefore();
    if (!newFirst) timeNow();
    now.transcript.push(...stepEntries(step));
    before.transcript.push(...stepEntries(step));
    assembly.stepShown(step);
  }
  return { now, before };
}

const runs = [];
for (let index = 0; index < WARM + RUNS; index++) {
  const one = run(index % 2 === 0);
  if (index >= WARM) runs.push(one);
}
const median = (list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)];
const around = (times, step) => {
  const window = times.slice(step - 5, step + 5);
  return window.reduce((sum, time) => sum + time, 0) / window.length;
};
const at = (pick, step) => median(runs.map((one) => around(pick(one), step)));

const out = { bench: 'context-growth', steps: STEPS, runs: RUNS, tool_definitions: tools.length };
for (const step of AT) {
  out[`before_us_step_${step}`] = Number(at((one) => one.before.times, step).toFixed(2));
  out[`now_us_step_${step}`] = Number(at((one) => one.now.times, step).toFixed(2));
  out[`now_over_before_step_${step}`] = Number(
    (at((one) => one.now.times, step) / at((one) => one.before.times, step)).toFixed(4),
  );
  out[`now_entries_measured_step_${step}`] = runs[0].now.entries[step - 1];
}
out.before_growth_500_over_10 = Number((out.before_us_step_500 / out.before_us_step_10).toFixed(1));
out.now_growth_500_over_10 = Number((out.now_us_step_500 / out.now_us_step_10).toFixed(2));
console.log(JSON.stringify(out));
