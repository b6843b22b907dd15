import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OpenAI, Policy, runWith, Store, TaskContract, Verification } from 'io-harness';
import { assistantTurns, ScriptedModelServer } from 'io-harness/testing';

// The project: add() subtracts, and its test says so.
const repo = mkdtempSync(join(tmpdir(), 'io-harness-example-'));
mkdirSync(join(repo, 'src'));
mkdirSync(join(repo, 'test'));
writeFileSync(join(repo, 'package.json'), '{ "name": "tiny", "type": "module" }\n');
writeFileSync(join(repo, 'src', 'add.js'), 'export function add(a, b) {\n  return a - b;\n}\n');
writeFileSync(
  join(repo, 'test', 'add.test.js'),
  "import assert from 'node:assert/strict';\nimport { test } from 'node:test';\nimport { add } from '../src/add.js';\n\ntest('adds', () => assert.equal(add(2, 3), 5));\n",
);

// What the model does, turn by turn.
const fix = '@@ -1,3 +1,3 @@\n export function add(a, b) {\n-  return a - b;\n+  return a + b;\n }\n';
const turns = [
  { toolCalls: [{ name: 'read_file', args: { path: 'src/add.js' } }] },
  { toolCalls: [{ name: 'patch_file', args: { path: 'src/add.js', patch: fix } }] },
  { toolCalls: [{ name: 'exec', args: { argv: ['node', '--test'] } }] },
  { text: 'add() subtracted; it adds now and the suite passes.' },
];
const model = await ScriptedModelServer.start((call) => turns[Math.min(assistantTurns(call), turns.length - 1)]);
const provider = OpenAI.create({ model: 'scripted', baseUrl: `${model.url}/v1`, apiKey: 'unused' });

const store = await Store.open(process.argv[2] ?? join(repo, '..', `${Date.now()}-runs.db`));
const contract = TaskContract.workspace('the tests fail; fix them', repo)
  .withVerification(Verification.command(['node', '--test']))
  .withBudget({ steps: 20 });
// Reads and writes in the workspace are allowed; commands are asked about, except the tests.
const policy = Policy.default().layer('app').allowExec('node --test*');

const result = await runWith(contract, provider, store, policy);
console.log('outcome:', result.outcome);
console.log('usage:  ', result.usage);
console.log(
  'gate:   ',
  store.gateEvaluations(result.runId).map((gate) => gate.verdict),
);
console.log(store.patch(result.runId));
await model.close();
store.close();
