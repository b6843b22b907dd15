// The peers benchmark's model for the sequential workload, served over HTTP on the OpenAI
// wire in a process of its own, answering at once: `steps` steps that each call one tool,
// then an answer. The tool is `read_file` of notes.txt when the request offers it and not
// `noop`, else `noop` (the embedder's tool, and the raw loops, which offer none). Prints
// the server's URL, then serves until its parent ends it.
import { serveScript } from 'io-harness/testing';

const steps = Number(process.argv[2] ?? 200);
const server = await serveScript((request) => {
  const step = request.transcript.filter((entry) => entry.role === 'assistant').length;
  if (step >= steps) return { text: 'done' };
  const names = new Set(request.tools.map((tool) => tool.name));
  const call =
    names.has('read_file') && !names.has('noop')
      ? { name: 'read_file', args: { path: 'notes.txt' } }
      : { name: 'noop', args: {} };
  return { text: 'working', toolCalls: [call] };
});
console.log(server.url);
process.on('SIGTERM', () => void server.close().then(() => process.exit(0)));
