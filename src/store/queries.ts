/**
 * The typed reads of a store, written once for both backends: each a generator that
 * yields the statements it needs (see ./sql.ts). The SQLite backend's `TraceReader`
 * (sqlite/reader.ts) answers them at once from its own read-only connection; the
 * PostgreSQL store (postgres/index.ts) runs the same reads and awaits them.
 */

import { InvalidArgumentError } from '../errors.js';
import type { NoteRecord } from '../runtime/context/memory.js';
import type { HarnessEvent } from '../runtime/events.js';
import type { Completion } from '../runtime/provider.js';
import type {
  CostReport,
  FileChangeRecord,
  IntentRecord,
  LedgerAccount,
  MessageRecord,
  ModelCallRow,
  PriceTable,
  QuestionRecord,
  QueueRecord,
  RestorePoint,
  RunRecord,
  SessionRecord,
  StepRecord,
  TreeLedger,
  TurnRecord,
  WebSourceRow,
} from './records.js';
import {
  type Row,
  type SessionRow,
  TURN_SELECT,
  type TurnRow,
  toAccount,
  toEvent,
  toIntent,
  toMessage,
  toNote,
  toQuestion,
  toRestorePoint,
  toRun,
  toSession,
  toTurn,
} from './rows.js';
import type { Q } from './sql.js';
import * as sql from './sql.js';

/**
 * An amount as a person reads it: dollars, two significant digits at least and never fewer
 * than two decimals (`$12.40`, `$0.0029`, `$0.00`); no float noise. The raw number stays
 * where it came from.
 */
export function formatCost(amount: number): string {
  if (!Number.isFinite(amount)) return String(amount);
  const sign = amount < 0 ? '-' : '';
  const value = Math.abs(amount);
  if (value === 0) return '$0.00';
  // Decimals enough for two significant digits, at least 2, at most 8.
  const decimals = Math.min(8, Math.max(2, 1 - Math.floor(Math.log10(value))));
  return `${sign}$${value.toFixed(decimals)}`;
}

const RUN_BY_ID = 'SELECT * FROM runs WHERE run_id = ?';
const INBOX = 'SELECT * FROM mailbox WHERE root_id = ? AND to_address = ? AND consumed_by IS NULL ORDER BY ordinal';
const LEDGER_BY_ID = 'SELECT * FROM ledger WHERE run_id = ?';

/**
 * The typed reads of a store, for either backend: each a generator that yields the
 * statements it needs (see sql.ts). `TraceReader` (sqlite/reader.ts) runs them on a
 * SQLite file, synchronously; the PostgreSQL store runs the same reads and awaits them.
 */
/**
 * An id a reader is given, checked before any driver sees it: a reader called with the
 * wrong shape (`steps({ runId })`) is told which argument was wrong, never a driver's own
 * error.
 */
function id(reader: string, name: string, value: unknown, optional = false): void {
  if (optional && value === undefined) return;
  if (typeof value === 'string' && value !== '') return;
  let shown: string;
  try {
    shown = JSON.stringify(value) ?? String(value);
  } catch {
    shown = Object.prototype.toString.call(value);
  }
  throw new InvalidArgumentError(
    `store.${reader}: ${name} is ${name === 'runId' || name === 'rootId' ? "a run's id" : 'an id'}, a non-empty string; got ${shown.slice(0, 200)}${typeof value === 'object' && value !== null ? ` (pass ${reader}(x.${name}), not ${reader}(x))` : ''}.`,
    { details: { reader, argument: name } },
  );
}

/** A reader's filter, checked: an object whose `ids` are ids where given. */
function filterOf(reader: string, filter: unknown, ids: readonly string[]): void {
  if (typeof filter !== 'object' || filter === null || Array.isArray(filter))
    throw new InvalidArgumentError(
      `store.${reader}: takes a filter object, like { ${ids[0]}: '…' }; got ${JSON.stringify(filter) ?? String(filter)}.`,
      { details: { reader, argument: 'filter' } },
    );
  for (const name of ids) id(reader, name, (filter as Record<string, unknown>)[name], true);
}

