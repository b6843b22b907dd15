/**
 * The step rules: one step committed all or nothing (the draw checked against every
 * ceiling from the run up to the root, the step row, the mail it read and sent, its
 * events, the checkpoint, and the run's end when it was the last), a reply that ends a
 * root with no step, a run ended without a step, and what a step keeps before it acts
 * (restore points, step images, the draft it acts on).
 */
import { ErrorCode, HarnessError } from '../../errors.js';
import { type CeilingCrossing, drawCrossing } from '../../runtime/budget.js';
import type { DrawAmount, EventData } from '../../runtime/events.js';
import type { Completion } from '../../runtime/provider.js';
import type {
  CommitStepInput,
  CommitStepResult,
  EndRunInput,
  Fence,
  ModelCallRecord,
  RestorePointInput,
} from '../records.js';
import type { Q } from '../sql.js';
import * as sql from '../sql.js';
import { fenced, type LedgerRow, type RuleContext, type RunRow, recordEvent } from './context.js';
import { finish, PENDING_CHILDREN, send } from './run-end.js';
import { type SteerRow, takeSteersAt, WAITING_STEERS } from './sessions.js';
import { settleSpawns } from './spawn.js';

/**
 * A draw charged to one account, with the account as it stands after it: the rule that
 * says whether it may stand is drawCrossing (runtime/budget.ts), and a draw that crosses
 * a ceiling is rolled back (see drawOnChain).
 */
const DRAW = `UPDATE ledger SET steps_spent = steps_spent + ?, tokens_spent = tokens_spent + ?
  WHERE run_id = ? RETURNING max_steps, max_tokens, steps_spent, tokens_spent`;

/**
 * The same draw on the tree's account, found from the run (none when the run is the root):
 * sent ahead with the run's own draw, so a child's step does not wait on it apart.
 */
const ROOT_DRAW = `UPDATE ledger SET steps_spent = steps_spent + ?, tokens_spent = tokens_spent + ?
  WHERE run_id = (SELECT root_id FROM runs WHERE run_id = ?) AND run_id <> ?
  RETURNING max_steps, max_tokens, steps_spent, tokens_spent`;

/** The parent's row of the run `?` (none for a root). */
const PARENT_OF = 'SELECT * FROM runs WHERE run_id = (SELECT parent_id FROM runs WHERE run_id = ?)';

const INSERT_DRAW =
  'INSERT INTO draws (draw_id, root_id, run_id, seq, generation, steps, tokens, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)';

const INSERT_STEP =
  'INSERT INTO steps (run_id, seq, generation, completion, observations, usage, at) VALUES (?, ?, ?, ?, ?, ?, ?)';

const STEP_EXISTS = 'SELECT 1 AS one FROM steps WHERE run_id = ? AND seq = ?';

const CONSUME = `UPDATE mailbox SET consumed_by = ?, consumed_seq = ?, consumed_generation = ?
  WHERE msg_id = ? AND root_id = ? AND to_address = ? AND consumed_by IS NULL`;

const ADVANCE_RUN = 'UPDATE runs SET last_seq = ? WHERE run_id = ?';

const UPSERT_CHECKPOINT = `INSERT INTO checkpoints (run_id, seq, generation, state, at) VALUES (?, ?, ?, ?, ?)
  ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, generation = excluded.generation, state = excluded.state, at = excluded.at`;

