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
import type { QuestionRecord } from '../store/reader.js';
import type { Store } from '../store/store.js';
import { answerQuestion } from './questions.js';

export class Attach {
  readonly #store: Store;
  /** The session followed, or null for one tree. */
  readonly sessionId: string | null;
  readonly #rootId: string | null;
  #closed = false;

  private constructor(store: Store, sessionId: string | null, rootId: string | null) {
    this.#store = store;
    this.sessionId = sessionId;
    this.#rootId = rootId;
  }

  /** Follows the tree of `id` (any run of it), or the session `id`. */
  static open(store: Store, id: string): Attach {
    if (typeof id !== 'string' || id === '')
      throw new InvalidArgumentError('Attach.open needs a run id or a session id.');
    if (store.session(id)) return new Attach(store, id, null);
    const run = store.run(id);
    if (run) return new Attach(store, null, run.rootId);
    throw new HarnessError(
      ErrorCode.RunNotFound,
      `no run and no session ${id} in ${store.path}; list them with store.runs() and store.sessions().`,
      { details: { id } },
    );
  }

  /** The trees followed: the run's, or every turn's of the session so far. */
  roots(): string[] {
    if (this.#rootId) return [this.#rootId];
    return this.#store
      .turns(this.sessionId as string)
      .map((turn) => turn.runId)
      .filter((runId): runId is string => runId !== null);
  }

  /** The committed events of the followed trees after `afterId`, in commit order. */
  read(afterId = 0): HarnessEvent[] {
    return this.roots()
      .flatMap((root) => this.#store.treeEvents(root, afterId))
      .sort((a, b) => a.eventId - b.eventId);
  }

  /**
   * The committed events as they are written, each once and in commit order, from the
   * first. Ends when `close()` is called or `signal` aborts, or, following one tree,
   * once its root has ended and nothing is left to read.
   */
  async *events(options: { pollMs?: number; signal?: AbortSignal } = {}): AsyncIterable<HarnessEvent> {
    const pollMs = options.pollMs ?? 25;
    let after = 0;
    for (;;) {
      const batch = this.read(after);
      for (const event of batch) {
        after = event.eventId;
        yield event;
      }
      if (this.#closed || options.signal?.aborted) return;
      if (batch.length === 0 && this.#rootId && this.#ended(this.#rootId) && this.read(after).length === 0) return;
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  }

  /** What the followed runs are parked on: their open questions (approvals, plans, questions, interrupted commands). */
  parked(): QuestionRecord[] {
    return this.roots().flatMap((rootId) => this.#store.questions({ rootId, status: 'open' }));
  }

  /**
   * Answers one of the followed runs' open questions. The first answer wins: a second is
   * refused with ALREADY_ANSWERED, naming who answered and what. The run goes on when its
   * owner resumes it (`session.resumeTurn()`, `supervisor.resume()`); attaching never does.
   */
  answer(questionId: string, answer: unknown, options: { by?: string } = {}): void {
    const question = this.roots()
      .flatMap((rootId) => this.#store.questions({ rootId }))
      .find((item) => item.questionId === questionId);
    if (!question) {
      throw new HarnessError(
        ErrorCode.QuestionNotFound,
        `question ${questionId} is not one of the followed runs'; list them with attach.parked().`,
        { details: { questionId } },
      );
    }
    answerQuestion(this.#store, questionId, answer, options);
  }

  /** Stops the iteration of `events()`. Nothing else happens: the runs go on. */
  close(): void {
    this.#closed = true;
  }

  /** Whether the tree's root has ended for good (a paused one may still be resumed and write more). */
  #ended(rootId: string): boolean {
    const status = this.#store.run(rootId)?.status;
    return status !== undefined && isTerminal(status);
  }
}
