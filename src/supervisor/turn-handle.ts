/**
 * A session turn under way, as the caller holds it: awaited for its result, iterated for
 * its text and tool calls, steered or interrupted, and streamed to a chat page as the AI
 * SDK's UI message stream. Made by ./session.ts.
 */
import type { ServerResponse } from 'node:http';
import { ErrorCode, HarnessError, InvalidArgumentError } from '../errors.js';
import type { Answer, AnyStore } from '../store/either.js';
import type { Store } from '../store/sqlite/store.js';
import { pipeUIMessageStream, rootSource, type UIStreamSource, uiMessageResponse } from '../ui/message-stream.js';
import type { Observe } from './run-stream.js';
import type { TurnResult } from './session.js';
import type { Supervisor } from './supervisor.js';

/** What a turn's answering agent does as it happens: its text as the model streams it, and its tool calls. */
export type TurnEvent =
  | { type: 'text'; text: string }
  | { type: 'tool-call-start'; callId: string; name: string }
  | { type: 'tool-call-end'; callId: string; name: string; isError: boolean };

/**
 * A turn under way: await it for its result, or iterate it for its text and tool calls as
 * they happen (every event from the turn's start, in order, however late the iteration
 * begins). Stopping the iteration stops nothing but the iteration.
 */
export class TurnHandle<S extends AnyStore = Store> implements PromiseLike<TurnResult>, AsyncIterable<TurnEvent> {
  readonly result: Promise<TurnResult>;
  readonly #events: TurnEvent[] = [];
  readonly #waiting = new Set<() => void>();
  #done = false;

