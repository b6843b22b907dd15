// A program of the package's user, run by test/bundle.test.ts from inside the package, so
// 'io-harness' resolves as it does for an installed copy: to what package.json exports
// (dist/bundle/). A workspace agent on worker threads greps (on the search pool's thread),
// runs a command (contained), and answers; then the viewer serves its page over the store.
// Prints what the model was shown and what the viewer answered, as JSON.
// node test/support/bundle-program.mjs <workspace> <store file>
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { OpenAI, Policy, runWith, Store, TaskContract } from 'io-harness';
import { assistantTurns, ScriptedModelServer, wireToolResults } from 'io-harness/testing';
import { viewer } from 'io-harness/viewer';

const [workspace, storeFile] = process.argv.slice(2);
writeFileSync(join(workspace, 'notes.txt'), 'what the bundle holds\n');
const turns = [
  { toolCalls: [{ name: 'grep', args: { pattern: 'bundle holds' } }] },
  { toolCalls: [{ name: 'exec', args: { argv: ['node', '-e', 'console.log("six times seven is", 6 * 7)'] } }] },
  { text: 'found it, and ran it' },
];
const model = await ScriptedModelServer.start((call) => turns[Math.min(assistantTurns(call), turns.length - 1)]);
const store = await Store.open(storeFile);
const result = await runWith(
  TaskContract.workspace('find the note and run the sum', workspace),
  OpenAI.create({ model: 'scripted', baseUrl: `${model.url}/v1`, apiKey: 'unused' }),
  store,
  Policy.default().layer('app').allowExec('node -e*'),
);
const page = await viewer(store);
const response = await fetch(page.url);
const html = await response.text();
await page.close();
console.log(
  JSON.stringify({
    outcome: result.outcome.kind,
    shown: wireToolResults(model.calls.at(-1)).map((tool) => tool.content),
    page: { status: response.status, html: html.includes('<html') },
  }),
);
await model.close();
store.close();
