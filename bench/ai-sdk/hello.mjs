// The AI SDK's one-tool hello-world, the peer a cold start is compared with: `generateText`
// with one tool against the model at `url` (the OpenAI wire, through the AI SDK's
// OpenAI-compatible provider), until the model answers. Run in a fresh process per pass:
// `node bench/ai-sdk/hello.mjs <url>` after `npm install --prefix bench/ai-sdk`. Prints the
// answer and how many steps it took.
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, stepCountIs, tool } from 'ai';
import { z } from 'zod';

const url = process.argv[2];
const provider = createOpenAICompatible({ name: 'scripted', baseURL: `${url}/v1`, apiKey: 'bench-key' });
const result = await generateText({
  model: provider('scripted'),
  prompt: 'What is the weather in Oslo?',
  tools: {
    forecast: tool({
      description: 'The weather forecast for a city.',
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => ({ city, sky: 'clear' }),
    }),
  },
  stopWhen: stepCountIs(5),
});
console.log(JSON.stringify({ text: result.text, steps: result.steps.length }));