export class TraceQueries {
  /** One run, or null. */
  *run(runId: string): Q<RunRecord | null> {
    id('run', 'runId', runId);
    const row = yield* sql.get(RUN_BY_ID, runId);
    return row ? toRun(row) : null;
  }

  /** Every run of a tree (root first, then in creation order), or every root when no tree is named. */
  *runs(rootId?: string): Q<RunRecord[]> {
    id('runs', 'rootId', rootId, true);
    const rows =
      rootId === undefined
        ? yield* sql.all('SELECT * FROM runs WHERE parent_id IS NULL ORDER BY created_at, rowid')
        : yield* sql.all('SELECT * FROM runs WHERE root_id = ? ORDER BY depth, created_at, rowid', rootId);
    return (rows as Row[]).map(toRun);
  }

  /** A run's steps in order; `afterSeq` reads only later ones. */
  *steps(runId: string, afterSeq = 0): Q<StepRecord[]> {
    id('steps', 'runId', runId);
    const rows = (yield* sql.all(
      'SELECT * FROM steps WHERE run_id = ? AND seq > ? ORDER BY seq',
      runId,
      afterSeq,
    )) as Row[];
    return rows.map((row) => ({
      runId: row.run_id as string,
      seq: row.seq as number,
      generation: row.generation as number,
      completion: JSON.parse(row.completion as string),
      observations: JSON.parse(row.observations as string),
      usage: JSON.parse(row.usage as string),
      at: row.at as number,
    }));
  }

  /** A run's events in commit order; `afterId` reads only newer ones. */
  *events(runId: string, afterId = 0): Q<HarnessEvent[]> {
    id('events', 'runId', runId);
    const rows = (yield* sql.all(
      'SELECT * FROM events WHERE run_id = ? AND event_id > ? ORDER BY event_id',
      runId,
      afterId,
    )) as Row[];
    return rows.map(toEvent);
  }

  /** Every event of a tree in commit order; `afterId` reads only newer ones. */
  *treeEvents(rootId: string, afterId = 0): Q<HarnessEvent[]> {
    id('treeEvents', 'rootId', rootId);
    const rows = (yield* sql.all(
      'SELECT * FROM events WHERE root_id = ? AND event_id > ? ORDER BY event_id',
      rootId,
      afterId,
    )) as Row[];
    return rows.map(toEvent);
  }

  /**
   * The id of the newest event in the store (0 when there is none), read with no write in
   * flight, so none of a smaller id can still appear: where a reader of every tree's events
   * starts from now.
   */
  *lastEventId(): Q<number> {
    const [row] = (yield* sql.settled('SELECT MAX(event_id) AS id FROM events')) as { id: number | null }[];
    return row?.id ?? 0;
  }

  /**
   * Events of every tree in id order after `afterId`, at most `limit` of them: what a log
   * catches up from. Trees commit side by side on PostgreSQL, so they are read with no
   * write in flight (`settled`): an event with a smaller id than the last read cannot
   * commit after it. One tree's events commit in id order anyway (see postgres/locks.ts).
   */
  *eventsAfter(afterId = 0, limit = 1000): Q<HarnessEvent[]> {
    const rows = (yield* sql.settled(
      'SELECT * FROM events WHERE event_id > ? ORDER BY event_id LIMIT ?',
      afterId,
      Math.max(1, Math.floor(limit)),
    )) as Row[];
    return rows.map(toEvent);
  }

  *account(runId: string): Q<LedgerAccount | null> {
    id('account', 'runId', runId);
    const row = yield* sql.get(LEDGER_BY_ID, runId);
    return row ? toAccount(row) : null;
  }

