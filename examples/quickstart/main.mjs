import { OpenAI, Store, Supervisor } from 'io-harness';
import { ScriptedModelServer, systemText } from 'io-harness/testing';

// A model on loopback that speaks the OpenAI wire; with a key, use OpenAI.fromEnv() instead.
const model = await ScriptedModelServer.start((call) => {
  const counter = systemText(call).includes('"counter"');
  if (counter) return { text: '42 files' };
  return call.body.messages.some((message) => message.role === 'tool')
    ? { text: 'the counter reported back' }
    : { toolCalls: [{ name: 'spawn_agent', args: { task: 'count the files', as: 'counter' } }] };
});
const provider = OpenAI.create({ model: 'scripted', baseUrl: `${model.url}/v1`, apiKey: 'unused' });

const store = await Store.open(process.argv[2] ?? 'runs.db');
const supervisor = await Supervisor.start(store, { maxConcurrentAgents: 16 });
supervisor.observe((event) => console.log(event.type, event.runId));

const handle = supervisor.run({ task: 'survey the repository', provider, budget: { steps: 50, tokens: 100_000 } });
const result = await handle.result; // { status: 'finished', reply, spent: { steps, tokens }, ... }
console.log(result, store.ledger(result.rootId)?.root.spent);
await supervisor.close();
await model.close();
