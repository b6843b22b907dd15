/**
 * The spawn rules: a child reserved (idempotently, by its spawn key), its address chosen,
 * its ceilings clamped to what the parent has left, and queued for admission once the step
 * that asked for it commits; what a step reserved and did not claim is dropped; a tree's
 * waiting children cancelled, or a run's backlog taken back by a rewind.
 */
import { clampToParent, remaining } from '../../runtime/budget.js';
import type { SpawnInput, SpawnResult } from '../records.js';
import type { Q } from '../sql.js';
import * as sql from '../sql.js';
import {
  ADDRESS,
  ADDRESS_EXISTS,
  fenced,
  INSERT_LEDGER,
  INSERT_RUN,
  type LedgerRow,
  type RuleContext,
  type RunRow,
  recordEvent,
  runRow,
} from './context.js';
import { cancelRuns, detach, dropPending, finish } from './run-end.js';

const RUN_BY_SPAWN_KEY = 'SELECT * FROM runs WHERE spawn_key = ?';

const RUN_BY_ADDRESS = 'SELECT * FROM runs WHERE root_id = ? AND address = ?';

const COUNT_CHILDREN = 'UPDATE runs SET children = children + 1 WHERE run_id = ?';

const COUNT_TREE = 'UPDATE ledger SET spawned = spawned + 1 WHERE run_id = ?';

const ENQUEUE = 'INSERT INTO spawn_queue (child_run_id, root_id, parent_id, state, enqueued_at) VALUES (?, ?, ?, ?, ?)';

/** The tree's account of the run `?`, read before its row is. */
const ROOT_LEDGER_OF = 'SELECT * FROM ledger WHERE run_id = (SELECT root_id FROM runs WHERE run_id = ?)';

/** Whether the address the run `?`'s next numbered child would take is held already. */
const NEXT_ADDRESS_TAKEN = `SELECT run_id FROM runs WHERE root_id = (SELECT root_id FROM runs WHERE run_id = ?)
  AND address = (SELECT address || '.' || (children + 1) FROM runs WHERE run_id = ?)`;

/**
 * What a spawn decides on, read ahead with the parent's row, in its round trip (PostgreSQL,
 * where each answer waited for is one): the child made before under this spawn key, the
 * tree's account and the parent's, each locked as the rule would lock it, and whether the
 * parent's next numbered address is taken. Good until the rule changes a row they read.
 */
interface SpawnAhead {
  existing: () => RunRow[];
  rootLedger: () => LedgerRow[];
  parentLedger: () => LedgerRow[];
  nextTaken: () => unknown[];
}

function* readAhead(context: RuleContext, input: SpawnInput): Q<SpawnAhead> {
  return {
    existing: yield* sql.putRows<RunRow>(RUN_BY_SPAWN_KEY, input.key),
    rootLedger: yield* sql.putRows<LedgerRow>(`${ROOT_LEDGER_OF}${context.forUpdate}`, input.runId),
    parentLedger: yield* sql.putRows<LedgerRow>(context.ledgerById, input.runId),
    nextTaken: yield* sql.putRows(NEXT_ADDRESS_TAKEN, input.runId, input.runId),
  };
}

/** `hint`, or `hint.2`, `hint.3` ... the first that is free and still an address; null when none is. */
function* hintedAddress(rootId: string, hint: string): Q<string | null> {
  for (let n = 1; n < 10_000; n++) {
    const address = n === 1 ? hint : `${hint}.${n}`;
    if (!ADDRESS.test(address)) return null;
    if (!(yield* sql.get(ADDRESS_EXISTS, rootId, address))) return address;
  }
  return null;
}

function* refuseSpawn(
  context: RuleContext,
  parent: RunRow,
  input: SpawnInput,
  rule: string,
  reason: string,
): Q<SpawnResult> {
  yield* recordEvent(context, parent, null, input.generation, { type: 'spawn-refused', rule, reason }, input.now);
  return { status: 'refused', rule, reason };
}

