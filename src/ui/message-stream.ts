/**
 * A run as the AI SDK's UI message stream: the protocol `useChat` (`@ai-sdk/react` and its
 * kin) reads, as server-sent events of JSON chunks: the message's start, each step's text
 * (as it streams) and tool calls with their input and output, errors, and the finish with
 * the run's status and usage. Nothing of the AI SDK is imported: the chunks are written here.
 *
 * A stream reads what the store has of the run first (its committed steps), then follows it
 * live until it ends, so one begun late, or in another process after a restart, shows the
 * whole message once: the AI SDK's resume convention replays a message from its start.
 * Text is streamed live for a step whose model call it saw begin; a step it joined midway
 * shows its text whole when the step commits.
 */
import type { ServerResponse } from 'node:http';
import { TraceQueries } from '../store/queries.js';
import type { Observation, StepRecord } from '../store/records.js';
import type { Q } from '../store/sql.js';
import { outcomeQuery, type RunResult } from '../supervisor/outcome.js';
import { type Observe, PartQueue, type RunPart } from '../supervisor/run-stream.js';

/** One chunk of the UI message stream, as the AI SDK's `UIMessageChunk` has it (the kinds written here). */
export type UIMessageChunk =
  | { type: 'start'; messageId: string }
  | { type: 'start-step' }
  | { type: 'finish-step' }
  | { type: 'text-start'; id: string }
  | { type: 'text-delta'; id: string; delta: string }
  | { type: 'text-end'; id: string }
  | { type: 'tool-input-start'; toolCallId: string; toolName: string; dynamic: true }
  | { type: 'tool-input-available'; toolCallId: string; toolName: string; input: unknown; dynamic: true }
  | { type: 'tool-output-available'; toolCallId: string; output: unknown; dynamic: true }
  | { type: 'tool-output-error'; toolCallId: string; errorText: string; dynamic: true }
  | { type: 'error'; errorText: string }
  | { type: 'finish'; messageMetadata: UIMessageMetadata };

/** What the finish chunk says of the run, as the message's metadata. */
export interface UIMessageMetadata {
  runId: string;
  /** How the run ended (`finished`, `paused`, `failed`, ...). */
  status: RunResult['outcome']['kind'];
  usage: { inputTokens: number; outputTokens: number; cacheReadTokens: number; steps: number };
}

/** Where a UI message stream reads a run from: a supervisor's events and its store. */
export interface UIStreamSource {
  observe: Observe;
  read<T>(query: Q<T>): Promise<T>;
  /** The tree the run is of, and the run whose work the message shows (a tree's root, a turn's run). */
  rootId: string;
  runId: string;
  /** The message's id: a turn's id, or the run's. */
  messageId: string;
  /** What drives the run: a rejection ends the stream with an error (the run could not be driven). */
  driven?: Promise<unknown>;
}

/** The source of a tree's root run (a run's handle, a turn's), read through a supervisor's ports. */
export function rootSource(
  ports: { observe: Observe; read<T>(query: Q<T>): Promise<T> },
  rootId: string,
  messageId: string,
  driven: Promise<unknown>,
): UIStreamSource {
  return { observe: ports.observe, read: (query) => ports.read(query), rootId, runId: rootId, messageId, driven };
}

const reads = new TraceQueries();
const OVER = new Set(['running', 'queued']);

/** The headers of a UI message stream response. */
export const UI_STREAM_HEADERS: Record<string, string> = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
  'x-vercel-ai-ui-message-stream': 'v1',
  'x-accel-buffering': 'no',
};

