/**
 * Attaching from another process: follows a run's tree, or a session's turns, from the
 * store alone. It reads the committed events in commit order as they are written (it
 * tails the store; live deltas stay in the owner's process), says whether a run is parked
 * on an approval, a plan, a question or an interrupted command, and answers it, the
 * first answer winning by compare-and-swap. It has no way to start, resume or step a run:
 * killing the attaching process changes nothing, and killing the owner leaves a run to
 * resume.
 */
import { ErrorCode, HarnessError, InvalidArgumentError } from '../errors.js';
import { type HarnessEvent, isTerminal } from '../runtime/events.js';
import { type Answer, type AnyStore, type Effects, perform, read, whereIs, write } from '../store/either.js';
import { TraceQueries } from '../store/queries.js';
import type { QuestionRecord } from '../store/records.js';
import type { Store } from '../store/sqlite/store.js';

const QUERIES = new TraceQueries();

/**
 * A follower on either backend: on a SQLite store its reads and its answer are at once,
 * on a PostgreSQL store each is a promise (`events()` is iterated alike on both).
 */
export class Attach<S extends AnyStore = Store> {
  readonly #store: S;
  /** The session followed, or null for one tree. */
  readonly sessionId: string | null;
  readonly #rootId: string | null;
  #closed = false;

  private constructor(store: S, sessionId: string | null, rootId: string | null) {
    this.#store = store;
    this.sessionId = sessionId;
    this.#rootId = rootId;
  }

  /** Follows the tree of `id` (any run of it), or the session `id`. */
  static open<S extends AnyStore = Store>(store: S, id: string): Answer<S, Attach<S>> {
    return perform(
      store,
      (function* () {
        if (typeof id !== 'string' || id === '')
          throw new InvalidArgumentError('Attach.open needs a run id or a session id.');
        if (yield* read(QUERIES.session(id))) return new Attach(store, id, null);
        const run = yield* read(QUERIES.run(id));
        if (run) return new Attach(store, null, run.rootId);
        throw new HarnessError(
          ErrorCode.RunNotFound,
          `no run and no session ${id} in ${whereIs(store)}; list them with store.runs() and store.sessions().`,
          { details: { id } },
        );
      })(),
    );
  }

  #do<T>(body: Effects<T>): Answer<S, T> {
    return perform(this.#store, body);
  }

  /** The trees followed: the run's, or every turn's of the session so far. */
  roots(): Answer<S, string[]> {
    return this.#do(this.#roots());
  }

  *#roots(): Effects<string[]> {
    if (this.#rootId) return [this.#rootId];
    return (yield* read(QUERIES.turns(this.sessionId as string)))
      .map((turn) => turn.runId)
      .filter((runId): runId is string => runId !== null);
  }

  /** The committed events of the followed trees after `afterId`, in commit order. */
  read(afterId = 0): Answer<S, HarnessEvent[]> {
    return this.#do(this.#read(afterId));
  }

