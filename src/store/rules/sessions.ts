/**
 * The session rules: a session and its turns (the head moved by compare-and-swap, so two
 * turns racing for it never both win), and what a person sends a running root between its
 * steps — a correction or an interrupt, taken at the next step boundary.
 */
import { ErrorCode, HarnessError, InvalidArgumentError } from '../../errors.js';
import { isTerminal } from '../../runtime/events.js';
import type { Fence } from '../records.js';
import type { Q } from '../sql.js';
import * as sql from '../sql.js';
import { fenced, type RuleContext, type RunRow, recordEvent } from './context.js';
import { finish } from './run-end.js';
import { cancelQueued } from './spawn.js';

/** Makes a session's row; opening one that exists is refused (its id is the embedder's to choose once). */
export function* openSession(
  _context: RuleContext,
  input: { sessionId: string; root: string | null; now: number },
): Q<void> {
  const known = yield* sql.get('SELECT 1 AS one FROM sessions WHERE session_id = ?', input.sessionId);
  if (known) {
    throw new InvalidArgumentError(
      `a session ${input.sessionId} is already in this store; resume it with Session.resume(store, id), or open one with another id.`,
    );
  }
  yield* sql.put(
    'INSERT INTO sessions (session_id, root, head, created_at) VALUES (?, ?, NULL, ?)',
    input.sessionId,
    // No workspace is '' in the column, which a workspace's absolute path never is.
    input.root ?? '',
    input.now,
  );
}

/** Records a turn as begun, following `parent` (the head the caller read); the head moves only when it ends. */
export function* beginTurn(
  _context: RuleContext,
  input: { sessionId: string; turnId: string; parent: string | null; text: string; now: number },
): Q<{
  seq: number;
}> {
  const row = (yield* sql.get(
    'SELECT COALESCE(MAX(seq), 0) + 1 AS seq FROM turns WHERE session_id = ?',
    input.sessionId,
  )) as { seq: number };
  yield* sql.put(
    `INSERT INTO turns (turn_id, session_id, parent, seq, run_id, user_text, reply, status, created_at, ended_at)
       VALUES (?, ?, ?, ?, NULL, ?, NULL, 'running', ?, NULL)`,
    input.turnId,
    input.sessionId,
    input.parent,
    row.seq,
    input.text,
    input.now,
  );
  return { seq: row.seq };
}

/** Records the run that answers a turn. */
export function* startedTurn(_context: RuleContext, input: { turnId: string; runId: string }): Q<void> {
  yield* sql.put('UPDATE turns SET run_id = ? WHERE turn_id = ?', input.runId, input.turnId);
}

/**
 * Ends a turn and moves its session's head to it by compare-and-swap: only if the head
 * is still the turn's parent. A turn that lost the race is kept, as `conflicted`.
 */
export function* endTurn(
  _context: RuleContext,
  input: {
    turnId: string;
    status: string;
    reply: string | null;
    now: number;
    /** False: the turn's row ends, and the head stays (a turn whose run never started). */
    advance?: boolean;
  },
): Q<{ advanced: true } | { advanced: false; head: string | null }> {
  const turn = (yield* sql.get('SELECT session_id, parent FROM turns WHERE turn_id = ?', input.turnId)) as
    | { session_id: string; parent: string | null }
    | undefined;
  if (!turn) throw new InvalidArgumentError(`no turn ${input.turnId} in this store.`);
  const moved =
    input.advance === false
      ? { changes: 0 }
      : // Still on the turn's parent, or already on the turn (a paused turn that ends after its resume).
        yield* sql.run(
          'UPDATE sessions SET head = ? WHERE session_id = ? AND (head IS NOT DISTINCT FROM ? OR head = ?)',
          input.turnId,
          turn.session_id,
          turn.parent,
          input.turnId,
        );
  const advanced = moved.changes === 1;
  const status = advanced || input.advance === false ? input.status : 'conflicted';
  yield* sql.put(
    'UPDATE turns SET status = ?, reply = ?, ended_at = ? WHERE turn_id = ?',
    status,
    input.reply,
    input.now,
    input.turnId,
  );
  if (advanced) return { advanced: true };
  const head = (yield* sql.get('SELECT head FROM sessions WHERE session_id = ?', turn.session_id)) as {
    head: string | null;
  };
  return { advanced: false, head: head.head };
}

/** Moves a session's head to one of its turns (a branch). */
export function* moveHead(_context: RuleContext, input: { sessionId: string; turnId: string }): Q<void> {
  const moved = yield* sql.run(
    'UPDATE sessions SET head = ? WHERE session_id = ? AND EXISTS (SELECT 1 FROM turns WHERE turn_id = ? AND session_id = ?)',
    input.turnId,
    input.sessionId,
    input.turnId,
    input.sessionId,
  );
  if (moved.changes !== 1)
    throw new InvalidArgumentError(
      `turn ${input.turnId} is not a turn of session ${input.sessionId}; nothing was moved.`,
    );
}

/** What waits for a run from a person, oldest first. */
export const WAITING_STEERS =
  'SELECT steer_id, kind, body, by_whom FROM steers WHERE run_id = ? AND taken_seq IS NULL ORDER BY steer_id';