/**
 * Creates a child, idempotently: the same spawn key returns the child it made
 * before. The total cap refuses; the child waits in the durable queue until the
 * supervisor admits it; its ceilings are clamped to what the parent has left.
 */
export function* spawn(context: RuleContext, input: SpawnInput): Q<SpawnResult> {
  let ahead = context.readAhead ? yield* readAhead(context, input) : null;
  const parent = yield* fenced(context, input);
  const existing = ahead ? ahead.existing()[0] : yield* sql.get<RunRow>(RUN_BY_SPAWN_KEY, input.key);
  if (existing && existing.task === input.task && (input.as === null || input.as === existing.address)) {
    // The same step run again after a crash, asking the same: the child it made before.
    let childStatus = existing.status;
    if (input.queueNow && childStatus === 'pending') {
      yield* releaseChild(context, parent, input.generation, null, existing, input.now);
      childStatus = 'queued';
    }
    return { status: 'existing', childId: existing.run_id, address: existing.address, clamps: [], childStatus };
  }
  if (existing) {
    // The re-run asked for something else at this call: the earlier child is not this one.
    yield* detach(context, existing, input.now);
    ahead = null;
  }
  if (input.as !== null) {
    const holder = yield* sql.get<RunRow>(RUN_BY_ADDRESS, parent.root_id, input.as);
    const earlierAttempt = `${parent.run_id}:`;
    if (
      holder &&
      holder.status === 'pending' &&
      holder.parent_id === parent.run_id &&
      holder.spawn_key?.startsWith(earlierAttempt)
    ) {
      // Reserved by an uncommitted attempt at a step of this parent: that reservation lapses.
      yield* detach(context, holder, input.now);
      ahead = null;
    }
  }
  const rootLedger = (ahead?.rootLedger()[0] ??
    (yield* sql.get<LedgerRow>(context.ledgerById, parent.root_id))) as LedgerRow;
  const spawned = rootLedger.spawned;
  if (rootLedger.max_total_agents !== null && spawned + 1 > rootLedger.max_total_agents) {
    return yield* refuseSpawn(
      context,
      parent,
      input,
      'maxTotalAgents',
      `this tree may hold at most ${rootLedger.max_total_agents} spawned agents and already has ${spawned}; finish with the agents you have.`,
    );
  }
  const address = yield* childAddress(parent, input, ahead ? ahead.nextTaken().length > 0 : undefined);
  if (typeof address !== 'string') return yield* refuseSpawn(context, parent, input, 'address', address.refused);
  return yield* createChild(context, parent, input, address, ahead?.parentLedger()[0]);
}

/**
 * The address a new child takes: the one it asked for (`as`), refused when it is not an
 * address or is taken; else a roster agent's own name under its parent, numbered when
 * taken; else the parent's next number.
 */
function* childAddress(parent: RunRow, input: SpawnInput, nextTaken?: boolean): Q<string | { refused: string }> {
  let address = input.as;
  if (address !== null) {
    if (!ADDRESS.test(address)) {
      return {
        refused: `address ${JSON.stringify(address)} is not valid: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit.`,
      };
    }
    if (yield* sql.get(ADDRESS_EXISTS, parent.root_id, address)) {
      return { refused: `address ${JSON.stringify(address)} is already taken in this tree; choose another "as".` };
    }
    return address;
  }
  // A roster agent is named for itself under its parent, numbered when taken; any other child by its number.
  const hinted = input.addressHint ? yield* hintedAddress(parent.root_id, input.addressHint) : null;
  if (hinted) return hinted;
  let n = parent.children + 1;
  address = `${parent.address}.${n}`;
  // Read ahead, the first number's answer is known (see SpawnAhead).
  if (nextTaken === false) return address;
  while (yield* sql.get(ADDRESS_EXISTS, parent.root_id, address)) address = `${parent.address}.${++n}`;
  return address;
}

