/**
 * io-harness/otel against a real OTLP/HTTP receiver on loopback: the SDK's batch processor
 * and OTLP exporter (the packages a user installs) post JSON to a server this test runs.
 * A tree whose root spawns a child and calls tools comes out as one trace: run spans
 * nested parent to child across agents, step spans under runs, provider calls and tool
 * calls under steps, with the GenAI attributes; and no attribute or span event holds the
 * task, what the model said, a tool's arguments or what it returned, checked against what
 * the store recorded. With the collector refusing connections, or never answering, the
 * run's trace is the same as with no exporter at all.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { OpenAI, type Store, TaskContract } from '../dist/index.js';
import { otelObserver } from '../dist/otel/index.js';
import { ScriptedModelServer } from '../dist/testing/index.js';
import { later, supervisorOnStore, tempWorkspace } from './support/workspace.js';

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: { key: string; value: Record<string, unknown> }[];
  events?: { name: string; attributes: { key: string; value: Record<string, unknown> }[] }[];
}

/** An OTLP/HTTP receiver: every span posted to /v1/traces, as JSON. */
async function receiver(mode: 'ok' | 'silent' = 'ok'): Promise<{ url: string; spans: OtlpSpan[]; server: Server }> {
  const spans: OtlpSpan[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => {
      body += chunk;
    });
    request.on('end', () => {
      if (mode === 'silent') return; // never answers
      const data = JSON.parse(body) as {
        resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[];
      };
      for (const resource of data.resourceSpans) for (const scope of resource.scopeSpans) spans.push(...scope.spans);
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  later(() => new Promise<void>((done) => server.close(() => done())));
  server.closeAllConnections?.();
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`, spans, server };
}

const attr = (span: OtlpSpan, key: string) => {
  const value = span.attributes.find((item) => item.key === key)?.value;
  return value === undefined ? undefined : Object.values(value)[0];
};

const TASK = 'survey the repository for the word PELICAN-TASK';

/** A root that reads a file and spawns a counter, which answers; both over loopback. */
async function model() {
  const server = await ScriptedModelServer.start((call) => {
    const task = String(call.body.messages.find((message) => message.role === 'user')?.content ?? '');
    if (task.includes('HERON-ARGS')) return { text: 'COUNTER-REPLY: 42 files' };
    const results = call.body.messages.filter((message) => message.role === 'tool').length;
    if (results === 0) return { toolCalls: [{ name: 'read_file', args: { path: 'notes-OSPREY.txt' } }] };
    if (results === 1)
      return { toolCalls: [{ name: 'spawn_agent', args: { task: 'count the files HERON-ARGS', as: 'counter' } }] };
    return { text: 'ROOT-REPLY: the counter reported back' };
  });
  later(() => server.close());
  return OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
}

async function runTree(store: Store, supervisor: Awaited<ReturnType<typeof supervisorOnStore>>['supervisor']) {
  const root = tempWorkspace({ 'notes-OSPREY.txt': 'the FALCON-OUTPUT line\n' });
  const provider = await model();
  const result = await supervisor.run({ contract: TaskContract.workspace(TASK, root), provider }).result;
  expect(result.status).toBe('finished');
  return { rootId: result.rootId, store };
}

/** A trace with what differs between two runs of one script (ids, times, paths) taken out. */
function shapeOf(store: Store, rootId: string) {
  return store.runs(rootId).map((run) => ({
    address: run.address,
    status: run.status,
    reply: run.reply,
    events: store.events(run.runId).map((event) => event.type),
    steps: store.steps(run.runId).map((step) => ({
      text: step.completion.text,
      calls: step.completion.toolCalls.map((call) => call.name),
      observations: step.observations.map((item) => item.isError),
    })),
    calls: store.modelCalls({ runId: run.runId }).map((call) => [call.seq, call.outcome, call.inputTokens]),
    spent: store.account(run.runId)?.spent,
  }));
}

describe('io-harness/otel', () => {
  it('exports a tree as one trace of nested GenAI spans to a real OTLP/HTTP receiver, holding no content', {
    timeout: 60_000,
  }, async () => {
    const collector = await receiver();
    const provider = new BasicTracerProvider({
      spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: collector.url }))],
    });
    const { supervisor, store } = await supervisorOnStore();
    const observer = otelObserver({ tracer: provider.getTracer('io-harness') });
    supervisor.observe(observer);
    const { rootId } = await runTree(store, supervisor);
    await provider.forceFlush();
    await provider.shutdown();
    expect(observer.open).toBe(0);
    const spans = collector.spans;
    const runs = store.runs(rootId);
    expect(runs.map((run) => run.address)).toEqual(['root', 'counter']);

    // One trace; each run span a child of its parent's.
    expect(new Set(spans.map((span) => span.traceId)).size).toBe(1);
    const runSpan = (runId: string) => spans.find((span) => attr(span, 'gen_ai.agent.id') === runId) as OtlpSpan;
    const rootSpan = runSpan(rootId);
    const childSpan = runSpan(runs[1]?.runId as string);
    expect(rootSpan.name).toBe('invoke_agent root');
    expect(rootSpan.parentSpanId ?? '').toBe('');
    expect(childSpan.name).toBe('invoke_agent counter');
    expect(childSpan.parentSpanId).toBe(rootSpan.spanId);
    expect(attr(rootSpan, 'gen_ai.operation.name')).toBe('invoke_agent');
    expect(attr(rootSpan, 'io_harness.run.status')).toBe('finished');

    // Steps under their run, a chat span under each step, tool calls beside it.
    const under = (parent: OtlpSpan) => spans.filter((span) => span.parentSpanId === parent.spanId);
    const rootSteps = under(rootSpan).filter((span) => span.name.startsWith('step '));
    expect(rootSteps.map((span) => span.name)).toEqual(['step 1', 'step 2', 'step 3']);
    expect(under(childSpan).map((span) => span.name)).toEqual(['step 1']);
    const [first, second] = rootSteps as [OtlpSpan, OtlpSpan];
    expect(under(first).map((span) => span.name)).toEqual(['chat scripted', 'execute_tool read_file']);
    expect(under(second).map((span) => span.name)).toEqual(['chat scripted', 'execute_tool spawn_agent']);
    const chat = under(first)[0] as OtlpSpan;
    const recorded = store.modelCalls({ runId: rootId })[0];
    expect(attr(chat, 'gen_ai.operation.name')).toBe('chat');
    expect(attr(chat, 'gen_ai.provider.name')).toBe(recorded?.provider);
    expect(attr(chat, 'gen_ai.request.model')).toBe('scripted');
    expect(Number(attr(chat, 'gen_ai.usage.input_tokens'))).toBe(recorded?.inputTokens);
    expect(Number(attr(chat, 'gen_ai.usage.output_tokens'))).toBe(recorded?.outputTokens);
    for (const key of [
      'gen_ai.usage.cache_read.input_tokens',
      'gen_ai.usage.cache_creation.input_tokens',
      'gen_ai.usage.reasoning.output_tokens',
      'io_harness.call.latency_ms',
      'gen_ai.response.time_to_first_chunk',
    ])
      expect(attr(chat, key), key).toBeTypeOf('number');
    const tool = under(first)[1] as OtlpSpan;
    expect(attr(tool, 'gen_ai.tool.name')).toBe('read_file');
    expect(attr(tool, 'gen_ai.tool.call.id')).toBe(store.steps(rootId)[0]?.completion.toolCalls[0]?.id);
    // Times nest: a step within its run, a call within its step.
    const t = (span: OtlpSpan, end = false) => BigInt(end ? span.endTimeUnixNano : span.startTimeUnixNano);
    expect(t(first) >= t(rootSpan) && t(first, true) <= t(rootSpan, true)).toBe(true);
    expect(t(chat) >= t(first) && t(chat, true) <= t(first, true)).toBe(true);

    // Nothing the model was sent or said, nor any tool's arguments or output, is in a span.
    const content = [
      ...runs.map((run) => run.task),
      ...runs.flatMap((run) => [run.reply ?? '']),
      ...runs.flatMap((run) =>
        store
          .steps(run.runId)
          .flatMap((step) => [
            step.completion.text,
            ...step.completion.toolCalls.flatMap((call) => Object.values(call.args).map(String)),
            ...step.observations.map((item) => item.content),
          ]),
      ),
      // An agent's name (spawn_agent's `as`) is its identity, kept as gen_ai.agent.name; not content.
    ].filter((text) => text.length >= 6 && !runs.some((run) => run.address.split('.').includes(text)));
    expect(content.join(' ')).toContain('PELICAN-TASK');
    expect(content.join(' ')).toContain('FALCON-OUTPUT');
    expect(content.join(' ')).toContain('HERON-ARGS');
    const values = spans.flatMap((span) => [
      span.name,
      ...span.attributes.map((item) => String(Object.values(item.value)[0])),
      ...(span.events ?? []).flatMap((event) => event.attributes.map((item) => String(Object.values(item.value)[0]))),
    ]);
    const leaked = content.filter((text) => values.some((value) => value.includes(text) || text === value));
    expect(leaked).toEqual([]);
    for (const marker of ['PELICAN', 'OSPREY-', 'FALCON', 'HERON', 'COUNTER-REPLY', 'ROOT-REPLY'])
      expect(
        values.filter((value) => value.includes(marker)),
        marker,
      ).toEqual([]);
  });

  it('changes nothing about a run when the collector is down or never answers', { timeout: 90_000 }, async () => {
    const plain = await supervisorOnStore();
    const baseline = await runTree(plain.store, plain.supervisor);

    const refusing = await receiver();
    await new Promise<void>((done) => refusing.server.close(() => done()));
    const silent = await receiver('silent');
    for (const url of [refusing.url, silent.url]) {
      const exporter = new OTLPTraceExporter({ url, timeoutMillis: 2000 });
      const provider = new BasicTracerProvider({
        spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 10 })],
      });
      const { supervisor, store } = await supervisorOnStore();
      supervisor.observe(otelObserver({ tracer: provider.getTracer('io-harness') }));
      const { rootId } = await runTree(store, supervisor);
      expect(shapeOf(store, rootId)).toEqual(shapeOf(plain.store, baseline.rootId));
      // The export fails (or times out) on its own path, after the run.
      await provider.shutdown().catch(() => undefined);
    }
  });

  it('keeps a tool name only when it is spelled as one, and never a refusal’s rule', () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const observer = otelObserver({ tracer: provider.getTracer('io-harness') });
    const base = { rootId: 'r', runId: 'r', generation: 1, eventId: 1 };
    const said = 'the user password is hunter2';
    observer({
      ...base,
      seq: null,
      at: 1,
      type: 'run-start',
      task: 't',
      address: 'root',
      parentId: null,
      resumed: false,
    } as never);
    observer({ ...base, seq: 1, at: 2, type: 'tool-call', callId: 'c1', name: said, args: {} } as never);
    observer({
      ...base,
      seq: 1,
      at: 2,
      type: 'refusal',
      callId: 'c1',
      tool: said,
      rule: 'deny-write sk-LEAKED/**',
      layer: 'root',
      reason: 'x',
    } as never);
    observer({
      ...base,
      seq: 1,
      at: 3,
      type: 'step-end',
      toolCalls: [said],
      inputTokens: 1,
      outputTokens: 1,
      cacheReadTokens: 0,
      cachedShare: 0,
      provider: 'p',
      model: 'm',
    } as never);
    observer({ ...base, seq: null, at: 4, type: 'run-end', status: 'finished', reply: 'r' } as never);
    const spans = exporter.getFinishedSpans();
    expect(spans.map((span) => span.name)).toContain('execute_tool (not a tool name)');
    const text = JSON.stringify(
      spans.map((span) => [span.name, span.attributes, span.events.map((event) => event.attributes)]),
    );
    expect(text).not.toContain('hunter2');
    expect(text).not.toContain('sk-LEAKED');
  });
});
