/**
 * Retention over real sessions in a real store, a SQLite file or a PostgreSQL database (the
 * suite runs on both): a session deleted whole (its turns, their runs and the child one
 * spawned, every row of theirs, counted table by table), another left as it was; a sweep
 * refused, by name, for a session whose run can still be resumed; an archive that keeps
 * every row and number and leaves no word behind, column by column; and a compaction.
 */
import { describe, expect, it } from 'vitest';
import { CallbackApprover, ErrorCode, HarnessError, Policy, Session } from '../dist/index.js';
import type { ModelScript } from '../dist/testing/index.js';
import { type EitherStore, freshStore, openAt, SUITE_BACKEND, sqlRows } from './support/backends.js';
import { serve, tempWorkspace } from './support/workspace.js';

const TABLES = [
  'sessions',
  'turns',
  'runs',
  'ledger',
  'draws',
  'steps',
  'checkpoints',
  'events',
  'mailbox',
  'spawn_queue',
  'intents',
  'model_calls',
  'restore_points',
  'file_changes',
  'questions',
  'drafts',
  'step_images',
  'steers',
];

type Message = { role: string; content?: unknown };

/** `rewrite notes.txt` overwrites the file; `spawn a helper` spawns a child that answers; a child says done. */
const script: ModelScript = (call) => {
  const messages = (call.body as { messages: Message[] }).messages;
  const users = messages.filter((message) => message.role === 'user');
  const opening = String(users.at(-1)?.content ?? '');
  const first = String(users[0]?.content ?? '');
  const acted = messages.at(-1)?.role === 'tool';
  if (first.startsWith('child work PELICAN')) return { text: 'child done PELICAN' };
  if (acted) return { text: `done with ${opening.split('\n')[0]} PELICAN` };
  if (opening.startsWith('rewrite notes.txt'))
    return { toolCalls: [{ name: 'write_file', args: { path: 'notes.txt', content: 'PELICAN new words\n' } }] };
  if (opening.startsWith('spawn a helper'))
    return { toolCalls: [{ name: 'spawn_agent', args: { task: 'child work PELICAN', wait: true } }] };
  return { text: `reply PELICAN to ${opening.split('\n')[0]}` };
};

const policy = Policy.default().layer('test').allowRead('**').allowWrite('**');

async function counts(location: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const table of TABLES)
    out[table] = Number((await sqlRows(location, `SELECT COUNT(*) AS n FROM ${table}`))[0]?.n);
  return out;
}

/** The columns of `table`, on either backend. */
async function columnsOf(location: string, table: string): Promise<string[]> {
  const rows =
    SUITE_BACKEND.name === 'SQLite'
      ? await sqlRows(location, `SELECT name FROM pragma_table_info('${table}')`)
      : await sqlRows(
          location,
          'SELECT column_name AS name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ?',
          table,
        );
  return rows.map((row) => String(row.name));
}

/** A session of two turns (one rewrites a large file and is steered, one spawns a child), in `store`. */
async function conversation(store: EitherStore, provider: never) {
  const root = tempWorkspace({ 'notes.txt': `${'old words PELICAN '.repeat(60_000)}\n` });
  const session = await Session.open(store, root);
  const first = session.turn('rewrite notes.txt PELICAN', { provider, policy });
  // A correction, taken before the first step: its words are the session's too.
  first.steer('rewrite notes.txt as asked PELICAN');
  const one = await first;
  const two = await session.turn('spawn a helper PELICAN', { provider, policy, contained: { maxTotalAgents: 2 } });
  expect([one.outcome.kind, two.outcome.kind]).toEqual(['finished', 'finished']);
  return session;
}

async function refusal(action: () => unknown): Promise<{ code: string; message: string }> {
  try {
    await action();
  } catch (error) {
    expect(HarnessError.isInstance(error)).toBe(true);
    return { code: (error as HarnessError).code, message: (error as Error).message };
  }
  throw new Error('expected a refusal');
}

async function fresh(): Promise<{ location: string; store: EitherStore }> {
  const location = await freshStore();
  return { location, store: await openAt(location) };
}

