// Streaming: our OpenAI-wire client against a loopback server sending a 2,000-event
// completion, beside two raw reads of the same stream in the same run: undici's request()
// with its body read and dropped (the baseline the target is set against), and undici's
// dispatcher with a handler that only counts bytes (the least any client on undici does).
// Measured twice: the server on this thread (it shares the CPU with the client, as in
// earlier figures) and in a child process (as a vendor is). Then the time to first token.
import { fork } from 'node:child_process';
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import { loadProvider } from 'io-harness';
import { Agent, request } from 'undici';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 2000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 300);
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

function serve() {
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
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

if (process.argv[2] === '--serve') {
  // The child: serves until its parent is gone.
  const server = await serve();
  process.send(server.address().port);
  process.on('disconnect', () => process.exit(0));
} else {
  await main();
}

async function main() {
  const here = await serve();
  const child = fork(new URL(import.meta.url), ['--serve']);
  const childPort = await new Promise((resolve) => child.once('message', resolve));
  const places = {
    thread: `http://127.0.0.1:${here.address().port}`,
    process: `http://127.0.0.1:${childPort}`,
  };
  const modelRequest = {
    system: 'bench',
    transcript: [{ role: 'user', text: 'go' }],
    tools: [],
    metadata: { runId: 'b', rootId: 'b', address: 'root', parentAddress: null, depth: 0, seq: 1 },
  };
  const agent = new Agent({ keepAliveTimeout: 30_000 });

  async function raw(base) {
    const response = await request(`${base}/v1/chat/completions`, {
      method: 'POST',
      body: '{}',
      headers: { 'content-type': 'application/json' },
      dispatcher: agent,
    });
    let bytes = 0;
    for await (const part of response.body) bytes += part.length;
    return bytes;
  }

  function dispatched(base) {
    return new Promise((resolve, reject) => {
      let bytes = 0;
      agent.dispatch(
        {
          origin: base,
          path: '/v1/chat/completions',
          method: 'POST',
          body: '{}',
          headers: { 'content-type': 'application/json' },
        },
        {
          onRequestStart() {},
          onResponseStart() {},
          onResponseData(_controller, part) {
            bytes += part.length;
          },
          onResponseEnd() {
            resolve(bytes);
          },
          onResponseError(_controller, error) {
            reject(error);
          },
        },
      );
    });
  }

  /**
   * Our client and one baseline, taking turns so drift hits them alike. Two at a time: with
   * a third in the rotation, what one reader leaves the garbage collector (and, with the
   * server on this thread, the server's own clean-up) lands on the next, whoever that is.
   */
  async function pair(base, baseline) {
    const ours = await loadProvider({ kind: 'openai', model: 'bench', baseUrl: `${base}/v1`, apiKey: 'k' });
    const readers = {
      baseline: baseline === 'raw' ? () => raw(base) : () => dispatched(base),
      ours: async () => {
        const completion = await ours.complete(modelRequest);
        if (!completion.text.startsWith('token1 ')) throw new Error('bad completion');
      },
    };
    const times = { baseline: [], ours: [] };
    for (let i = 0; i < 10; i++) for (const name of ['baseline', 'ours']) await readers[name]();
    for (let i = 0; i < ROUNDS; i++) {
      for (const name of ['baseline', 'ours']) {
        const start = performance.now();
        await readers[name]();
        times[name].push(performance.now() - start);
      }
    }
    const sum = (list) => list.reduce((total, value) => total + value, 0);
    // The median completion time too, against GC pauses and a shared machine's stalls.
    const median = (list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)];
    return {
      [`${baseline}PerSecond`]: +((ROUNDS * 1000) / sum(times.baseline)).toFixed(1),
      oursPerSecond: +((ROUNDS * 1000) / sum(times.ours)).toFixed(1),
      ratio: +(sum(times.baseline) / sum(times.ours)).toFixed(3),
      medianRatio: +(median(times.baseline) / median(times.ours)).toFixed(3),
    };
  }

  async function throughput(base) {
    return { againstRaw: await pair(base, 'raw'), againstDispatch: await pair(base, 'dispatch') };
  }

  async function ttft(base) {
    const ours = await loadProvider({ kind: 'openai', model: 'bench', baseUrl: `${base}/ttft/v1`, apiKey: 'k' });
    const rawTimes = [];
    const oursTimes = [];
    for (let i = 0; i < TTFT_ROUNDS + 20; i++) {
      let start = performance.now();
      const response = await request(`${base}/ttft/v1/chat/completions`, {
        method: 'POST',
        body: '{}',
        dispatcher: agent,
      });
      let firstAt = null;
      for await (const part of response.body) {
        // The raw baseline's first token: the first chunk holding the first content delta.
        if (firstAt === null && part.toString().includes('"content":"token1 ')) firstAt = performance.now();
      }
      if (i >= 20) rawTimes.push(firstAt - start);
      start = performance.now();
      let oursFirst = null;
      for await (const part of ours.stream(modelRequest)) {
        if (oursFirst === null && part.type === 'text-delta') oursFirst = performance.now();
      }
      if (i >= 20) oursTimes.push(oursFirst - start);
    }
    const p50 = (list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)];
    return { rawP50Ms: p50(rawTimes), oursP50Ms: p50(oursTimes) };
  }

  const thread = await throughput(places.thread);
  const process_ = await throughput(places.process);
  const firstToken = await ttft(places.thread);
  here.close();
  child.disconnect();
  console.log(
    JSON.stringify({
      bench: 'streaming',
      events: EVENTS,
      bytes: body.length,
      serverOnThisThread: thread,
      serverInAChildProcess: process_,
      ttftRawP50Ms: +firstToken.rawP50Ms.toFixed(3),
      ttftOursP50Ms: +firstToken.oursP50Ms.toFixed(3),
      ttftAddedP50Ms: +(firstToken.oursP50Ms - firstToken.rawP50Ms).toFixed(3),
    }),
  );
  process.exit(0);
}
