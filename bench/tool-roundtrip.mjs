// The round trip of an embedder's tool (agent thread -> main thread -> back, over the
// host channel) beside a built-in read_file, in the same run: two workspace runs on a
// model that answers at once, every step one call. The difference of the step gaps is
// the tool's cost over a read done in the agent's own thread.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Policy, Store, Supervisor, TaskContract, tool } from 'io-harness';
import { z } from 'zod';
import { percentile, stepGaps } from './support/gaps.mjs';
import { tempDir } from './support/temp.mjs';

const STEPS = Number(process.env.BENCH_STEPS ?? 1000);
const root = tempDir('io-harness-bench-repo-');
writeFileSync(join(root, 'notes.txt'), 'a short file\n');
const echo = tool({
  name: 'echo',
  description: 'Returns what it is given.',
  parameters: z.object({ text: z.string() }),
  effect: 'reads',
  execute: ({ text }) => text,
});

async function measure(name, args) {
  const store = await Store.open(join(tempDir('io-harness-bench-'), 'runs.db'));
  const supervisor = await Supervisor.start(store, { tools: [echo] });
  const marks = [];
  supervisor.observe((event) => {
    if (event.type === 'step-end') marks.push(performance.now());
  });
  const result = await supervisor.run({
    contract: TaskContract.workspace('call a tool', root),
    policy: Policy.default(),
    provider: {
      kind: 'module',
      module: fileURLToPath(new URL('./support/tool-model.mjs', import.meta.url)),
      options: { steps: STEPS, name, args },
    },
  }).result;
  await supervisor.close();
  store.close();
  const gaps = stepGaps(marks, STEPS);
  const pct = (p) => percentile(gaps, p);
  return { status: result.status, p50Ms: +pct(50).toFixed(3), p99Ms: +pct(99).toFixed(3) };
}

const builtIn = await measure('read_file', { path: 'notes.txt' });
const custom = await measure('echo', { text: 'a short text' });
console.log(
  JSON.stringify({
    bench: 'tool-roundtrip',
    steps: STEPS,
    readFile: builtIn,
    customTool: custom,
    roundTripP50Ms: +(custom.p50Ms - builtIn.p50Ms).toFixed(3),
    ratioP50: +(custom.p50Ms / builtIn.p50Ms).toFixed(2),
  }),
);
