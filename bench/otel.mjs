// What io-harness/otel costs a step: one agent on a model that answers at once (so the gap
// between two committed steps is all harness), run with no exporter and with the observer
// exporting through the SDK's batch processor and the OTLP/HTTP exporter to a receiver on
// loopback, alternated in one process (none, otel, none, otel) so both see the same
// machine. p50 and p99 of the step gaps, the warm-up tenth left out.
import { createServer } from 'node:http';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { Store, Supervisor } from 'io-harness';
import { otelObserver } from 'io-harness/otel';
import { percentile, stepGaps } from './support/gaps.mjs';
import { tempDir } from './support/temp.mjs';

const STEPS = Number(process.env.BENCH_STEPS ?? 2000);
let received = 0;
const collector = createServer((request, response) => {
  request.on('data', () => undefined);
  request.on('end', () => {
    received += 1;
    response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});
await new Promise((done) => collector.listen(0, '127.0.0.1', done));
const url = `http://127.0.0.1:${collector.address().port}/v1/traces`;

async function once(exporting) {
  const store = await Store.open(join(tempDir('io-harness-bench-'), 'runs.db'));
  const supervisor = await Supervisor.start(store);
  const provider = exporting
    ? new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url }))] })
    : null;
  if (provider) supervisor.observe(otelObserver({ tracer: provider.getTracer('io-harness') }));
  const marks = [];
  supervisor.observe((event) => {
    if (event.type === 'step-end') marks.push(performance.now());
  });
  const result = await supervisor.run({
    task: 'loop',
    provider: {
      kind: 'module',
      module: fileURLToPath(new URL('./support/loop-model.mjs', import.meta.url)),
      options: { steps: STEPS },
    },
  }).result;
  await provider?.shutdown();
  await supervisor.close();
  store.close();
  if (result.status !== 'finished') throw new Error(`the run ended ${result.status}`);
  return stepGaps(marks, STEPS);
}

const rows = [];
for (const exporting of [false, true, false, true]) {
  const gaps = await once(exporting);
  rows.push({ exporter: exporting, p50Ms: percentile(gaps, 50), p99Ms: percentile(gaps, 99) });
}
collector.close();
const p50 = (exporting) => {
  const list = rows.filter((row) => row.exporter === exporting).map((row) => row.p50Ms);
  return list.reduce((sum, value) => sum + value, 0) / list.length;
};
console.log(
  JSON.stringify({
    bench: 'otel',
    steps: STEPS,
    posts: received,
    runs: rows.map((row) => ({ ...row, p50Ms: +row.p50Ms.toFixed(3), p99Ms: +row.p99Ms.toFixed(3) })),
    p50None: +p50(false).toFixed(3),
    p50Otel: +p50(true).toFixed(3),
    ratio: +(p50(true) / p50(false)).toFixed(3),
  }),
);
