/**
 * What every write rule shares: the rows it decides on, the statements more than one
 * concern runs, and the context one transaction's rules run in — how they lock rows on
 * this backend, and what the writes committed so far announce. A rule reads and writes
 * only through the statements it yields (see ../sql.ts); this is the rest of its world.
 */
import { ErrorCode, HarnessError, LeaseLostError } from '../../errors.js';
import type { EventData, HarnessEvent, RunStatus } from '../../runtime/events.js';
import type { Fence, Notifications } from '../records.js';
import type { Q } from '../sql.js';
import * as sql from '../sql.js';

export function emptyNotifications(): Notifications {
  return { events: [], mail: [], spawned: [], ended: [] };
}

export interface RunRow {
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
  /** On a root: 1 once a cancel of the tree was asked for (see ./cancel.ts). */
  cancel_asked: number;
  cancel_reason: string | null;
}

export interface LedgerRow {
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

export const ADDRESS = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

const INSERT_EVENT =
  'INSERT INTO events (root_id, run_id, seq, generation, type, data, at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING event_id';
export const INSERT_RUN = `INSERT INTO runs (run_id, root_id, parent_id, address, depth, ancestry, status, task, spec, spawn_key, created_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;
export const INSERT_LEDGER = `INSERT INTO ledger (run_id, root_id, max_steps, max_tokens, max_wall_ms, started_at, max_total_agents, max_concurrent_agents, max_wait_secs)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`;
/**
 * A tree's spawned agents that hold a slot now, on whichever host: running under a lease,
 * and not parked on a child. (The root does not count against the cap.) A lease that has
 * lapsed still counts: its host may only be slow and renew it, and a claim takes such runs
 * over before it admits anything new, so a lapsed run keeps its slot through a takeover.
 */
export const HOLDING = `SELECT COUNT(*) AS n FROM runs WHERE root_id = ? AND parent_id IS NOT NULL AND status = 'running'
  AND lease_owner IS NOT NULL AND parked = 0 AND run_id <> ?`;
export const ADDRESS_EXISTS = 'SELECT run_id FROM runs WHERE root_id = ? AND address = ?';
export const END_RUN =
  'UPDATE runs SET status = ?, reply = ?, outcome = ?, ended_at = ?, lease_owner = NULL, lease_expires_at = NULL WHERE run_id = ?';

/**
 * The context one transaction's write rules run in, on either backend: a run's row and a
 * tree's account read `FOR UPDATE` where the database has row locks, and what the rules
 * announce (events, mail, spawns, ends) gathered until the writer hands it on.
 */
export class RuleContext {
  /** A run's row, and a tree's account, locked for the rest of the transaction where the database has row locks. */
  readonly runById: string;
  readonly ledgerById: string;
  /** What a claim adds to the rows it reads to take: PostgreSQL skips the rows another host holds. */
  readonly skipLocked: string;
  readonly skipLockedRuns: string;
  /**
   * Whether a rule reads what it will need ahead, sent with the statement it waits on
   * (PostgreSQL, where that saves a round trip); on SQLite every read is answered at once,
   * so it reads only what it needs, when it needs it.
   */
  readonly readAhead: boolean;
  /** What a read adds to lock the rows it reads for the rest of the transaction (PostgreSQL), or nothing. */
  readonly forUpdate: string;
  #pending: Notifications = emptyNotifications();

  /**
   * `lockRows`: read the rows a write decides on `FOR UPDATE` (PostgreSQL, where several
   * hosts write at once). SQLite's one writer at a time needs no row locks.
   */
  constructor(options: { lockRows?: boolean } = {}) {
    const lock = options.lockRows ? ' FOR UPDATE' : '';
    this.skipLocked = options.lockRows ? ' FOR UPDATE SKIP LOCKED' : '';
    this.skipLockedRuns = options.lockRows ? ' FOR UPDATE OF runs SKIP LOCKED' : '';
    this.readAhead = options.lockRows === true;
    this.forUpdate = lock;
    this.runById = `SELECT * FROM runs WHERE run_id = ?${lock}`;
    this.ledgerById = `SELECT * FROM ledger WHERE run_id = ?${lock}`;
  }

  /** What the rules run since the last {@link takeNotifications} announced; the rules add to it. */
  get pending(): Notifications {
    return this.#pending;
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
}

/** Records one event of `run` and announces it. */
export function* recordEvent(
  context: RuleContext,
  run: RunRow,
  seq: number | null,
  generation: number,
  data: EventData,
  at: number,
): Q<void> {
  const event = eventOf(run.root_id, run.run_id, seq, generation, data, at);
  // The id is the database's, known once the insert has run (before the write commits).
  yield* sql.putThen<{ event_id: number }>(
    (row) => {
      event.eventId = Number(row?.event_id);
    },
    INSERT_EVENT,
    run.root_id,
    run.run_id,
    seq,
    generation,
    data.type,
    eventText(data),
    at,
  );
  context.pending.events.push(event);
}

/** An event as it is announced, its id (the database's) still 0. */
export function eventOf(
  rootId: string,
  runId: string,
  seq: number | null,
  generation: number,
  data: EventData,
  at: number,
): HarnessEvent {
  return { ...data, eventId: 0, rootId, runId, seq, generation, at } as HarnessEvent;
}

/** What an event's row keeps in its `data` column: everything but its type. */
export function eventText(data: EventData): string {
  const { type: _type, ...rest } = data;
  return JSON.stringify(rest);
}

/** The run's row, read as the context locks it; a run that is not there is refused. */
export function* runRow(context: RuleContext, runId: string): Q<RunRow> {
  const row = yield* sql.get<RunRow>(context.runById, runId);
  if (!row)
    throw new HarnessError(
      ErrorCode.RunNotFound,
      `no run ${runId} in this store; check the id (runs are listed by TraceReader.runs()).`,
    );
  return row;
}

/** The run's row when `fence` still holds its lease; otherwise the write is refused, writing nothing. */
export function* fenced(context: RuleContext, fence: Fence): Q<RunRow> {
  const row = yield* runRow(context, fence.runId);
  if (row.generation !== fence.generation || row.lease_owner !== fence.owner) {
    throw new LeaseLostError(fence.runId, fence.generation, row.generation);
  }
  return row;
}
