import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Memory, OpenAI, Policy, runWith, Store, TaskContract } from 'io-harness';
import { assistantTurns, ScriptedModelServer } from 'io-harness/testing';

// A repository, and a model on loopback that keeps two notes, then tries to change one.
const repo = mkdtempSync(join(tmpdir(), 'memory-example-'));
writeFileSync(join(repo, 'package.json'), '{ "scripts": { "test": "vitest run" } }\n');
const turns = [
  [{ toolCalls: [{ name: 'remember', args: { key: 'test-command', text: 'npm test runs vitest once.' } }] }],
  [
    { toolCalls: [{ name: 'remember', args: { key: 'runner', text: 'npm test runs vitest once' } }] },
    { text: 'noted' },
  ],
  [{ toolCalls: [{ name: 'remember', args: { key: 'test-command', text: 'use jest' } }] }, { text: 'kept as it was' }],
];
let run = 0;
const model = await ScriptedModelServer.start((call) => {
  const script = turns[run] ?? [];
  return script[assistantTurns(call)] ?? { text: 'done' };
});
const provider = OpenAI.create({ model: 'scripted', baseUrl: `${model.url}/v1`, apiKey: 'unused' });
const store = await Store.open(process.argv[2] ?? 'runs.db');
const contract = TaskContract.workspace('learn how this repository is tested', repo).withMemory();

for (; run < 3; run++) {
  const { runId } = await runWith(contract, provider, store, Policy.default());
  for (const step of store.steps(runId))
    for (const observation of step.observations)
      console.log(`run ${run + 1} ${observation.name}: ${observation.content}`);
  // After the second run the operator pins the note: it is a correction no run may overwrite.
  if (run === 1) Memory.of(store, { workspace: repo }).pin('test-command');
}

const memory = Memory.of(store, { workspace: repo });
for (const note of memory.notes())
  console.log(`kept: ${note.key} (runs that drew on it: ${note.runs}, pinned: ${note.pinned})`);
await model.close();
store.close();
