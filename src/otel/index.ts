/**
 * io-harness/otel: the store's committed events as OpenTelemetry spans, under the GenAI
 * semantic conventions. Install it as an observer on a supervisor whose process has a
 * tracer provider (yours: the SDK and the OTLP exporter of your choice):
 *
 *   supervisor.observe(otelObserver());
 *
 * A span per run (`invoke_agent <address>`), per step (`step <seq>`), per provider call
 * (`chat <model>`) and per tool call (`execute_tool <name>`); a child agent's run span is
 * a child of its parent's, so a tree is one trace. Provider calls carry the model, the
 * token split (input, output, cache read, cache write, reasoning), latency and time to
 * first token, read from the store's model-call rows; times are the store's.
 *
 * What the model was sent and said, and what tools were given and gave back, are never
 * attributes: no code here reads a prompt, a reply, a task, tool arguments, tool output or
 * a reason text. Spans are made from events after they were committed, and exporting them
 * is the tracer provider's (batched, off the run's path), so a collector that is down or
 * slow changes nothing about a run; an error here is the event bus's to isolate.
 */
import {
  type Attributes,
  type Context,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import type { HarnessEvent } from '../runtime/events.js';
import { scrubText, scrubValue } from '../runtime/secrets.js';
import type { Store } from '../store/sqlite/store.js';
import type { Observer, ObserverContext } from '../supervisor/event-bus.js';

export interface OtelObserverOptions {
  /** The tracer spans are made with. Default: `trace.getTracer('io-harness')` from the global provider. */
  tracer?: Tracer;
}

/** The observer {@link otelObserver} returns. */
export type OtelObserver = Observer & {
  /** Run spans started and not yet ended (a run still going, or one this process saw start and not end). */
  readonly open: number;
};

/** The statuses a run span ends in error with. */
const FAILED = new Set(['failed', 'budget-exhausted', 'gate-failed', 'schema-unsatisfied', 'interrupted']);

interface OpenRun {
  span: Span;
  context: Context;
  /** When the step under way began: the run's start, or its last step's end. */
  stepStart: number;
  /** The tool calls of the step under way, by name, as their events came. */
  tools: { name: string; callId: string }[];
}

export function otelObserver(options: OtelObserverOptions = {}): OtelObserver {
  const tracer = options.tracer ?? trace.getTracer('io-harness');
  const runs = new Map<string, OpenRun>();
  let store: Store | null = null;

  const observer = ((event: HarnessEvent) => {
    switch (event.type) {
      case 'run-start': {
        runs.get(event.runId)?.span.end(event.at);
        const parent = event.parentId ? runs.get(event.parentId)?.context : undefined;
        const span = tracer.startSpan(
          scrubText(`invoke_agent ${event.address}`),
          {
            kind: SpanKind.INTERNAL,
            startTime: event.at,
            attributes: clean({
              'gen_ai.operation.name': 'invoke_agent',
              'gen_ai.agent.id': event.runId,
              'gen_ai.agent.name': event.address,
              'io_harness.root_id': event.rootId,
              'io_harness.resumed': event.resumed,
              ...(event.parentId ? { 'io_harness.parent_id': event.parentId } : {}),
            }),
          },
          parent ?? ROOT_CONTEXT,
        );
        runs.set(event.runId, {
          span,
          context: trace.setSpan(parent ?? ROOT_CONTEXT, span),
          stepStart: event.at,
          tools: [],
        });
        return;
      }
      case 'tool-call':
        runs.get(event.runId)?.tools.push({ name: toolName(event.name), callId: event.callId });
        return;
      case 'step-end': {
        const run = runs.get(event.runId);
        if (!run || event.seq === null) return;
        stepSpans(tracer, store, run, event, event.seq);
        run.stepStart = event.at;
        run.tools = [];
        return;
      }
      case 'run-paused':
      case 'run-end': {
        const run = runs.get(event.runId);
        if (!run) return;
        const status = event.type === 'run-end' ? event.status : 'paused';
        run.span.setAttribute('io_harness.run.status', scrubText(status));
        if (FAILED.has(status)) run.span.setStatus({ code: SpanStatusCode.ERROR, message: status });
        run.span.end(event.at);
        runs.delete(event.runId);
        return;
      }
      case 'refusal':
        // The tool alone: a rule's text can hold a pattern the model chose (a child's deny list).
        runs
          .get(event.runId)
          ?.span.addEvent('io_harness.refusal', clean({ 'io_harness.tool': toolName(event.tool) }), event.at);
        return;
      default:
        return;
    }
  }) as OtelObserver;
  observer.attach = (attached: ObserverContext) => {
    store = attached.store;
  };
  Object.defineProperty(observer, 'open', { get: () => runs.size });
  return observer;
}

/**
 * Attributes with every secret this process holds scrubbed from their values (see
 * runtime/secrets.ts): a model or provider name, an address or an id could carry one as
 * easily as any text, and an exported span leaves the process.
 */
function clean(attributes: Attributes): Attributes {
  return scrubValue(attributes);
}

/**
 * A tool's name as the span carries it. The name is the model's to choose, so only one
 * spelled as tool names are (letters, digits, `_`, `-`, `.`, at most 64) is kept; any other
 * text is not the name of a tool, and is never put in a span.
 */
function toolName(name: string): string {
  return /^[A-Za-z0-9_.-]{1,64}$/.test(name) ? name : '(not a tool name)';
}

/** A step's span, with its provider calls and tool calls under it. */
function stepSpans(
  tracer: Tracer,
  store: Store | null,
  run: OpenRun,
  event: Extract<HarnessEvent, { type: 'step-end' }>,
  seq: number,
): void {
  const step = tracer.startSpan(
    `step ${seq}`,
    {
      startTime: run.stepStart,
      attributes: clean({
        'io_harness.step.seq': seq,
        'gen_ai.response.model': event.model,
        'gen_ai.usage.input_tokens': event.inputTokens,
        'gen_ai.usage.output_tokens': event.outputTokens,
        'gen_ai.usage.cache_read.input_tokens': event.cacheReadTokens,
      }),
    },
    run.context,
  );
  const inStep = trace.setSpan(run.context, step);
  // The calls the step made, failed tries first; each began once the one before it ended.
  let at = run.stepStart;
  const calls = store ? store.modelCalls({ runId: event.runId, seq }) : [];
  for (const call of calls) {
    const latency = call.latencyMs ?? 0;
    const attributes: Attributes = {
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': call.provider,
      'gen_ai.request.model': call.model,
      'gen_ai.response.model': call.model,
      'gen_ai.usage.input_tokens': call.inputTokens,
      'gen_ai.usage.output_tokens': call.outputTokens,
      'gen_ai.usage.cache_read.input_tokens': call.cacheReadTokens,
      'gen_ai.usage.cache_creation.input_tokens': call.cacheWriteTokens,
      'gen_ai.usage.reasoning.output_tokens': call.reasoningTokens,
      'io_harness.call.attempt': call.attempt,
      'io_harness.call.outcome': call.outcome,
      ...(call.latencyMs === null ? {} : { 'io_harness.call.latency_ms': call.latencyMs }),
      ...(call.ttftMs === null ? {} : { 'gen_ai.response.time_to_first_chunk': call.ttftMs / 1000 }),
      ...(call.statusCode === null ? {} : { 'http.response.status_code': call.statusCode }),
    };
    const span = tracer.startSpan(
      scrubText(`chat ${call.model}`),
      { kind: SpanKind.CLIENT, startTime: at, attributes: clean(attributes) },
      inStep,
    );
    if (call.outcome !== 'ok') {
      span.setAttribute('error.type', scrubText(call.outcome));
      span.setStatus({ code: SpanStatusCode.ERROR, message: scrubText(call.outcome) });
    }
    at = Math.min(at + latency, event.at);
    span.end(at);
  }
  // What ran after the answer, to the commit: the step's tools (their own times are not kept).
  for (const tool of run.tools) {
    const span = tracer.startSpan(
      scrubText(`execute_tool ${tool.name}`),
      {
        kind: SpanKind.INTERNAL,
        startTime: at,
        attributes: clean({
          'gen_ai.operation.name': 'execute_tool',
          'gen_ai.tool.name': tool.name,
          'gen_ai.tool.call.id': tool.callId,
        }),
      },
      inStep,
    );
    span.end(event.at);
  }
  step.end(event.at);
}