  /**
   * The accounts of `runIds` (a run and its ancestors, as a budget check reads them), in
   * the order asked, those with no account left out: one statement for the chain.
   */
  *accounts(runIds: readonly string[]): Q<LedgerAccount[]> {
    if (runIds.length === 1) {
      const account = yield* this.account(runIds[0] as string);
      return account ? [account] : [];
    }
    if (runIds.length === 0) return [];
    const rows = (yield* sql.all(
      `SELECT * FROM ledger WHERE run_id IN (${runIds.map(() => '?').join(', ')})`,
      ...runIds,
    )) as Row[];
    const byId = new Map(rows.map((row) => [row.run_id as string, toAccount(row)]));
    return runIds.flatMap((runId) => byId.get(runId) ?? []);
  }

  /** The tree's one ledger: the root's ceilings and spend, every account, every draw. */
  *ledger(rootId: string): Q<TreeLedger | null> {
    id('ledger', 'rootId', rootId);
    const rootRow = yield* sql.get(LEDGER_BY_ID, rootId);
    if (!rootRow) return null;
    const accounts = ((yield* sql.all('SELECT * FROM ledger WHERE root_id = ? ORDER BY rowid', rootId)) as Row[]).map(
      toAccount,
    );
    const draws = ((yield* sql.all('SELECT * FROM draws WHERE root_id = ? ORDER BY rowid', rootId)) as Row[]).map(
      (row) => ({
        drawId: row.draw_id as string,
        runId: row.run_id as string,
        seq: row.seq as number,
        generation: row.generation as number,
        steps: row.steps as number,
        tokens: row.tokens as number,
        at: row.at as number,
      }),
    );
    return {
      rootId,
      root: toAccount(rootRow),
      accounts,
      draws,
      maxTotalAgents: rootRow.max_total_agents as number | null,
      maxConcurrentAgents: rootRow.max_concurrent_agents as number | null,
    };
  }

  /** Every message of a tree, in send order. */
  *messages(rootId: string): Q<MessageRecord[]> {
    id('messages', 'rootId', rootId);
    return ((yield* sql.all('SELECT * FROM mailbox WHERE root_id = ? ORDER BY ordinal', rootId)) as Row[]).map(
      toMessage,
    );
  }

  /** Messages waiting for an address, oldest first. */
  *inbox(rootId: string, address: string): Q<MessageRecord[]> {
    return (yield* sql.all(INBOX, rootId, address)).map(toMessage);
  }

  /** The notes of durable memory in these scopes (`global`, a workspace root), in the store's order. */
  *notes(scopes: readonly string[]): Q<NoteRecord[]> {
    if (scopes.length === 0) return [];
    return (
      (yield* sql.all(
        `SELECT * FROM memory_notes WHERE scope IN (${scopes.map(() => '?').join(', ')}) ORDER BY note_id`,
        ...scopes,
      )) as Row[]
    ).map(toNote);
  }

  /** The notes a run drew on: carried in its requests (`block`) or recalled (`recall`), first drawn first. */
  *noteDraws(runId: string): Q<{ scope: string; key: string; how: 'block' | 'recall' }[]> {
    return (yield* sql.all(
      `SELECT n.scope AS scope, n.key AS key, d.how AS how FROM memory_draws d JOIN memory_notes n ON n.note_id = d.note_id
         WHERE d.run_id = ? ORDER BY d.drawn_at, n.note_id`,
      runId,
    )) as { scope: string; key: string; how: 'block' | 'recall' }[];
  }

  /** Whether an address names an agent of that tree. */
  *hasAddress(rootId: string, address: string): Q<boolean> {
    return (yield* sql.get('SELECT 1 FROM runs WHERE root_id = ? AND address = ?', rootId, address)) !== undefined;
  }

  /** The durable spawn queue of a tree, first in first. */
  *queue(rootId: string): Q<QueueRecord[]> {
    return ((yield* sql.all('SELECT * FROM spawn_queue WHERE root_id = ? ORDER BY ordinal', rootId)) as Row[]).map(
      (row) => ({
        ordinal: row.ordinal as number,
        childRunId: row.child_run_id as string,
        parentId: row.parent_id as string,
        state: row.state as QueueRecord['state'],
        enqueuedAt: row.enqueued_at as number,
        admittedAt: row.admitted_at as number | null,
      }),
    );
  }

