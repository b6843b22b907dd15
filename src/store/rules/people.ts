/**
 * The rules of what waits on a person: an effect journaled before it starts and its end
 * recorded, a run paused on a question, the question answered (the first answer wins), the
 * run taken back up once nothing it waits on is open, and a gate retried after the run ended.
 */
import { ErrorCode, HarnessError, InvalidArgumentError } from '../../errors.js';
import type { EventData, QuestionKind, RunStatus } from '../../runtime/events.js';
import type { Completion } from '../../runtime/provider.js';
import type { Fence, IntentBegin, IntentInput, LeaseClaim, QuestionInput } from '../records.js';
import type { Q } from '../sql.js';
import * as sql from '../sql.js';
import { fenced, type RuleContext, recordEvent, runRow } from './context.js';
import { acquireLease } from './leases.js';
import { finish } from './run-end.js';
import { keepDraft } from './step.js';

/**
 * Journals an effect the runtime cannot inspect or undo before it starts. The answer
 * says whether it may start, already ran (its result stands), or was interrupted.
 * `again` replaces an interrupted one the operator chose to retry.
 */
export function* beginIntent(context: RuleContext, input: IntentInput): Q<IntentBegin> {
  const run = yield* fenced(context, input);
  yield* keepDraft(run, input.seq, input.generation, input.completion, input.now);
  const existing = (yield* sql.get('SELECT * FROM intents WHERE effect_key = ?', input.key)) as
    | { result: string | null; started_at: number }
    | undefined;
  if (existing && existing.result !== null) return { status: 'done', result: existing.result };
  if (existing && !input.again) return { status: 'in-flight', startedAt: existing.started_at };
  yield* sql.put(
    `INSERT INTO intents (effect_key, run_id, seq, generation, kind, detail, started_at, result, finished_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL)
       ON CONFLICT (effect_key) DO UPDATE SET run_id = excluded.run_id, seq = excluded.seq, generation = excluded.generation,
         kind = excluded.kind, detail = excluded.detail, started_at = excluded.started_at, result = NULL, finished_at = NULL`,
    input.key,
    run.run_id,
    input.seq,
    input.generation,
    input.kind,
    input.detail,
    input.now,
  );
  yield* recordEvent(
    context,
    run,
    input.seq,
    input.generation,
    { type: 'intent-started', key: input.key, kind: input.kind, detail: input.detail },
    input.now,
  );
  return { status: 'started' };
}

/** Records how a journaled effect ended. */
export function* finishIntent(
  context: RuleContext,
  input: Fence & { seq: number; key: string; result: string; outcome: string; now: number },
): Q<void> {
  const run = yield* fenced(context, input);
  yield* sql.put(
    'UPDATE intents SET result = ?, finished_at = ? WHERE effect_key = ? AND result IS NULL',
    input.result,
    input.now,
    input.key,
  );
  yield* recordEvent(
    context,
    run,
    input.seq,
    input.generation,
    { type: 'intent-finished', key: input.key, outcome: input.outcome },
    input.now,
  );
}

/**
 * Stops a run to wait on a person: the question is stored (the first asking wins), the
 * step in progress is kept as a draft for the resume, and the lease is given back.
 */
export function* pause(
  context: RuleContext,
  input: Fence & {
    seq: number;
    completion: Completion;
    partial: unknown;
    question: QuestionInput;
    events: EventData[];
    now: number;
  },
): Q<void> {
  const run = yield* fenced(context, input);
  yield* keepDraft(run, input.seq, input.generation, input.completion, input.now);
  yield* sql.put('UPDATE drafts SET partial = ? WHERE run_id = ?', JSON.stringify(input.partial), run.run_id);
  // The draft keeps the calls the step made before it paused as made: a resume does not make
  // them again, so it must not put back what they wrote either. Its images go; what the step
  // writes after the resume is imaged afresh, from here.
  yield* sql.put('DELETE FROM step_images WHERE run_id = ? AND seq = ?', run.run_id, input.seq);
  const q = input.question;
  yield* sql.put(
    `INSERT INTO questions (question_id, root_id, run_id, seq, kind, payload, status, created_at)
       VALUES (?, ?, ?, ?, ?, ?, 'open', ?) ON CONFLICT DO NOTHING`,
    q.questionId,
    run.root_id,
    run.run_id,
    input.seq,
    q.kind,
    JSON.stringify(q.payload),
    input.now,
  );
  for (const event of input.events) yield* recordEvent(context, run, input.seq, input.generation, event, input.now);
  yield* recordEvent(
    context,
    run,
    input.seq,
    input.generation,
    { type: 'run-paused', questionId: q.questionId, kind: q.kind, summary: q.summary },
    input.now,
  );
  yield* sql.put(
    `UPDATE runs SET status = 'paused', lease_owner = NULL, lease_expires_at = NULL WHERE run_id = ?`,
    run.run_id,
  );
  // A parent waiting on this run hears that it stopped.
  context.pending.ended.push({ rootId: run.root_id, runId: run.run_id, status: 'paused' });
}

/**
 * Answers an open question. A compare-and-swap on the row: the first answer wins, and
 * a second is refused naming the first (CONFLICT), so two operators never both decide.
 */