  *#read(afterId: number): Effects<HarnessEvent[]> {
    return yield* this.#readEach(() => afterId);
  }

  /** The committed events of each followed tree after that tree's own last one read, in id order. */
  *#readEach(after: (rootId: string) => number): Effects<HarnessEvent[]> {
    const events: HarnessEvent[] = [];
    for (const root of yield* this.#roots()) events.push(...(yield* read(QUERIES.treeEvents(root, after(root)))));
    return events.sort((a, b) => a.eventId - b.eventId);
  }

  /**
   * The committed events as they are written, each once, each tree's in commit order, from
   * the first. Ends when `close()` is called or `signal` aborts, or, following one tree,
   * once its root has ended and nothing is left to read.
   */
  async *events(options: { pollMs?: number; signal?: AbortSignal } = {}): AsyncIterable<HarnessEvent> {
    // On PostgreSQL the hints every host's commits send wake the next read (the poll is for a
    // lost one); listening starts before the first read, so nothing committed after it is waited out.
    const hint = new HintWake();
    const stop = await hint.listen(this.#store);
    const pollMs = options.pollMs ?? (stop ? HEARD_POLL_MS : 25);
    // A cursor for each tree: on PostgreSQL two turns' trees commit side by side, so one
    // tree's event may commit after another tree's with a greater id (see store/postgres/locks.ts).
    const last = new Map<string, number>();
    const after = (rootId: string) => last.get(rootId) ?? 0;
    try {
      for (;;) {
        hint.heard = false;
        const batch = await this.#do(this.#readEach(after));
        for (const event of batch) {
          last.set(event.rootId, event.eventId);
          yield event;
        }
        if (this.#closed || options.signal?.aborted) return;
        if (batch.length === 0 && this.#rootId && (await this.#do(this.#ended(this.#rootId)))) {
          if ((await this.#do(this.#readEach(after))).length === 0) return;
          continue;
        }
        // Where hints wake the reads, one that found events reads again before it waits: the
        // tree may have ended with them, and no hint follows its end.
        if (stop && batch.length > 0) continue;
        await hint.wait(pollMs, options.signal);
      }
    } finally {
      stop?.();
    }
  }

  /** What the followed runs are parked on: their open questions (approvals, plans, questions, interrupted commands). */
  parked(): Answer<S, QuestionRecord[]> {
    const attach = this;
    return this.#do(
      (function* () {
        const open: QuestionRecord[] = [];
        for (const rootId of yield* attach.#roots())
          open.push(...(yield* read(QUERIES.questions({ rootId, status: 'open' }))));
        return open;
      })(),
    );
  }

  /**
   * Answers one of the followed runs' open questions. The first answer wins: a second is
   * refused with ALREADY_ANSWERED, naming who answered and what. The run goes on when its
   * owner resumes it (`session.resumeTurn()`, `supervisor.resume()`); attaching never does.
   */
  answer(questionId: string, answer: unknown, options: { by?: string } = {}): Answer<S, void> {
    const attach = this;
    return this.#do(
      (function* () {
        let question: QuestionRecord | undefined;
        for (const rootId of yield* attach.#roots())
          question ??= (yield* read(QUERIES.questions({ rootId }))).find((item) => item.questionId === questionId);
        if (!question) {
          throw new HarnessError(
            ErrorCode.QuestionNotFound,
            `question ${questionId} is not one of the followed runs'; list them with attach.parked().`,
            { details: { questionId } },
          );
        }
        yield* write('answer', { questionId, answer, by: options.by ?? `pid ${process.pid}`, now: Date.now() });
      })(),
    );
  }

  /** Stops the iteration of `events()`. Nothing else happens: the runs go on. */
  close(): void {
    this.#closed = true;
  }

  /** Whether the tree's root has ended for good (a paused one may still be resumed and write more). */
  *#ended(rootId: string): Effects<boolean> {
    const status = (yield* read(QUERIES.run(rootId)))?.status;
    return status !== undefined && isTerminal(status);
  }
}

/** How often `events()` looks for a hint that was lost, where the store sends hints (PostgreSQL). */
const HEARD_POLL_MS = 1_000;

/** The store's hints that trees have new events, as a wake for a waiting read (see PostgresStore.hear). */
class HintWake {
  /** A hint came since the last read began: the next wait does not wait. */
  heard = false;
  #wake: (() => void) | null = null;

  /** Listens where the store can (PostgreSQL); what stops it, or null where there are no hints (SQLite). */
  async listen(store: AnyStore): Promise<(() => void) | null> {
    const hear = (
      store as { hear?: (listener: (hint: { events: string[]; all: boolean }) => void) => Promise<() => void> }
    ).hear;
    if (typeof hear !== 'function') return null;
    return hear.call(store, (hint) => {
      if (!hint.all && hint.events.length === 0) return;
      this.heard = true;
      this.#wake?.();
    });
  }

  /** Waits `pollMs`, or less: until a hint, or `signal` aborts. */
  async wait(pollMs: number, signal: AbortSignal | undefined): Promise<void> {
    if (this.heard) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        this.#wake = null;
        resolve();
      };
      const timer = setTimeout(done, pollMs);
      this.#wake = done;
      signal?.addEventListener('abort', done, { once: true });
    });
  }
}
