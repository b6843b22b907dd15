// main.mjs
import { fileURLToPath } from 'node:url';
import { Store, Supervisor } from 'io-harness';

const store = await Store.open(process.argv[2] ?? 'runs.db');
const supervisor = await Supervisor.start(store, { maxConcurrentAgents: 16 });
supervisor.observe((event) => console.log(event.type, event.runId));

const handle = supervisor.run({
  task: 'survey the repository',
  provider: { kind: 'module', module: fileURLToPath(new URL('./model.mjs', import.meta.url)) },
  budget: { steps: 50, tokens: 100_000 },
});
const result = await handle.result; // { status: 'finished', reply, spent: { steps, tokens }, ... }
console.log(result, store.ledger(result.rootId).root.spent);
await supervisor.close();