  /** The first `limit` children still waiting in a tree's queue, first in first. */
  *queued(rootId: string, limit: number): Q<string[]> {
    const rows = (yield* sql.all(
      `SELECT child_run_id FROM spawn_queue WHERE root_id = ? AND state = 'queued' ORDER BY ordinal LIMIT ?`,
      rootId,
      limit,
    )) as { child_run_id: string }[];
    return rows.map((row) => row.child_run_id);
  }

  /** Whether a cancel of the tree was asked for (by any host), and why; null when none was. */
  *cancelAsked(rootId: string): Q<{ reason: string | null } | null> {
    const row = (yield* sql.get('SELECT cancel_asked, cancel_reason FROM runs WHERE run_id = ?', rootId)) as
      | { cancel_asked: number; cancel_reason: string | null }
      | undefined;
    return row && Number(row.cancel_asked) === 1 ? { reason: row.cancel_reason } : null;
  }

  /** Runs of a tree not yet in a terminal state. */
  *liveCount(rootId: string): Q<number> {
    // Reserved children (pending) are live only through their parent, which is running or paused.
    const row = (yield* sql.get(
      `SELECT count(*) AS n FROM runs WHERE root_id = ? AND status IN ('queued', 'running')`,
      rootId,
    )) as { n: number };
    return row.n;
  }

  /** Every model call of a tree, of one run, or of one step (`runId` and `seq`), every try included, in the order they were recorded. */
  *modelCalls(filter: { rootId?: string; runId?: string; seq?: number }): Q<ModelCallRow[]> {
    filterOf('modelCalls', filter, ['rootId', 'runId']);
    const rows = (
      filter.runId !== undefined && filter.seq !== undefined
        ? yield* sql.all(
            'SELECT * FROM model_calls WHERE run_id = ? AND seq = ? ORDER BY call_id',
            filter.runId,
            filter.seq,
          )
        : filter.runId !== undefined
          ? yield* sql.all('SELECT * FROM model_calls WHERE run_id = ? ORDER BY call_id', filter.runId)
          : yield* sql.all('SELECT * FROM model_calls WHERE root_id = ? ORDER BY call_id', filter.rootId ?? '')
    ) as Row[];
    return rows.map((row) => ({
      callId: row.call_id as number,
      runId: row.run_id as string,
      seq: row.seq as number,
      attempt: row.attempt as number,
      provider: row.provider as string,
      model: row.model as string,
      outcome: row.outcome as string,
      statusCode: row.status_code as number | null,
      inputTokens: row.input_tokens as number,
      outputTokens: row.output_tokens as number,
      cacheReadTokens: row.cache_read_tokens as number,
      cacheWriteTokens: row.cache_write_tokens as number,
      reasoningTokens: row.reasoning_tokens as number,
      usageReported: row.usage_reported !== 0,
      webSearches: Number(row.web_searches ?? 0),
      webFetches: Number(row.web_fetches ?? 0),
      latencyMs: row.latency_ms as number | null,
      ttftMs: row.ttft_ms as number | null,
      at: row.at as number,
    }));
  }

  /** The pages the vendor's web tools found, fetched or cited for a run's answers, in the order reported. */
  *webSources(runId: string): Q<WebSourceRow[]> {
    id('webSources', 'runId', runId);
    const rows = (yield* sql.all('SELECT * FROM web_sources WHERE run_id = ? ORDER BY seq, source_id', runId)) as Row[];
    return rows.map((row) => ({
      runId: row.run_id as string,
      seq: Number(row.seq),
      attempt: Number(row.attempt),
      kind: row.kind as WebSourceRow['kind'],
      url: row.url as string,
      title: (row.title as string | null) ?? null,
      citedText: (row.cited_text as string | null) ?? null,
      at: Number(row.at),
    }));
  }