/** The message a run makes, chunk by chunk: what the store has, then what happens, to its end. */
export async function* uiMessageChunks(source: UIStreamSource, signal?: AbortSignal): AsyncGenerator<UIMessageChunk> {
  const { runId } = source;
  // Subscribed before anything is read, so nothing committed between the read and now is missed.
  const queue = new PartQueue(source.observe, source.rootId, runId);
  // A reader that goes away ends a wait for the next part at once.
  signal?.addEventListener('abort', () => queue.close(), { once: true });
  const writer = new MessageWriter();
  try {
    yield { type: 'start', messageId: source.messageId };
    let failure: string | null = null;
    // What drives the run: its end is the end of the stream; its failure, the stream's error.
    const driven = (source.driven ?? new Promise<never>(() => undefined)).then(
      () => new Promise<never>(() => undefined),
      (error: unknown) => {
        failure = error instanceof Error ? error.message : String(error);
      },
    );
    let run = await source.read(reads.run(runId));
    // A run being admitted is not stored yet: its first part says it is.
    const early: RunPart[] = [];
    while (run === null) {
      const part = await queue.next(driven);
      if (part === null) break;
      early.push(part);
      if ('runId' in part && part.runId === runId) run = await source.read(reads.run(runId));
    }
    queue.putBack(early);
    if (run === null) {
      yield { type: 'error', errorText: failure ?? `no run ${runId} in this store` };
      return;
    }
    let last = 0;
    for (const step of await source.read(reads.steps(runId))) {
      yield* writer.step(step);
      last = step.seq;
    }
    if (OVER.has(run.status)) {
      for (let part = await queue.next(driven); part !== null; part = await queue.next(driven)) {
        if (part.type === 'outcome' || !('runId' in part) || part.runId !== runId) continue;
        if ((part.type === 'run-end' || part.type === 'run-paused') && part.runId === runId) break;
        if (!('seq' in part) || part.seq <= last) continue;
        if (part.type === 'step') {
          // Only what committed since the last one written: one step, as a rule.
          for (const step of await source.read(reads.steps(runId, last)))
            if (step.seq <= part.seq) {
              yield* writer.step(step);
              last = step.seq;
            }
        } else if (part.type === 'model-call-start') yield* writer.modelCall(part.seq);
        else if (part.type === 'text-delta') yield* writer.text(part.seq, part.text);
        else if (part.type === 'tool-call-start') yield* writer.toolStart(part.seq, part.callId, part.name);
      }
    }
    yield* writer.endStep();
    if (failure !== null) {
      yield { type: 'error', errorText: failure };
      return;
    }
    const result = await source.read(outcomeQuery(runId));
    // A reply with no step (a session's reply turn) whose text this stream did not see.
    if (result.reply && !writer.shown(result.reply)) yield* writer.whole(result.reply);
    yield* writer.endStep();
    if ('reason' in result.outcome && result.outcome.kind !== 'paused')
      yield { type: 'error', errorText: `${result.outcome.kind}: ${result.outcome.reason}` };
    yield {
      type: 'finish',
      messageMetadata: {
        runId,
        status: result.outcome.kind,
        usage: {
          inputTokens: result.usage.inputTokens,
          outputTokens: result.usage.outputTokens,
          cacheReadTokens: result.usage.cacheReadTokens,
          steps: result.usage.steps,
        },
      },
    };
  } finally {
    queue.close();
  }
}

/** Writes a message's steps as chunks, keeping which step, text block and tool calls are open. */
class MessageWriter {
  /** The step under way (its seq), or null between steps. */
  #step: number | null = null;
  /** The text block open in it, and what the step's model call has said. */
  #textId: string | null = null;
  #text = '';
  /** Steps whose model call this writer saw begin: their text is streamed live. */
  readonly #seen = new Set<number>();
  /** Tool calls whose input has been started, by id. */
  readonly #started = new Set<string>();
  /** How many text blocks this message has shown, and the last one's text. */
  #blocks = 0;
  #lastText: string | null = null;

  *modelCall(seq: number): Generator<UIMessageChunk> {
    yield* this.#open(seq);
    this.#seen.add(seq);
  }

