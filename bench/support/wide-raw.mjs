// One pass of the wide fan-out benchmark's baseline, in a fresh process: the same model
// calls as the tree makes, with nothing durable — one root call, then a Promise.all of
// `children` loops of three sequential calls each, with fetch on the OpenAI wire.
import { performance } from 'node:perf_hooks';

const [url, childrenArg] = process.argv.slice(2);
const children = Number(childrenArg);
let peak = process.memoryUsage().rss;
const sampler = setInterval(() => {
  peak = Math.max(peak, process.memoryUsage().rss);
}, 20);

async function call(address, messages) {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer bench-key' },
    body: JSON.stringify({
      model: 'scripted',
      messages: [{ role: 'system', content: `You are agent "${address}".` }, ...messages],
    }),
  });
  const body = await response.json();
  return body.choices[0].message;
}

async function loop(address) {
  const messages = [{ role: 'user', content: 'part' }];
  for (let i = 0; i < 3; i++) {
    const message = await call(address, messages);
    messages.push(message);
    for (const toolCall of message.tool_calls ?? []) {
      messages.push({ role: 'tool', tool_call_id: toolCall.id, content: '[]' });
    }
  }
}

const start = performance.now();
const cpuBefore = process.cpuUsage();
await call('root', [{ role: 'user', content: 'fan out' }]);
await Promise.all(Array.from({ length: children }, (_, i) => loop(`p${i}`)));
const wallMs = performance.now() - start;
const cpu = process.cpuUsage(cpuBefore);
clearInterval(sampler);
peak = Math.max(peak, process.memoryUsage().rss);
console.log(
  JSON.stringify({ wallMs, cpuMs: (cpu.user + cpu.system) / 1000, peakRssMb: peak / 2 ** 20, finished: children }),
);
