import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OpenAI, Policy, Session, Store, Supervisor } from 'io-harness';
import { ScriptedModelServer } from 'io-harness/testing';

// A workspace with two files in it, and a model on loopback that reads or lists them when
// asked, and answers later questions from what the conversation holds.
const repo = mkdtempSync(join(tmpdir(), 'io-harness-session-'));
writeFileSync(join(repo, 'NOTES.md'), 'release: 2.4.1\nowner: ada\n');
writeFileSync(join(repo, 'app.js'), 'console.log("hi");\n');
const model = await ScriptedModelServer.start((call) => {
  const messages = call.body.messages;
  const last = messages.at(-1);
  const said = String(messages.findLast((message) => message.role === 'user')?.content ?? '');
  if (last?.role === 'tool') {
    const tool = messages.at(-2)?.tool_calls?.[0]?.function?.name;
    if (tool === 'read_file') return { text: 'It names release 2.4.1, owned by ada.' };
    // The user's last words are a correction they sent while the turn ran.
    return { text: said.startsWith('Only') ? 'Only NOTES.md, as you asked.' : 'NOTES.md and app.js.' };
  }
  if (said.startsWith('What does NOTES.md say?'))
    return { toolCalls: [{ name: 'read_file', args: { path: 'NOTES.md' } }] };
  if (said.startsWith('List the files') || said.startsWith('Only'))
    return { toolCalls: [{ name: 'find', args: { pattern: '*' } }] };
  const owner = /owner: (\w+)/.exec(JSON.stringify(messages))?.[1];
  return { text: owner ? `The owner is ${owner}.` : 'I do not know yet.' };
});
const provider = OpenAI.create({ model: 'scripted', baseUrl: `${model.url}/v1`, apiKey: 'unused' });
const policy = Policy.default().layer('app').allowRead('**');

const store = await Store.open(process.argv[2] ?? 'runs.db');
// Every turn runs on one supervisor kept running, so a turn pays for no thread start-up.
const supervisor = await Supervisor.start(store);
const session = await Session.open(store, repo, { supervisor });

// A turn streams its text as the model writes it; awaiting it gives the result.
const first = session.turn('What does NOTES.md say?', { provider, policy });
let streamed = '';
for await (const event of first) if (event.type === 'text') streamed += event.text;
console.log(`turn 1 streamed: ${streamed}`);

// The next turn's request begins with the first: what it asked, what read_file found, the reply.
// Its first completion stops on text, so the turn is a reply: one model call, no step written.
const second = await session.turn('Who owns it?', { provider, policy });
console.log(`turn 2 (${second.kind}): ${second.reply}`);

// A turn can be corrected while it runs: the words reach the agent at its next step boundary.
const third = session.turn('List the files', { provider, policy });
third.steer('Only the markdown ones, please.');
const listed = await third;
console.log(`turn 3 (${listed.kind}): ${listed.reply}`);

// Any process can pick the session up again by its id.
const again = await Session.resume(store, session.id);
console.log(
  `turns: ${again
    .turns()
    .map((turn) => `${turn.text} -> ${turn.status}`)
    .join(' | ')}`,
);
console.log(`head is turn 3: ${again.head === listed.turnId}`);
await supervisor.close();
await model.close();
store.close();
