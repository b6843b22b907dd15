// Streaming: our OpenAI-wire client against a loopback server sending a 2,000-event
// completion, beside undici's raw body read of the same stream in the same run; and the
// time to first token each sees, the difference being what our parsing and decoding add.
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import { loadProvider } from 'io-harness';
import { request } from 'undici';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 2000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 150);
const TTFT_ROUNDS = Number(process.env.BENCH_TTFT_ROUNDS ?? 300);

const chunk = (delta) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1, model: 'bench', choices: [{ index: 0, delta, logprobs: null, finish_reason: null }] })}\n\n`;
const events = [chunk({ role: 'assistant', content: '' })];
for (let i = 1; i < EVENTS - 2; i++) events.push(chunk({ content: `token${i} ` }));
events.push(
  `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1, model: 'bench', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`,
);
events.push(
  `data: ${JSON.stringify({ id: 'chatcmpl-bench', choices: [], usage: { prompt_tokens: 10, completion_tokens: EVENTS } })}\n\n`,
);
events.push('data: [DONE]\n\n');
const body = events.join('');
const first = events[0] + events[1];
const rest = events.slice(2).join('');

const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    if (req.url?.includes('ttft')) {
      // The first token at once, the rest a moment later: time to first token is all we measure.
      res.write(first);
      setTimeout(() => res.end(rest), 2);
    } else {
      res.end(body);
    }
  });
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const base = `http://127.0.0.1:${server.address().port}`;

const modelRequest = {
  system: 'bench',
  transcript: [{ role: 'user', text: 'go' }],
  tools: [],
  metadata: { runId: 'b', rootId: 'b', address: 'root', parentAddress: null, depth: 0, seq: 1 },
};
const ours = await loadProvider({ kind: 'openai', model: 'bench', baseUrl: `${base}/v1`, apiKey: 'k' });
const oursTtft = await loadProvider({ kind: 'openai', model: 'bench', baseUrl: `${base}/ttft/v1`, apiKey: 'k' });

async function raw(path) {
  const response = await request(`${base}${path}`, {
    method: 'POST',
    body: '{}',
    headers: { 'content-type': 'application/json' },
  });
  let bytes = 0;
  for await (const part of response.body) bytes += part.length;
  return bytes;
}

async function throughput() {
  // Warm both paths, then alternate so drift hits them alike.
  for (let i = 0; i < 5; i++) {
    await raw('/v1/chat/completions');
    await ours.complete(modelRequest);
  }
  const rawTimes = [];
  const oursTimes = [];
  for (let i = 0; i < ROUNDS; i++) {
    let start = performance.now();
    await raw('/v1/chat/completions');
    rawTimes.push(performance.now() - start);
    start = performance.now();
    const completion = await ours.complete(modelRequest);
    oursTimes.push(performance.now() - start);
    if (!completion.text.startsWith('token1 ')) throw new Error('bad completion');
  }
  const sum = (list) => list.reduce((total, value) => total + value, 0);
  const median = (list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)];
  return {
    rawPerSecond: (ROUNDS * 1000) / sum(rawTimes),
    oursPerSecond: (ROUNDS * 1000) / sum(oursTimes),
    // The median completion time of each, against GC pauses and a shared machine's stalls.
    rawMedianMs: median(rawTimes),
    oursMedianMs: median(oursTimes),
  };
}

async function ttft() {
  const rawTimes = [];
  const oursTimes = [];
  for (let i = 0; i < TTFT_ROUNDS + 20; i++) {
    let start = performance.now();
    const response = await request(`${base}/ttft/v1/chat/completions`, { method: 'POST', body: '{}' });
    let firstAt = null;
    for await (const part of response.body) {
      // The raw baseline's first token: the first chunk holding the first content delta.
      if (firstAt === null && part.toString().includes('"content":"token1 ')) firstAt = performance.now();
    }
    if (i >= 20) rawTimes.push(firstAt - start);
    start = performance.now();
    let oursFirst = null;
    for await (const part of oursTtft.stream(modelRequest)) {
      if (oursFirst === null && part.type === 'text-delta') oursFirst = performance.now();
    }
    if (i >= 20) oursTimes.push(oursFirst - start);
  }
  const p50 = (list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)];
  return { rawP50Ms: p50(rawTimes), oursP50Ms: p50(oursTimes) };
}

const rate = await throughput();
const first2 = await ttft();
server.close();
console.log(
  JSON.stringify({
    bench: 'streaming',
    events: EVENTS,
    bytes: body.length,
    rawPerSecond: +rate.rawPerSecond.toFixed(1),
    oursPerSecond: +rate.oursPerSecond.toFixed(1),
    ratio: +(rate.oursPerSecond / rate.rawPerSecond).toFixed(3),
    rawMedianMs: +rate.rawMedianMs.toFixed(3),
    oursMedianMs: +rate.oursMedianMs.toFixed(3),
    medianRatio: +(rate.rawMedianMs / rate.oursMedianMs).toFixed(3),
    ttftRawP50Ms: +first2.rawP50Ms.toFixed(3),
    ttftOursP50Ms: +first2.oursP50Ms.toFixed(3),
    ttftAddedP50Ms: +(first2.oursP50Ms - first2.rawP50Ms).toFixed(3),
  }),
);
process.exit(0);
