/**
 * Retention on a SQLite file: a session's rows counted, deleted and archived in the
 * caller's transaction, by the rules of ../retention.ts.
 */
import type Database from 'better-sqlite3';
import { ErrorCode, HarnessError } from '../../errors.js';
import { isTerminal } from '../../runtime/events.js';
import { BY_ROOT, BY_RUN, emptied, KEYS, scope, WORDS } from '../retention.js';

/** The roots of a session's turns. */
function rootsOf(db: Database.Database, sessionId: string): string[] {
  const rows = db
    .prepare('SELECT DISTINCT run_id FROM turns WHERE session_id = ? AND run_id IS NOT NULL')
    .all(sessionId) as { run_id: string }[];
  return rows.map((row) => row.run_id);
}

function requireSession(db: Database.Database, sessionId: string): void {
  if (!db.prepare('SELECT 1 FROM sessions WHERE session_id = ?').get(sessionId)) {
    throw new HarnessError(
      ErrorCode.SessionNotFound,
      `no session ${sessionId} in this store; list them with store.sessions().`,
      {
        details: { sessionId },
      },
    );
  }
}

/** A temporary table of the given roots, for the statements below to join on. */
function withRoots<T>(db: Database.Database, roots: readonly string[], body: () => T): T {
  db.exec('CREATE TEMP TABLE IF NOT EXISTS retention_roots (root_id TEXT PRIMARY KEY)');
  db.exec('DELETE FROM retention_roots');
  const insert = db.prepare('INSERT OR IGNORE INTO retention_roots (root_id) VALUES (?)');
  for (const root of roots) insert.run(root);
  try {
    return body();
  } finally {
    db.exec('DELETE FROM retention_roots');
  }
}

/** How many rows of each table a session has (every run of its trees included). */
export function countSessionRows(db: Database.Database, sessionId: string): Record<string, number> {
  return withRoots(db, rootsOf(db, sessionId), () => {
    const counts: Record<string, number> = {};
    const count = (sql: string, ...args: unknown[]) => (db.prepare(sql).get(...args) as { n: number }).n;
    counts.sessions = count('SELECT COUNT(*) AS n FROM sessions WHERE session_id = ?', sessionId);
    counts.turns = count('SELECT COUNT(*) AS n FROM turns WHERE session_id = ?', sessionId);
    for (const table of ['runs', ...BY_ROOT, ...BY_RUN])
      counts[table] = count(`SELECT COUNT(*) AS n FROM ${table} WHERE ${scope(table)}`);
    return counts;
  });
}

/** The bytes a session's rows hold in their columns of words and data (an estimate of what deleting it frees). */
export function sessionBytes(db: Database.Database, sessionId: string): number {
  return withRoots(db, rootsOf(db, sessionId), () => {
    let bytes = 0;
    const sum = (sql: string, ...args: unknown[]) => (db.prepare(sql).get(...args) as { n: number | null }).n ?? 0;
    for (const [table, columns] of Object.entries(WORDS)) {
      const total = Object.keys(columns)
        .map((column) => `COALESCE(LENGTH(${column}), 0)`)
        .join(' + ');
      const where = scope(table);
      bytes += sum(`SELECT SUM(${total}) AS n FROM ${table} WHERE ${where}`, ...(table === 'turns' ? [sessionId] : []));
    }
    return bytes;
  });
}

/**
 * Deletes sessions whole, in the caller's transaction, all of them by the same set-based
 * statements (a sweep deletes its sessions together). Returns how many rows of each table went.
 */
export function deleteSessionRows(
  db: Database.Database,
  sessionIds: string | readonly string[],
): Record<string, number> {
  const ids = typeof sessionIds === 'string' ? [sessionIds] : sessionIds;
  for (const id of ids) requireSession(db, id);
  return withRoots(
    db,
    ids.flatMap((id) => rootsOf(db, id)),
    () => {
      const removed: Record<string, number> = {};
      // The tables found through the runs first, the runs last.
      for (const table of [...BY_RUN, ...BY_ROOT, 'runs'])
        removed[table] = db.prepare(`DELETE FROM ${table} WHERE ${scope(table)}`).run().changes;
      removed.turns = 0;
      removed.sessions = 0;
      for (const id of ids) {
        removed.turns += db.prepare('DELETE FROM turns WHERE session_id = ?').run(id).changes;
        removed.sessions += db.prepare('DELETE FROM sessions WHERE session_id = ?').run(id).changes;
      }
      return removed;
    },
  );
}

/** The runs of a session that can still be resumed (not ended), for a sweep to refuse it by. */
export function resumableRuns(db: Database.Database, sessionId: string): { runId: string; status: string }[] {
  return withRoots(db, rootsOf(db, sessionId), () =>
    (
      db
        .prepare(
          'SELECT run_id, status FROM runs WHERE root_id IN (SELECT root_id FROM retention_roots) ORDER BY created_at',
        )
        .all() as { run_id: string; status: string }[]
    )
      .filter((row) => !isTerminal(row.status))
      .map((row) => ({ runId: row.run_id, status: row.status })),
  );
}

/** Empties every column of words of a session's rows, in the caller's transaction; every row and number stays. */
export function archiveSessionRows(db: Database.Database, sessionId: string): void {
  requireSession(db, sessionId);
  withRoots(db, rootsOf(db, sessionId), () => {
    for (const [table, columns] of Object.entries(WORDS)) {
      const where = scope(table);
      const args = table === 'turns' ? [sessionId] : [];
      const keys = KEYS[table] ?? ['rowid'];
      const picked = [...keys.map((key, index) => `${key} AS key${index}`), ...Object.keys(columns)];
      const rows = db.prepare(`SELECT ${picked.join(', ')} FROM ${table} WHERE ${where}`).all(...args) as Record<
        string,
        unknown
      >[];
      const sets = Object.keys(columns).map((column) => `${column} = ?`);
      const match = keys.map((key) => `${key} = ?`).join(' AND ');
      const update = db.prepare(`UPDATE ${table} SET ${sets.join(', ')} WHERE ${match}`);
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
        update.run(...values, ...keys.map((_, index) => row[`key${index}`]));
      }
    }
  });
}