describe('retention', () => {
  it('deletes a session whole, every table counted, leaves the other session as it was, and compacts the store', async () => {
    const { location, store } = await fresh();
    const { provider } = await serve(script);
    const doomed = await conversation(store, provider as never);
    const kept = await conversation(store, provider as never);
    const before = await counts(location);
    const size = await store.sessionSize(doomed.id);
    // Two turns' runs and the child one spawned; every table a run writes has rows of it.
    expect(size.rows.runs).toBe(3);
    for (const table of [
      'turns',
      'ledger',
      'draws',
      'steps',
      'events',
      'mailbox',
      'model_calls',
      'restore_points',
      'file_changes',
    ])
      expect(size.rows[table], table).toBeGreaterThan(0);
    expect(size.bytes).toBeGreaterThan(1_000_000);
    const keptBefore = await store.sessionSize(kept.id);
    const { removed } = await store.deleteSession(doomed.id);
    expect(removed).toEqual(size.rows);
    const after = await counts(location);
    for (const table of TABLES) expect(after[table], table).toBe((before[table] as number) - (size.rows[table] ?? 0));
    expect(await store.session(doomed.id)).toBeNull();
    expect(await store.sessionSize(kept.id)).toEqual(keptBefore);
    const grown = (await store.size()).bytes;
    const compacted = (await store.compact()).bytes;
    expect(compacted).toBeLessThan(grown);
    expect(compacted).toBeGreaterThan(0);
    expect(await refusal(() => store.deleteSession(doomed.id))).toMatchObject({ code: ErrorCode.SessionNotFound });
  });

  it('refuses a sweep, deleting nothing and naming the session, while one of its runs can be resumed', async () => {
    const { location, store } = await fresh();
    const { provider } = await serve(script);
    const done = await conversation(store, provider as never);
    // A turn paused on an approval nobody gave: its run can be resumed.
    const waiting = await Session.open(store, tempWorkspace({ 'notes.txt': 'x\n' }));
    const paused = await waiting.turn('rewrite notes.txt', {
      provider,
      policy: Policy.default().layer('test').allowRead('**').askWrite('**'),
      approver: new CallbackApprover(() => 'defer'),
    });
    expect(paused.outcome.kind).toBe('paused');
    const before = await counts(location);
    const refused = await refusal(() => store.sweepSessions({ before: new Date(Date.now() + 60_000) }));
    expect(refused.code).toBe(ErrorCode.RunStillLive);
    expect(refused.message).toContain(`session ${waiting.id} (run ${paused.runId} is paused)`);
    expect(refused.message).not.toContain(done.id);
    expect(await counts(location)).toEqual(before);
    // Swept up to before the waiting session began: the finished one goes, the waiting one stays.
    const turnAt = (await waiting.turns())[0]?.createdAt as number;
    const sweptBefore = (await store.session(waiting.id))?.createdAt as number;
    expect(turnAt).toBeGreaterThanOrEqual(sweptBefore);
    const swept = await store.sweepSessions({ before: sweptBefore });
    expect(swept.deleted).toEqual([done.id]);
    expect(await store.session(waiting.id)).not.toBeNull();
    expect((await refusal(() => store.sweepSessions({ before: 'yesterday' as never }))).code).toBe(
      ErrorCode.InvalidArgument,
    );
  });

  it('archives a session: every row and number kept, no word left in any column', async () => {
    const { location, store } = await fresh();
    const { provider } = await serve(script);
    const session = await conversation(store, provider as never);
    const other = await conversation(store, provider as never);
    const numbers = () =>
      sqlRows(
        location,
        `SELECT (SELECT SUM(tokens_spent) FROM ledger) AS tokens, (SELECT SUM(steps_spent) FROM ledger) AS steps,
                (SELECT SUM(input_tokens + output_tokens) FROM model_calls) AS calls, (SELECT COUNT(*) FROM file_changes) AS changes`,
      );
    const numbersBefore = await numbers();
    const before = await counts(location);
    const paths = await sqlRows(location, 'SELECT path FROM file_changes ORDER BY path');
    await store.archiveSession(session.id);
    expect(await counts(location)).toEqual(before);
    expect(await numbers()).toEqual(numbersBefore);
    expect(await sqlRows(location, 'SELECT path FROM file_changes ORDER BY path')).toEqual(paths);
    const roots = (await session.turns()).map((turn) => turn.runId as string);
    const runs = (
      await sqlRows(location, `SELECT run_id FROM runs WHERE root_id IN (${roots.map(() => '?').join(', ')})`, ...roots)
    ).map((row) => String(row.run_id));
    expect(runs).toHaveLength(3);
    // Column by column, every row of the archived session: not one word of it is left.
    for (const table of TABLES) {
      const columns = await columnsOf(location, table);
      const [scope, args] = columns.includes('run_id')
        ? [`run_id IN (${runs.map(() => '?').join(', ')})`, runs]
        : columns.includes('root_id')
          ? [`root_id IN (${roots.map(() => '?').join(', ')})`, roots]
          : columns.includes('session_id')
            ? ['session_id = ?', [session.id]]
            : [null, []];
      if (scope === null) continue;
      const rows = await sqlRows(location, `SELECT * FROM ${table} WHERE ${scope}`, ...args);
      for (const row of rows) {
        for (const [column, value] of Object.entries(row)) {
          const text = Buffer.isBuffer(value) ? value.toString('latin1') : String(value ?? '');
          expect(text.includes('PELICAN'), `${table}.${column}`).toBe(false);
        }
      }
    }
    // The other session keeps its words.
    const otherRoot = (await other.turns())[0]?.runId as string;
    expect(
      JSON.stringify(await sqlRows(location, 'SELECT completion FROM steps WHERE run_id = ?', otherRoot)),
    ).toContain('PELICAN');
    // What is left still reads: the turns and steps parse.
    expect((await store.steps(roots[0] as string)).length).toBeGreaterThan(0);
    expect((await session.turns()).map((turn) => turn.text)).toEqual(['', '']);
    expect((await refusal(() => store.archiveSession('no-such-session'))).code).toBe(ErrorCode.SessionNotFound);
  });
});
