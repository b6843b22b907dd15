// The wide fan-out benchmark's model, served over HTTP on the OpenAI wire in a process of
// its own: the root spawns `children` agents without waiting and answers; every other
// agent makes two read_messages steps and answers. Every call takes `latencyMs`. Prints
// the server's URL, then serves until its parent ends it.
import { serveScript } from 'io-harness/testing';

const [children, latencyMs] = process.argv.slice(2).map(Number);
const server = await serveScript(
  (request) => {
    const step = request.transcript.filter((entry) => entry.role === 'assistant').length;
    if (request.metadata.address === 'root') {
      if (step > 0) return { text: 'spawned them all' };
      return {
        toolCalls: Array.from({ length: children }, (_, i) => ({
          name: 'spawn_agent',
          args: { task: `part ${i}`, as: `p${i}`, wait: false },
        })),
      };
    }
    if (step < 2) return { text: 'looking', toolCalls: [{ name: 'read_messages', args: {} }] };
    return { text: 'done' };
  },
  { latencyMs },
);
console.log(server.url);
process.on('SIGTERM', () => void server.close().then(() => process.exit(0)));
