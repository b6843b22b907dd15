/**
 * The memory rules: a note written under its key in its scope (a run its own workspace's,
 * never over a pinned one; a scope at its cap gives up its least-drawn note), forgotten,
 * pinned, and the record of which runs drew on it.
 */
import { InvalidArgumentError } from '../../errors.js';
import { GLOBAL_SCOPE, keyProblem, type NoteRecord, restated } from '../../runtime/context/memory.js';
import type { Fence, RememberInput, RememberResult } from '../records.js';
import { type Row, toNote } from '../rows.js';
import type { Q } from '../sql.js';
import * as sql from '../sql.js';
import { fenced, type RuleContext } from './context.js';

/**
 * Writes a note under its key in its scope. A run may not overwrite a pinned note; a new
 * key in a scope at its cap takes the place of the unpinned note the fewest separate runs
 * have drawn on (the oldest of those), not the oldest note. Says which note it restates,
 * under another key of its scope or the global one.
 */
export function* remember(context: RuleContext, input: RememberInput): Q<RememberResult> {
  const problem = keyProblem(input.key);
  if (problem) throw new InvalidArgumentError(`remember: ${problem}.`);
  if (input.by) {
    yield* fenced(context, input.by);
    // The global scope and pinning are the embedder's: a run writes its workspace's notes only.
    if (input.scope === GLOBAL_SCOPE || input.pin !== undefined)
      throw new InvalidArgumentError('remember: a run writes its own workspace’s notes, unpinned.');
  }
  const existing = yield* noteAt(input.scope, input.key);
  if (existing?.pinned && input.by) return { status: 'pinned', note: existing };
  // A pinned global note is a correction for every workspace: a run may not shadow it either.
  const above = input.by ? yield* noteAt(GLOBAL_SCOPE, input.key) : null;
  if (above?.pinned) return { status: 'pinned', note: above };
  const others = (yield* sql.all(
    'SELECT key, body AS text FROM memory_notes WHERE scope IN (?, ?) AND NOT (scope = ? AND key = ?)',
    input.scope,
    GLOBAL_SCOPE,
    input.scope,
    input.key,
  )) as { key: string; text: string }[];
  const restates = restated(input.text, input.key, others)?.key ?? null;
  let evicted: NoteRecord | null = null;
  if (!existing) {
    const { count } = (yield* sql.get('SELECT COUNT(*) AS count FROM memory_notes WHERE scope = ?', input.scope)) as {
      count: number;
    };
    // Down to one under the cap (a cap lowered since takes more than one).
    for (let over = count - input.cap + 1; over > 0; over--) {
      const least = yield* leastDrawn(input.scope, input.by?.runId ?? null);
      if (!least) return { status: 'full', cap: input.cap };
      evicted = least;
      yield* dropNote(least.id);
    }
  }
  const pinned = input.pin ?? existing?.pinned ?? false;
  const by = input.by?.runId ?? null;
  if (existing)
    yield* sql.put(
      'UPDATE memory_notes SET kind = ?, body = ?, pinned = ?, written_by = ?, updated_at = ? WHERE note_id = ?',
      input.kind,
      input.text,
      pinned ? 1 : 0,
      by,
      input.now,
      existing.id,
    );
  else
    yield* sql.put(
      `INSERT INTO memory_notes (scope, key, kind, body, pinned, runs, written_by, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?)`,
      input.scope,
      input.key,
      input.kind,
      input.text,
      pinned ? 1 : 0,
      by,
      input.now,
      input.now,
    );
  const note = (yield* noteAt(input.scope, input.key)) as NoteRecord;
  return { status: 'written', note, replaced: existing !== null, evicted, restates };
}

/**
 * The unpinned note of a scope the fewest separate runs have drawn on (the oldest of
 * those). A run's own notes go last: its next note does not push out the one it just wrote.
 */
function* leastDrawn(scope: string, runId: string | null): Q<NoteRecord | null> {
  const order = 'ORDER BY runs, note_id LIMIT 1';
  const own =
    runId === null
      ? undefined
      : yield* sql.get(
          `SELECT * FROM memory_notes WHERE scope = ? AND pinned = 0 AND (written_by IS NULL OR written_by != ?) ${order}`,
          scope,
          runId,
        );
  const row = own ?? (yield* sql.get(`SELECT * FROM memory_notes WHERE scope = ? AND pinned = 0 ${order}`, scope));
  return row ? toNote(row) : null;
}

/** Drops a note (and the record of who drew on it). A run may not forget a pinned one. */
export function* forget(
  context: RuleContext,
  input: { scope: string; key: string; by: Fence | null; now: number },
): Q<{
  status: 'forgotten' | 'absent' | 'pinned';
}> {
  if (input.by) {
    yield* fenced(context, input.by);
    if (input.scope === GLOBAL_SCOPE)
      throw new InvalidArgumentError('forget: a run forgets its own workspace’s notes only.');
  }
  const note = yield* noteAt(input.scope, input.key);
  if (!note) return { status: 'absent' };
  if (note.pinned && input.by) return { status: 'pinned' };
  yield* dropNote(note.id);
  return { status: 'forgotten' };
}

/** Pins a note (no run may overwrite or forget it) or unpins it: the embedder's alone. */
export function* pinNote(
  _context: RuleContext,
  input: { scope: string; key: string; pinned: boolean; now: number },
): Q<{ status: 'done' | 'absent' }> {
  const note = yield* noteAt(input.scope, input.key);
  if (!note) return { status: 'absent' };
  yield* sql.put(
    'UPDATE memory_notes SET pinned = ?, updated_at = ? WHERE note_id = ?',
    input.pinned ? 1 : 0,
    input.now,
    note.id,
  );
  return { status: 'done' };
}

/** Records that a run drew on notes; each note counts a run once, however often it draws. */
export function* drawNotes(
  context: RuleContext,
  input: { by: Fence; noteIds: number[]; how: 'block' | 'recall'; now: number },
): Q<{ drawn: number }> {
  yield* fenced(context, input.by);
  let drawn = 0;
  for (const id of new Set(input.noteIds)) {
    const inserted = yield* sql.run(
      `INSERT INTO memory_draws (note_id, run_id, how, drawn_at) SELECT note_id, ?, ?, ? FROM memory_notes WHERE note_id = ?
       ON CONFLICT DO NOTHING`,
      input.by.runId,
      input.how,
      input.now,
      id,
    );
    if (inserted.changes === 0) continue;
    yield* sql.put('UPDATE memory_notes SET runs = runs + 1 WHERE note_id = ?', id);
    drawn++;
  }
  return { drawn };
}

function* noteAt(scope: string, key: string): Q<NoteRecord | null> {
  const row = (yield* sql.get('SELECT * FROM memory_notes WHERE scope = ? AND key = ?', scope, key)) as Row | undefined;
  return row ? toNote(row) : null;
}

function* dropNote(id: number): Q<void> {
  yield* sql.put('DELETE FROM memory_draws WHERE note_id = ?', id);
  yield* sql.put('DELETE FROM memory_notes WHERE note_id = ?', id);
}