  /** What a tree's model calls cost under `prices`, derived now from the stored token counts. */
  *cost(rootId: string, prices: PriceTable): Q<CostReport> {
    id('cost', 'rootId', rootId);
    const report: CostReport = { total: 0, byModel: {}, unpriced: [], text: '' };
    for (const call of yield* this.modelCalls({ rootId })) {
      const price = prices[call.model];
      if (!price) {
        if (!report.unpriced.includes(call.model)) report.unpriced.push(call.model);
        continue;
      }
      const plain = Math.max(0, call.inputTokens - call.cacheReadTokens - call.cacheWriteTokens);
      const amount =
        (plain * price.input +
          call.cacheReadTokens * (price.cacheRead ?? price.input) +
          call.cacheWriteTokens * (price.cacheWrite ?? price.input) +
          call.outputTokens * price.output) /
          1_000_000 +
        // The vendor's own searches and fetches, priced by the thousand where the table says.
        (call.webSearches * (price.webSearch ?? 0) + call.webFetches * (price.webFetch ?? 0)) / 1_000;
      report.total += amount;
      report.byModel[call.model] = (report.byModel[call.model] ?? 0) + amount;
    }
    const models = Object.entries(report.byModel).map(([model, amount]) => `${model} ${formatCost(amount)}`);
    report.text = `${formatCost(report.total)}${models.length > 0 ? ` (${models.join(', ')})` : ''}${report.unpriced.length > 0 ? `; not priced: ${report.unpriced.join(', ')}` : ''}`;
    return report;
  }

  /** The restore point of one file of a run, or null when the run never touched it. */
  *restorePoint(runId: string, path: string): Q<RestorePoint | null> {
    const row = (yield* sql.get('SELECT * FROM restore_points WHERE run_id = ? AND path = ?', runId, path)) as
      | Row
      | undefined;
    return row ? toRestorePoint(row) : null;
  }

  /** Every restore point of a run, in the order the run first touched the files. */
  *restorePoints(runId: string): Q<RestorePoint[]> {
    id('restorePoints', 'runId', runId);
    const rows = (yield* sql.all(
      'SELECT * FROM restore_points WHERE run_id = ? ORDER BY seq, at, path',
      runId,
    )) as Row[];
    return rows.map(toRestorePoint);
  }

  /** Every change a run's committed steps made, step by step, in the order made. */
  *fileChanges(runId: string, seq?: number): Q<FileChangeRecord[]> {
    id('fileChanges', 'runId', runId);
    const rows = (
      seq === undefined
        ? yield* sql.all('SELECT * FROM file_changes WHERE run_id = ? ORDER BY seq, ordinal', runId)
        : yield* sql.all('SELECT * FROM file_changes WHERE run_id = ? AND seq = ? ORDER BY ordinal', runId, seq)
    ) as Row[];
    return rows.map((row) => ({
      runId: row.run_id as string,
      seq: row.seq as number,
      ordinal: row.ordinal as number,
      path: row.path as string,
      diff: row.diff as string,
      at: row.at as number,
    }));
  }

  /**
   * A run's whole change as a step-ordered patch series, for review: each step's diffs
   * under a header naming the step. Empty when the run changed nothing.
   *
   * @example
   * writeFileSync('run.patch', store.patch(result.runId));
   */
  *patch(runId: string): Q<string> {
    id('patch', 'runId', runId);
    const out: string[] = [];
    let step = -1;
    for (const change of yield* this.fileChanges(runId)) {
      if (change.seq !== step) {
        step = change.seq;
        out.push(`# io-harness run ${runId} step ${step}\n`);
      }
      out.push(change.diff.endsWith('\n') ? change.diff : `${change.diff}\n`);
    }
    return out.join('');
  }

  /** Every gate evaluation of a run, in the order evaluated (retries after the run included). */
  *gateEvaluations(runId: string): Q<Extract<HarnessEvent, { type: 'gate-evaluated' }>[]> {
    id('gateEvaluations', 'runId', runId);
    const rows = (yield* sql.all(
      `SELECT * FROM events WHERE run_id = ? AND type = 'gate-evaluated' ORDER BY event_id`,
      runId,
    )) as Row[];
    return rows.map(toEvent) as Extract<HarnessEvent, { type: 'gate-evaluated' }>[];
  }