/** Writes a new child's rows at `address`: its run, its account clamped to what the parent has left, its place in the queue. */
function* createChild(
  context: RuleContext,
  parent: RunRow,
  input: SpawnInput,
  address: string,
  readAhead?: LedgerRow,
): Q<SpawnResult> {
  const parentLedger = (readAhead ?? (yield* sql.get<LedgerRow>(context.ledgerById, parent.run_id))) as LedgerRow;
  const left = remaining(
    { steps: parentLedger.max_steps, tokens: parentLedger.max_tokens, wallMs: parentLedger.max_wall_ms },
    { steps: parentLedger.steps_spent, tokens: parentLedger.tokens_spent },
    parentLedger.started_at,
    input.now,
  );
  const { ceilings, clamps } = clampToParent(input.asked, left);
  const ancestry = [...(JSON.parse(parent.ancestry) as string[]), parent.run_id];
  yield* sql.put(
    INSERT_RUN,
    input.newRunId,
    parent.root_id,
    parent.run_id,
    address,
    parent.depth + 1,
    JSON.stringify(ancestry),
    input.queueNow ? 'queued' : 'pending',
    input.task,
    input.policy || input.system || input.contract ? childSpec(parent.spec, input) : parent.spec,
    input.key,
    input.now,
  );
  const maxWait =
    input.maxWaitSecs === null ? parentLedger.max_wait_secs : Math.min(input.maxWaitSecs, parentLedger.max_wait_secs);
  yield* sql.put(
    INSERT_LEDGER,
    input.newRunId,
    parent.root_id,
    ceilings.steps,
    ceilings.tokens,
    ceilings.wallMs,
    input.now,
    null,
    null,
    maxWait,
  );
  yield* sql.put(
    ENQUEUE,
    input.newRunId,
    parent.root_id,
    parent.run_id,
    input.queueNow ? 'queued' : 'pending',
    input.now,
  );
  yield* sql.put(COUNT_CHILDREN, parent.run_id);
  yield* sql.put(COUNT_TREE, parent.root_id);
  if (input.queueNow) {
    yield* recordEvent(
      context,
      parent,
      null,
      input.generation,
      { type: 'spawn-queued', childId: input.newRunId, address, task: input.task },
      input.now,
    );
    context.pending.spawned.push({ rootId: parent.root_id, childId: input.newRunId });
  }
  if (clamps.length > 0) {
    yield* recordEvent(
      context,
      parent,
      null,
      input.generation,
      { type: 'budget-clamped', childId: input.newRunId, clamps },
      input.now,
    );
  }
  return {
    status: 'created',
    childId: input.newRunId,
    address,
    clamps,
    childStatus: input.queueNow ? 'queued' : 'pending',
  };
}

/**
 * A child's spec: its parent's, with the policy, system prompt and contract the spawn gave
 * it. A contract of its own has another root, so the parent's briefing (which names its
 * root) is not the child's: the spawn gives the child's.
 */
function childSpec(parentSpec: string, input: SpawnInput): string {
  const parent = JSON.parse(parentSpec) as Record<string, unknown>;
  const { briefing: _briefing, ...withoutBriefing } = parent;
  return JSON.stringify({
    ...(input.contract ? withoutBriefing : parent),
    ...(input.policy ? { policy: input.policy } : {}),
    ...(input.system ? { system: input.system } : {}),
    ...(input.contract ? { contract: input.contract } : {}),
    ...(input.contract && input.briefing !== undefined ? { briefing: input.briefing } : {}),
  });
}

/**
 * Queues the children this step reserved, and drops any child an earlier, uncommitted
 * attempt at the same step reserved and this one did not ask for again.
 */
