/**
 * How a run ends, whichever rule ends it (its last step, a reply, a cancel, a pause's
 * interrupt, a rewind): its row closed, its drafts and step images gone, the children it
 * reserved and never released cancelled, a line sent to its parent, and the end announced.
 * Mail sent by a step goes the same way as that line.
 */
import { ErrorCode, HarnessError } from '../../errors.js';
import type { EventData, RunStatus } from '../../runtime/events.js';
import type { SentMessage } from '../records.js';
import type { Q } from '../sql.js';
import * as sql from '../sql.js';
import {
  ADDRESS_EXISTS,
  END_RUN,
  type LedgerRow,
  type RuleContext,
  type RunRow,
  recordEvent,
  runRow,
} from './context.js';

/** How much of a child's reply its finishing line to the parent carries. */
const LINE_REPLY_CHARS = 200;

const INSERT_MESSAGE = `INSERT INTO mailbox (msg_id, root_id, from_run, from_address, to_address, body, sent_seq, sent_generation)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?)`;
export const PENDING_CHILDREN = `SELECT * FROM runs WHERE parent_id = ? AND status = 'pending' AND substr(spawn_key, 1, ?) = ?`;

/** Sends `message` from `run` to an address of its tree; an address no agent has is refused. */
export function* send(
  context: RuleContext,
  run: RunRow,
  seq: number,
  generation: number,
  msgId: string,
  message: SentMessage,
  now: number,
  addressee?: RunRow,
): Q<void> {
  // A row of the tree already read at that address is an agent there: no need to look.
  const known = addressee?.root_id === run.root_id && addressee.address === message.to;
  if (!known && !(yield* sql.get(ADDRESS_EXISTS, run.root_id, message.to))) {
    throw new HarnessError(
      ErrorCode.MailboxConflict,
      `run ${run.run_id}: no agent has the address ${JSON.stringify(message.to)} in this tree.`,
    );
  }
  yield* sql.put(
    INSERT_MESSAGE,
    msgId,
    run.root_id,
    run.run_id,
    run.address,
    message.to,
    message.body,
    seq,
    generation,
  );
  yield* recordEvent(context, run, seq, generation, { type: 'message-sent', msgId, to: message.to }, now);
  context.pending.mail.push({ rootId: run.root_id, to: message.to });
}

/**
 * What a run's end reads, when its caller read it ahead in the same transaction and nothing
 * since has changed it: the children it still has reserved, its parent's row, and its own
 * account (its spend, for the line to the parent).
 */
export interface RunEndAhead {
  reserved: RunRow[];
  parent: RunRow | undefined;
  ledger: Pick<LedgerRow, 'steps_spent' | 'tokens_spent'>;
}

export function* finish(
  context: RuleContext,
  run: RunRow,
  generation: number,
  seq: number,
  status: RunStatus,
  reply: string | null,
  reason: string,
  now: number,
  events: EventData[],
  ahead?: RunEndAhead,
): Q<void> {
  for (const event of events) yield* recordEvent(context, run, seq, generation, event, now);
  yield* sql.put(END_RUN, status, reply, JSON.stringify({ status, reason }), now, run.run_id);
  yield* sql.put('DELETE FROM drafts WHERE run_id = ?', run.run_id);
  yield* sql.put('DELETE FROM step_images WHERE run_id = ?', run.run_id);
  // Children a step reserved but never committed can no longer be released.
  yield* dropPending(context, run, '', now, undefined, undefined, ahead?.reserved);
  if (run.parent_id !== null) {
    const parent = ahead?.parent ?? (yield* runRow(context, run.parent_id));
    const ledger = ahead?.ledger ?? ((yield* sql.get<LedgerRow>(context.ledgerById, run.run_id)) as LedgerRow);
    const said =
      reply === null ? reason : reply.length > LINE_REPLY_CHARS ? `${reply.slice(0, LINE_REPLY_CHARS)}…` : reply;
    const line = `[${run.address} ${status}] ${said.replace(/\s+/g, ' ')} (steps ${ledger.steps_spent}, tokens ${ledger.tokens_spent})`;
    yield* send(context, run, seq, generation, `${run.address}:end`, { to: parent.address, body: line }, now, parent);
  }
  yield* recordEvent(context, run, seq, generation, { type: 'run-end', status, reply, reason }, now);
  context.pending.ended.push({ rootId: run.root_id, runId: run.run_id, status });
}

/**
 * Ends each run the query `select` (with `params`) names as cancelled, at its last committed
 * step, saying `reason`: what a cancel does to runs no actor drives (paused, or left by a host).
 */
export function* cancelRuns(
  context: RuleContext,
  select: string,
  params: unknown[],
  reason: string,
  now: number,
): Q<string[]> {
  const rows = (yield* sql.all(select, ...params)) as { run_id: string }[];
  for (const { run_id } of rows) {
    const run = yield* runRow(context, run_id);
    yield* finish(context, run, run.generation, run.last_seq, 'cancelled', null, reason, now, []);
  }
  return rows.map((row) => row.run_id);
}

/**
 * Cancels the reserved children of `run` whose spawn key starts with `prefix`, except `keep`;
 * `pending`, when given, is what PENDING_CHILDREN read for them earlier in the transaction.
 */
export function* dropPending(
  context: RuleContext,
  run: RunRow,
  prefix: string,
  now: number,
  keep: Set<string> = new Set(),
  reason?: string,
  pending?: RunRow[],
): Q<void> {
  for (const orphan of pending ?? (yield* sql.all<RunRow>(PENDING_CHILDREN, run.run_id, prefix.length, prefix))) {
    if (!keep.has(orphan.run_id)) yield* detach(context, orphan, now, reason);
  }
}

/**
 * Unhooks a child from the spawn key (and, if it never started, the address) an
 * uncommitted step gave it, so a later attempt can use them. A child still pending
 * is cancelled and stops counting against the tree's total; one already started (a
 * waited-for spawn is an effect taken ahead of the commit) runs on, under its own id.
 */
export function* detach(
  context: RuleContext,
  child: RunRow,
  now: number,
  reason = 'the step that spawned it was not committed',
): Q<void> {
  const suffix = `#dropped-${child.run_id.slice(0, 8)}`;
  if (child.status !== 'pending') {
    yield* sql.put('UPDATE runs SET spawn_key = spawn_key || ? WHERE run_id = ?', suffix, child.run_id);
    return;
  }
  yield* sql.put(
    'UPDATE runs SET spawn_key = spawn_key || ?, address = address || ? WHERE run_id = ?',
    suffix,
    suffix,
    child.run_id,
  );
  yield* sql.put(`UPDATE spawn_queue SET state = 'cancelled' WHERE child_run_id = ?`, child.run_id);
  yield* sql.put('UPDATE ledger SET spawned = spawned - 1 WHERE run_id = ?', child.root_id);
  yield* sql.put(END_RUN, 'cancelled', null, JSON.stringify({ status: 'cancelled', reason }), now, child.run_id);
  yield* recordEvent(
    context,
    child,
    null,
    child.generation,
    { type: 'run-end', status: 'cancelled', reply: null, reason },
    now,
  );
  context.pending.ended.push({ rootId: child.root_id, runId: child.run_id, status: 'cancelled' });
}