  /** The turn's id, known from the start (a second process steers it by this id through Session.steer). */
  readonly turnId: string;
  /** True on PostgreSQL, where a steer or an interrupt is a promise. */
  readonly #async: boolean;
  readonly #deliver: Deliver<S>;
  readonly #byTurn: (turnId: string, kind: 'steer' | 'interrupt', text: string | null) => Answer<S, void>;
  #runId: string | null = null;
  readonly #before: { kind: 'steer' | 'interrupt'; text: string | null }[] = [];
  /** Corrections held before the run existed that could not be written when it did. */
  readonly #lost: string[] = [];
  /** Where the turn's UI message stream reads from, once its run exists (or why it never will). */
  #found: (source: UIStreamSource) => void = () => undefined;
  #unstarted: (error: unknown) => void = () => undefined;
  readonly #source = new Promise<UIStreamSource>((resolve, reject) => {
    this.#found = resolve;
    this.#unstarted = reject;
  });

  /** @internal */
  constructor(
    turnId: string,
    async: boolean,
    deliver: Deliver<S>,
    byTurn: (turnId: string, kind: 'steer' | 'interrupt', text: string | null) => Answer<S, void>,
    run: (
      push: (event: TurnEvent) => void,
      started: (runId: string, supervisor: Supervisor<AnyStore>, observe?: Observe) => void | Promise<void>,
    ) => Promise<TurnResult>,
  ) {
    this.#async = async;
    this.#deliver = deliver;
    this.#byTurn = byTurn;
    this.turnId = turnId;
    const wake = () => {
      for (const resolve of this.#waiting) resolve();
      this.#waiting.clear();
    };
    this.result = run(
      (event) => {
        this.#events.push(event);
        wake();
      },
      async (runId, supervisor, observe) => {
        const ports = {
          // Where another process drives the run, what the caller follows it by (see store-follow.ts).
          observe: observe ?? (supervisor.observe.bind(supervisor) as Observe),
          read: supervisor.read.bind(supervisor),
        };
        this.#found(rootSource(ports, runId, turnId, this.result));
        // What was sent before the run existed goes to it now, in order, before its first step;
        // what is sent while that is written waits its turn behind it.
        while (this.#before.length > 0) {
          const item = this.#before.shift() as { kind: 'steer' | 'interrupt'; text: string | null };
          try {
            await this.#deliver(runId, item.kind, item.text);
          } catch {
            // Reported with the result, as a correction the turn never took.
            if (item.text !== null) this.#lost.push(item.text);
          }
        }
        this.#runId = runId;
      },
    )
      .then((result) =>
        this.#lost.length > 0 ? { ...result, undelivered: [...this.#lost, ...result.undelivered] } : result,
      )
      .finally(() => {
        this.#done = true;
        wake();
      });
    // Awaited or not, a failed turn is the caller's to see through `result`, never an unhandled rejection.
    this.result.catch(() => undefined);
    // A turn that fails before its run exists has nothing to stream but why.
    this.result.catch((error: unknown) => this.#unstarted(error));
    this.#source.catch(() => undefined);
  }

  /**
   * The turn as the AI SDK's UI message stream in a web `Response`: what `useChat` reads
   * (text as it streams, tool calls with input and output, errors, the finish with the
   * turn's status and usage). See docs/guides/ai-sdk.md.
   */
  toUIMessageStreamResponse(init?: ResponseInit): Response {
    return uiMessageResponse(this.#source, init);
  }

  /** The same stream, written to a Node `ServerResponse`; resolves once it has ended. */
  pipeUIMessageStreamToResponse(
    response: ServerResponse,
    init?: { status?: number; headers?: Record<string, string> },
  ): Promise<void> {
    return pipeUIMessageStream(this.#source, response, init);
  }

  // biome-ignore lint/suspicious/noThenProperty: a turn is awaited like the promise of its result.
  then<A = TurnResult, B = never>(
    onFulfilled?: ((value: TurnResult) => A | PromiseLike<A>) | null,
    onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    return this.result.then(onFulfilled, onRejected);
  }

  /**
   * Corrects the turn while it runs: `text` reaches the answering agent (the root, never a
   * child) at its next step boundary, as the user's words. Throws TURN_ENDED, writing
   * nothing, once the turn has ended (on PostgreSQL, the promise it returns is rejected so).
   */
  steer(text: string): Answer<S, void> {
    if (typeof text !== 'string' || text.trim() === '')
      return this.#refuse(new InvalidArgumentError('turn.steer needs the correction, a non-empty string.'));
    return this.#send('steer', text);
  }

  /** Ends the turn at its next step boundary as `interrupted`, its committed steps kept. Throws TURN_ENDED once it has ended. */
  interrupt(): Answer<S, void> {
    return this.#send('interrupt', null);
  }

  #refuse(error: Error): Answer<S, void> {
    if (this.#async) return Promise.reject(error) as Answer<S, void>;
    throw error;
  }

  #send(kind: 'steer' | 'interrupt', text: string | null): Answer<S, void> {
    // Once the handle's result is in, the turn is reached by its id: a paused turn still can be.
    if (this.#done) return this.#byTurn(this.turnId, kind, text);
    if (this.#runId !== null) return this.#deliver(this.#runId, kind, text);
    this.#before.push({ kind, text });
    return (this.#async ? Promise.resolve() : undefined) as Answer<S, void>;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<TurnEvent> {
    let at = 0;
    for (;;) {
      while (at < this.#events.length) yield this.#events[at++] as TurnEvent;
      if (this.#done) return;
      await new Promise<void>((resolve) => this.#waiting.add(resolve));
    }
  }
}

/** Writes a steer or an interrupt for a turn's root run. */
export type Deliver<S> = (runId: string, kind: 'steer' | 'interrupt', text: string | null) => Answer<S, void>;

/** The error for steering or interrupting a turn that has ended. */
export function turnEnded(kind: 'steer' | 'interrupt', turnId?: string, status?: string): never {
  throw new HarnessError(
    ErrorCode.TurnEnded,
    `${turnId ? `turn ${turnId}` : 'the turn'} has ended${status ? ` (${status})` : ''}; there is nothing to ${kind}. Say it in a new turn.`,
    { details: { ...(turnId ? { turnId } : {}), ...(status ? { status } : {}) } },
  );
}