  /**
   * Questions runs wait on (approvals deferred, plans, questions to the operator,
   * interrupted commands), oldest first.
   *
   * @example
   * for (const question of store.questions({ status: 'open' })) console.log(question.questionId, question.payload);
   */
  *questions(filter: { rootId?: string; runId?: string; status?: 'open' | 'answered' } = {}): Q<QuestionRecord[]> {
    filterOf('questions', filter, ['rootId', 'runId']);
    const where: string[] = [];
    const values: string[] = [];
    if (filter.rootId !== undefined) {
      where.push('root_id = ?');
      values.push(filter.rootId);
    }
    if (filter.runId !== undefined) {
      where.push('run_id = ?');
      values.push(filter.runId);
    }
    if (filter.status !== undefined) {
      where.push('status = ?');
      values.push(filter.status);
    }
    const text = `SELECT * FROM questions${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at, rowid`;
    return ((yield* sql.all(text, ...values)) as Row[]).map(toQuestion);
  }

  *question(questionId: string): Q<QuestionRecord | null> {
    id('question', 'questionId', questionId);
    const row = (yield* sql.get('SELECT * FROM questions WHERE question_id = ?', questionId)) as Row | undefined;
    return row ? toQuestion(row) : null;
  }

  /** The step in progress a run will pick up (its completion), when its effects had begun. */
  *draft(runId: string): Q<{ seq: number; completion: Completion; partial: unknown } | null> {
    const row = (yield* sql.get('SELECT seq, completion, partial FROM drafts WHERE run_id = ?', runId)) as
      | { seq: number; completion: string; partial: string | null }
      | undefined;
    return row
      ? {
          seq: row.seq,
          completion: JSON.parse(row.completion),
          partial: row.partial === null ? null : JSON.parse(row.partial),
        }
      : null;
  }

  /** What the files a step in progress wrote held before it did (cleared when the step commits). */
  *stepImages(runId: string, seq: number): Q<{ path: string; existed: boolean; content: Buffer | null }[]> {
    const rows = (yield* sql.all(
      'SELECT path, existed, content FROM step_images WHERE run_id = ? AND seq = ? ORDER BY path',
      runId,
      seq,
    )) as Row[];
    return rows.map((row) => ({
      path: row.path as string,
      existed: row.existed === 1,
      content: (row.content as Buffer | null) ?? null,
    }));
  }

  /** One journaled effect by its key (run:seq:call), or null. */
  *intent(key: string): Q<IntentRecord | null> {
    const row = (yield* sql.get('SELECT * FROM intents WHERE effect_key = ?', key)) as Row | undefined;
    return row ? toIntent(row) : null;
  }

  /** The effects a run journaled before starting them. */
  *intents(runId: string): Q<IntentRecord[]> {
    id('intents', 'runId', runId);
    const rows = (yield* sql.all(
      'SELECT * FROM intents WHERE run_id = ? ORDER BY seq, started_at, effect_key',
      runId,
    )) as Row[];
    return rows.map(toIntent);
  }

  /** The spec a run was started with (provider and system prompt). */
  /** A session's row, or null where the store has none by that id. */
  *session(sessionId: string): Q<SessionRecord | null> {
    id('session', 'sessionId', sessionId);
    const row = (yield* sql.get('SELECT * FROM sessions WHERE session_id = ?', sessionId)) as SessionRow | undefined;
    return row ? toSession(row) : null;
  }

  /** Every session, oldest first. */
  *sessions(): Q<SessionRecord[]> {
    const rows = (yield* sql.all('SELECT * FROM sessions ORDER BY created_at, rowid')) as SessionRow[];
    return rows.map(toSession);
  }

