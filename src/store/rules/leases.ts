/**
 * The leases and admission rules: a root made and leased, a lease taken, renewed and given
 * back, a queued child admitted, the runs a host claims (its own lapsed ones and the queue's,
 * within each tree's cap whichever host holds the rows), and a waiting parent's slot given
 * up and asked back. Every lease taken raises the run's generation, which fences every
 * earlier driver.
 */
import { ConflictError } from '../../errors.js';
import type { EventData } from '../../runtime/events.js';
import { processLiveness } from '../liveness.js';
import type { CreateRootInput, Fence, LeaseClaim } from '../records.js';
import type { Q } from '../sql.js';
import * as sql from '../sql.js';
import {
  fenced,
  HOLDING,
  INSERT_LEDGER,
  INSERT_RUN,
  type LedgerRow,
  type RuleContext,
  type RunRow,
  recordEvent,
  runRow,
} from './context.js';

/** A run a host took with {@link claim}: to drive from its last step (`resumed`), or from its start. */
export interface ClaimedRun {
  runId: string;
  rootId: string;
  address: string;
  generation: number;
  resumed: boolean;
}

const TAKE_LEASE = `UPDATE runs SET lease_owner = ?, lease_pid = ?, lease_host = ?, lease_expires_at = ?,
  generation = generation + 1, parked = 0 WHERE run_id = ? AND generation = ?`;

/**
 * The slots of tree `?` that are spoken for: its spawned agents holding one (as {@link HOLDING}
 * counts them) and the parents whose child has ended, waiting for one to go on (a free slot is
 * theirs before the queue's). One read a tree a claim; the claim counts what it takes on top.
 */
const SPOKEN_FOR = `SELECT COUNT(*) FILTER (WHERE parent_id IS NOT NULL AND parked = 0) AS holding,
  COUNT(*) FILTER (WHERE parked = 2) AS wanting
  FROM runs WHERE root_id = ? AND status = 'running' AND lease_owner IS NOT NULL`;

/** A tree's cap and the slots of it spoken for, as one claim sees them. */
interface Slots {
  cap: number | null;
  used: number;
}

const RENEW = 'UPDATE runs SET lease_expires_at = ? WHERE run_id = ? AND generation = ? AND lease_owner = ?';

export function* createRoot(context: RuleContext, input: CreateRootInput): Q<{ generation: number }> {
  const now = input.claim.now;
  yield* sql.put(
    INSERT_RUN,
    input.runId,
    input.runId,
    null,
    'root',
    0,
    '[]',
    'running',
    input.task,
    JSON.stringify(input.spec),
    null,
    now,
  );
  yield* sql.put(
    INSERT_LEDGER,
    input.runId,
    input.runId,
    input.ceilings.steps,
    input.ceilings.tokens,
    input.ceilings.wallMs,
    now,
    input.maxTotalAgents,
    input.maxConcurrentAgents,
    input.maxWaitSecs,
  );
  return yield* acquireLease(context, { runId: input.runId, ...input.claim });
}

/**
 * Takes the run's lease. A live owner whose lease has not lapsed is a Conflict; a
 * dead owner's lease is taken at once; the ttl decides only what liveness cannot.
 * Taking always raises the generation, which fences every earlier driver.
 */
export function* acquireLease(context: RuleContext, input: LeaseClaim & { runId: string }): Q<{ generation: number }> {
  return yield* takeLease(context, yield* runRow(context, input.runId), input);
}

/**
 * Takes the lease of `row`, as {@link acquireLease} does, the row read (and on PostgreSQL
 * locked) earlier in this transaction and changed since only in its status: nothing is
 * read again, so the claim that read it waits on nothing more for it.
 */
function* takeLease(context: RuleContext, row: RunRow, input: LeaseClaim): Q<{ generation: number }> {
  const previous = row.lease_owner;
  if (previous !== null && previous !== input.owner) {
    const liveness = processLiveness(row.lease_pid, row.lease_host, input.host);
    const expires = row.lease_expires_at ?? 0;
    if (liveness !== 'dead' && expires > input.now) {
      throw new ConflictError(row.run_id, {
        owner: previous,
        pid: row.lease_pid,
        host: row.lease_host,
        expiresAt: expires,
      });
    }
  }
  yield* sql.put(TAKE_LEASE, input.owner, input.pid, input.host, input.now + input.ttlMs, row.run_id, row.generation);
  const generation = row.generation + 1;
  yield* recordEvent(
    context,
    row,
    null,
    generation,
    { type: 'lease-taken', owner: input.owner, pid: input.pid, generation, previousOwner: previous },
    input.now,
  );
  return { generation };
}

