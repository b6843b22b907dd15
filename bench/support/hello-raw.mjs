// The cold-start benchmark's baseline, run as a process of its own: the same two model calls
// as hello-agent.mjs with fetch (the tool run in between), the answer committed as one
// SQLite row (better-sqlite3, WAL, synchronous=NORMAL), nothing else. Prints the reply,
// the time from the process's start to the commit, and its peak RSS.
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';

const [url, dir] = process.argv.slice(2);
const db = new Database(join(dir, 'raw.db'));
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.exec('CREATE TABLE IF NOT EXISTS answers (task TEXT NOT NULL, reply TEXT NOT NULL)');
const forecast = ({ city }) => JSON.stringify({ city, sky: 'clear' });
const tools = [
  {
    type: 'function',
    function: {
      name: 'forecast',
      description: 'The weather forecast for a city.',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  },
];
const messages = [{ role: 'user', content: 'What is the weather in Oslo?' }];
for (;;) {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer bench-key' },
    body: JSON.stringify({ model: 'scripted', messages, tools }),
  });
  const message = (await response.json()).choices[0].message;
  messages.push(message);
  if (!message.tool_calls?.length) break;
  for (const call of message.tool_calls) {
    const content = forecast(JSON.parse(call.function.arguments));
    messages.push({ role: 'tool', tool_call_id: call.id, content });
  }
}
const reply = messages.at(-1).content;
db.prepare('INSERT INTO answers (task, reply) VALUES (?, ?)').run('What is the weather in Oslo?', reply);
console.log(JSON.stringify({ reply, resultMs: performance.now(), maxRssMb: process.resourceUsage().maxRSS / 1024 }));
