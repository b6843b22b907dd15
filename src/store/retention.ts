/**
 * Retention: what a store keeps of its sessions, decided by the embedder and never by a
 * model. A session is deleted whole (its turns, the runs they drove, every run those
 * spawned, every row of theirs in every table) in one transaction; old sessions are swept
 * the same way, refusing any that still holds a run that can be resumed; a session is
 * archived by keeping every row and every number and emptying every column that holds
 * words; the store gives its freed space back when compacted. Nothing expires on its own.
 *
 * The rules are written once, as statements both backends run (see sql.ts): which
 * tables hold a session's rows, which columns hold words and how an archive empties them,
 * and each operation, run in the caller's transaction. A SQLite `Store` runs them on its
 * file, a `PostgresStore` on its server.
 */
import { ErrorCode, HarnessError, InvalidArgumentError } from '../errors.js';
import { isTerminal } from '../runtime/events.js';
import type { Q } from './sql.js';
import * as sql from './sql.js';

/** The tables a run's rows are in, by the column that names the tree (`root_id`) or the run (`run_id`). */
export const BY_ROOT = [
  'ledger',
  'draws',
  'events',
  'mailbox',
  'spawn_queue',
  'model_calls',
  'web_sources',
  'restore_points',
  'file_changes',
  'questions',
] as const;
export const BY_RUN = ['steps', 'checkpoints', 'intents', 'drafts', 'step_images', 'steers', 'memory_draws'] as const;

/** Every table a session's rows are in, for counting. */
export const SESSION_TABLES = ['sessions', 'turns', 'runs', ...BY_ROOT, ...BY_RUN] as const;

/**
 * Columns that hold words (prompts, replies, tool arguments and output, diffs, messages,
 * file contents) and how an archive empties them: `text` to '', `null` to NULL, `json`
 * to the same JSON with every string in it emptied (its shape, numbers and flags kept,
 * so readers still parse it).
 */
export const WORDS: Record<string, Record<string, 'text' | 'null' | 'json'>> = {
  turns: { user_text: 'text', reply: 'null' },
  runs: { task: 'text', spec: 'json', outcome: 'json', reply: 'null' },
  steps: { completion: 'json', observations: 'json' },
  checkpoints: { state: 'json' },
  events: { data: 'json' },
  mailbox: { body: 'text' },
  intents: { detail: 'text', result: 'null' },
  restore_points: { content: 'null' },
  file_changes: { diff: 'text' },
  questions: { payload: 'json', answer: 'json' },
  drafts: { completion: 'json', partial: 'json' },
  step_images: { content: 'null' },
  steers: { body: 'null' },
  web_sources: { url: 'text', title: 'null', cited_text: 'null' },
};

/** How a row is found again for its update: its table's primary key (indexed on both backends). */
export const KEYS: Record<string, readonly string[]> = {
  runs: ['run_id'],
  turns: ['turn_id'],
  checkpoints: ['run_id'],
  intents: ['effect_key'],
  questions: ['question_id'],
  drafts: ['run_id'],
  steps: ['run_id', 'seq'],
  restore_points: ['run_id', 'path'],
  file_changes: ['run_id', 'seq', 'ordinal'],
  step_images: ['run_id', 'seq', 'path'],
  events: ['event_id'],
  mailbox: ['ordinal'],
  steers: ['steer_id'],
  web_sources: ['source_id'],
};

/**
 * Which sessions an operation is over, as a condition on a `session_id` column and its
 * parameters: one session, or every session created before a moment (a sweep). The
 * statements stay the same text however many sessions there are.
 */
export interface Sessions {
  match: string;
  params: unknown[];
}

export const oneSession = (sessionId: string): Sessions => ({ match: '= ?', params: [sessionId] });
const createdBefore = (before: number): Sessions => ({
  match: 'IN (SELECT session_id FROM sessions WHERE created_at < ?)',
  params: [before],
});

/**
 * Which rows of `table` belong to `sessions`: their turns by session; the rows of the trees
 * their turns drove by `root_id`, or for the tables that have none, by the runs of those
 * trees. The statement's condition and its parameters.
 */
export function scope(table: string, sessions: Sessions): [string, unknown[]] {
  if (table === 'turns') return [`session_id ${sessions.match}`, sessions.params];
  const roots = `(SELECT run_id FROM turns WHERE session_id ${sessions.match} AND run_id IS NOT NULL)`;
  // Only a turn's root is steered, and a turn may name its run before the run's row is written.
  if (table === 'steers') return [`run_id IN ${roots}`, sessions.params];
  if (table === 'runs' || (BY_ROOT as readonly string[]).includes(table))
    return [`root_id IN ${roots}`, sessions.params];
  return [`run_id IN (SELECT run_id FROM runs WHERE root_id IN ${roots})`, sessions.params];
}

/** Every string in a JSON value emptied; its keys, numbers, flags and shape kept. */
export function emptied(value: unknown): unknown {
  if (typeof value === 'string') return '';
  if (Array.isArray(value)) return value.map(emptied);
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, emptied(item)]));
  return value;
}

/** The moment a sweep deletes sessions created before, in milliseconds; a clear error for anything else. */
export function sweepBefore(options: { before: Date | number }): number {
  const before = options?.before instanceof Date ? options.before.getTime() : options?.before;
  if (typeof before !== 'number' || !Number.isFinite(before))
    throw new InvalidArgumentError('sweepSessions needs { before: a Date or milliseconds since the epoch }.');
  return before;
}

/** Refuses a session the store does not have. */
function* requireSession(sessionId: string, where: string): Q<void> {
  if (
    typeof sessionId !== 'string' ||
    !(yield* sql.get('SELECT 1 AS one FROM sessions WHERE session_id = ?', sessionId))
  )
    throw new HarnessError(
      ErrorCode.SessionNotFound,
      `no session ${String(sessionId)} in ${where}; list them with store.sessions().`,
      { details: { sessionId } },
    );
}