export function* settleSpawns(
  context: RuleContext,
  run: RunRow,
  generation: number,
  seq: number,
  spawned: string[],
  now: number,
  pending?: RunRow[],
): Q<void> {
  const claimed = new Set(spawned);
  // Read ahead (and locked) with the step's run row: every child this step's key reserved that waits.
  const waiting = new Map(pending?.map((child) => [child.run_id, child]));
  for (const childId of spawned) {
    const child = waiting.get(childId) ?? (yield* sql.get<RunRow>(context.runById, childId));
    if (child && child.parent_id === run.run_id && child.status === 'pending') {
      yield* releaseChild(context, run, generation, seq, child, now);
    }
  }
  // Reserved by this step's key but not claimed: a call of an attempt that did not commit,
  // or one reserved ahead that the step stopped before (a cancel, the deadline).
  yield* dropPending(
    context,
    run,
    `${run.run_id}:${seq}:`,
    now,
    claimed,
    'the call that spawned it is not in the step its parent committed',
    pending,
  );
}

/** Moves a reserved child into the admission queue. */
function* releaseChild(
  context: RuleContext,
  parent: RunRow,
  generation: number,
  seq: number | null,
  child: RunRow,
  now: number,
): Q<void> {
  yield* sql.put(`UPDATE runs SET status = 'queued' WHERE run_id = ?`, child.run_id);
  yield* sql.put(`UPDATE spawn_queue SET state = 'queued' WHERE child_run_id = ?`, child.run_id);
  yield* recordEvent(
    context,
    parent,
    seq,
    generation,
    { type: 'spawn-queued', childId: child.run_id, address: child.address, task: child.task },
    now,
  );
  context.pending.spawned.push({ rootId: parent.root_id, childId: child.run_id });
}

/** Cancels every child of a tree still waiting in the queue; no lease is needed for a run that never started. */
export function* cancelQueued(
  context: RuleContext,
  input: { rootId: string; now: number },
): Q<{ cancelled: string[] }> {
  const rows = (yield* sql.all(
    `SELECT child_run_id FROM spawn_queue WHERE root_id = ? AND state IN ('pending', 'queued') ORDER BY ordinal`,
    input.rootId,
  )) as { child_run_id: string }[];
  for (const { child_run_id } of rows) {
    yield* sql.put(`UPDATE spawn_queue SET state = 'cancelled' WHERE child_run_id = ?`, child_run_id);
    const run = yield* runRow(context, child_run_id);
    yield* finish(context, run, run.generation, 0, 'cancelled', null, 'cancelled while queued', input.now, []);
  }
  // A run paused on a person is not being driven either: a cancelled tree does not leave it to be resumed.
  const paused = yield* cancelRuns(
    context,
    `SELECT run_id FROM runs WHERE root_id = ? AND status = 'paused' ORDER BY created_at`,
    [input.rootId],
    'cancelled while paused',
    input.now,
  );
  return { cancelled: [...rows.map((row) => row.child_run_id), ...paused] };
}

/**
 * Cancels the children a run left waiting (reserved or queued, never started): the
 * spawn backlog a whole-run rewind takes back. Steps, events and the ledger stay.
 */
export function* dropBacklog(context: RuleContext, input: { runId: string; now: number }): Q<{ cancelled: string[] }> {
  const rows = (yield* sql.all(
    `SELECT child_run_id FROM spawn_queue WHERE parent_id = ? AND state IN ('pending', 'queued') ORDER BY ordinal`,
    input.runId,
  )) as { child_run_id: string }[];
  for (const { child_run_id } of rows) {
    yield* sql.put(`UPDATE spawn_queue SET state = 'cancelled' WHERE child_run_id = ?`, child_run_id);
    const child = yield* runRow(context, child_run_id);
    yield* finish(
      context,
      child,
      child.generation,
      0,
      'cancelled',
      null,
      'cancelled by a rewind of its parent',
      input.now,
      [],
    );
  }
  return { cancelled: rows.map((row) => row.child_run_id) };
}