  /** A session's turns in the order they began, every branch's, the conflicted ones too. */
  *turns(sessionId: string): Q<TurnRecord[]> {
    id('turns', 'sessionId', sessionId);
    const rows = (yield* sql.all(`${TURN_SELECT} WHERE session_id = ? ORDER BY seq`, sessionId)) as TurnRow[];
    return rows.map(toTurn);
  }

  /** One turn, or null. */
  *turn(turnId: string): Q<TurnRecord | null> {
    const row = (yield* sql.get(`${TURN_SELECT} WHERE turn_id = ?`, turnId)) as TurnRow | undefined;
    return row ? toTurn(row) : null;
  }

  /**
   * The branch that ends at `turnId`, oldest turn first, with what its transcript is made
   * of: each turn's words and reply, its run's committed steps, and the corrections it took
   * (each with the step it came before). Three statements, however long the branch.
   */
  *branch(turnId: string): Q<
    {
      turn: TurnRecord;
      steps: Pick<StepRecord, 'seq' | 'completion' | 'observations'>[];
      steers: { before: number; text: string }[];
    }[]
  > {
    // UNION, not UNION ALL: a turn met twice (a damaged file's cycle) ends the walk.
    const chain = `WITH RECURSIVE chain(turn_id) AS (
        SELECT turn_id FROM turns WHERE turn_id = ?
        UNION
        SELECT turns.parent FROM turns JOIN chain ON turns.turn_id = chain.turn_id
        WHERE turns.parent IS NOT NULL
      )`;
    const turns = (yield* sql.all(
      `${chain} SELECT turns.*, (SELECT COUNT(*) FROM steps WHERE steps.run_id = turns.run_id) AS steps FROM chain JOIN turns ON turns.turn_id = chain.turn_id ORDER BY turns.seq`,
      turnId,
    )) as TurnRow[];
    const runs = `SELECT turns.run_id FROM chain JOIN turns ON turns.turn_id = chain.turn_id WHERE turns.run_id IS NOT NULL`;
    const steps = new Map<string, Pick<StepRecord, 'seq' | 'completion' | 'observations'>[]>();
    for (const row of (yield* sql.all(
      `${chain} SELECT run_id, seq, completion, observations FROM steps WHERE run_id IN (${runs}) ORDER BY run_id, seq`,
      turnId,
    )) as { run_id: string; seq: number; completion: string; observations: string }[]) {
      const list = steps.get(row.run_id) ?? [];
      list.push({ seq: row.seq, completion: JSON.parse(row.completion), observations: JSON.parse(row.observations) });
      steps.set(row.run_id, list);
    }
    const steers = new Map<string, { before: number; text: string }[]>();
    for (const row of (yield* sql.all(
      `${chain} SELECT run_id, taken_seq, body FROM steers WHERE run_id IN (${runs}) AND kind = 'steer' AND taken_seq IS NOT NULL ORDER BY steer_id`,
      turnId,
    )) as { run_id: string; taken_seq: number; body: string | null }[]) {
      const list = steers.get(row.run_id) ?? [];
      list.push({ before: row.taken_seq, text: row.body ?? '' });
      steers.set(row.run_id, list);
    }
    return turns.map((row) => {
      const turn = toTurn(row);
      return {
        turn,
        steps: turn.runId ? (steps.get(turn.runId) ?? []) : [],
        steers: turn.runId ? (steers.get(turn.runId) ?? []) : [],
      };
    });
  }

  /** The corrections sent to a run that it ended before taking, oldest first. */
  *undeliveredSteers(runId: string): Q<string[]> {
    const rows = (yield* sql.all(
      `SELECT body FROM steers WHERE run_id = ? AND kind = 'steer' AND taken_seq IS NULL ORDER BY steer_id`,
      runId,
    )) as { body: string | null }[];
    return rows.map((row) => row.body ?? '');
  }

  *spec(runId: string): Q<unknown> {
    const row = (yield* sql.get('SELECT spec FROM runs WHERE run_id = ?', runId)) as { spec: string } | undefined;
    return row ? JSON.parse(row.spec) : null;
  }
}
