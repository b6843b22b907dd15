// What scrubbing secrets by value costs a store write (the store actor's hot path): a
// commit-shaped input of about 110 KB (six tool results, a forty-message checkpoint)
// scrubbed with no secret held, with two held (a key and a header value, ten spellings),
// and with forty held, beside JSON.stringify of the same input (what the writer does to
// it anyway), in one process. Prints microseconds per write and each over the stringify.
import { performance } from 'node:perf_hooks';
import { holdSecrets, scrubValue } from '../dist/runtime/secrets.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 2000);
const message = (i) => ({
  role: i % 2 ? 'assistant' : 'tool',
  content: `${'The quick brown fox jumps over the lazy dog. '.repeat(44)}${i}`,
  tool_calls: [{ id: `c${i}`, function: { name: 'read_file', arguments: JSON.stringify({ path: `src/f${i}.ts` }) } }],
});
const input = {
  runId: 'r',
  generation: 1,
  seq: 5,
  events: Array.from({ length: 6 }, (_, i) => ({ type: 'tool-call', callId: `c${i}`, result: 'y'.repeat(4000) })),
  checkpoint: { messages: Array.from({ length: 40 }, (_, i) => message(i)) },
  draw: { steps: 1, tokens: 300 },
};
const time = (fn) => {
  for (let i = 0; i < 200; i++) fn();
  const start = performance.now();
  for (let i = 0; i < RUNS; i++) fn();
  return ((performance.now() - start) / RUNS) * 1000;
};
const stringify = time(() => JSON.stringify(input));
const none = time(() => scrubValue(input));
holdSecrets(['sk-live-abcdef1234567890', 'hdr-value-0987654321']);
const two = time(() => scrubValue(input));
holdSecrets(Array.from({ length: 38 }, (_, i) => `secret-value-${i}-${'z'.repeat(12)}`));
const forty = time(() => scrubValue(input));
const row = (us) => ({ us: +us.toFixed(1), overStringify: +(us / stringify).toFixed(2) });
console.log(
  JSON.stringify({
    bench: 'scrub',
    bytes: JSON.stringify(input).length,
    runs: RUNS,
    stringifyUs: +stringify.toFixed(1),
    none: row(none),
    twoHeld: row(two),
    fortyHeld: row(forty),
  }),
);
