import { OpenAI, Policy, Store, Supervisor, tool } from 'io-harness';
import { assistantTurns, ScriptedModelServer } from 'io-harness/testing';
import { z } from 'zod';

// A tool of your own: a zod schema for its arguments, a function that runs on this thread.
const orders = new Map([['A-1001', { status: 'shipped', eta: '2026-12-04' }]]);
const lookupOrder = tool({
  name: 'lookup_order',
  description: 'Looks up an order by its id and says where it is.',
  parameters: z.object({
    id: z
      .string()
      .regex(/^A-\d{4}$/)
      .describe('The order id, such as A-1001'),
  }),
  effect: 'reads', // only looks; an 'acts' tool is journaled before each call
  execute: ({ id }) => orders.get(id) ?? `no order ${id}`,
});

// A model on loopback that calls the tool once (with a bad id, then a good one), then answers.
const turns = [
  { toolCalls: [{ name: 'lookup_order', args: { id: '1001' } }] },
  { toolCalls: [{ name: 'lookup_order', args: { id: 'A-1001' } }] },
  { text: 'Order A-1001 has shipped and arrives on 2026-12-04.' },
];
const model = await ScriptedModelServer.start((call) => turns[Math.min(assistantTurns(call), turns.length - 1)]);
const provider = OpenAI.create({ model: 'scripted', baseUrl: `${model.url}/v1`, apiKey: 'unused' });

const store = await Store.open(process.argv[2] ?? 'runs.db');
const supervisor = await Supervisor.start(store, { tools: [lookupOrder] });
// The policy governs your tools like any act: allow, deny or ask, by name.
const policy = Policy.empty().layer('support').allowTool('lookup_*');
const result = await supervisor.run({ task: 'Where is order A-1001?', provider, policy }).result;
for (const step of store.steps(result.rootId)) {
  for (const observation of step.observations) console.log(`${observation.name}: ${observation.content}`);
}
console.log(`${result.status}: ${result.reply}`);
await supervisor.close();
await model.close();
store.close();
