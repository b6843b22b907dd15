// npm run demo: a real fan-out tree on the embedded scripted model server. A root spawns
// eight workers that message each other and report back; every agent talks to the model
// over HTTP in the OpenAI wire format, from its own worker thread; progress comes from
// the event bus, and the root's words stream in as the model writes them (live events);
// the ledger and the trace's location are printed at the end.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OpenAI, Store, Supervisor } from 'io-harness';
import { ScriptedModelServer } from 'io-harness/testing';
import { demoModel } from './demo-script.mjs';

const model = await ScriptedModelServer.start(demoModel({ workers: 8 }));
const path = join(mkdtempSync(join(tmpdir(), 'io-harness-demo-')), 'runs.db');
const store = await Store.open(path);
const supervisor = await Supervisor.start(store, { maxConcurrentAgents: 4 });
const addresses = new Map();

let streaming = false;
supervisor.observe(
  (event) => {
    // A live event is what an agent does as it happens (here, the root's text as it streams); it is never committed.
    if (event.live) {
      if (event.type !== 'text-delta' || event.address !== 'root') return;
      if (!streaming) process.stdout.write('root      streams: ');
      streaming = true;
      process.stdout.write(event.text);
      return;
    }
    // The step's committed events follow its text: end the streamed line first.
    if (streaming) {
      process.stdout.write('\n');
      streaming = false;
    }
    report(event);
  },
  { live: true },
);

function report(event) {
  if (event.type === 'spawn-queued') addresses.set(event.childId, event.address);
  if (event.type === 'run-start') addresses.set(event.runId, event.address);
  const who = (addresses.get(event.runId) ?? event.runId.slice(0, 8)).padEnd(9);
  switch (event.type) {
    case 'spawn-queued':
      console.log(`${who} spawned ${event.address} (queued)`);
      break;
    case 'spawn-started':
      console.log(`${who} admitted`);
      break;
    case 'message-sent':
      console.log(`${who} -> ${event.to}`);
      break;
    case 'message-read':
      console.log(`${who} read ${event.msgIds.length} message(s)`);
      break;
    case 'run-end':
      console.log(`${who} ${event.status}${event.reply ? `: ${event.reply}` : ''}`);
      break;
  }
}

const handle = supervisor.run({
  task: 'Survey the project in eight parts and report back.',
  // With a real key this line is OpenAI.fromEnv(); the scripted server speaks the same wire.
  provider: OpenAI.create({ model: 'scripted', baseUrl: `${model.url}/v1`, apiKey: 'no-key-needed' }),
  budget: { steps: 200, tokens: 200_000 },
});
const result = await handle.result;
const ledger = store.ledger(result.rootId);
console.log('');
console.log(`outcome: ${result.status} — ${result.reply}`);
console.log(
  `ledger:  ${ledger.root.spent.steps}/${ledger.root.ceilings.steps} steps, ${ledger.root.spent.tokens}/${ledger.root.ceilings.tokens} tokens, ${ledger.draws.length} draws over ${result.runs} runs`,
);
console.log(`trace:   ${path} (root run ${result.rootId})`);
console.log(`model:   ${model.calls.length} calls over HTTP to the scripted model server at ${model.url}`);
await supervisor.close();
await model.close();
store.close();