export function* answer(
  context: RuleContext,
  input: {
    questionId: string;
    answer: unknown;
    by: string;
    now: number;
  },
): Q<{ runId: string; rootId: string }> {
  const row = (yield* sql.get('SELECT * FROM questions WHERE question_id = ?', input.questionId)) as
    | {
        run_id: string;
        root_id: string;
        kind: QuestionKind;
        status: string;
        answered_by: string | null;
        answer: string | null;
      }
    | undefined;
  if (!row) {
    throw new HarnessError(
      ErrorCode.QuestionNotFound,
      `no question ${input.questionId} in this store; list the open ones with store.questions({ status: 'open' }).`,
      { details: { questionId: input.questionId } },
    );
  }
  checkAnswer(row.kind, input.answer);
  const changed = (yield* sql.run(
    `UPDATE questions SET status = 'answered', answer = ?, answered_by = ?, answered_at = ? WHERE question_id = ? AND status = 'open'`,
    JSON.stringify(input.answer),
    input.by,
    input.now,
    input.questionId,
  )).changes;
  if (changed !== 1) {
    const current = (yield* sql.get(
      'SELECT answer, answered_by FROM questions WHERE question_id = ?',
      input.questionId,
    )) as {
      answer: string;
      answered_by: string;
    };
    throw new HarnessError(
      ErrorCode.AlreadyAnswered,
      `question ${input.questionId} was already answered by ${current.answered_by} (${current.answer}); the first answer stands and yours was not recorded.`,
      {
        details: {
          questionId: input.questionId,
          answeredBy: current.answered_by,
          answer: JSON.parse(current.answer),
        },
      },
    );
  }
  const run = yield* runRow(context, row.run_id);
  yield* recordEvent(
    context,
    run,
    null,
    run.generation,
    { type: 'question-answered', questionId: input.questionId, kind: row.kind, answer: input.answer, by: input.by },
    input.now,
  );
  return { runId: row.run_id, rootId: row.root_id };
}

/**
 * Takes a paused run back up when nothing it waits on is still open: it becomes
 * running under a new lease. Otherwise it stays paused and the open questions are named.
 */
export function* resumePaused(
  context: RuleContext,
  input: LeaseClaim & { runId: string },
): Q<{ status: 'resumed'; generation: number } | { status: 'waiting'; open: string[] }> {
  const open = (
    (yield* sql.all(
      `SELECT question_id FROM questions WHERE run_id = ? AND status = 'open' ORDER BY created_at`,
      input.runId,
    )) as { question_id: string }[]
  ).map((row) => row.question_id);
  if (open.length > 0) return { status: 'waiting', open };
  const run = yield* runRow(context, input.runId);
  if (run.status !== 'paused') return { status: 'waiting', open: [] };
  yield* sql.put(`UPDATE runs SET status = 'running' WHERE run_id = ?`, input.runId);
  const { generation } = yield* acquireLease(context, input);
  return { status: 'resumed', generation };
}

/**
 * Records a gate evaluated again after the run ended (`retryGate`), and moves a run
 * that ended on its gate to `finished` when the gate now passes. Only a run that is
 * over and not leased can be re-gated.
 */
export function* regate(
  context: RuleContext,
  input: { runId: string; events: EventData[]; passed: boolean; reply: string | null; now: number },
): Q<{
  status: RunStatus;
}> {
  const run = yield* runRow(context, input.runId);
  if (run.status !== 'gate-failed' && run.status !== 'finished') {
    throw new HarnessError(
      ErrorCode.RunStillLive,
      `run ${input.runId} is ${run.status}; only a run that ended on its gate (or finished) can have its gate retried.`,
      { details: { runId: input.runId, status: run.status } },
    );
  }
  for (const event of input.events) yield* recordEvent(context, run, null, run.generation, event, input.now);
  if (input.passed && run.status === 'gate-failed') {
    yield* finish(
      context,
      run,
      run.generation,
      run.last_seq,
      'finished',
      input.reply,
      'the gate passed when retried',
      input.now,
      [],
    );
    return { status: 'finished' };
  }
  return { status: run.status };
}

/** What each kind of question takes as an answer; anything else is refused before it is stored. */
function checkAnswer(kind: QuestionKind, answer: unknown): void {
  const fail = (wanted: string) => {
    throw new InvalidArgumentError(`a ${kind} question is answered with ${wanted}; got ${JSON.stringify(answer)}.`);
  };
  if (kind === 'approval' && answer !== 'approve' && answer !== 'deny') fail(`'approve' or 'deny'`);
  if (kind === 'intent' && answer !== 'retry' && answer !== 'skip' && answer !== 'abort')
    fail(`'retry', 'skip' or 'abort'`);
  if (kind === 'question' && (typeof answer !== 'string' || answer.trim() === '')) fail('a non-empty string');
  if (kind === 'plan') {
    const decision = (answer as { decision?: unknown; steps?: unknown } | null)?.decision;
    const steps = (answer as { steps?: unknown } | null)?.steps;
    const validSteps =
      Array.isArray(steps) &&
      steps.length > 0 &&
      steps.every((step) => typeof (step as { description?: unknown })?.description === 'string');
    if (decision !== 'approve' && decision !== 'cancel' && !(decision === 'correct' && validSteps)) {
      fail(`{ decision: 'approve' }, { decision: 'cancel' } or { decision: 'correct', steps: [{ description }] }`);
    }
  }
}
