/**
 * A run's handle as a stream: `for await (const part of handle)` hears the tree's text as
 * the models stream it, its tool calls starting and ending, each step as it commits, each
 * run as it ends, and the tree's outcome last; `handle.textStream` the root's text alone.
 *
 * The live parts come from the supervisor's live channel, which is switched on only while
 * some iteration is under way (it costs every agent a message per delta), so an iteration
 * subscribes when it begins and leaves when it ends. Begin it before awaiting anything
 * else and it hears every part; one begun later hears the live parts from then on, while
 * the outcome, the record of everything, is always its last part.
 */
import type { GateVerdict, RunStatus } from '../runtime/events.js';
import type { LiveEvent } from '../runtime/live.js';
import type { EventFilter, LiveObserver } from './event-bus.js';
import type { TreeResult } from './handles.js';

/** One part of a run's stream. Every part but the outcome names the agent it is of. */
export type RunPart<Output = unknown> =
  /** An agent asks its model, for the step `seq` (again, when a call is retried). */
  | { type: 'model-call-start'; runId: string; address: string; seq: number }
  /** A piece of an agent's text as the model streams it (a retried call's text streams again from its start). */
  | { type: 'text-delta'; runId: string; address: string; seq: number; text: string }
  /** An agent starts a tool call. */
  | { type: 'tool-call-start'; runId: string; address: string; seq: number; callId: string; name: string }
  /** A tool call has its result; `isError` when the tool failed or was refused. */
  | {
      type: 'tool-call-end';
      runId: string;
      address: string;
      seq: number;
      callId: string;
      name: string;
      isError: boolean;
    }
  /** An agent's step is committed: durable from here, whatever happens to the process. */
  | {
      type: 'step';
      runId: string;
      seq: number;
      toolCalls: string[];
      inputTokens: number;
      outputTokens: number;
    }
  /** An agent's run started (or was resumed): the root first, then each child as it is admitted. */
  | { type: 'run-start'; runId: string; address: string; parentId: string | null }
  /** An agent's run paused for a person: the question it waits on (answer it, then resume). */
  | { type: 'run-paused'; runId: string; questionId: string; summary: string }
  /** A gate decided whether an agent's work is done. */
  | { type: 'gate'; runId: string; verdict: GateVerdict }
  /** An agent's run ended. */
  | { type: 'run-end'; runId: string; status: RunStatus; reply: string | null }
  /** The tree settled: the same result `handle.result` gives. Always the last part. */
  | { type: 'outcome'; result: TreeResult<Output> };

/** How a stream hears the supervisor's events: `observe` with a live filter. */
export type Observe = (observer: LiveObserver, filter: EventFilter & { live: true }) => () => void;

/** The part an event makes, or null for an event a stream does not carry. */
function partOf(event: Parameters<LiveObserver>[0]): RunPart | null {
  if (event.live) return livePart(event);
  switch (event.type) {
    case 'step-end':
      return {
        type: 'step',
        runId: event.runId,
        seq: event.seq ?? 0,
        toolCalls: event.toolCalls,
        inputTokens: event.inputTokens,
        outputTokens: event.outputTokens,
      };
    case 'run-start':
      return { type: 'run-start', runId: event.runId, address: event.address, parentId: event.parentId };
    case 'gate-evaluated':
      return { type: 'gate', runId: event.runId, verdict: event.verdict };
    case 'run-paused':
      return { type: 'run-paused', runId: event.runId, questionId: event.questionId, summary: event.summary };
    case 'run-end':
      return { type: 'run-end', runId: event.runId, status: event.status, reply: event.reply };
    default:
      return null;
  }
}

function livePart(event: LiveEvent): RunPart {
  const at = { runId: event.runId, address: event.address, seq: event.seq };
  switch (event.type) {
    case 'model-call-start':
      return { type: 'model-call-start', ...at };
    case 'text-delta':
      return { type: 'text-delta', ...at, text: event.text };
    case 'tool-call-start':
      return { type: 'tool-call-start', ...at, callId: event.callId, name: event.name };
    case 'tool-call-end':
      return { type: 'tool-call-end', ...at, callId: event.callId, name: event.name, isError: event.isError };
  }
}

/**
 * The parts of a tree as they come, queued from the moment it is made (it subscribes at
 * once), until close(). What a run's stream and a UI message stream read from.
 */
export class PartQueue {
  readonly #queue: RunPart[] = [];
  #wake: (() => void) | null = null;
  #until: Promise<unknown> | null = null;
  #over = false;
  #closed = false;
  readonly #stop: () => void;

  /** `runId`: only that run's parts (a UI message is one run's), not its children's too. */
  constructor(observe: Observe, rootId: string, runId?: string) {
    this.#stop = observe(
      (event) => {
        const part = partOf(event);
        if (part === null) return;
        this.#queue.push(part);
        this.#wake?.();
      },
      runId === undefined ? { rootId, live: true } : { rootId, runId, live: true },
    );
  }

  /** The next part, or null once `until` (the same promise each time) settles with none queued. */
  async next(until: Promise<unknown>): Promise<RunPart | null> {
    if (this.#until !== until) {
      this.#until = until;
      this.#over = false;
      const over = () => {
        if (this.#until !== until) return;
        this.#over = true;
        this.#wake?.();
      };
      void until.then(over, over);
    }
    for (;;) {
      const part = this.#queue.shift();
      if (part !== undefined) return part;
      if (this.#over || this.#closed) return null;
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
      this.#wake = null;
    }
  }

  /** Puts parts taken too early back at the head of the queue, in their order. */
  putBack(parts: readonly RunPart[]): void {
    this.#queue.unshift(...parts);
  }

  /** Stops listening, drops what is queued, and ends a `next()` that waits. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#stop();
    this.#queue.length = 0;
    this.#wake?.();
  }
}

/**
 * The parts of the tree `rootId`, from now until `result` settles (its outcome last). If
 * the tree fails to run at all, the iteration throws what `result` rejects with.
 */
export async function* runParts<Output>(
  observe: Observe,
  rootId: string,
  result: Promise<TreeResult<Output>>,
): AsyncGenerator<RunPart<Output>, void, undefined> {
  const queue = new PartQueue(observe, rootId);
  const done = result.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  try {
    // Every event of the tree was delivered before its result settled: what is queued then is all.
    for (let part = await queue.next(done); part !== null; part = await queue.next(done)) yield part as RunPart<Output>;
  } finally {
    queue.close();
  }
  const end = await done;
  if ('error' in end) throw end.error;
  yield { type: 'outcome', result: end.value };
}

/** The root agent's text, as the model streams it. */
export async function* rootText<Output>(parts: AsyncIterable<RunPart<Output>>, rootId: string): AsyncGenerator<string> {
  for await (const part of parts) if (part.type === 'text-delta' && part.runId === rootId) yield part.text;
}