export interface SteerRow {
  steer_id: number;
  kind: string;
  body: string | null;
  by_whom: string;
}

/**
 * Takes what is waiting for a root run at the boundary after step `after` (0: before its
 * first): corrections, which come before the next step as the user's words, each recorded
 * as `steered`; and an interrupt, which ends the run as `interrupted` here, its committed
 * steps kept. `read`, when given, is what WAITING_STEERS read earlier in the transaction.
 */
export function* takeSteersAt(
  context: RuleContext,
  run: RunRow,
  generation: number,
  after: number,
  now: number,
  read?: SteerRow[],
): Q<{ steers: string[]; interrupt: boolean }> {
  const waiting = read ?? ((yield* sql.all(WAITING_STEERS, run.run_id)) as SteerRow[]);
  const taken = { steers: [] as string[], interrupt: false };
  if (waiting.length === 0) return taken;
  const before = after + 1;
  const seq = after === 0 ? null : after;
  const interrupt = waiting.find((item) => item.kind === 'interrupt');
  if (interrupt) {
    // The run ends here: corrections sent with the interrupt are left untaken, reported as undelivered.
    yield* sql.put(
      `UPDATE steers SET taken_seq = ? WHERE run_id = ? AND kind = 'interrupt' AND taken_seq IS NULL`,
      before,
      run.run_id,
    );
    yield* finish(context, run, generation, after, 'interrupted', null, `interrupted by ${interrupt.by_whom}`, now, []);
    return { steers: [], interrupt: true };
  }
  yield* sql.put('UPDATE steers SET taken_seq = ? WHERE run_id = ? AND taken_seq IS NULL', before, run.run_id);
  for (const item of waiting) {
    const text = item.body ?? '';
    taken.steers.push(text);
    yield* recordEvent(context, run, seq, generation, { type: 'steered', text, before, by: item.by_whom }, now);
  }
  return taken;
}

/** Takes what waits for a root run as it starts (sent before its first step, or while it was paused or down). */
export function* takeSteers(
  context: RuleContext,
  input: Fence & { now: number },
): Q<{ steers: string[]; interrupt: boolean }> {
  const run = yield* fenced(context, input);
  if (run.parent_id !== null) return { steers: [], interrupt: false };
  return yield* takeSteersAt(context, run, input.generation, run.last_seq, input.now);
}

/**
 * Sends a running root run a correction (`steer`, with its words) or an `interrupt`,
 * taken at its next step boundary. Refused, writing nothing, for a child (only the
 * root is steered) and for a run that has ended.
 */
export function* steer(
  context: RuleContext,
  input: { runId: string; kind: 'steer' | 'interrupt'; text: string | null; by: string; now: number },
): Q<{
  steerId: number;
}> {
  const run = (yield* sql.get<RunRow>(context.runById, input.runId)) as RunRow | undefined;
  if (run && run.parent_id !== null) {
    throw new InvalidArgumentError(
      `run ${input.runId} is a child of ${run.parent_id}; only the root of a turn is steered. Steer ${run.root_id}.`,
    );
  }
  const what = input.kind === 'steer' ? 'steer' : 'interrupt';
  if (run && isTerminal(run.status)) {
    throw new HarnessError(
      ErrorCode.TurnEnded,
      `run ${input.runId} has ended (${run.status}); there is nothing to ${what}. Say it in a new turn.`,
      { details: { runId: input.runId, status: run.status } },
    );
  }
  // Only a session's turn is steered: a turn running or paused names the run (before its
  // row is written, too: the turn names it first).
  const turn = (yield* sql.get(
    `SELECT turn_id FROM turns WHERE run_id = ? AND status IN ('running', 'paused')`,
    input.runId,
  )) as { turn_id: string } | undefined;
  if (!turn) {
    throw new HarnessError(
      ErrorCode.RunNotFound,
      `no turn of a session runs ${input.runId} in this store; only a session's running turn is steered.`,
      { details: { runId: input.runId } },
    );
  }
  const row = yield* sql.get<{ steer_id: number }>(
    'INSERT INTO steers (run_id, kind, body, by_whom, created_at, taken_seq) VALUES (?, ?, ?, ?, ?, NULL) RETURNING steer_id',
    input.runId,
    input.kind,
    input.text,
    input.by,
    input.now,
  );
  // A root paused on a person takes no step until it is resumed: an interrupt ends it now,
  // and what of its tree waits (paused or queued) with it.
  if (run && input.kind === 'interrupt' && run.status === 'paused') {
    yield* sql.put(
      `UPDATE steers SET taken_seq = ? WHERE run_id = ? AND kind = 'interrupt' AND taken_seq IS NULL`,
      run.last_seq + 1,
      run.run_id,
    );
    yield* finish(
      context,
      run,
      run.generation,
      run.last_seq,
      'interrupted',
      null,
      `interrupted by ${input.by}`,
      input.now,
      [],
    );
    yield* cancelQueued(context, { rootId: run.root_id, now: input.now });
    yield* sql.put(`UPDATE turns SET status = 'interrupted', ended_at = ? WHERE turn_id = ?`, input.now, turn.turn_id);
  }
  return { steerId: Number(row?.steer_id) };
}