  *text(seq: number, delta: string): Generator<UIMessageChunk> {
    if (!this.#seen.has(seq)) return;
    yield* this.#open(seq);
    if (this.#textId === null) {
      this.#textId = `text-${seq}-${this.#blocks}`;
      this.#text = '';
      yield { type: 'text-start', id: this.#textId };
    }
    this.#text += delta;
    yield { type: 'text-delta', id: this.#textId, delta };
  }

  *toolStart(seq: number, callId: string, name: string): Generator<UIMessageChunk> {
    yield* this.#open(seq);
    yield* this.#closeText();
    if (this.#started.has(callId)) return;
    this.#started.add(callId);
    yield { type: 'tool-input-start', toolCallId: callId, toolName: name, dynamic: true };
  }

  /** A committed step: its text if it was not streamed, its calls' inputs and outputs, its end. */
  *step(step: StepRecord): Generator<UIMessageChunk> {
    const streamed = this.#seen.has(step.seq);
    yield* this.#open(step.seq);
    if (!streamed && step.completion.text !== '') yield* this.whole(step.completion.text);
    yield* this.#closeText();
    for (const call of step.completion.toolCalls) {
      if (!this.#started.has(call.id)) {
        this.#started.add(call.id);
        yield { type: 'tool-input-start', toolCallId: call.id, toolName: call.name, dynamic: true };
      }
      yield { type: 'tool-input-available', toolCallId: call.id, toolName: call.name, input: call.args, dynamic: true };
      const observation = step.observations.find((each: Observation) => each.callId === call.id);
      if (!observation) continue;
      yield observation.isError
        ? { type: 'tool-output-error', toolCallId: call.id, errorText: observation.content, dynamic: true }
        : { type: 'tool-output-available', toolCallId: call.id, output: observation.content, dynamic: true };
    }
    yield* this.endStep();
  }

  /** A whole text, as one block. */
  *whole(text: string): Generator<UIMessageChunk> {
    yield* this.#closeText();
    if (this.#step === null) {
      this.#step = -1;
      yield { type: 'start-step' };
    }
    const id = `text-whole-${this.#blocks}`;
    yield { type: 'text-start', id };
    yield { type: 'text-delta', id, delta: text };
    yield { type: 'text-end', id };
    this.#shown(text);
  }

  /** Whether `text` is the last text this message showed (the run's reply, streamed already). */
  shown(text: string): boolean {
    return this.#lastText === text || (this.#textId !== null && this.#text === text);
  }

  *endStep(): Generator<UIMessageChunk> {
    yield* this.#closeText();
    if (this.#step === null) return;
    this.#step = null;
    yield { type: 'finish-step' };
  }

  *#open(seq: number): Generator<UIMessageChunk> {
    if (this.#step === seq) return;
    yield* this.endStep();
    this.#step = seq;
    yield { type: 'start-step' };
  }

  #shown(text: string): void {
    this.#blocks++;
    this.#lastText = text;
  }

  *#closeText(): Generator<UIMessageChunk> {
    if (this.#textId === null) return;
    yield { type: 'text-end', id: this.#textId };
    this.#shown(this.#text);
    this.#textId = null;
  }
}

/** The chunks as server-sent events, ending with `[DONE]`; cancelling it stops reading the run. */
export function uiMessageStream(source: UIStreamSource | Promise<UIStreamSource>): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const cancelled = new AbortController();
  let chunks: AsyncGenerator<UIMessageChunk> | null = null;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        chunks ??= uiMessageChunks(await source, cancelled.signal);
        const next = await chunks.next();
        if (next.done) {
          controller.enqueue(encoder.encode('data: [DONE]\n\n'));
          controller.close();
          return;
        }
        controller.enqueue(encoder.encode(`data: ${JSON.stringify(next.value)}\n\n`));
      } catch (error) {
        const errorText = error instanceof Error ? error.message : String(error);
        controller.enqueue(encoder.encode(`data: ${JSON.stringify({ type: 'error', errorText })}\n\n`));
        controller.enqueue(encoder.encode('data: [DONE]\n\n'));
        controller.close();
      }
    },
    async cancel() {
      // Ends a wait first: a return() queued behind a pending next() would wait with it.
      cancelled.abort();
      await chunks?.return(undefined);
    },
  });
}

/** The stream as a web `Response` (what a route handler returns). */
export function uiMessageResponse(source: UIStreamSource | Promise<UIStreamSource>, init: ResponseInit = {}): Response {
  const headers = new Headers(init.headers);
  for (const [name, value] of Object.entries(UI_STREAM_HEADERS)) if (!headers.has(name)) headers.set(name, value);
  return new Response(uiMessageStream(source), { ...init, status: init.status ?? 200, headers });
}

/** Writes the stream to a Node `ServerResponse`; a client that goes away stops the reading (the run goes on). */
export function pipeUIMessageStream(
  source: UIStreamSource | Promise<UIStreamSource>,
  response: ServerResponse,
  init: { status?: number; headers?: Record<string, string> } = {},
): Promise<void> {
  response.writeHead(init.status ?? 200, { ...UI_STREAM_HEADERS, ...init.headers });
  const reader = uiMessageStream(source).getReader();
  const stop = () => void reader.cancel().catch(() => undefined);
  response.once('close', stop);
  return (async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (!response.write(value))
          await new Promise<void>((resolve) => {
            // A client that goes away while the socket is full never drains it.
            const done = () => {
              response.off('drain', done);
              response.off('close', done);
              resolve();
            };
            response.once('drain', done);
            response.once('close', done);
          });
        if (response.destroyed) break;
      }
    } catch {
      // The client went away: the run it watched goes on, and its turn is kept.
    } finally {
      response.off('close', stop);
      if (!response.writableEnded) response.end();
    }
  })();
}
