import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OpenAI, Policy, Session, Store } from 'io-harness';
import { ScriptedModelServer } from 'io-harness/testing';

// A workspace with one file in it, and a model on loopback that reads it when asked and
// answers later questions from what the conversation holds.
const repo = mkdtempSync(join(tmpdir(), 'io-harness-session-'));
writeFileSync(join(repo, 'NOTES.md'), 'release: 2.4.1\nowner: ada\n');
const model = await ScriptedModelServer.start((call) => {
  const messages = call.body.messages;
  const opening = String(messages.findLast((message) => message.role === 'user')?.content ?? '');
  const read = messages.some((message) => message.role === 'tool');
  if (opening.startsWith('What does NOTES.md say?') && !read)
    return { toolCalls: [{ name: 'read_file', args: { path: 'NOTES.md' } }] };
  if (opening.startsWith('What does NOTES.md say?')) return { text: 'It names release 2.4.1, owned by ada.' };
  const owner = /owner: (\w+)/.exec(JSON.stringify(messages))?.[1];
  return { text: owner ? `The owner is ${owner}.` : 'I do not know yet.' };
});
const provider = OpenAI.create({ model: 'scripted', baseUrl: `${model.url}/v1`, apiKey: 'unused' });
const policy = Policy.default().layer('app').allowRead('**');

const store = await Store.open(process.argv[2] ?? 'runs.db');
const session = await Session.open(store, repo);

// A turn streams its text as the model writes it; awaiting it gives the result.
const first = session.turn('What does NOTES.md say?', { provider, policy });
let streamed = '';
for await (const event of first) if (event.type === 'text') streamed += event.text;
console.log(`turn 1 streamed: ${streamed}`);

// The next turn's request begins with the first: what it asked, what read_file found, the reply.
const second = await session.turn('Who owns it?', { provider, policy });
console.log(`turn 2: ${second.reply}`);

// Any process can pick the session up again by its id.
const again = await Session.resume(store, session.id);
console.log(
  `turns: ${again
    .turns()
    .map((turn) => `${turn.text} -> ${turn.status}`)
    .join(' | ')}`,
);
console.log(`head is turn 2: ${again.head === second.turnId}`);
await model.close();
store.close();