/** Extends the leases this owner still holds; returns the ones it lost. */
export function* renewLeases(
  context: RuleContext,
  input: { owner: string; leases: { runId: string; generation: number }[]; expiresAt: number },
): Q<{
  lost: string[];
}> {
  const lost: string[] = [];
  for (const lease of input.leases) {
    if ((yield* sql.run(RENEW, input.expiresAt, lease.runId, lease.generation, input.owner)).changes === 1) continue;
    // Not renewed: the run ended under this lease (it gave the lease back), or another owner
    // took it, whether that owner is still driving it or has ended it since, or it is gone.
    const row = yield* sql.get<RunRow>(context.runById, lease.runId);
    if (!row || row.generation !== lease.generation) lost.push(lease.runId);
  }
  return { lost };
}

export function* releaseLease(context: RuleContext, fence: Fence): Q<void> {
  const row = yield* sql.get<RunRow>(context.runById, fence.runId);
  if (!row || row.generation !== fence.generation || row.lease_owner !== fence.owner) return;
  yield* sql.put('UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL WHERE run_id = ?', fence.runId);
}

/** Moves a queued child to running under this owner's lease, first in, first out. */
export function* admit(
  context: RuleContext,
  input: LeaseClaim & { childId: string },
): Q<{ status: 'admitted'; generation: number } | { status: 'gone' }> {
  const row = yield* runRow(context, input.childId);
  const moved = (yield* sql.run(ADMITTED, input.now, input.childId)).changes;
  // Cancelled, or admitted by another driver, since the supervisor read the queue.
  if (moved !== 1 || row.status !== 'queued') return { status: 'gone' };
  return { status: 'admitted', ...(yield* running(context, row, input)) };
}

const ADMITTED = `UPDATE spawn_queue SET state = 'admitted', admitted_at = ? WHERE child_run_id = ? AND state = 'queued'`;

/** A child out of the queue, `row` as read (locked) before: running under this owner's lease. */
function* running(context: RuleContext, row: RunRow, input: LeaseClaim): Q<{ generation: number }> {
  yield* sql.put(`UPDATE runs SET status = 'running' WHERE run_id = ?`, row.run_id);
  const lease = yield* takeLease(context, row, input);
  const started: EventData = { type: 'spawn-started', childId: row.run_id, address: row.address };
  yield* recordEvent(context, row, null, lease.generation, started, input.now);
  return lease;
}

/**
 * A queued child a claim read, moved to running under this owner's lease, as {@link admit}
 * moves it, with nothing read again: the claim read its row locked and its place in the
 * queue under the tree's lock, which every write that moves a child in or out of the queue
 * takes too, so both still stand.
 */
function* enterQueued(context: RuleContext, row: RunRow, input: LeaseClaim): Q<{ generation: number }> {
  yield* sql.put(ADMITTED, input.now, row.run_id);
  return yield* running(context, row, input);
}

/**
 * Takes runnable agents for a host, up to `limit`: first the runs of these trees that
 * are running under no live lease (their host died, or let them go), then the queue, first
 * in first out. Each tree's concurrency cap is counted from the rows, whichever host holds
 * them, so it holds across every host; a slot a parent waits to have back is kept for it.
 * On PostgreSQL the rows are read `FOR UPDATE SKIP LOCKED`, so two hosts claiming at once
 * never take the same run.
 */