/** How many rows of each table a session has (every run of its trees included), and the bytes of its words and data. */
export function* sessionSize(sessionId: string, where: string): Q<{ rows: Record<string, number>; bytes: number }> {
  yield* requireSession(sessionId, where);
  const sessions = oneSession(sessionId);
  const rows: Record<string, number> = {};
  const count = function* (text: string, params: unknown[]): Q<number> {
    return Number(((yield* sql.get(text, ...params)) as { n: number }).n);
  };
  rows.sessions = yield* count('SELECT COUNT(*) AS n FROM sessions WHERE session_id = ?', [sessionId]);
  for (const table of ['turns', 'runs', ...BY_ROOT, ...BY_RUN]) {
    const [where_, params] = scope(table, sessions);
    rows[table] = yield* count(`SELECT COUNT(*) AS n FROM ${table} WHERE ${where_}`, params);
  }
  let bytes = 0;
  for (const [table, columns] of Object.entries(WORDS)) {
    const total = Object.keys(columns)
      .map((column) => `COALESCE(LENGTH(${column}), 0)`)
      .join(' + ');
    const [where_, params] = scope(table, sessions);
    const row = (yield* sql.get(`SELECT SUM(${total}) AS n FROM ${table} WHERE ${where_}`, ...params)) as {
      n: number | null;
    };
    bytes += Number(row.n ?? 0);
  }
  return { rows, bytes };
}

/** Deletes sessions whole, all of them by the same set-based statements. Returns how many rows of each table went. */
function* deleteSessionRows(sessions: Sessions): Q<Record<string, number>> {
  const removed: Record<string, number> = {};
  // The tables found through the runs first, the runs, then the turns (the runs are found by them), the sessions last.
  for (const table of [...BY_RUN, ...BY_ROOT, 'runs', 'turns']) {
    const [where_, params] = scope(table, sessions);
    removed[table] = (yield* sql.run(`DELETE FROM ${table} WHERE ${where_}`, ...params)).changes;
  }
  removed.sessions = (yield* sql.run(
    `DELETE FROM sessions WHERE session_id ${sessions.match}`,
    ...sessions.params,
  )).changes;
  return removed;
}

/** Deletes a session whole. */
export function* deleteSession(sessionId: string, where: string): Q<{ removed: Record<string, number> }> {
  yield* requireSession(sessionId, where);
  return { removed: yield* deleteSessionRows(oneSession(sessionId)) };
}

/**
 * Deletes every session created before `before`, refusing the whole sweep (deleting
 * nothing, naming them) if any of them holds a run that can still be resumed.
 */
export function* sweepSessions(before: number): Q<{ deleted: string[]; removed: Record<string, number> }> {
  const sessions = createdBefore(before);
  const ids = (
    (yield* sql.all('SELECT session_id FROM sessions WHERE created_at < ? ORDER BY created_at', before)) as {
      session_id: string;
    }[]
  ).map((row) => row.session_id);
  // Every run of those sessions' trees, in one statement, for the ones that can still be resumed.
  const runs = (yield* sql.all(
    `SELECT turns.session_id AS session_id, runs.run_id AS run_id, runs.status AS status FROM runs
       JOIN turns ON runs.root_id = turns.run_id WHERE turns.session_id ${sessions.match}
       ORDER BY runs.created_at, runs.run_id`,
    ...sessions.params,
  )) as { session_id: string; run_id: string; status: string }[];
  const seen = new Set<string>();
  const live: { sessionId: string; runId: string; status: string }[] = [];
  for (const run of runs) {
    if (isTerminal(run.status) || seen.has(run.run_id)) continue;
    seen.add(run.run_id);
    live.push({ sessionId: run.session_id, runId: run.run_id, status: run.status });
  }
  if (live.length > 0) {
    const named = live.map((run) => `session ${run.sessionId} (run ${run.runId} is ${run.status})`).join(', ');
    throw new HarnessError(
      ErrorCode.RunStillLive,
      `sweepSessions deleted nothing: ${named} can still be resumed. End or cancel those runs, or sweep with an earlier date.`,
      { details: { live } },
    );
  }
  return { deleted: ids, removed: ids.length > 0 ? yield* deleteSessionRows(sessions) : {} };
}

/** Empties every column of words of a session's rows; every row and number stays. */
export function* archiveSession(sessionId: string, where: string): Q<void> {
  yield* requireSession(sessionId, where);
  for (const [table, columns] of Object.entries(WORDS)) {
    const [where_, params] = scope(table, oneSession(sessionId));
    const keys = KEYS[table] as readonly string[];
    const picked = [...keys.map((key, index) => `${key} AS key${index}`), ...Object.keys(columns)];
    const rows = (yield* sql.all(`SELECT ${picked.join(', ')} FROM ${table} WHERE ${where_}`, ...params)) as Record<
      string,
      unknown
    >[];
    const sets = Object.keys(columns).map((column) => `${column} = ?`);
    const match = keys.map((key) => `${key} = ?`).join(' AND ');
    for (const row of rows) {
      const values = Object.entries(columns).map(([column, how]) => {
        const value = row[column];
        if (value === null || value === undefined) return null;
        if (how === 'null') return null;
        if (how === 'text') return '';
        try {
          return JSON.stringify(emptied(JSON.parse(String(value))));
        } catch {
          return '';
        }
      });
      yield* sql.put(
        `UPDATE ${table} SET ${sets.join(', ')} WHERE ${match}`,
        ...values,
        ...keys.map((_, index) => row[`key${index}`]),
      );
    }
  }
}
