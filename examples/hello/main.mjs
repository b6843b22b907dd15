import { OpenAI, Store, Supervisor, tool } from 'io-harness';
import { z } from 'zod';

// A tool of yours: a zod schema for its arguments, a function that runs in your process.
const weather = tool({
  name: 'weather',
  description: "Today's weather in a city.",
  parameters: z.object({ city: z.string() }),
  effect: 'reads',
  execute: ({ city }) => (city === 'Oslo' ? 'snow, -3 °C' : 'sun, 21 °C'),
});

const store = await Store.open('runs.db'); // every step of every run is kept here
const supervisor = await Supervisor.start(store, { tools: [weather] });
const handle = supervisor.run({ task: 'Should I take a coat in Oslo today?', provider: OpenAI.fromEnv() });
for await (const text of handle.textStream) process.stdout.write(text); // the answer as it streams
const result = await handle.result;
console.log(`\n${result.status} in ${result.spent.steps} steps, ${result.spent.tokens} tokens`);
for (const step of store.steps(result.rootId))
  for (const call of step.observations) console.log(`  ${call.name} -> ${call.content}`);
await supervisor.close();
store.close();
