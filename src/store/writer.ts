/**
 * Every durable write the runtime makes, as operations on the one read-write
 * connection. Only the store actor calls these; each runs inside a savepoint the
 * actor opens, so an operation is all-or-nothing even when several share one
 * group-commit transaction. Every operation on a run is fenced: it checks the run's
 * lease generation and owner first and refuses, writing nothing, when they moved.
 */
import { ConflictError, ErrorCode, HarnessError, InvalidArgumentError, LeaseLostError } from '../errors.js';
import { type CeilingCrossing, clampToParent, drawCrossing, remaining } from '../runtime/budget.js';
import { GLOBAL_SCOPE, keyProblem, type NoteRecord, restated } from '../runtime/context/memory.js';
import {
  type DrawAmount,
  type EventData,
  type HarnessEvent,
  isTerminal,
  type QuestionKind,
  type RunStatus,
} from '../runtime/events.js';
import type { Completion } from '../runtime/provider.js';
import { processLiveness } from './liveness.js';
import { toNote } from './reader.js';
import type {
  CommitStepInput,
  CommitStepResult,
  CreateRootInput,
  EndRunInput,
  Fence,
  IntentBegin,
  IntentInput,
  LeaseClaim,
  ModelCallRecord,
  Notifications,
  QuestionInput,
  RememberInput,
  RememberResult,
  RestorePointInput,
  SentMessage,
  SpawnInput,
  SpawnResult,
} from './records.js';
import type { Q } from './sql.js';
import * as sql from './sql.js';

export type {
  CommitStepInput,
  CommitStepResult,
  CreateRootInput,
  EndRunInput,
  Fence,
  FileDiff,
  IntentBegin,
  IntentInput,
  LeaseClaim,
  ModelCallRecord,
  Notifications,
  Observation,
  QuestionInput,
  RestorePointInput,
  RunSpec,
  SentMessage,
  SpawnInput,
  SpawnResult,
} from './records.js';

export function emptyNotifications(): Notifications {
  return { events: [], mail: [], spawned: [], ended: [] };
}

interface RunRow {
  run_id: string;
  root_id: string;
  /** 0: holds its slot; 1: a parent waiting on a child, its slot given up; 2: wants it back. */
  parked: number;
  parent_id: string | null;
  address: string;
  depth: number;
  ancestry: string;
  status: RunStatus;
  task: string;
  spec: string;
  spawn_key: string | null;
  last_seq: number;
  children: number;
  lease_owner: string | null;
  lease_pid: number | null;
  lease_host: string | null;
  lease_expires_at: number | null;
  generation: number;
}

interface LedgerRow {
  run_id: string;
  max_steps: number | null;
  max_tokens: number | null;
  max_wall_ms: number | null;
  steps_spent: number;
  tokens_spent: number;
  started_at: number;
  max_total_agents: number | null;
  max_concurrent_agents: number | null;
  max_wait_secs: number;
  spawned: number;
}

const ADDRESS = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
/** How much of a child's reply its finishing line to the parent carries. */
const LINE_REPLY_CHARS = 200;

type Row = Record<string, unknown>;

/** A run a host took with {@link WriteRules.claim}: to drive from its last step (`resumed`), or from its start. */
export interface ClaimedRun {
  runId: string;
  rootId: string;
  address: string;
  generation: number;
  resumed: boolean;
}

const INSERT_EVENT =
  'INSERT INTO events (root_id, run_id, seq, generation, type, data, at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING event_id';