export function* claim(
  context: RuleContext,
  input: LeaseClaim & { roots: string[]; limit: number; driving?: string[] },
): Q<{ claimed: ClaimedRun[] }> {
  const claimed: ClaimedRun[] = [];
  if (input.roots.length === 0 || input.limit < 1) return { claimed };
  const roots = input.roots.map(() => '?').join(', ');
  // A lapsed lease of this owner's own is taken again too (a claim whose answer was lost, a
  // release that failed), unless this owner drives that run now.
  const driving = input.driving ?? [];
  const notDriving = driving.length === 0 ? '' : ` AND run_id NOT IN (${driving.map(() => '?').join(', ')})`;
  // Both lists read in one wait (on PostgreSQL): the second's answer comes after the first's.
  const lapsed = yield* sql.putRows<RunRow>(
    `SELECT * FROM runs WHERE root_id IN (${roots}) AND status = 'running'
      AND (lease_owner IS NULL OR lease_expires_at <= ? OR (lease_owner <> ? AND lease_host = ?))${notDriving}
      ORDER BY created_at, run_id LIMIT ?${context.skipLocked}`,
    ...input.roots,
    input.now,
    input.owner,
    input.host,
    ...driving,
    input.limit * 4,
  );
  const queued = yield* sql.all<RunRow>(
    `SELECT runs.* FROM spawn_queue JOIN runs ON runs.run_id = spawn_queue.child_run_id
      WHERE spawn_queue.root_id IN (${roots}) AND spawn_queue.state = 'queued' AND runs.status = 'queued'
      ORDER BY spawn_queue.ordinal LIMIT ?${context.skipLockedRuns}`,
    ...input.roots,
    input.limit * 4,
  );
  // Read once a tree, when a run of it first needs a slot: the claim holds the tree's lock,
  // so nothing else changes the count meanwhile but what this claim takes.
  const slots = new Map<string, Slots>();
  const slotsOf = function* (rootId: string): Q<Slots> {
    let known = slots.get(rootId);
    if (!known) {
      // The tree's account and its count, in one wait (on PostgreSQL), whether it has a cap or not.
      const ledger = yield* sql.putRows<LedgerRow>(context.ledgerById, rootId);
      const counts = yield* sql.get<{ holding: number; wanting: number }>(SPOKEN_FOR, rootId);
      known = {
        cap: ledger()[0]?.max_concurrent_agents ?? null,
        used: Number(counts?.holding ?? 0) + Number(counts?.wanting ?? 0),
      };
      slots.set(rootId, known);
    }
    return known;
  };
  for (const row of [...lapsed(), ...queued]) {
    if (claimed.length >= input.limit) break;
    const wasRunning = row.status === 'running';
    // A lease on this host whose process is gone is taken at once; a live one stays its owner's.
    if (wasRunning && row.lease_owner !== null && (row.lease_expires_at ?? 0) > input.now) {
      if (processLiveness(row.lease_pid, row.lease_host, input.host) !== 'dead') continue;
    }
    // A run under a lease that holds its slot, or waits for it back, is counted already:
    // taking it over changes no count. Anything else needs a free slot (and is in neither count).
    const counted = wasRunning && row.lease_owner !== null && Number(row.parked) !== 1;
    const tree = row.parent_id !== null && !counted ? yield* slotsOf(row.root_id) : null;
    if (tree && tree.cap !== null && tree.used >= tree.cap) continue;
    // The row was read locked (`FOR UPDATE ... SKIP LOCKED`), so the lease is taken from it as read.
    // Taking the lease unparks the run: it holds a slot now.
    const { generation } = wasRunning ? yield* takeLease(context, row, input) : yield* enterQueued(context, row, input);
    claimed.push({ runId: row.run_id, rootId: row.root_id, address: row.address, generation, resumed: wasRunning });
    if (tree) tree.used++;
  }
  return { claimed };
}

/**
 * A parent waiting on a child gives its slot up (`park`), or asks for it back (`back`):
 * granted when the tree has a slot free, counted from the rows as {@link claim} counts;
 * otherwise it is marked as wanting one, which keeps the next free slot from the queue.
 */
export function* park(
  context: RuleContext,
  input: Fence & { want: 'park' | 'back'; now: number },
): Q<{ granted: boolean }> {
  const row = yield* fenced(context, input);
  if (input.want === 'park') {
    yield* sql.put('UPDATE runs SET parked = 1 WHERE run_id = ?', row.run_id);
    return { granted: true };
  }
  const ledger = yield* sql.get<LedgerRow>(context.ledgerById, row.root_id);
  const cap = ledger?.max_concurrent_agents ?? null;
  const holding = (yield* sql.get<{ n: number }>(HOLDING, row.root_id, row.run_id))?.n ?? 0;
  const granted = cap === null || Number(holding) < cap;
  yield* sql.put('UPDATE runs SET parked = ? WHERE run_id = ?', granted ? 0 : 2, row.run_id);
  return { granted };
}
