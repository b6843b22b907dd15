// npm run demo: a real fan-out tree on the embedded scripted model. A root spawns
// eight workers that message each other and report back; progress comes from the
// event bus; the ledger and the trace's location are printed at the end.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Store, Supervisor } from 'io-harness';

const path = join(mkdtempSync(join(tmpdir(), 'io-harness-demo-')), 'runs.db');
const store = await Store.open(path);
const supervisor = await Supervisor.start(store, { maxConcurrentAgents: 4 });
const addresses = new Map();

supervisor.observe((event) => {
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
});

const handle = supervisor.run({
  task: 'Survey the project in eight parts and report back.',
  provider: {
    kind: 'module',
    module: fileURLToPath(new URL('./demo-script.mjs', import.meta.url)),
    options: { workers: 8 },
  },
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
await supervisor.close();
store.close();