const INSERT_CALL = `INSERT INTO model_calls (root_id, run_id, seq, attempt, generation, provider, model, outcome, status_code, input_tokens,
  output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, latency_ms, ttft_ms, usage_reported, web_searches,
  web_fetches, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

const INSERT_SOURCE = `INSERT INTO web_sources (root_id, run_id, seq, attempt, kind, url, title, cited_text, at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`;

/**
 * One step, all or nothing: the draw checked against every ceiling from the run
 * up to the root, the step row, the messages it consumed and sent, its events,
 * the checkpoint, and the run's end if this was its last step.
 */
export function* commitStep(context: RuleContext, input: CommitStepInput): Q<CommitStepResult> {
  const draw = stepDraw(input);
  // Sent with the read of the run's row, in its round trip: the draw on the run's own
  // account (undone below unless the step stands), and what the step's end looks for.
  yield* sql.put('SAVEPOINT draw');
  const own = yield* sql.putRows<LedgerRow>(DRAW, draw.steps, draw.tokens, input.runId);
  const rootDrawn = context.readAhead
    ? yield* sql.putRows<LedgerRow>(ROOT_DRAW, draw.steps, draw.tokens, input.runId, input.runId)
    : null;
  const prefix = `${input.runId}:${input.seq}:`;
  const pending = context.readAhead
    ? yield* sql.putRows<RunRow>(`${PENDING_CHILDREN}${context.forUpdate}`, input.runId, prefix.length, prefix)
    : null;
  const steers = context.readAhead ? yield* sql.putRows<SteerRow>(WAITING_STEERS, input.runId) : null;
  // A last step's end reads these: the children still reserved, and the parent its line goes to.
  const ending =
    context.readAhead && input.final
      ? {
          reserved: yield* sql.putRows<RunRow>(`${PENDING_CHILDREN}${context.forUpdate}`, input.runId, 0, ''),
          parent: yield* sql.putRows<RunRow>(`${PARENT_OF}${context.forUpdate}`, input.runId),
        }
      : null;
  let run: RunRow;
  try {
    run = yield* fenced(context, input);
  } catch (error) {
    // Undone here too, for a caller that holds no transaction to roll back.
    yield* undoDraw();
    throw error;
  }
  if (input.seq !== run.last_seq + 1) {
    yield* undoDraw();
    if (yield* sql.get(STEP_EXISTS, input.runId, input.seq)) return { status: 'duplicate', seq: input.seq };
    throw new HarnessError(
      ErrorCode.StepOutOfOrder,
      `run ${input.runId}: step ${input.seq} cannot follow step ${run.last_seq}.`,
    );
  }
  const drawn = yield* drawOnChain(run, draw, own()[0], rootDrawn?.()[0]);
  if ('refused' in drawn) {
    const { account, crossing } = drawn.refused;
    const { ceiling, spent, limit } = crossing;
    // The call happened even though its step cannot be charged: account for it.
    yield* recordCalls(run, input.seq, input.generation, input.calls, input.now);
    yield* finish(
      context,
      run,
      input.generation,
      input.seq - 1,
      'budget-exhausted',
      null,
      `the ${ceiling} ceiling of run ${account} would be crossed`,
      input.now,
      [{ type: 'budget-exhausted', draw, ceiling, account, spent, limit }],
    );
    return { status: 'exhausted', runId: account, ceiling, spent, limit };
  }
  const gen = input.generation;
  yield* writeStepRows(run, input, draw);
  for (const event of input.events) yield* recordEvent(context, run, input.seq, gen, event, input.now);
  yield* recordCalls(run, input.seq, gen, input.calls, input.now);
  if (input.consumed.length > 0)
    yield* recordEvent(context, run, input.seq, gen, { type: 'message-read', msgIds: input.consumed }, input.now);
  for (const [index, message] of input.sent.entries()) {
    // Ids name the sender by address, so the same tree run twice reads the same ids.
    yield* send(context, run, input.seq, gen, `${run.address}:${input.seq}:${index}`, message, input.now);
  }
  yield* settleSpawns(context, run, gen, input.seq, input.spawned, input.now, pending?.());
  // Only a draw moves an account's spend, and the tree's account was drawn on first.
  const treeSpent = { steps: drawn.root.steps_spent, tokens: drawn.root.tokens_spent };
  yield* recordEvent(context, run, input.seq, gen, { type: 'spend', draw, treeSpent }, input.now);
  yield* recordEvent(context, run, input.seq, gen, stepEnd(input), input.now);
  // The lease's expiry is the supervisor's to extend, on its injectable clock; a step does not touch it.
  yield* sql.put(ADVANCE_RUN, input.seq, run.run_id);
  yield* sql.put('DELETE FROM drafts WHERE run_id = ?', run.run_id);
  yield* sql.put('DELETE FROM step_images WHERE run_id = ? AND seq <= ?', run.run_id, input.seq);
  yield* sql.put(UPSERT_CHECKPOINT, run.run_id, input.seq, gen, JSON.stringify({ seq: input.seq }), input.now);
  if (input.final) {
    // Read ahead, and still as they stand when the step released or dropped no child.
    const untouched = ending !== null && input.spawned.length === 0 && (pending?.() ?? []).length === 0;
    yield* finish(
      context,
      run,
      gen,
      input.seq,
      input.final.status,
      input.final.reply,
      input.final.reason ?? 'the model gave its final answer',
      input.now,
      [],
      untouched
        ? { reserved: ending.reserved(), parent: ending.parent()[0], ledger: own()[0] as LedgerRow }
        : undefined,
    );
    return { status: 'committed', seq: input.seq, treeSpent };
  }
  // What a person sent the run while this step ran is taken at its end, the boundary.
  const taken =
    run.parent_id === null ? yield* takeSteersAt(context, run, gen, input.seq, input.now, steers?.()) : null;
  if (taken?.interrupt) return { status: 'interrupted', seq: input.seq, treeSpent };
  return {
    status: 'committed',
    seq: input.seq,
    treeSpent,
    ...(taken?.steers.length ? { steers: taken.steers } : {}),
  };
}

/** The draw a step makes: one step (none for a fold's) and the tokens of its call. */
export function stepDraw(input: CommitStepInput): DrawAmount {
  return { steps: input.fold === true ? 0 : 1, tokens: input.usage.inputTokens + input.usage.outputTokens };
}

/** The event that closes a committed step. */
export function stepEnd(input: CommitStepInput): EventData {
  return {
    type: 'step-end',
    toolCalls: input.completion.toolCalls.map((call) => call.name),
    inputTokens: input.usage.inputTokens,
    outputTokens: input.usage.outputTokens,
    cacheReadTokens: input.usage.cacheReadTokens ?? 0,
    cachedShare: input.usage.inputTokens > 0 ? (input.usage.cacheReadTokens ?? 0) / input.usage.inputTokens : 0,
    provider: input.completion.provider ?? null,
    model: input.completion.model,
  };
}

/**
 * Charges `draw` to every account from `run` up to the root, all or none: the first
 * account, from the root down, that the draw would take over a ceiling ({@link
 * drawCrossing}, the one rule) is the one refused, and nothing of the draw stays charged.
 * Drawn, it returns the tree's account as it stands. `own`: the run's own account, drawn
 * already inside the savepoint `draw` this opened (commitStep sends that draw early).
 */
function* drawOnChain(
  run: RunRow,
  draw: DrawAmount,
  own?: LedgerRow,
  root?: LedgerRow,
): Q<{ refused: { account: string; crossing: CeilingCrossing } } | { root: LedgerRow }> {
  // The root first (an ancestry runs from it down).
  const chain = [...(JSON.parse(run.ancestry) as string[]), run.run_id];
  if (!own) yield* sql.put('SAVEPOINT draw');
  const after = new Map<string, LedgerRow>();
  if (own) after.set(run.run_id, own);
  // Drawn ahead with the run's own (see ROOT_DRAW).
  if (root && run.root_id !== run.run_id) after.set(run.root_id, root);
  for (const id of chain) {
    if (!after.has(id)) after.set(id, (yield* sql.get<LedgerRow>(DRAW, draw.steps, draw.tokens, id)) as LedgerRow);
  }
  for (const id of chain) {
    const row = after.get(id) as LedgerRow;
    const crossing = drawCrossing(
      { steps: row.max_steps, tokens: row.max_tokens },
      { steps: row.steps_spent - draw.steps, tokens: row.tokens_spent - draw.tokens },
      draw,
    );
    if (crossing !== null) {
      yield* undoDraw();
      return { refused: { account: id, crossing } };
    }
  }
  yield* sql.put('RELEASE draw');
  return { root: after.get(run.root_id) as LedgerRow };
}

/** Takes back what was drawn since the savepoint `draw`. */
function* undoDraw(): Q<void> {
  yield* sql.put('ROLLBACK TO draw');
  yield* sql.put('RELEASE draw');
}

/** A committed step's own rows: its draw, the step, the files it changed, the messages it read. */
function* writeStepRows(run: RunRow, input: CommitStepInput, draw: DrawAmount): Q<void> {
  const gen = input.generation;
  yield* sql.put(
    INSERT_DRAW,
    `${run.run_id}:${input.seq}`,
    run.root_id,
    run.run_id,
    input.seq,
    gen,
    draw.steps,
    draw.tokens,
    input.now,
  );
  yield* sql.put(
    INSERT_STEP,
    run.run_id,
    input.seq,
    gen,
    JSON.stringify(input.completion),
    JSON.stringify(input.observations),
    JSON.stringify(input.usage),
    input.now,
  );
  for (const [ordinal, change] of (input.changes ?? []).entries()) {
    yield* sql.put(
      'INSERT INTO file_changes (run_id, seq, ordinal, root_id, generation, path, diff, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      run.run_id,
      input.seq,
      ordinal,
      run.root_id,
      gen,
      change.path,
      change.diff,
      input.now,
    );
  }
  for (const msgId of input.consumed) {
    const changed = (yield* sql.run(CONSUME, run.run_id, input.seq, gen, msgId, run.root_id, run.address)).changes;
    if (changed !== 1) {
      throw new HarnessError(
        ErrorCode.MailboxConflict,
        `run ${run.run_id}: message ${msgId} is not waiting in the inbox of ${run.address}; the step was not committed.`,
      );
    }
  }
}

/**
 * Ends a root run on its first completion when that completion is a reply (text, no tool
 * call): its tokens drawn on the tree's ledger (no step), its model call recorded, no
 * step row and no checkpoint. A draw that would cross a ceiling ends it as
 * budget-exhausted instead.
 */
export function* endReply(
  context: RuleContext,
  input: Fence & { completion: Completion; calls: ModelCallRecord[]; events: EventData[]; now: number },
): Q<{
  status: 'finished' | 'exhausted';
}> {
  const run = yield* fenced(context, input);
  const usage = input.completion.usage;
  const draw: DrawAmount = { steps: 0, tokens: usage.inputTokens + usage.outputTokens };
  const seq = run.last_seq + 1;
  const drawn = yield* drawOnChain(run, draw);
  if ('refused' in drawn) {
    const { account, crossing } = drawn.refused;
    const { ceiling, spent, limit } = crossing;
    yield* recordCalls(run, seq, input.generation, input.calls, input.now);
    yield* finish(
      context,
      run,
      input.generation,
      run.last_seq,
      'budget-exhausted',
      null,
      `the ${ceiling} ceiling of run ${account} would be crossed`,
      input.now,
      [...input.events, { type: 'budget-exhausted', draw, ceiling, account, spent, limit }],
    );
    return { status: 'exhausted' };
  }
  yield* sql.put(
    INSERT_DRAW,
    `${run.run_id}:${seq}`,
    run.root_id,
    run.run_id,
    seq,
    input.generation,
    0,
    draw.tokens,
    input.now,
  );
  yield* recordCalls(run, seq, input.generation, input.calls, input.now);
  const treeSpent = { steps: drawn.root.steps_spent, tokens: drawn.root.tokens_spent };
  yield* finish(
    context,
    run,
    input.generation,
    run.last_seq,
    'finished',
    input.completion.text,
    'the model replied',
    input.now,
    [...input.events, { type: 'spend', draw, treeSpent }],
  );
  return { status: 'finished' };
}

/** Records events that belong to no step (a run starting or resuming). */
export function* recordEvents(context: RuleContext, input: Fence & { events: EventData[]; now: number }): Q<void> {
  const run = yield* fenced(context, input);
  for (const event of input.events) yield* recordEvent(context, run, null, input.generation, event, input.now);
}

/** A model call's own columns of its row, in order: from `provider` to `web_fetches`. */
export function callColumns(call: ModelCallRecord): unknown[] {
  return [
    call.provider,
    call.model,
    call.outcome,
    call.statusCode,
    call.inputTokens,
    call.outputTokens,
    call.cacheReadTokens,
    call.cacheWriteTokens,
    call.reasoningTokens,
    call.latencyMs,
    call.ttftMs,
    call.usageReported === false ? 0 : 1,
    call.web?.searches ?? 0,
    call.web?.fetches ?? 0,
  ];
}

/** Records the model calls made for step `seq`, one row per attempt. */
function* recordCalls(
  run: RunRow,
  seq: number,
  generation: number,
  calls: ModelCallRecord[] | undefined,
  now: number,
): Q<void> {
  for (const [attempt, call] of (calls ?? []).entries()) {
    yield* sql.put(INSERT_CALL, run.root_id, run.run_id, seq, attempt, generation, ...callColumns(call), now);
    for (const source of call.web?.sources ?? [])
      yield* sql.put(
        INSERT_SOURCE,
        run.root_id,
        run.run_id,
        seq,
        attempt,
        source.kind,
        source.url,
        source.title,
        source.citedText,
        now,
      );
  }
}

/** Ends a run without a step: a budget that ran out before the model was asked, a failure, a cancel. */
export function* endRun(context: RuleContext, input: EndRunInput): Q<void> {
  const run = yield* fenced(context, input);
  yield* recordCalls(run, run.last_seq + 1, input.generation, input.calls, input.now);
  yield* finish(
    context,
    run,
    input.generation,
    run.last_seq,
    input.status,
    input.reply,
    input.reason,
    input.now,
    input.events,
  );
}

/**
 * Keeps what a file held before the run first touched it. Written, and committed,
 * before the file is: a crash between the two leaves a restore point and an untouched
 * file, never a changed file with nothing to put it back from. The first one wins.
 */
export function* recordRestorePoint(context: RuleContext, input: RestorePointInput): Q<{ created: boolean }> {
  const run = yield* fenced(context, input);
  // The step's own image too: what the file held before this step first wrote it.
  yield* sql.put(
    'INSERT INTO step_images (run_id, seq, path, existed, content) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING',
    run.run_id,
    input.seq,
    input.path,
    input.content === null ? 0 : 1,
    input.content === null ? null : Buffer.from(input.content),
  );
  const changes = (yield* sql.run(
    `INSERT INTO restore_points (run_id, path, root_id, workspace, existed, content, seq, generation, at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
    run.run_id,
    input.path,
    run.root_id,
    input.workspace,
    input.content === null ? 0 : 1,
    input.content === null ? null : Buffer.from(input.content),
    input.seq,
    input.generation,
    input.now,
  )).changes;
  return { created: changes === 1 };
}

/**
 * Forgets a step's images once the actor has put the files back (a step re-run after
 * a crash starts from the committed state), recording which files went back.
 */
export function* clearStepImages(
  context: RuleContext,
  input: Fence & { seq: number; paths: string[]; now: number },
): Q<void> {
  const run = yield* fenced(context, input);
  yield* sql.put('DELETE FROM step_images WHERE run_id = ? AND seq = ?', run.run_id, input.seq);
  yield* recordEvent(
    context,
    run,
    input.seq,
    input.generation,
    { type: 'step-rolled-back', paths: input.paths },
    input.now,
  );
}

/** Keeps the completion a step acts on, once its first effect begins; a re-run of the step reuses it. */
export function* keepDraft(run: RunRow, seq: number, generation: number, completion: Completion, now: number): Q<void> {
  yield* sql.put(
    'INSERT INTO drafts (run_id, seq, generation, completion, at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING',
    run.run_id,
    seq,
    generation,
    JSON.stringify(completion),
    now,
  );
}
