// The one tool of the cold-start benchmark's program (bench/cold-start.mjs and the process it
// runs, support/hello-agent.mjs): the same as the AI SDK's program has (bench/ai-sdk/hello.mjs).
import { tool } from 'io-harness';
import { z } from 'zod';

export const forecast = tool({
  name: 'forecast',
  description: 'The weather forecast for a city.',
  parameters: z.object({ city: z.string() }),
  effect: 'reads',
  execute: ({ city }) => JSON.stringify({ city, sky: 'clear' }),
});
