/**
 * Answering a paused run from anywhere: another process reads the open questions with
 * `store.questions({ status: 'open' })` and answers one here, without a supervisor. The
 * write is a compare-and-swap on the question's row, so when two answer, the first wins
 * and the second is refused (ALREADY_ANSWERED) naming the answer that stands. Then
 * `supervisor.resume(rootId)` continues the run from where it paused. On a PostgreSQL
 * store the answer is a promise. With a supervisor
 * running in this process, `supervisor.answer(...)` writes the same answer through its
 * store actor instead, and its observers see the `question-answered` event.
 */
import { type Answer, type AnyStore, perform, write } from '../store/either.js';
import type { Store } from '../store/sqlite/store.js';

/**
 * @example
 * const [question] = store.questions({ status: 'open' });
 * answerQuestion(store, question.questionId, 'approve', { by: 'alice' });
 * await (await supervisor.resume(question.rootId)).result;
 */
export function answerQuestion<S extends AnyStore = Store>(
  store: S,
  questionId: string,
  answer: unknown,
  options: { by?: string } = {},
): Answer<S, { runId: string; rootId: string }> {
  return perform(
    store,
    write('answer', { questionId, answer, by: options.by ?? `pid ${process.pid}`, now: Date.now() }),
  );
}
