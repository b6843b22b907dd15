// The sequential-steps benchmark's model, served over HTTP on the OpenAI wire in a process
// of its own: `steps` steps that each read notes.txt, then an answer. Answers at once.
// Prints the server's URL, then serves until its parent ends it.
import { serveScript } from 'io-harness/testing';

const steps = Number(process.argv[2] ?? 200);
const server = await serveScript((request) => {
  const step = request.transcript.filter((entry) => entry.role === 'assistant').length;
  if (step < steps) return { text: 'reading', toolCalls: [{ name: 'read_file', args: { path: 'notes.txt' } }] };
  return { text: 'done' };
});
console.log(server.url);
process.on('SIGTERM', () => void server.close().then(() => process.exit(0)));
