// The cold-start benchmark's model, served over HTTP on the OpenAI wire in a process of its
// own: a first answer that calls `forecast` for Oslo once, then the answer. Answers at once.
// The same calls for the three programs measured (io-harness's, the raw loop's and the AI
// SDK's bench/ai-sdk/hello.mjs). Prints the server's URL, then serves until its parent ends it.
import { serveScript } from 'io-harness/testing';

const server = await serveScript((request) => {
  const step = request.transcript.filter((entry) => entry.role === 'assistant').length;
  if (step === 0) return { text: 'looking it up', toolCalls: [{ name: 'forecast', args: { city: 'Oslo' } }] };
  return { text: 'Clear skies in Oslo.' };
});
console.log(server.url);
process.on('SIGTERM', () => void server.close().then(() => process.exit(0)));