const INSERT_RUN = `INSERT INTO runs (run_id, root_id, parent_id, address, depth, ancestry, status, task, spec, spawn_key, created_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;
const INSERT_LEDGER = `INSERT INTO ledger (run_id, root_id, max_steps, max_tokens, max_wall_ms, started_at, max_total_agents, max_concurrent_agents, max_wait_secs)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`;
const TAKE_LEASE = `UPDATE runs SET lease_owner = ?, lease_pid = ?, lease_host = ?, lease_expires_at = ?,
  generation = generation + 1, parked = 0 WHERE run_id = ? AND generation = ?`;
/**
 * A tree's spawned agents that hold a slot now, on whichever host: running under a lease,
 * and not parked on a child. (The root does not count against the cap.) A lease that has
 * lapsed still counts: its host may only be slow and renew it, and a claim takes such runs
 * over before it admits anything new, so a lapsed run keeps its slot through a takeover.
 */
const HOLDING = `SELECT COUNT(*) AS n FROM runs WHERE root_id = ? AND parent_id IS NOT NULL AND status = 'running'
  AND lease_owner IS NOT NULL AND parked = 0 AND run_id <> ?`;
/** Parents whose child has ended, waiting for a slot to go on: a free slot is theirs before the queue's. */
const WANTING = `SELECT COUNT(*) AS n FROM runs WHERE root_id = ? AND status = 'running'
  AND lease_owner IS NOT NULL AND parked = 2 AND run_id <> ?`;
/**
 * A draw charged to one account, with the account as it stands after it: the rule that
 * says whether it may stand is drawCrossing (runtime/budget.ts), and a draw that crosses
 * a ceiling is rolled back (see #draw).
 */
const DRAW = `UPDATE ledger SET steps_spent = steps_spent + ?, tokens_spent = tokens_spent + ?
  WHERE run_id = ? RETURNING max_steps, max_tokens, steps_spent, tokens_spent`;
const INSERT_DRAW =
  'INSERT INTO draws (draw_id, root_id, run_id, seq, generation, steps, tokens, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)';
const INSERT_STEP =
  'INSERT INTO steps (run_id, seq, generation, completion, observations, usage, at) VALUES (?, ?, ?, ?, ?, ?, ?)';
const STEP_EXISTS = 'SELECT 1 AS one FROM steps WHERE run_id = ? AND seq = ?';
const CONSUME = `UPDATE mailbox SET consumed_by = ?, consumed_seq = ?, consumed_generation = ?
  WHERE msg_id = ? AND root_id = ? AND to_address = ? AND consumed_by IS NULL`;
const INSERT_MESSAGE = `INSERT INTO mailbox (msg_id, root_id, from_run, from_address, to_address, body, sent_seq, sent_generation)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?)`;
const ADDRESS_EXISTS = 'SELECT run_id FROM runs WHERE root_id = ? AND address = ?';
const ADVANCE_RUN = 'UPDATE runs SET last_seq = ? WHERE run_id = ?';
const UPSERT_CHECKPOINT = `INSERT INTO checkpoints (run_id, seq, generation, state, at) VALUES (?, ?, ?, ?, ?)
  ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, generation = excluded.generation, state = excluded.state, at = excluded.at`;
const END_RUN =
  'UPDATE runs SET status = ?, reply = ?, outcome = ?, ended_at = ?, lease_owner = NULL, lease_expires_at = NULL WHERE run_id = ?';
const RUN_BY_SPAWN_KEY = 'SELECT * FROM runs WHERE spawn_key = ?';
const RUN_BY_ADDRESS = 'SELECT * FROM runs WHERE root_id = ? AND address = ?';
const PENDING_CHILDREN = `SELECT * FROM runs WHERE parent_id = ? AND status = 'pending' AND substr(spawn_key, 1, ?) = ?`;
const INSERT_CALL = `INSERT INTO model_calls (root_id, run_id, seq, attempt, generation, provider, model, outcome, status_code, input_tokens,
  output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, latency_ms, ttft_ms, usage_reported, at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;
const COUNT_CHILDREN = 'UPDATE runs SET children = children + 1 WHERE run_id = ?';
const COUNT_TREE = 'UPDATE ledger SET spawned = spawned + 1 WHERE run_id = ?';
const RENEW = 'UPDATE runs SET lease_expires_at = ? WHERE run_id = ? AND generation = ? AND lease_owner = ?';
const ENQUEUE = 'INSERT INTO spawn_queue (child_run_id, root_id, parent_id, state, enqueued_at) VALUES (?, ?, ?, ?, ?)';

/**
 * The rules of every write, for either backend: each operation a generator that yields
 * the statements it needs (see sql.ts). The SQLite backend runs them synchronously
 * ({@link sqliteWriter}); the PostgreSQL one awaits each statement.
 */
export class WriteRules {
  /** A run's row, and a tree's account, locked for the rest of the transaction where the database has row locks. */
  readonly #runById: string;
  readonly #ledgerById: string;
  #pending: Notifications = emptyNotifications();

  /**
   * `lockRows`: read the rows a write decides on `FOR UPDATE` (PostgreSQL, where several
   * hosts write at once). SQLite's one writer at a time needs no row locks.
   */
  /** What a claim adds to the rows it reads to take: PostgreSQL skips the rows another host holds. */
  readonly #skipLocked: string;
  readonly #skipLockedRuns: string;

  constructor(options: { lockRows?: boolean } = {}) {
    const lock = options.lockRows ? ' FOR UPDATE' : '';
    this.#skipLocked = options.lockRows ? ' FOR UPDATE SKIP LOCKED' : '';
    this.#skipLockedRuns = options.lockRows ? ' FOR UPDATE OF runs SKIP LOCKED' : '';
    this.#runById = `SELECT * FROM runs WHERE run_id = ?${lock}`;
    this.#ledgerById = `SELECT * FROM ledger WHERE run_id = ?${lock}`;
  }
  /** Hands over what the operations since the last call changed. */
  takeNotifications(): Notifications {
    const out = this.#pending;
    this.#pending = emptyNotifications();
    return out;
  }

  /** Forgets what a rolled-back operation would have announced. */
  markNotifications(): number[] {
    const p = this.#pending;
    return [p.events.length, p.mail.length, p.spawned.length, p.ended.length];
  }

  rollbackNotifications(mark: number[]): void {
    const p = this.#pending;
    p.events.length = mark[0] as number;
    p.mail.length = mark[1] as number;
    p.spawned.length = mark[2] as number;
    p.ended.length = mark[3] as number;
  }

  *#event(run: RunRow, seq: number | null, generation: number, data: EventData, at: number): Q<void> {
    const { type, ...rest } = data;
    const info = yield* sql.get<{ event_id: number }>(
      INSERT_EVENT,
      run.root_id,
      run.run_id,
      seq,
      generation,
      type,
      JSON.stringify(rest),
      at,
    );
    this.#pending.events.push({
      ...data,
      eventId: Number(info?.event_id),
      rootId: run.root_id,
      runId: run.run_id,
      seq,
      generation,
      at,
    } as HarnessEvent);
  }

  *#run(runId: string): Q<RunRow> {
    const row = yield* sql.get<RunRow>(this.#runById, runId);
    if (!row)
      throw new HarnessError(
        ErrorCode.RunNotFound,
        `no run ${runId} in this store; check the id (runs are listed by TraceReader.runs()).`,
      );
    return row;
  }

  *#fence(fence: Fence): Q<RunRow> {
    const row = yield* this.#run(fence.runId);
    if (row.generation !== fence.generation || row.lease_owner !== fence.owner) {
      throw new LeaseLostError(fence.runId, fence.generation, row.generation);
    }
    return row;
  }

  *createRoot(input: CreateRootInput): Q<{ generation: number }> {
    const now = input.claim.now;
    yield* sql.run(
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
    yield* sql.run(
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
    return yield* this.acquireLease({ runId: input.runId, ...input.claim });
  }

  /**
   * Takes the run's lease. A live owner whose lease has not lapsed is a Conflict; a
   * dead owner's lease is taken at once; the ttl decides only what liveness cannot.
   * Taking always raises the generation, which fences every earlier driver.
   */
  *acquireLease(input: LeaseClaim & { runId: string }): Q<{ generation: number }> {
    const row = yield* this.#run(input.runId);
    const previous = row.lease_owner;
    if (previous !== null && previous !== input.owner) {
      const liveness = processLiveness(row.lease_pid, row.lease_host, input.host);
      const expires = row.lease_expires_at ?? 0;
      if (liveness !== 'dead' && expires > input.now) {
        throw new ConflictError(input.runId, {
          owner: previous,
          pid: row.lease_pid,
          host: row.lease_host,
          expiresAt: expires,
        });
      }
    }
    yield* sql.run(
      TAKE_LEASE,
      input.owner,
      input.pid,
      input.host,
      input.now + input.ttlMs,
      input.runId,
      row.generation,
    );
    const generation = row.generation + 1;
    yield* this.#event(
      row,
      null,
      generation,
      { type: 'lease-taken', owner: input.owner, pid: input.pid, generation, previousOwner: previous },
      input.now,
    );
    return { generation };
  }

  /** Extends the leases this owner still holds; returns the ones it lost. */
  *renewLeases(input: { owner: string; leases: { runId: string; generation: number }[]; expiresAt: number }): Q<{
    lost: string[];
  }> {
    const lost: string[] = [];
    for (const lease of input.leases) {
      if ((yield* sql.run(RENEW, input.expiresAt, lease.runId, lease.generation, input.owner)).changes === 1) continue;
      // A run that ended gave its lease back; only a run still going under another generation is lost.
      const row = yield* sql.get<RunRow>(this.#runById, lease.runId);
      if (row && row.status === 'running' && row.generation !== lease.generation) {
        lost.push(lease.runId);
      }
    }
    return { lost };
  }

  *releaseLease(fence: Fence): Q<void> {
    const row = yield* sql.get<RunRow>(this.#runById, fence.runId);
    if (!row || row.generation !== fence.generation || row.lease_owner !== fence.owner) return;
    yield* sql.run('UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL WHERE run_id = ?', fence.runId);
  }

  /** Moves a queued child to running under this owner's lease, first in, first out. */
  *admit(input: LeaseClaim & { childId: string }): Q<{ status: 'admitted'; generation: number } | { status: 'gone' }> {
    const row = yield* this.#run(input.childId);
    const moved = (yield* sql.run(
      `UPDATE spawn_queue SET state = 'admitted', admitted_at = ? WHERE child_run_id = ? AND state = 'queued'`,
      input.now,
      input.childId,
    )).changes;
    // Cancelled, or admitted by another driver, since the supervisor read the queue.
    if (moved !== 1 || row.status !== 'queued') return { status: 'gone' };
    yield* sql.run(`UPDATE runs SET status = 'running' WHERE run_id = ?`, input.childId);
    const lease = yield* this.acquireLease({ runId: input.childId, ...input });
    yield* this.#event(
      row,
      null,
      lease.generation,
      { type: 'spawn-started', childId: row.run_id, address: row.address },
      input.now,
    );
    return { status: 'admitted', generation: lease.generation };
  }

  /**
   * Takes runnable agents for a host, up to `limit`: first the runs of these trees that
   * are running under no live lease (their host died, or let them go), then the queue, first
   * in first out. Each tree's concurrency cap is counted from the rows, whichever host holds
   * them, so it holds across every host; a slot a parent waits to have back is kept for it.
   * On PostgreSQL the rows are read `FOR UPDATE SKIP LOCKED`, so two hosts claiming at once
   * never take the same run.
   */
  *claim(input: LeaseClaim & { roots: string[]; limit: number; driving?: string[] }): Q<{ claimed: ClaimedRun[] }> {
    const claimed: ClaimedRun[] = [];
    if (input.roots.length === 0 || input.limit < 1) return { claimed };
    const roots = input.roots.map(() => '?').join(', ');
    // A lapsed lease of this owner's own is taken again too (a claim whose answer was lost, a
    // release that failed), unless this owner drives that run now.
    const driving = input.driving ?? [];
    const notDriving = driving.length === 0 ? '' : ` AND run_id NOT IN (${driving.map(() => '?').join(', ')})`;
    const lapsed = yield* sql.all<RunRow>(
      `SELECT * FROM runs WHERE root_id IN (${roots}) AND status = 'running'
        AND (lease_owner IS NULL OR lease_expires_at <= ? OR (lease_owner <> ? AND lease_host = ?))${notDriving}
        ORDER BY created_at, run_id LIMIT ?${this.#skipLocked}`,
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
        ORDER BY spawn_queue.ordinal LIMIT ?${this.#skipLockedRuns}`,
      ...input.roots,
      input.limit * 4,
    );
    const full = new Set<string>();
    for (const row of [...lapsed, ...queued]) {
      if (claimed.length >= input.limit) break;
      const wasRunning = row.status === 'running';
      // A lease on this host whose process is gone is taken at once; a live one stays its owner's.
      if (wasRunning && row.lease_owner !== null && (row.lease_expires_at ?? 0) > input.now) {
        if (processLiveness(row.lease_pid, row.lease_host, input.host) !== 'dead') continue;
      }
      // A run under a lease that holds its slot, or waits for it back, is counted already:
      // taking it over changes no count. Anything else needs a free slot.
      const counted = wasRunning && row.lease_owner !== null && Number(row.parked) !== 1;
      if (row.parent_id !== null && !counted) {
        if (full.has(row.root_id)) continue;
        const ledger = yield* sql.get<LedgerRow>(this.#ledgerById, row.root_id);
        const cap = ledger?.max_concurrent_agents ?? null;
        if (cap !== null) {
          const holding = (yield* sql.get<{ n: number }>(HOLDING, row.root_id, row.run_id))?.n ?? 0;
          const wanting = (yield* sql.get<{ n: number }>(WANTING, row.root_id, row.run_id))?.n ?? 0;
          if (Number(holding) + Number(wanting) >= cap) {
            full.add(row.root_id);
            continue;
          }
        }
      }
      if (wasRunning) {
        const { generation } = yield* this.acquireLease({ runId: row.run_id, ...input });
        claimed.push({ runId: row.run_id, rootId: row.root_id, address: row.address, generation, resumed: true });
      } else {
        const admitted = yield* this.admit({ childId: row.run_id, ...input });
        if (admitted.status === 'admitted')
          claimed.push({
            runId: row.run_id,
            rootId: row.root_id,
            address: row.address,
            generation: admitted.generation,
            resumed: false,
          });
      }
    }
    return { claimed };
  }

  /**
   * A parent waiting on a child gives its slot up (`park`), or asks for it back (`back`):
   * granted when the tree has a slot free, counted from the rows as {@link claim} counts;
   * otherwise it is marked as wanting one, which keeps the next free slot from the queue.
   */
  *park(input: Fence & { want: 'park' | 'back'; now: number }): Q<{ granted: boolean }> {
    const row = yield* this.#fence(input);
    if (input.want === 'park') {
      yield* sql.run('UPDATE runs SET parked = 1 WHERE run_id = ?', row.run_id);
      return { granted: true };
    }
    const ledger = yield* sql.get<LedgerRow>(this.#ledgerById, row.root_id);
    const cap = ledger?.max_concurrent_agents ?? null;
    const holding = (yield* sql.get<{ n: number }>(HOLDING, row.root_id, row.run_id))?.n ?? 0;
    const granted = cap === null || Number(holding) < cap;
    yield* sql.run('UPDATE runs SET parked = ? WHERE run_id = ?', granted ? 0 : 2, row.run_id);
    return { granted };
  }

  /**
   * Creates a child, idempotently: the same spawn key returns the child it made
   * before. The total cap refuses; the child waits in the durable queue until the
   * supervisor admits it; its ceilings are clamped to what the parent has left.
   */
  /** `hint`, or `hint.2`, `hint.3` ... the first that is free and still an address; null when none is. */
  *#hinted(rootId: string, hint: string): Q<string | null> {
    for (let n = 1; n < 10_000; n++) {
      const address = n === 1 ? hint : `${hint}.${n}`;
      if (!ADDRESS.test(address)) return null;
      if (!(yield* sql.get(ADDRESS_EXISTS, rootId, address))) return address;
    }
    return null;
  }

  *#refuse(parent: RunRow, input: SpawnInput, rule: string, reason: string): Q<SpawnResult> {
    yield* this.#event(parent, null, input.generation, { type: 'spawn-refused', rule, reason }, input.now);
    return { status: 'refused', rule, reason };
  }

  *spawn(input: SpawnInput): Q<SpawnResult> {
    const parent = yield* this.#fence(input);
    const existing = yield* sql.get<RunRow>(RUN_BY_SPAWN_KEY, input.key);
    if (existing && existing.task === input.task && (input.as === null || input.as === existing.address)) {
      // The same step run again after a crash, asking the same: the child it made before.
      let childStatus = existing.status;
      if (input.queueNow && childStatus === 'pending') {
        yield* this.#release(parent, input.generation, null, existing, input.now);
        childStatus = 'queued';
      }
      return { status: 'existing', childId: existing.run_id, address: existing.address, clamps: [], childStatus };
    }
    if (existing) {
      // The re-run asked for something else at this call: the earlier child is not this one.
      yield* this.#detach(existing, input.now);
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
        yield* this.#detach(holder, input.now);
      }
    }
    const rootLedger = (yield* sql.get<LedgerRow>(this.#ledgerById, parent.root_id)) as LedgerRow;
    const spawned = rootLedger.spawned;
    const refuse = (rule: string, reason: string) => this.#refuse(parent, input, rule, reason);
    if (rootLedger.max_total_agents !== null && spawned + 1 > rootLedger.max_total_agents) {
      return yield* refuse(
        'maxTotalAgents',
        `this tree may hold at most ${rootLedger.max_total_agents} spawned agents and already has ${spawned}; finish with the agents you have.`,
      );
    }
    let address = input.as;
    if (address !== null) {
      if (!ADDRESS.test(address)) {
        return yield* refuse(
          'address',
          `address ${JSON.stringify(address)} is not valid: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit.`,
        );
      }
      if (yield* sql.get(ADDRESS_EXISTS, parent.root_id, address)) {
        return yield* refuse(
          'address',
          `address ${JSON.stringify(address)} is already taken in this tree; choose another "as".`,
        );
      }
    } else {
      // A roster agent is named for itself under its parent, numbered when taken; any other child by its number.
      const hinted = input.addressHint ? yield* this.#hinted(parent.root_id, input.addressHint) : null;
      if (hinted) address = hinted;
      else {
        let n = parent.children + 1;
        address = `${parent.address}.${n}`;
        while (yield* sql.get(ADDRESS_EXISTS, parent.root_id, address)) address = `${parent.address}.${++n}`;
      }
    }
    const parentLedger = (yield* sql.get<LedgerRow>(this.#ledgerById, parent.run_id)) as LedgerRow;
    const left = remaining(
      { steps: parentLedger.max_steps, tokens: parentLedger.max_tokens, wallMs: parentLedger.max_wall_ms },
      { steps: parentLedger.steps_spent, tokens: parentLedger.tokens_spent },
      parentLedger.started_at,
      input.now,
    );
    const { ceilings, clamps } = clampToParent(input.asked, left);
    const ancestry = [...(JSON.parse(parent.ancestry) as string[]), parent.run_id];
    yield* sql.run(
      INSERT_RUN,
      input.newRunId,
      parent.root_id,
      parent.run_id,
      address,
      parent.depth + 1,
      JSON.stringify(ancestry),
      input.queueNow ? 'queued' : 'pending',
      input.task,
      input.policy || input.system
        ? JSON.stringify({
            ...JSON.parse(parent.spec),
            ...(input.policy ? { policy: input.policy } : {}),
            ...(input.system ? { system: input.system } : {}),
          })
        : parent.spec,
      input.key,
      input.now,
    );
    const maxWait =
      input.maxWaitSecs === null ? parentLedger.max_wait_secs : Math.min(input.maxWaitSecs, parentLedger.max_wait_secs);
    yield* sql.run(
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
    yield* sql.run(
      ENQUEUE,
      input.newRunId,
      parent.root_id,
      parent.run_id,
      input.queueNow ? 'queued' : 'pending',
      input.now,
    );
    yield* sql.run(COUNT_CHILDREN, parent.run_id);
    yield* sql.run(COUNT_TREE, parent.root_id);
    if (input.queueNow) {
      yield* this.#event(
        parent,
        null,
        input.generation,
        { type: 'spawn-queued', childId: input.newRunId, address, task: input.task },
        input.now,
      );
      this.#pending.spawned.push({ rootId: parent.root_id, childId: input.newRunId });
    }
    if (clamps.length > 0) {
      yield* this.#event(
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
   * One step, all or nothing: the draw checked against every ceiling from the run
   * up to the root, the step row, the messages it consumed and sent, its events,
   * the checkpoint, and the run's end if this was its last step.
   */
  *commitStep(input: CommitStepInput): Q<CommitStepResult> {
    const run = yield* this.#fence(input);
    if (input.seq !== run.last_seq + 1) {
      if (yield* sql.get(STEP_EXISTS, input.runId, input.seq)) return { status: 'duplicate', seq: input.seq };
      throw new HarnessError(
        ErrorCode.StepOutOfOrder,
        `run ${input.runId}: step ${input.seq} cannot follow step ${run.last_seq}.`,
      );
    }
    const draw: DrawAmount = {
      steps: input.fold === true ? 0 : 1,
      tokens: input.usage.inputTokens + input.usage.outputTokens,
    };
    const chain = [...(JSON.parse(run.ancestry) as string[]), run.run_id];
    const refused = yield* this.#draw(chain, draw);
    if (refused !== null) {
      const { account, crossing } = refused;
      const { ceiling, spent, limit } = crossing;
      // The call happened even though its step cannot be charged: account for it.
      yield* this.#calls(run, input.seq, input.generation, input.calls, input.now);
      yield* this.#finish(
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
    yield* sql.run(
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
    yield* sql.run(
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
      yield* sql.run(
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
    for (const event of input.events) yield* this.#event(run, input.seq, gen, event, input.now);
    yield* this.#calls(run, input.seq, gen, input.calls, input.now);
    if (input.consumed.length > 0)
      yield* this.#event(run, input.seq, gen, { type: 'message-read', msgIds: input.consumed }, input.now);
    for (const [index, message] of input.sent.entries()) {
      // Ids name the sender by address, so the same tree run twice reads the same ids.
      yield* this.#send(run, input.seq, gen, `${run.address}:${input.seq}:${index}`, message, input.now);
    }
    yield* this.#settleSpawns(run, gen, input.seq, input.spawned, input.now);
    const root = (yield* sql.get<LedgerRow>(this.#ledgerById, run.root_id)) as LedgerRow;
    const treeSpent = { steps: root.steps_spent, tokens: root.tokens_spent };
    yield* this.#event(run, input.seq, gen, { type: 'spend', draw, treeSpent }, input.now);
    yield* this.#event(
      run,
      input.seq,
      gen,
      {
        type: 'step-end',
        toolCalls: input.completion.toolCalls.map((call) => call.name),
        inputTokens: input.usage.inputTokens,
        outputTokens: input.usage.outputTokens,
        cacheReadTokens: input.usage.cacheReadTokens ?? 0,
        cachedShare: input.usage.inputTokens > 0 ? (input.usage.cacheReadTokens ?? 0) / input.usage.inputTokens : 0,
        provider: input.completion.provider ?? null,
        model: input.completion.model,
      },
      input.now,
    );
    // The lease's expiry is the supervisor's to extend, on its injectable clock; a step does not touch it.
    yield* sql.run(ADVANCE_RUN, input.seq, run.run_id);
    yield* sql.run('DELETE FROM drafts WHERE run_id = ?', run.run_id);
    yield* sql.run('DELETE FROM step_images WHERE run_id = ? AND seq <= ?', run.run_id, input.seq);
    yield* sql.run(UPSERT_CHECKPOINT, run.run_id, input.seq, gen, JSON.stringify({ seq: input.seq }), input.now);
    if (input.final) {
      yield* this.#finish(
        run,
        gen,
        input.seq,
        input.final.status,
        input.final.reply,
        input.final.reason ?? 'the model gave its final answer',
        input.now,
        [],
      );
      return { status: 'committed', seq: input.seq, treeSpent };
    }
    // What a person sent the run while this step ran is taken at its end, the boundary.
    const taken = run.parent_id === null ? yield* this.#takeSteers(run, gen, input.seq, input.now) : null;
    if (taken?.interrupt) return { status: 'interrupted', seq: input.seq, treeSpent };
    return {
      status: 'committed',
      seq: input.seq,
      treeSpent,
      ...(taken?.steers.length ? { steers: taken.steers } : {}),
    };
  }

  /**
   * Takes what is waiting for a root run at the boundary after step `after` (0: before its
   * first): corrections, which come before the next step as the user's words, each recorded
   * as `steered`; and an interrupt, which ends the run as `interrupted` here, its committed
   * steps kept.
   */
  *#takeSteers(
    run: RunRow,
    generation: number,
    after: number,
    now: number,
  ): Q<{ steers: string[]; interrupt: boolean }> {
    const waiting = (yield* sql.all(
      'SELECT steer_id, kind, body, by_whom FROM steers WHERE run_id = ? AND taken_seq IS NULL ORDER BY steer_id',
      run.run_id,
    )) as { steer_id: number; kind: string; body: string | null; by_whom: string }[];
    const taken = { steers: [] as string[], interrupt: false };
    if (waiting.length === 0) return taken;
    const before = after + 1;
    const seq = after === 0 ? null : after;
    const interrupt = waiting.find((item) => item.kind === 'interrupt');
    if (interrupt) {
      // The run ends here: corrections sent with the interrupt are left untaken, reported as undelivered.
      yield* sql.run(
        `UPDATE steers SET taken_seq = ? WHERE run_id = ? AND kind = 'interrupt' AND taken_seq IS NULL`,
        before,
        run.run_id,
      );
      yield* this.#finish(run, generation, after, 'interrupted', null, `interrupted by ${interrupt.by_whom}`, now, []);
      return { steers: [], interrupt: true };
    }
    yield* sql.run('UPDATE steers SET taken_seq = ? WHERE run_id = ? AND taken_seq IS NULL', before, run.run_id);
    for (const item of waiting) {
      const text = item.body ?? '';
      taken.steers.push(text);
      yield* this.#event(run, seq, generation, { type: 'steered', text, before, by: item.by_whom }, now);
    }
    return taken;
  }

  /** Takes what waits for a root run as it starts (sent before its first step, or while it was paused or down). */
  *takeSteers(input: Fence & { now: number }): Q<{ steers: string[]; interrupt: boolean }> {
    const run = yield* this.#fence(input);
    if (run.parent_id !== null) return { steers: [], interrupt: false };
    return yield* this.#takeSteers(run, input.generation, run.last_seq, input.now);
  }

  /**
   * Sends a running root run a correction (`steer`, with its words) or an `interrupt`,
   * taken at its next step boundary. Refused, writing nothing, for a child (only the
   * root is steered) and for a run that has ended.
   */
  *steer(input: { runId: string; kind: 'steer' | 'interrupt'; text: string | null; by: string; now: number }): Q<{
    steerId: number;
  }> {
    const run = (yield* sql.get<RunRow>(this.#runById, input.runId)) as RunRow | undefined;
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
      yield* sql.run(
        `UPDATE steers SET taken_seq = ? WHERE run_id = ? AND kind = 'interrupt' AND taken_seq IS NULL`,
        run.last_seq + 1,
        run.run_id,
      );
      yield* this.#finish(
        run,
        run.generation,
        run.last_seq,
        'interrupted',
        null,
        `interrupted by ${input.by}`,
        input.now,
        [],
      );
      yield* this.cancelQueued({ rootId: run.root_id, now: input.now });
      yield* sql.run(
        `UPDATE turns SET status = 'interrupted', ended_at = ? WHERE turn_id = ?`,
        input.now,
        turn.turn_id,
      );
    }
    return { steerId: Number(row?.steer_id) };
  }

  /**
   * Ends a root run on its first completion when that completion is a reply (text, no tool
   * call): its tokens drawn on the tree's ledger (no step), its model call recorded, no
   * step row and no checkpoint. A draw that would cross a ceiling ends it as
   * budget-exhausted instead.
   */
  *endReply(input: Fence & { completion: Completion; calls: ModelCallRecord[]; events: EventData[]; now: number }): Q<{
    status: 'finished' | 'exhausted';
  }> {
    const run = yield* this.#fence(input);
    const usage = input.completion.usage;
    const draw: DrawAmount = { steps: 0, tokens: usage.inputTokens + usage.outputTokens };
    const seq = run.last_seq + 1;
    const chain = [...(JSON.parse(run.ancestry) as string[]), run.run_id];
    const refused = yield* this.#draw(chain, draw);
    if (refused !== null) {
      const { account, crossing } = refused;
      const { ceiling, spent, limit } = crossing;
      yield* this.#calls(run, seq, input.generation, input.calls, input.now);
      yield* this.#finish(
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
    yield* sql.run(
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
    yield* this.#calls(run, seq, input.generation, input.calls, input.now);
    const root = (yield* sql.get<LedgerRow>(this.#ledgerById, run.root_id)) as LedgerRow;
    const treeSpent = { steps: root.steps_spent, tokens: root.tokens_spent };
    yield* this.#finish(
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

  /**
   * Charges `draw` to every account of `chain` (a run and its ancestors), all or none: the
   * first account the draw would take over a ceiling ({@link drawCrossing}, the one rule)
   * stops it, and nothing of it stays charged.
   */
  *#draw(chain: readonly string[], draw: DrawAmount): Q<{ account: string; crossing: CeilingCrossing } | null> {
    yield* sql.run('SAVEPOINT draw');
    for (const id of chain) {
      const after = (yield* sql.get<LedgerRow>(DRAW, draw.steps, draw.tokens, id)) as LedgerRow;
      const crossing = drawCrossing(
        { steps: after.max_steps, tokens: after.max_tokens },
        { steps: after.steps_spent - draw.steps, tokens: after.tokens_spent - draw.tokens },
        draw,
      );
      if (crossing !== null) {
        yield* sql.run('ROLLBACK TO draw');
        yield* sql.run('RELEASE draw');
        return { account: id, crossing };
      }
    }
    yield* sql.run('RELEASE draw');
    return null;
  }

  /**
   * Queues the children this step reserved, and drops any child an earlier, uncommitted
   * attempt at the same step reserved and this one did not ask for again.
   */
  *#settleSpawns(run: RunRow, generation: number, seq: number, spawned: string[], now: number): Q<void> {
    const claimed = new Set(spawned);
    for (const childId of spawned) {
      const child = yield* sql.get<RunRow>(this.#runById, childId);
      if (child && child.parent_id === run.run_id && child.status === 'pending') {
        yield* this.#release(run, generation, seq, child, now);
      }
    }
    // Reserved by this step's key but not claimed: a call of an attempt that did not commit,
    // or one reserved ahead that the step stopped before (a cancel, the deadline).
    yield* this.#dropPending(
      run,
      `${run.run_id}:${seq}:`,
      now,
      claimed,
      'the call that spawned it is not in the step its parent committed',
    );
  }

  /** Cancels the reserved children of `run` whose spawn key starts with `prefix`, except `keep`. */
  *#dropPending(run: RunRow, prefix: string, now: number, keep: Set<string> = new Set(), reason?: string): Q<void> {
    for (const orphan of yield* sql.all<RunRow>(PENDING_CHILDREN, run.run_id, prefix.length, prefix)) {
      if (!keep.has(orphan.run_id)) yield* this.#detach(orphan, now, reason);
    }
  }

  /**
   * Unhooks a child from the spawn key (and, if it never started, the address) an
   * uncommitted step gave it, so a later attempt can use them. A child still pending
   * is cancelled and stops counting against the tree's total; one already started (a
   * waited-for spawn is an effect taken ahead of the commit) runs on, under its own id.
   */
  *#detach(child: RunRow, now: number, reason = 'the step that spawned it was not committed'): Q<void> {
    const suffix = `#dropped-${child.run_id.slice(0, 8)}`;
    if (child.status !== 'pending') {
      yield* sql.run('UPDATE runs SET spawn_key = spawn_key || ? WHERE run_id = ?', suffix, child.run_id);
      return;
    }
    yield* sql.run(
      'UPDATE runs SET spawn_key = spawn_key || ?, address = address || ? WHERE run_id = ?',
      suffix,
      suffix,
      child.run_id,
    );
    yield* sql.run(`UPDATE spawn_queue SET state = 'cancelled' WHERE child_run_id = ?`, child.run_id);
    yield* sql.run('UPDATE ledger SET spawned = spawned - 1 WHERE run_id = ?', child.root_id);
    yield* sql.run(END_RUN, 'cancelled', null, JSON.stringify({ status: 'cancelled', reason }), now, child.run_id);
    yield* this.#event(
      child,
      null,
      child.generation,
      { type: 'run-end', status: 'cancelled', reply: null, reason },
      now,
    );
    this.#pending.ended.push({ rootId: child.root_id, runId: child.run_id, status: 'cancelled' });
  }

  /** Moves a reserved child into the admission queue. */
  *#release(parent: RunRow, generation: number, seq: number | null, child: RunRow, now: number): Q<void> {
    yield* sql.run(`UPDATE runs SET status = 'queued' WHERE run_id = ?`, child.run_id);
    yield* sql.run(`UPDATE spawn_queue SET state = 'queued' WHERE child_run_id = ?`, child.run_id);
    yield* this.#event(
      parent,
      seq,
      generation,
      { type: 'spawn-queued', childId: child.run_id, address: child.address, task: child.task },
      now,
    );
    this.#pending.spawned.push({ rootId: parent.root_id, childId: child.run_id });
  }

  /** Records events that belong to no step (a run starting or resuming). */
  *recordEvents(input: Fence & { events: EventData[]; now: number }): Q<void> {
    const run = yield* this.#fence(input);
    for (const event of input.events) yield* this.#event(run, null, input.generation, event, input.now);
  }

  /** Ends a run without a step: a budget that ran out before the model was asked, a failure, a cancel. */
  *#calls(run: RunRow, seq: number, generation: number, calls: ModelCallRecord[] | undefined, now: number): Q<void> {
    for (const [attempt, call] of (calls ?? []).entries()) {
      yield* sql.run(
        INSERT_CALL,
        run.root_id,
        run.run_id,
        seq,
        attempt,
        generation,
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
        now,
      );
    }
  }

  *endRun(input: EndRunInput): Q<void> {
    const run = yield* this.#fence(input);
    yield* this.#calls(run, run.last_seq + 1, input.generation, input.calls, input.now);
    yield* this.#finish(
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
  *recordRestorePoint(input: RestorePointInput): Q<{ created: boolean }> {
    const run = yield* this.#fence(input);
    // The step's own image too: what the file held before this step first wrote it.
    yield* sql.run(
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
  *clearStepImages(input: Fence & { seq: number; paths: string[]; now: number }): Q<void> {
    const run = yield* this.#fence(input);
    yield* sql.run('DELETE FROM step_images WHERE run_id = ? AND seq = ?', run.run_id, input.seq);
    yield* this.#event(run, input.seq, input.generation, { type: 'step-rolled-back', paths: input.paths }, input.now);
  }

  /** Keeps the completion a step acts on, once its first effect begins; a re-run of the step reuses it. */
  *#draft(run: RunRow, seq: number, generation: number, completion: Completion, now: number): Q<void> {
    yield* sql.run(
      'INSERT INTO drafts (run_id, seq, generation, completion, at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING',
      run.run_id,
      seq,
      generation,
      JSON.stringify(completion),
      now,
    );
  }

  /**
   * Journals an effect the runtime cannot inspect or undo before it starts. The answer
   * says whether it may start, already ran (its result stands), or was interrupted.
   * `again` replaces an interrupted one the operator chose to retry.
   */
  *beginIntent(input: IntentInput): Q<IntentBegin> {
    const run = yield* this.#fence(input);
    yield* this.#draft(run, input.seq, input.generation, input.completion, input.now);
    const existing = (yield* sql.get('SELECT * FROM intents WHERE effect_key = ?', input.key)) as
      | { result: string | null; started_at: number }
      | undefined;
    if (existing && existing.result !== null) return { status: 'done', result: existing.result };
    if (existing && !input.again) return { status: 'in-flight', startedAt: existing.started_at };
    yield* sql.run(
      `INSERT INTO intents (effect_key, run_id, seq, generation, kind, detail, started_at, result, finished_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL)
         ON CONFLICT (effect_key) DO UPDATE SET run_id = excluded.run_id, seq = excluded.seq, generation = excluded.generation,
           kind = excluded.kind, detail = excluded.detail, started_at = excluded.started_at, result = NULL, finished_at = NULL`,
      input.key,
      run.run_id,
      input.seq,
      input.generation,
      input.kind,
      input.detail,
      input.now,
    );
    yield* this.#event(
      run,
      input.seq,
      input.generation,
      { type: 'intent-started', key: input.key, kind: input.kind, detail: input.detail },
      input.now,
    );
    return { status: 'started' };
  }

  /** Records how a journaled effect ended. */
  *finishIntent(input: Fence & { seq: number; key: string; result: string; outcome: string; now: number }): Q<void> {
    const run = yield* this.#fence(input);
    yield* sql.run(
      'UPDATE intents SET result = ?, finished_at = ? WHERE effect_key = ? AND result IS NULL',
      input.result,
      input.now,
      input.key,
    );
    yield* this.#event(
      run,
      input.seq,
      input.generation,
      { type: 'intent-finished', key: input.key, outcome: input.outcome },
      input.now,
    );
  }

  /**
   * Stops a run to wait on a person: the question is stored (the first asking wins), the
   * step in progress is kept as a draft for the resume, and the lease is given back.
   */
  *pause(
    input: Fence & {
      seq: number;
      completion: Completion;
      partial: unknown;
      question: QuestionInput;
      events: EventData[];
      now: number;
    },
  ): Q<void> {
    const run = yield* this.#fence(input);
    yield* this.#draft(run, input.seq, input.generation, input.completion, input.now);
    yield* sql.run('UPDATE drafts SET partial = ? WHERE run_id = ?', JSON.stringify(input.partial), run.run_id);
    const q = input.question;
    yield* sql.run(
      `INSERT INTO questions (question_id, root_id, run_id, seq, kind, payload, status, created_at)
         VALUES (?, ?, ?, ?, ?, ?, 'open', ?) ON CONFLICT DO NOTHING`,
      q.questionId,
      run.root_id,
      run.run_id,
      input.seq,
      q.kind,
      JSON.stringify(q.payload),
      input.now,
    );
    for (const event of input.events) yield* this.#event(run, input.seq, input.generation, event, input.now);
    yield* this.#event(
      run,
      input.seq,
      input.generation,
      { type: 'run-paused', questionId: q.questionId, kind: q.kind, summary: q.summary },
      input.now,
    );
    yield* sql.run(
      `UPDATE runs SET status = 'paused', lease_owner = NULL, lease_expires_at = NULL WHERE run_id = ?`,
      run.run_id,
    );
    // A parent waiting on this run hears that it stopped.
    this.#pending.ended.push({ rootId: run.root_id, runId: run.run_id, status: 'paused' });
  }

  /**
   * Answers an open question. A compare-and-swap on the row: the first answer wins, and
   * a second is refused naming the first (CONFLICT), so two operators never both decide.
   */
  *answer(input: {
    questionId: string;
    answer: unknown;
    by: string;
    now: number;
  }): Q<{ runId: string; rootId: string }> {
    const row = (yield* sql.get('SELECT * FROM questions WHERE question_id = ?', input.questionId)) as
      | {
          run_id: string;
          root_id: string;
          kind: QuestionKind;
          status: string;
          answered_by: string | null;
          answer: string | null;
        }
      | undefined;
    if (!row) {
      throw new HarnessError(
        ErrorCode.QuestionNotFound,
        `no question ${input.questionId} in this store; list the open ones with store.questions({ status: 'open' }).`,
        { details: { questionId: input.questionId } },
      );
    }
    checkAnswer(row.kind, input.answer);
    const changed = (yield* sql.run(
      `UPDATE questions SET status = 'answered', answer = ?, answered_by = ?, answered_at = ? WHERE question_id = ? AND status = 'open'`,
      JSON.stringify(input.answer),
      input.by,
      input.now,
      input.questionId,
    )).changes;
    if (changed !== 1) {
      const current = (yield* sql.get(
        'SELECT answer, answered_by FROM questions WHERE question_id = ?',
        input.questionId,
      )) as {
        answer: string;
        answered_by: string;
      };
      throw new HarnessError(
        ErrorCode.AlreadyAnswered,
        `question ${input.questionId} was already answered by ${current.answered_by} (${current.answer}); the first answer stands and yours was not recorded.`,
        {
          details: {
            questionId: input.questionId,
            answeredBy: current.answered_by,
            answer: JSON.parse(current.answer),
          },
        },
      );
    }
    const run = yield* this.#run(row.run_id);
    yield* this.#event(
      run,
      null,
      run.generation,
      { type: 'question-answered', questionId: input.questionId, kind: row.kind, answer: input.answer, by: input.by },
      input.now,
    );
    return { runId: row.run_id, rootId: row.root_id };
  }

  /**
   * Takes a paused run back up when nothing it waits on is still open: it becomes
   * running under a new lease. Otherwise it stays paused and the open questions are named.
   */
  *resumePaused(
    input: LeaseClaim & { runId: string },
  ): Q<{ status: 'resumed'; generation: number } | { status: 'waiting'; open: string[] }> {
    const open = (
      (yield* sql.all(
        `SELECT question_id FROM questions WHERE run_id = ? AND status = 'open' ORDER BY created_at`,
        input.runId,
      )) as { question_id: string }[]
    ).map((row) => row.question_id);
    if (open.length > 0) return { status: 'waiting', open };
    const run = yield* this.#run(input.runId);
    if (run.status !== 'paused') return { status: 'waiting', open: [] };
    yield* sql.run(`UPDATE runs SET status = 'running' WHERE run_id = ?`, input.runId);
    const { generation } = yield* this.acquireLease(input);
    return { status: 'resumed', generation };
  }

  /**
   * Cancels the children a run left waiting (reserved or queued, never started): the
   * spawn backlog a whole-run rewind takes back. Steps, events and the ledger stay.
   */
  *dropBacklog(input: { runId: string; now: number }): Q<{ cancelled: string[] }> {
    const rows = (yield* sql.all(
      `SELECT child_run_id FROM spawn_queue WHERE parent_id = ? AND state IN ('pending', 'queued') ORDER BY ordinal`,
      input.runId,
    )) as { child_run_id: string }[];
    for (const { child_run_id } of rows) {
      yield* sql.run(`UPDATE spawn_queue SET state = 'cancelled' WHERE child_run_id = ?`, child_run_id);
      const child = yield* this.#run(child_run_id);
      yield* this.#finish(
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

  /**
   * Records a gate evaluated again after the run ended (`retryGate`), and moves a run
   * that ended on its gate to `finished` when the gate now passes. Only a run that is
   * over and not leased can be re-gated.
   */
  *regate(input: { runId: string; events: EventData[]; passed: boolean; reply: string | null; now: number }): Q<{
    status: RunStatus;
  }> {
    const run = yield* this.#run(input.runId);
    if (run.status !== 'gate-failed' && run.status !== 'finished') {
      throw new HarnessError(
        ErrorCode.RunStillLive,
        `run ${input.runId} is ${run.status}; only a run that ended on its gate (or finished) can have its gate retried.`,
        { details: { runId: input.runId, status: run.status } },
      );
    }
    for (const event of input.events) yield* this.#event(run, null, run.generation, event, input.now);
    if (input.passed && run.status === 'gate-failed') {
      yield* this.#finish(
        run,
        run.generation,
        run.last_seq,
        'finished',
        input.reply,
        'the gate passed when retried',
        input.now,
        [],
      );
      return { status: 'finished' };
    }
    return { status: run.status };
  }

  /**
   * Writes a note under its key in its scope. A run may not overwrite a pinned note; a new
   * key in a scope at its cap takes the place of the unpinned note the fewest separate runs
   * have drawn on (the oldest of those), not the oldest note. Says which note it restates,
   * under another key of its scope or the global one.
   */
  *remember(input: RememberInput): Q<RememberResult> {
    const problem = keyProblem(input.key);
    if (problem) throw new InvalidArgumentError(`remember: ${problem}.`);
    if (input.by) {
      yield* this.#fence(input.by);
      // The global scope and pinning are the embedder's: a run writes its workspace's notes only.
      if (input.scope === GLOBAL_SCOPE || input.pin !== undefined)
        throw new InvalidArgumentError('remember: a run writes its own workspace’s notes, unpinned.');
    }
    const existing = yield* this.#note(input.scope, input.key);
    if (existing?.pinned && input.by) return { status: 'pinned', note: existing };
    // A pinned global note is a correction for every workspace: a run may not shadow it either.
    const above = input.by ? yield* this.#note(GLOBAL_SCOPE, input.key) : null;
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
        const least = yield* this.#leastDrawn(input.scope, input.by?.runId ?? null);
        if (!least) return { status: 'full', cap: input.cap };
        evicted = least;
        yield* this.#dropNote(least.id);
      }
    }
    const pinned = input.pin ?? existing?.pinned ?? false;
    const by = input.by?.runId ?? null;
    if (existing)
      yield* sql.run(
        'UPDATE memory_notes SET kind = ?, body = ?, pinned = ?, written_by = ?, updated_at = ? WHERE note_id = ?',
        input.kind,
        input.text,
        pinned ? 1 : 0,
        by,
        input.now,
        existing.id,
      );
    else
      yield* sql.run(
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
    const note = (yield* this.#note(input.scope, input.key)) as NoteRecord;
    return { status: 'written', note, replaced: existing !== null, evicted, restates };
  }

  /**
   * The unpinned note of a scope the fewest separate runs have drawn on (the oldest of
   * those). A run's own notes go last: its next note does not push out the one it just wrote.
   */
  *#leastDrawn(scope: string, runId: string | null): Q<NoteRecord | null> {
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
  *forget(input: { scope: string; key: string; by: Fence | null; now: number }): Q<{
    status: 'forgotten' | 'absent' | 'pinned';
  }> {
    if (input.by) {
      yield* this.#fence(input.by);
      if (input.scope === GLOBAL_SCOPE)
        throw new InvalidArgumentError('forget: a run forgets its own workspace’s notes only.');
    }
    const note = yield* this.#note(input.scope, input.key);
    if (!note) return { status: 'absent' };
    if (note.pinned && input.by) return { status: 'pinned' };
    yield* this.#dropNote(note.id);
    return { status: 'forgotten' };
  }

  /** Pins a note (no run may overwrite or forget it) or unpins it: the embedder's alone. */
  *pinNote(input: { scope: string; key: string; pinned: boolean; now: number }): Q<{ status: 'done' | 'absent' }> {
    const note = yield* this.#note(input.scope, input.key);
    if (!note) return { status: 'absent' };
    yield* sql.run(
      'UPDATE memory_notes SET pinned = ?, updated_at = ? WHERE note_id = ?',
      input.pinned ? 1 : 0,
      input.now,
      note.id,
    );
    return { status: 'done' };
  }

  /** Records that a run drew on notes; each note counts a run once, however often it draws. */
  *drawNotes(input: { by: Fence; noteIds: number[]; how: 'block' | 'recall'; now: number }): Q<{ drawn: number }> {
    yield* this.#fence(input.by);
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
      yield* sql.run('UPDATE memory_notes SET runs = runs + 1 WHERE note_id = ?', id);
      drawn++;
    }
    return { drawn };
  }

  *#note(scope: string, key: string): Q<NoteRecord | null> {
    const row = (yield* sql.get('SELECT * FROM memory_notes WHERE scope = ? AND key = ?', scope, key)) as
      | Row
      | undefined;
    return row ? toNote(row) : null;
  }

  *#dropNote(id: number): Q<void> {
    yield* sql.run('DELETE FROM memory_draws WHERE note_id = ?', id);
    yield* sql.run('DELETE FROM memory_notes WHERE note_id = ?', id);
  }

  /** Makes a session's row; opening one that exists is refused (its id is the embedder's to choose once). */
  *openSession(input: { sessionId: string; root: string; now: number }): Q<void> {
    const known = yield* sql.get('SELECT 1 AS one FROM sessions WHERE session_id = ?', input.sessionId);
    if (known) {
      throw new InvalidArgumentError(
        `a session ${input.sessionId} is already in this store; resume it with Session.resume(store, id), or open one with another id.`,
      );
    }
    yield* sql.run(
      'INSERT INTO sessions (session_id, root, head, created_at) VALUES (?, ?, NULL, ?)',
      input.sessionId,
      input.root,
      input.now,
    );
  }

  /** Records a turn as begun, following `parent` (the head the caller read); the head moves only when it ends. */
  *beginTurn(input: { sessionId: string; turnId: string; parent: string | null; text: string; now: number }): Q<{
    seq: number;
  }> {
    const row = (yield* sql.get(
      'SELECT COALESCE(MAX(seq), 0) + 1 AS seq FROM turns WHERE session_id = ?',
      input.sessionId,
    )) as { seq: number };
    yield* sql.run(
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
  *startedTurn(input: { turnId: string; runId: string }): Q<void> {
    yield* sql.run('UPDATE turns SET run_id = ? WHERE turn_id = ?', input.runId, input.turnId);
  }

  /**
   * Ends a turn and moves its session's head to it by compare-and-swap: only if the head
   * is still the turn's parent. A turn that lost the race is kept, as `conflicted`.
   */
  *endTurn(input: {
    turnId: string;
    status: string;
    reply: string | null;
    now: number;
    /** False: the turn's row ends, and the head stays (a turn whose run never started). */
    advance?: boolean;
  }): Q<{ advanced: true } | { advanced: false; head: string | null }> {
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
    yield* sql.run(
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
  *moveHead(input: { sessionId: string; turnId: string }): Q<void> {
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

  /** Cancels every child of a tree still waiting in the queue; no lease is needed for a run that never started. */
  *cancelQueued(input: { rootId: string; now: number }): Q<{ cancelled: string[] }> {
    const rows = (yield* sql.all(
      `SELECT child_run_id FROM spawn_queue WHERE root_id = ? AND state IN ('pending', 'queued') ORDER BY ordinal`,
      input.rootId,
    )) as { child_run_id: string }[];
    for (const { child_run_id } of rows) {
      yield* sql.run(`UPDATE spawn_queue SET state = 'cancelled' WHERE child_run_id = ?`, child_run_id);
      const run = yield* this.#run(child_run_id);
      yield* this.#finish(run, run.generation, 0, 'cancelled', null, 'cancelled while queued', input.now, []);
    }
    // A run paused on a person is not being driven either: a cancelled tree does not leave it to be resumed.
    const paused = (yield* sql.all(
      `SELECT run_id FROM runs WHERE root_id = ? AND status = 'paused' ORDER BY created_at`,
      input.rootId,
    )) as { run_id: string }[];
    for (const { run_id } of paused) {
      const run = yield* this.#run(run_id);
      yield* this.#finish(
        run,
        run.generation,
        run.last_seq,
        'cancelled',
        null,
        'cancelled while paused',
        input.now,
        [],
      );
    }
    return { cancelled: [...rows.map((row) => row.child_run_id), ...paused.map((row) => row.run_id)] };
  }

  *#send(run: RunRow, seq: number, generation: number, msgId: string, message: SentMessage, now: number): Q<void> {
    if (!(yield* sql.get(ADDRESS_EXISTS, run.root_id, message.to))) {
      throw new HarnessError(
        ErrorCode.MailboxConflict,
        `run ${run.run_id}: no agent has the address ${JSON.stringify(message.to)} in this tree.`,
      );
    }
    yield* sql.run(
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
    yield* this.#event(run, seq, generation, { type: 'message-sent', msgId, to: message.to }, now);
    this.#pending.mail.push({ rootId: run.root_id, to: message.to });
  }

  *#finish(
    run: RunRow,
    generation: number,
    seq: number,
    status: RunStatus,
    reply: string | null,
    reason: string,
    now: number,
    events: EventData[],
  ): Q<void> {
    for (const event of events) yield* this.#event(run, seq, generation, event, now);
    yield* sql.run(END_RUN, status, reply, JSON.stringify({ status, reason }), now, run.run_id);
    yield* sql.run('DELETE FROM drafts WHERE run_id = ?', run.run_id);
    yield* sql.run('DELETE FROM step_images WHERE run_id = ?', run.run_id);
    // Children a step reserved but never committed can no longer be released.
    yield* this.#dropPending(run, '', now);
    if (run.parent_id !== null) {
      const parent = yield* this.#run(run.parent_id);
      const ledger = (yield* sql.get<LedgerRow>(this.#ledgerById, run.run_id)) as LedgerRow;
      const said =
        reply === null ? reason : reply.length > LINE_REPLY_CHARS ? `${reply.slice(0, LINE_REPLY_CHARS)}…` : reply;
      const line = `[${run.address} ${status}] ${said.replace(/\s+/g, ' ')} (steps ${ledger.steps_spent}, tokens ${ledger.tokens_spent})`;
      yield* this.#send(run, seq, generation, `${run.address}:end`, { to: parent.address, body: line }, now);
    }
    yield* this.#event(run, seq, generation, { type: 'run-end', status, reply, reason }, now);
    this.#pending.ended.push({ rootId: run.root_id, runId: run.run_id, status });
  }
}

/** What each kind of question takes as an answer; anything else is refused before it is stored. */
function checkAnswer(kind: QuestionKind, answer: unknown): void {
  const fail = (wanted: string) => {
    throw new InvalidArgumentError(`a ${kind} question is answered with ${wanted}; got ${JSON.stringify(answer)}.`);
  };
  if (kind === 'approval' && answer !== 'approve' && answer !== 'deny') fail(`'approve' or 'deny'`);
  if (kind === 'intent' && answer !== 'retry' && answer !== 'skip' && answer !== 'abort')
    fail(`'retry', 'skip' or 'abort'`);
  if (kind === 'question' && (typeof answer !== 'string' || answer.trim() === '')) fail('a non-empty string');
  if (kind === 'plan') {
    const decision = (answer as { decision?: unknown; steps?: unknown } | null)?.decision;
    const steps = (answer as { steps?: unknown } | null)?.steps;
    const validSteps =
      Array.isArray(steps) &&
      steps.length > 0 &&
      steps.every((step) => typeof (step as { description?: unknown })?.description === 'string');
    if (decision !== 'approve' && decision !== 'cancel' && !(decision === 'correct' && validSteps)) {
      fail(`{ decision: 'approve' }, { decision: 'cancel' } or { decision: 'correct', steps: [{ description }] }`);
    }
  }
}
