/**
 * Every durable write the runtime makes, as operations on the one read-write
 * connection. Only the store actor calls these; each runs inside a savepoint the
 * actor opens, so an operation is all-or-nothing even when several share one
 * group-commit transaction. Every operation on a run is fenced: it checks the run's
 * lease generation and owner first and refuses, writing nothing, when they moved.
 */
import type Database from 'better-sqlite3';
import { ConflictError, ErrorCode, HarnessError, InvalidArgumentError, LeaseLostError } from '../errors.js';
import { type Ceilings, clampToParent } from '../runtime/budget.js';
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
import { StatementCache } from './statements.js';

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

export class StoreWriter {
  readonly #runById: Database.Statement<[string], RunRow>;
  readonly #ledgerById: Database.Statement<[string], LedgerRow>;
  readonly #insertEvent: Database.Statement;
  readonly #insertRun: Database.Statement;
  readonly #insertLedger: Database.Statement;
  readonly #takeLease: Database.Statement;
  readonly #draw: Database.Statement;
  readonly #insertDraw: Database.Statement;
  readonly #insertStep: Database.Statement;
  readonly #stepExists: Database.Statement<[string, number], { one: number }>;
  readonly #consume: Database.Statement;
  readonly #insertMessage: Database.Statement;
  readonly #addressExists: Database.Statement<[string, string], { run_id: string }>;
  readonly #advanceRun: Database.Statement;
  readonly #upsertCheckpoint: Database.Statement;
  readonly #endRun: Database.Statement;
  readonly #runBySpawnKey: Database.Statement<[string], RunRow>;
  readonly #runByAddress: Database.Statement<[string, string], RunRow>;
  readonly #countChildren: Database.Statement;
  readonly #insertCall: Database.Statement;
  readonly #pendingChildren: Database.Statement<[string, number, string], RunRow>;
  readonly #countTree: Database.Statement;
  readonly #enqueue: Database.Statement;
  readonly #renew: Database.Statement;
  readonly #savepoint: Database.Statement;
  readonly #releaseSavepoint: Database.Statement;
  readonly #rollbackToSavepoint: Database.Statement;
  #pending: Notifications = emptyNotifications();
  readonly #statements: StatementCache;

  constructor(db: Database.Database) {
    this.#statements = new StatementCache(db);
    this.#runById = db.prepare('SELECT * FROM runs WHERE run_id = ?');
    this.#ledgerById = db.prepare('SELECT * FROM ledger WHERE run_id = ?');
    this.#insertEvent = db.prepare(
      'INSERT INTO events (root_id, run_id, seq, generation, type, data, at) VALUES (?, ?, ?, ?, ?, ?, ?)',
    );
    this.#insertRun = db.prepare(
      `INSERT INTO runs (run_id, root_id, parent_id, address, depth, ancestry, status, task, spec, spawn_key, created_at)
       VALUES (@run_id, @root_id, @parent_id, @address, @depth, @ancestry, @status, @task, @spec, @spawn_key, @created_at)`,
    );
    this.#insertLedger = db.prepare(
      `INSERT INTO ledger (run_id, root_id, max_steps, max_tokens, max_wall_ms, started_at, max_total_agents, max_concurrent_agents, max_wait_secs)
       VALUES (@run_id, @root_id, @max_steps, @max_tokens, @max_wall_ms, @started_at, @max_total_agents, @max_concurrent_agents, @max_wait_secs)`,
    );
    this.#takeLease = db.prepare(
      `UPDATE runs SET lease_owner = @owner, lease_pid = @pid, lease_host = @host, lease_expires_at = @expires,
         generation = generation + 1 WHERE run_id = @run_id AND generation = @generation`,
    );
    this.#draw = db.prepare(
      `UPDATE ledger SET steps_spent = steps_spent + @steps, tokens_spent = tokens_spent + @tokens
       WHERE run_id = @run_id
         AND (max_steps IS NULL OR steps_spent + @steps <= max_steps)
         AND (max_tokens IS NULL OR tokens_spent + @tokens <= max_tokens)`,
    );
    this.#insertDraw = db.prepare(
      'INSERT INTO draws (draw_id, root_id, run_id, seq, generation, steps, tokens, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    );
    this.#insertStep = db.prepare(
      'INSERT INTO steps (run_id, seq, generation, completion, observations, usage, at) VALUES (?, ?, ?, ?, ?, ?, ?)',
    );
    this.#stepExists = db.prepare('SELECT 1 AS one FROM steps WHERE run_id = ? AND seq = ?');
    this.#consume = db.prepare(
      `UPDATE mailbox SET consumed_by = @run_id, consumed_seq = @seq, consumed_generation = @generation
       WHERE msg_id = @msg_id AND root_id = @root_id AND to_address = @address AND consumed_by IS NULL`,
    );
    this.#insertMessage = db.prepare(
      `INSERT INTO mailbox (msg_id, root_id, from_run, from_address, to_address, body, sent_seq, sent_generation)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.#addressExists = db.prepare('SELECT run_id FROM runs WHERE root_id = ? AND address = ?');
    this.#advanceRun = db.prepare('UPDATE runs SET last_seq = ? WHERE run_id = ?');
    this.#upsertCheckpoint = db.prepare(
      `INSERT INTO checkpoints (run_id, seq, generation, state, at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, generation = excluded.generation, state = excluded.state, at = excluded.at`,
    );
    this.#endRun = db.prepare(
      'UPDATE runs SET status = ?, reply = ?, outcome = ?, ended_at = ?, lease_owner = NULL, lease_expires_at = NULL WHERE run_id = ?',
    );
    this.#runBySpawnKey = db.prepare('SELECT * FROM runs WHERE spawn_key = ?');
    this.#runByAddress = db.prepare('SELECT * FROM runs WHERE root_id = ? AND address = ?');
    this.#pendingChildren = db.prepare(
      `SELECT * FROM runs WHERE parent_id = ? AND status = 'pending' AND substr(spawn_key, 1, ?) = ?`,
    );
    this.#insertCall = db.prepare(
      `INSERT INTO model_calls (root_id, run_id, seq, attempt, generation, provider, model, outcome, status_code, input_tokens,
         output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, latency_ms, ttft_ms, usage_reported, at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.#countChildren = db.prepare('UPDATE runs SET children = children + 1 WHERE run_id = ?');
    this.#countTree = db.prepare('UPDATE ledger SET spawned = spawned + 1 WHERE run_id = ?');
    this.#savepoint = db.prepare('SAVEPOINT draw');
    this.#releaseSavepoint = db.prepare('RELEASE draw');
    this.#rollbackToSavepoint = db.prepare('ROLLBACK TO draw');
    this.#renew = db.prepare(
      'UPDATE runs SET lease_expires_at = ? WHERE run_id = ? AND generation = ? AND lease_owner = ?',
    );
    this.#enqueue = db.prepare(
      'INSERT INTO spawn_queue (child_run_id, root_id, parent_id, state, enqueued_at) VALUES (?, ?, ?, ?, ?)',
    );
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

  #event(run: RunRow, seq: number | null, generation: number, data: EventData, at: number): void {
    const { type, ...rest } = data;
    const info = this.#insertEvent.run(run.root_id, run.run_id, seq, generation, type, JSON.stringify(rest), at);
    this.#pending.events.push({
      ...data,
      eventId: Number(info.lastInsertRowid),
      rootId: run.root_id,
      runId: run.run_id,
      seq,
      generation,
      at,
    } as HarnessEvent);
  }

  #run(runId: string): RunRow {
    const row = this.#runById.get(runId);
    if (!row)
      throw new HarnessError(
        ErrorCode.RunNotFound,
        `no run ${runId} in this store; check the id (runs are listed by TraceReader.runs()).`,
      );
    return row;
  }

  #fence(fence: Fence): RunRow {
    const row = this.#run(fence.runId);
    if (row.generation !== fence.generation || row.lease_owner !== fence.owner) {
      throw new LeaseLostError(fence.runId, fence.generation, row.generation);
    }
    return row;
  }

  createRoot(input: CreateRootInput): { generation: number } {
    const now = input.claim.now;
    this.#insertRun.run({
      run_id: input.runId,
      root_id: input.runId,
      parent_id: null,
      address: 'root',
      depth: 0,
      ancestry: '[]',
      status: 'running',
      task: input.task,
      spec: JSON.stringify(input.spec),
      spawn_key: null,
      created_at: now,
    });
    this.#insertLedger.run({
      run_id: input.runId,
      root_id: input.runId,
      max_steps: input.ceilings.steps,
      max_tokens: input.ceilings.tokens,
      max_wall_ms: input.ceilings.wallMs,
      started_at: now,
      max_total_agents: input.maxTotalAgents,
      max_concurrent_agents: input.maxConcurrentAgents,
      max_wait_secs: input.maxWaitSecs,
    });
    return this.acquireLease({ runId: input.runId, ...input.claim });
  }

  /**
   * Takes the run's lease. A live owner whose lease has not lapsed is a Conflict; a
   * dead owner's lease is taken at once; the ttl decides only what liveness cannot.
   * Taking always raises the generation, which fences every earlier driver.
   */
  acquireLease(input: LeaseClaim & { runId: string }): { generation: number } {
    const row = this.#run(input.runId);
    const previous = row.lease_owner;
    if (previous !== null && previous !== input.owner) {
      const liveness = processLiveness(row.lease_pid, row.lease_host);
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
    this.#takeLease.run({
      owner: input.owner,
      pid: input.pid,
      host: input.host,
      expires: input.now + input.ttlMs,
      run_id: input.runId,
      generation: row.generation,
    });
    const generation = row.generation + 1;
    this.#event(
      row,
      null,
      generation,
      { type: 'lease-taken', owner: input.owner, pid: input.pid, generation, previousOwner: previous },
      input.now,
    );
    return { generation };
  }

  /** Extends the leases this owner still holds; returns the ones it lost. */
  renewLeases(input: { owner: string; leases: { runId: string; generation: number }[]; expiresAt: number }): {
    lost: string[];
  } {
    const lost: string[] = [];
    const renew = this.#renew;
    for (const lease of input.leases) {
      if (renew.run(input.expiresAt, lease.runId, lease.generation, input.owner).changes === 1) continue;
      // A run that ended gave its lease back; only a run still going under another generation is lost.
      const row = this.#runById.get(lease.runId);
      if (row && row.status === 'running' && row.generation !== lease.generation) {
        lost.push(lease.runId);
      }
    }
    return { lost };
  }

  releaseLease(fence: Fence): void {
    const row = this.#runById.get(fence.runId);
    if (!row || row.generation !== fence.generation || row.lease_owner !== fence.owner) return;
    this.#statements
      .get('UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL WHERE run_id = ?')
      .run(fence.runId);
  }

  /** Moves a queued child to running under this owner's lease, first in, first out. */
  admit(input: LeaseClaim & { childId: string }): { status: 'admitted'; generation: number } | { status: 'gone' } {
    const row = this.#run(input.childId);
    const moved = this.#statements
      .get(`UPDATE spawn_queue SET state = 'admitted', admitted_at = ? WHERE child_run_id = ? AND state = 'queued'`)
      .run(input.now, input.childId).changes;
    // Cancelled, or admitted by another driver, since the supervisor read the queue.
    if (moved !== 1 || row.status !== 'queued') return { status: 'gone' };
    this.#statements.get(`UPDATE runs SET status = 'running' WHERE run_id = ?`).run(input.childId);
    const lease = this.acquireLease({ runId: input.childId, ...input });
    this.#event(
      row,
      null,
      lease.generation,
      { type: 'spawn-started', childId: row.run_id, address: row.address },
      input.now,
    );
    return { status: 'admitted', generation: lease.generation };
  }

  /**
   * Creates a child, idempotently: the same spawn key returns the child it made
   * before. The total cap refuses; the child waits in the durable queue until the
   * supervisor admits it; its ceilings are clamped to what the parent has left.
   */
  /** `hint`, or `hint.2`, `hint.3` ... the first that is free and still an address; null when none is. */
  #hinted(rootId: string, hint: string): string | null {
    for (let n = 1; n < 10_000; n++) {
      const address = n === 1 ? hint : `${hint}.${n}`;
      if (!ADDRESS.test(address)) return null;
      if (!this.#addressExists.get(rootId, address)) return address;
    }
    return null;
  }

  spawn(input: SpawnInput): SpawnResult {
    const parent = this.#fence(input);
    const existing = this.#runBySpawnKey.get(input.key);
    if (existing && existing.task === input.task && (input.as === null || input.as === existing.address)) {
      // The same step run again after a crash, asking the same: the child it made before.
      let childStatus = existing.status;
      if (input.queueNow && childStatus === 'pending') {
        this.#release(parent, input.generation, null, existing, input.now);
        childStatus = 'queued';
      }
      return { status: 'existing', childId: existing.run_id, address: existing.address, clamps: [], childStatus };
    }
    if (existing) {
      // The re-run asked for something else at this call: the earlier child is not this one.
      this.#detach(existing, input.now);
    }
    if (input.as !== null) {
      const holder = this.#runByAddress.get(parent.root_id, input.as);
      const earlierAttempt = `${parent.run_id}:`;
      if (
        holder &&
        holder.status === 'pending' &&
        holder.parent_id === parent.run_id &&
        holder.spawn_key?.startsWith(earlierAttempt)
      ) {
        // Reserved by an uncommitted attempt at a step of this parent: that reservation lapses.
        this.#detach(holder, input.now);
      }
    }
    const rootLedger = this.#ledgerById.get(parent.root_id) as LedgerRow;
    const spawned = rootLedger.spawned;
    const refuse = (rule: string, reason: string): SpawnResult => {
      this.#event(parent, null, input.generation, { type: 'spawn-refused', rule, reason }, input.now);
      return { status: 'refused', rule, reason };
    };
    if (rootLedger.max_total_agents !== null && spawned + 1 > rootLedger.max_total_agents) {
      return refuse(
        'maxTotalAgents',
        `this tree may hold at most ${rootLedger.max_total_agents} spawned agents and already has ${spawned}; finish with the agents you have.`,
      );
    }
    let address = input.as;
    if (address !== null) {
      if (!ADDRESS.test(address)) {
        return refuse(
          'address',
          `address ${JSON.stringify(address)} is not valid: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit.`,
        );
      }
      if (this.#addressExists.get(parent.root_id, address)) {
        return refuse(
          'address',
          `address ${JSON.stringify(address)} is already taken in this tree; choose another "as".`,
        );
      }
    } else {
      // A roster agent is named for itself under its parent, numbered when taken; any other child by its number.
      const hinted = input.addressHint ? this.#hinted(parent.root_id, input.addressHint) : null;
      if (hinted) address = hinted;
      else {
        let n = parent.children + 1;
        address = `${parent.address}.${n}`;
        while (this.#addressExists.get(parent.root_id, address)) address = `${parent.address}.${++n}`;
      }
    }
    const parentLedger = this.#ledgerById.get(parent.run_id) as LedgerRow;
    const remaining: Ceilings = {
      steps: parentLedger.max_steps === null ? null : Math.max(0, parentLedger.max_steps - parentLedger.steps_spent),
      tokens:
        parentLedger.max_tokens === null ? null : Math.max(0, parentLedger.max_tokens - parentLedger.tokens_spent),
      wallMs:
        parentLedger.max_wall_ms === null
          ? null
          : Math.max(0, parentLedger.started_at + parentLedger.max_wall_ms - input.now),
    };
    const { ceilings, clamps } = clampToParent(input.asked, remaining);
    const ancestry = [...(JSON.parse(parent.ancestry) as string[]), parent.run_id];
    this.#insertRun.run({
      run_id: input.newRunId,
      root_id: parent.root_id,
      parent_id: parent.run_id,
      address,
      depth: parent.depth + 1,
      ancestry: JSON.stringify(ancestry),
      status: input.queueNow ? 'queued' : 'pending',
      task: input.task,
      // A child inherits its parent's spec; a narrowed policy (deny-only layers added) replaces the inherited one.
      // A roster agent's system prompt replaces the inherited one.
      spec:
        input.policy || input.system
          ? JSON.stringify({
              ...JSON.parse(parent.spec),
              ...(input.policy ? { policy: input.policy } : {}),
              ...(input.system ? { system: input.system } : {}),
            })
          : parent.spec,
      spawn_key: input.key,
      created_at: input.now,
    });
    const maxWait =
      input.maxWaitSecs === null ? parentLedger.max_wait_secs : Math.min(input.maxWaitSecs, parentLedger.max_wait_secs);
    this.#insertLedger.run({
      run_id: input.newRunId,
      root_id: parent.root_id,
      max_steps: ceilings.steps,
      max_tokens: ceilings.tokens,
      max_wall_ms: ceilings.wallMs,
      started_at: input.now,
      max_total_agents: null,
      max_concurrent_agents: null,
      max_wait_secs: maxWait,
    });
    this.#enqueue.run(input.newRunId, parent.root_id, parent.run_id, input.queueNow ? 'queued' : 'pending', input.now);
    this.#countChildren.run(parent.run_id);
    this.#countTree.run(parent.root_id);
    if (input.queueNow) {
      this.#event(
        parent,
        null,
        input.generation,
        { type: 'spawn-queued', childId: input.newRunId, address, task: input.task },
        input.now,
      );
      this.#pending.spawned.push({ rootId: parent.root_id, childId: input.newRunId });
    }
    if (clamps.length > 0) {
      this.#event(
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
  commitStep(input: CommitStepInput): CommitStepResult {
    const run = this.#fence(input);
    if (input.seq !== run.last_seq + 1) {
      if (this.#stepExists.get(input.runId, input.seq)) return { status: 'duplicate', seq: input.seq };
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
    this.#savepoint.run();
    for (const id of chain) {
      if (this.#draw.run({ run_id: id, steps: draw.steps, tokens: draw.tokens }).changes !== 1) {
        this.#rollbackToSavepoint.run();
        this.#releaseSavepoint.run();
        const ledger = this.#ledgerById.get(id) as LedgerRow;
        const stepsCross = ledger.max_steps !== null && ledger.steps_spent + draw.steps > ledger.max_steps;
        const ceiling = stepsCross ? 'steps' : 'tokens';
        const spent = stepsCross ? ledger.steps_spent : ledger.tokens_spent;
        const limit = (stepsCross ? ledger.max_steps : ledger.max_tokens) as number;
        // The call happened even though its step cannot be charged: account for it.
        this.#calls(run, input.seq, input.generation, input.calls, input.now);
        this.#finish(
          run,
          input.generation,
          input.seq - 1,
          'budget-exhausted',
          null,
          `the ${ceiling} ceiling of run ${id} would be crossed`,
          input.now,
          [{ type: 'budget-exhausted', draw, ceiling, account: id, spent, limit }],
        );
        return { status: 'exhausted', runId: id, ceiling, spent, limit };
      }
    }
    this.#releaseSavepoint.run();
    const gen = input.generation;
    this.#insertDraw.run(
      `${run.run_id}:${input.seq}`,
      run.root_id,
      run.run_id,
      input.seq,
      gen,
      draw.steps,
      draw.tokens,
      input.now,
    );
    this.#insertStep.run(
      run.run_id,
      input.seq,
      gen,
      JSON.stringify(input.completion),
      JSON.stringify(input.observations),
      JSON.stringify(input.usage),
      input.now,
    );
    input.changes?.forEach((change, ordinal) => {
      this.#statements
        .get(
          'INSERT INTO file_changes (run_id, seq, ordinal, root_id, generation, path, diff, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
        )
        .run(run.run_id, input.seq, ordinal, run.root_id, gen, change.path, change.diff, input.now);
    });
    for (const msgId of input.consumed) {
      const changed = this.#consume.run({
        run_id: run.run_id,
        seq: input.seq,
        generation: gen,
        msg_id: msgId,
        root_id: run.root_id,
        address: run.address,
      }).changes;
      if (changed !== 1) {
        throw new HarnessError(
          ErrorCode.MailboxConflict,
          `run ${run.run_id}: message ${msgId} is not waiting in the inbox of ${run.address}; the step was not committed.`,
        );
      }
    }
    for (const event of input.events) this.#event(run, input.seq, gen, event, input.now);
    this.#calls(run, input.seq, gen, input.calls, input.now);
    if (input.consumed.length > 0)
      this.#event(run, input.seq, gen, { type: 'message-read', msgIds: input.consumed }, input.now);
    input.sent.forEach((message, index) => {
      // Ids name the sender by address, so the same tree run twice reads the same ids.
      this.#send(run, input.seq, gen, `${run.address}:${input.seq}:${index}`, message, input.now);
    });
    this.#settleSpawns(run, gen, input.seq, input.spawned, input.now);
    const root = this.#ledgerById.get(run.root_id) as LedgerRow;
    const treeSpent = { steps: root.steps_spent, tokens: root.tokens_spent };
    this.#event(run, input.seq, gen, { type: 'spend', draw, treeSpent }, input.now);
    this.#event(
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
    this.#advanceRun.run(input.seq, run.run_id);
    this.#statements.get('DELETE FROM drafts WHERE run_id = ?').run(run.run_id);
    this.#statements.get('DELETE FROM step_images WHERE run_id = ? AND seq <= ?').run(run.run_id, input.seq);
    this.#upsertCheckpoint.run(run.run_id, input.seq, gen, JSON.stringify({ seq: input.seq }), input.now);
    if (input.final) {
      this.#finish(
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
    const taken = run.parent_id === null ? this.#takeSteers(run, gen, input.seq, input.now) : null;
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
  #takeSteers(run: RunRow, generation: number, after: number, now: number): { steers: string[]; interrupt: boolean } {
    const waiting = this.#statements
      .get('SELECT steer_id, kind, body, by_whom FROM steers WHERE run_id = ? AND taken_seq IS NULL ORDER BY steer_id')
      .all(run.run_id) as { steer_id: number; kind: string; body: string | null; by_whom: string }[];
    const taken = { steers: [] as string[], interrupt: false };
    if (waiting.length === 0) return taken;
    const before = after + 1;
    const seq = after === 0 ? null : after;
    const interrupt = waiting.find((item) => item.kind === 'interrupt');
    if (interrupt) {
      // The run ends here: corrections sent with the interrupt are left untaken, reported as undelivered.
      this.#statements
        .get(`UPDATE steers SET taken_seq = ? WHERE run_id = ? AND kind = 'interrupt' AND taken_seq IS NULL`)
        .run(before, run.run_id);
      this.#finish(run, generation, after, 'interrupted', null, `interrupted by ${interrupt.by_whom}`, now, []);
      return { steers: [], interrupt: true };
    }
    this.#statements
      .get('UPDATE steers SET taken_seq = ? WHERE run_id = ? AND taken_seq IS NULL')
      .run(before, run.run_id);
    for (const item of waiting) {
      const text = item.body ?? '';
      taken.steers.push(text);
      this.#event(run, seq, generation, { type: 'steered', text, before, by: item.by_whom }, now);
    }
    return taken;
  }

  /** Takes what waits for a root run as it starts (sent before its first step, or while it was paused or down). */
  takeSteers(input: Fence & { now: number }): { steers: string[]; interrupt: boolean } {
    const run = this.#fence(input);
    if (run.parent_id !== null) return { steers: [], interrupt: false };
    return this.#takeSteers(run, input.generation, run.last_seq, input.now);
  }

  /**
   * Sends a running root run a correction (`steer`, with its words) or an `interrupt`,
   * taken at its next step boundary. Refused, writing nothing, for a child (only the
   * root is steered) and for a run that has ended.
   */
  steer(input: { runId: string; kind: 'steer' | 'interrupt'; text: string | null; by: string; now: number }): {
    steerId: number;
  } {
    const run = this.#runById.get(input.runId) as RunRow | undefined;
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
    const turn = this.#statements
      .get(`SELECT turn_id FROM turns WHERE run_id = ? AND status IN ('running', 'paused')`)
      .get(input.runId) as { turn_id: string } | undefined;
    if (!turn) {
      throw new HarnessError(
        ErrorCode.RunNotFound,
        `no turn of a session runs ${input.runId} in this store; only a session's running turn is steered.`,
        { details: { runId: input.runId } },
      );
    }
    const row = this.#statements
      .get('INSERT INTO steers (run_id, kind, body, by_whom, created_at, taken_seq) VALUES (?, ?, ?, ?, ?, NULL)')
      .run(input.runId, input.kind, input.text, input.by, input.now);
    // A root paused on a person takes no step until it is resumed: an interrupt ends it now,
    // and what of its tree waits (paused or queued) with it.
    if (run && input.kind === 'interrupt' && run.status === 'paused') {
      this.#statements
        .get(`UPDATE steers SET taken_seq = ? WHERE run_id = ? AND kind = 'interrupt' AND taken_seq IS NULL`)
        .run(run.last_seq + 1, run.run_id);
      this.#finish(run, run.generation, run.last_seq, 'interrupted', null, `interrupted by ${input.by}`, input.now, []);
      this.cancelQueued({ rootId: run.root_id, now: input.now });
      this.#statements
        .get(`UPDATE turns SET status = 'interrupted', ended_at = ? WHERE turn_id = ?`)
        .run(input.now, turn.turn_id);
    }
    return { steerId: Number(row.lastInsertRowid) };
  }

  /**
   * Ends a root run on its first completion when that completion is a reply (text, no tool
   * call): its tokens drawn on the tree's ledger (no step), its model call recorded, no
   * step row and no checkpoint. A draw that would cross a ceiling ends it as
   * budget-exhausted instead.
   */
  endReply(input: Fence & { completion: Completion; calls: ModelCallRecord[]; events: EventData[]; now: number }): {
    status: 'finished' | 'exhausted';
  } {
    const run = this.#fence(input);
    const usage = input.completion.usage;
    const draw: DrawAmount = { steps: 0, tokens: usage.inputTokens + usage.outputTokens };
    const seq = run.last_seq + 1;
    const chain = [...(JSON.parse(run.ancestry) as string[]), run.run_id];
    this.#savepoint.run();
    for (const id of chain) {
      if (this.#draw.run({ run_id: id, steps: 0, tokens: draw.tokens }).changes !== 1) {
        this.#rollbackToSavepoint.run();
        this.#releaseSavepoint.run();
        const ledger = this.#ledgerById.get(id) as LedgerRow;
        this.#calls(run, seq, input.generation, input.calls, input.now);
        this.#finish(
          run,
          input.generation,
          run.last_seq,
          'budget-exhausted',
          null,
          `the tokens ceiling of run ${id} would be crossed`,
          input.now,
          [
            ...input.events,
            {
              type: 'budget-exhausted',
              draw,
              ceiling: 'tokens',
              account: id,
              spent: ledger.tokens_spent,
              limit: ledger.max_tokens as number,
            },
          ],
        );
        return { status: 'exhausted' };
      }
    }
    this.#releaseSavepoint.run();
    this.#insertDraw.run(
      `${run.run_id}:${seq}`,
      run.root_id,
      run.run_id,
      seq,
      input.generation,
      0,
      draw.tokens,
      input.now,
    );
    this.#calls(run, seq, input.generation, input.calls, input.now);
    const root = this.#ledgerById.get(run.root_id) as LedgerRow;
    const treeSpent = { steps: root.steps_spent, tokens: root.tokens_spent };
    this.#finish(
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
   * Queues the children this step reserved, and drops any child an earlier, uncommitted
   * attempt at the same step reserved and this one did not ask for again.
   */
  #settleSpawns(run: RunRow, generation: number, seq: number, spawned: string[], now: number): void {
    const claimed = new Set(spawned);
    for (const childId of spawned) {
      const child = this.#runById.get(childId);
      if (child && child.parent_id === run.run_id && child.status === 'pending') {
        this.#release(run, generation, seq, child, now);
      }
    }
    // Reserved by this step's key but not claimed: a call of an attempt that did not commit,
    // or one reserved ahead that the step stopped before (a cancel, the deadline).
    this.#dropPending(
      run,
      `${run.run_id}:${seq}:`,
      now,
      claimed,
      'the call that spawned it is not in the step its parent committed',
    );
  }

  /** Cancels the reserved children of `run` whose spawn key starts with `prefix`, except `keep`. */
  #dropPending(run: RunRow, prefix: string, now: number, keep: Set<string> = new Set(), reason?: string): void {
    for (const orphan of this.#pendingChildren.all(run.run_id, prefix.length, prefix)) {
      if (!keep.has(orphan.run_id)) this.#detach(orphan, now, reason);
    }
  }

  /**
   * Unhooks a child from the spawn key (and, if it never started, the address) an
   * uncommitted step gave it, so a later attempt can use them. A child still pending
   * is cancelled and stops counting against the tree's total; one already started (a
   * waited-for spawn is an effect taken ahead of the commit) runs on, under its own id.
   */
  #detach(child: RunRow, now: number, reason = 'the step that spawned it was not committed'): void {
    const suffix = `#dropped-${child.run_id.slice(0, 8)}`;
    if (child.status !== 'pending') {
      this.#statements.get('UPDATE runs SET spawn_key = spawn_key || ? WHERE run_id = ?').run(suffix, child.run_id);
      return;
    }
    this.#statements
      .get('UPDATE runs SET spawn_key = spawn_key || ?, address = address || ? WHERE run_id = ?')
      .run(suffix, suffix, child.run_id);
    this.#statements.get(`UPDATE spawn_queue SET state = 'cancelled' WHERE child_run_id = ?`).run(child.run_id);
    this.#statements.get('UPDATE ledger SET spawned = spawned - 1 WHERE run_id = ?').run(child.root_id);
    this.#endRun.run('cancelled', null, JSON.stringify({ status: 'cancelled', reason }), now, child.run_id);
    this.#event(child, null, child.generation, { type: 'run-end', status: 'cancelled', reply: null, reason }, now);
    this.#pending.ended.push({ rootId: child.root_id, runId: child.run_id, status: 'cancelled' });
  }

  /** Moves a reserved child into the admission queue. */
  #release(parent: RunRow, generation: number, seq: number | null, child: RunRow, now: number): void {
    this.#statements.get(`UPDATE runs SET status = 'queued' WHERE run_id = ?`).run(child.run_id);
    this.#statements.get(`UPDATE spawn_queue SET state = 'queued' WHERE child_run_id = ?`).run(child.run_id);
    this.#event(
      parent,
      seq,
      generation,
      { type: 'spawn-queued', childId: child.run_id, address: child.address, task: child.task },
      now,
    );
    this.#pending.spawned.push({ rootId: parent.root_id, childId: child.run_id });
  }

  /** Records events that belong to no step (a run starting or resuming). */
  recordEvents(input: Fence & { events: EventData[]; now: number }): void {
    const run = this.#fence(input);
    for (const event of input.events) this.#event(run, null, input.generation, event, input.now);
  }

  /** Ends a run without a step: a budget that ran out before the model was asked, a failure, a cancel. */
  #calls(run: RunRow, seq: number, generation: number, calls: ModelCallRecord[] | undefined, now: number): void {
    calls?.forEach((call, attempt) => {
      this.#insertCall.run(
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
    });
  }

  endRun(input: EndRunInput): void {
    const run = this.#fence(input);
    this.#calls(run, run.last_seq + 1, input.generation, input.calls, input.now);
    this.#finish(run, input.generation, run.last_seq, input.status, input.reply, input.reason, input.now, input.events);
  }

  /**
   * Keeps what a file held before the run first touched it. Written, and committed,
   * before the file is: a crash between the two leaves a restore point and an untouched
   * file, never a changed file with nothing to put it back from. The first one wins.
   */
  recordRestorePoint(input: RestorePointInput): { created: boolean } {
    const run = this.#fence(input);
    // The step's own image too: what the file held before this step first wrote it.
    this.#statements
      .get('INSERT OR IGNORE INTO step_images (run_id, seq, path, existed, content) VALUES (?, ?, ?, ?, ?)')
      .run(
        run.run_id,
        input.seq,
        input.path,
        input.content === null ? 0 : 1,
        input.content === null ? null : Buffer.from(input.content),
      );
    const changes = this.#statements
      .get(
        `INSERT OR IGNORE INTO restore_points (run_id, path, root_id, workspace, existed, content, seq, generation, at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        run.run_id,
        input.path,
        run.root_id,
        input.workspace,
        input.content === null ? 0 : 1,
        input.content === null ? null : Buffer.from(input.content),
        input.seq,
        input.generation,
        input.now,
      ).changes;
    return { created: changes === 1 };
  }

  /**
   * Forgets a step's images once the actor has put the files back (a step re-run after
   * a crash starts from the committed state), recording which files went back.
   */
  clearStepImages(input: Fence & { seq: number; paths: string[]; now: number }): void {
    const run = this.#fence(input);
    this.#statements.get('DELETE FROM step_images WHERE run_id = ? AND seq = ?').run(run.run_id, input.seq);
    this.#event(run, input.seq, input.generation, { type: 'step-rolled-back', paths: input.paths }, input.now);
  }

  /** Keeps the completion a step acts on, once its first effect begins; a re-run of the step reuses it. */
  #draft(run: RunRow, seq: number, generation: number, completion: Completion, now: number): void {
    this.#statements
      .get('INSERT OR IGNORE INTO drafts (run_id, seq, generation, completion, at) VALUES (?, ?, ?, ?, ?)')
      .run(run.run_id, seq, generation, JSON.stringify(completion), now);
  }

  /**
   * Journals an effect the runtime cannot inspect or undo before it starts. The answer
   * says whether it may start, already ran (its result stands), or was interrupted.
   * `again` replaces an interrupted one the operator chose to retry.
   */
  beginIntent(input: IntentInput): IntentBegin {
    const run = this.#fence(input);
    this.#draft(run, input.seq, input.generation, input.completion, input.now);
    const existing = this.#statements.get('SELECT * FROM intents WHERE effect_key = ?').get(input.key) as
      | { result: string | null; started_at: number }
      | undefined;
    if (existing && existing.result !== null) return { status: 'done', result: existing.result };
    if (existing && !input.again) return { status: 'in-flight', startedAt: existing.started_at };
    this.#statements
      .get(
        `INSERT OR REPLACE INTO intents (effect_key, run_id, seq, generation, kind, detail, started_at, result, finished_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL)`,
      )
      .run(input.key, run.run_id, input.seq, input.generation, input.kind, input.detail, input.now);
    this.#event(
      run,
      input.seq,
      input.generation,
      { type: 'intent-started', key: input.key, kind: input.kind, detail: input.detail },
      input.now,
    );
    return { status: 'started' };
  }

  /** Records how a journaled effect ended. */
  finishIntent(input: Fence & { seq: number; key: string; result: string; outcome: string; now: number }): void {
    const run = this.#fence(input);
    this.#statements
      .get('UPDATE intents SET result = ?, finished_at = ? WHERE effect_key = ? AND result IS NULL')
      .run(input.result, input.now, input.key);
    this.#event(
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
  pause(
    input: Fence & {
      seq: number;
      completion: Completion;
      partial: unknown;
      question: QuestionInput;
      events: EventData[];
      now: number;
    },
  ): void {
    const run = this.#fence(input);
    this.#draft(run, input.seq, input.generation, input.completion, input.now);
    this.#statements
      .get('UPDATE drafts SET partial = ? WHERE run_id = ?')
      .run(JSON.stringify(input.partial), run.run_id);
    const q = input.question;
    this.#statements
      .get(
        `INSERT OR IGNORE INTO questions (question_id, root_id, run_id, seq, kind, payload, status, created_at)
         VALUES (?, ?, ?, ?, ?, ?, 'open', ?)`,
      )
      .run(q.questionId, run.root_id, run.run_id, input.seq, q.kind, JSON.stringify(q.payload), input.now);
    for (const event of input.events) this.#event(run, input.seq, input.generation, event, input.now);
    this.#event(
      run,
      input.seq,
      input.generation,
      { type: 'run-paused', questionId: q.questionId, kind: q.kind, summary: q.summary },
      input.now,
    );
    this.#statements
      .get(`UPDATE runs SET status = 'paused', lease_owner = NULL, lease_expires_at = NULL WHERE run_id = ?`)
      .run(run.run_id);
    // A parent waiting on this run hears that it stopped.
    this.#pending.ended.push({ rootId: run.root_id, runId: run.run_id, status: 'paused' });
  }

  /**
   * Answers an open question. A compare-and-swap on the row: the first answer wins, and
   * a second is refused naming the first (CONFLICT), so two operators never both decide.
   */
  answer(input: { questionId: string; answer: unknown; by: string; now: number }): { runId: string; rootId: string } {
    const row = this.#statements.get('SELECT * FROM questions WHERE question_id = ?').get(input.questionId) as
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
    const changed = this.#statements
      .get(
        `UPDATE questions SET status = 'answered', answer = ?, answered_by = ?, answered_at = ? WHERE question_id = ? AND status = 'open'`,
      )
      .run(JSON.stringify(input.answer), input.by, input.now, input.questionId).changes;
    if (changed !== 1) {
      const current = this.#statements
        .get('SELECT answer, answered_by FROM questions WHERE question_id = ?')
        .get(input.questionId) as {
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
    const run = this.#run(row.run_id);
    this.#event(
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
  resumePaused(
    input: LeaseClaim & { runId: string },
  ): { status: 'resumed'; generation: number } | { status: 'waiting'; open: string[] } {
    const open = (
      this.#statements
        .get(`SELECT question_id FROM questions WHERE run_id = ? AND status = 'open' ORDER BY created_at`)
        .all(input.runId) as { question_id: string }[]
    ).map((row) => row.question_id);
    if (open.length > 0) return { status: 'waiting', open };
    const run = this.#run(input.runId);
    if (run.status !== 'paused') return { status: 'waiting', open: [] };
    this.#statements.get(`UPDATE runs SET status = 'running' WHERE run_id = ?`).run(input.runId);
    const { generation } = this.acquireLease(input);
    return { status: 'resumed', generation };
  }

  /**
   * Cancels the children a run left waiting (reserved or queued, never started): the
   * spawn backlog a whole-run rewind takes back. Steps, events and the ledger stay.
   */
  dropBacklog(input: { runId: string; now: number }): { cancelled: string[] } {
    const rows = this.#statements
      .get(
        `SELECT child_run_id FROM spawn_queue WHERE parent_id = ? AND state IN ('pending', 'queued') ORDER BY ordinal`,
      )
      .all(input.runId) as { child_run_id: string }[];
    for (const { child_run_id } of rows) {
      this.#statements.get(`UPDATE spawn_queue SET state = 'cancelled' WHERE child_run_id = ?`).run(child_run_id);
      const child = this.#run(child_run_id);
      this.#finish(child, child.generation, 0, 'cancelled', null, 'cancelled by a rewind of its parent', input.now, []);
    }
    return { cancelled: rows.map((row) => row.child_run_id) };
  }

  /**
   * Records a gate evaluated again after the run ended (`retryGate`), and moves a run
   * that ended on its gate to `finished` when the gate now passes. Only a run that is
   * over and not leased can be re-gated.
   */
  regate(input: { runId: string; events: EventData[]; passed: boolean; reply: string | null; now: number }): {
    status: RunStatus;
  } {
    const run = this.#run(input.runId);
    if (run.status !== 'gate-failed' && run.status !== 'finished') {
      throw new HarnessError(
        ErrorCode.RunStillLive,
        `run ${input.runId} is ${run.status}; only a run that ended on its gate (or finished) can have its gate retried.`,
        { details: { runId: input.runId, status: run.status } },
      );
    }
    for (const event of input.events) this.#event(run, null, run.generation, event, input.now);
    if (input.passed && run.status === 'gate-failed') {
      this.#finish(
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
  remember(input: RememberInput): RememberResult {
    const problem = keyProblem(input.key);
    if (problem) throw new InvalidArgumentError(`remember: ${problem}.`);
    if (input.by) {
      this.#fence(input.by);
      // The global scope and pinning are the embedder's: a run writes its workspace's notes only.
      if (input.scope === GLOBAL_SCOPE || input.pin !== undefined)
        throw new InvalidArgumentError('remember: a run writes its own workspace’s notes, unpinned.');
    }
    const existing = this.#note(input.scope, input.key);
    if (existing?.pinned && input.by) return { status: 'pinned', note: existing };
    // A pinned global note is a correction for every workspace: a run may not shadow it either.
    const above = input.by ? this.#note(GLOBAL_SCOPE, input.key) : null;
    if (above?.pinned) return { status: 'pinned', note: above };
    const others = this.#statements
      .get('SELECT key, body AS text FROM memory_notes WHERE scope IN (?, ?) AND NOT (scope = ? AND key = ?)')
      .all(input.scope, GLOBAL_SCOPE, input.scope, input.key) as { key: string; text: string }[];
    const restates = restated(input.text, input.key, others)?.key ?? null;
    let evicted: NoteRecord | null = null;
    if (!existing) {
      const { count } = this.#statements
        .get('SELECT COUNT(*) AS count FROM memory_notes WHERE scope = ?')
        .get(input.scope) as { count: number };
      // Down to one under the cap (a cap lowered since takes more than one).
      for (let over = count - input.cap + 1; over > 0; over--) {
        const least = this.#leastDrawn(input.scope, input.by?.runId ?? null);
        if (!least) return { status: 'full', cap: input.cap };
        evicted = least;
        this.#dropNote(least.id);
      }
    }
    const pinned = input.pin ?? existing?.pinned ?? false;
    const by = input.by?.runId ?? null;
    if (existing)
      this.#statements
        .get('UPDATE memory_notes SET kind = ?, body = ?, pinned = ?, written_by = ?, updated_at = ? WHERE note_id = ?')
        .run(input.kind, input.text, pinned ? 1 : 0, by, input.now, existing.id);
    else
      this.#statements
        .get(
          `INSERT INTO memory_notes (scope, key, kind, body, pinned, runs, written_by, created_at, updated_at)
           VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?)`,
        )
        .run(input.scope, input.key, input.kind, input.text, pinned ? 1 : 0, by, input.now, input.now);
    const note = this.#note(input.scope, input.key) as NoteRecord;
    return { status: 'written', note, replaced: existing !== null, evicted, restates };
  }

  /**
   * The unpinned note of a scope the fewest separate runs have drawn on (the oldest of
   * those). A run's own notes go last: its next note does not push out the one it just wrote.
   */
  #leastDrawn(scope: string, runId: string | null): NoteRecord | null {
    const pick = (sql: string, ...args: unknown[]) => {
      const row = this.#statements.get(sql).get(...args) as Row | undefined;
      return row ? toNote(row) : null;
    };
    const order = 'ORDER BY runs, note_id LIMIT 1';
    return (
      (runId === null
        ? null
        : pick(
            `SELECT * FROM memory_notes WHERE scope = ? AND pinned = 0 AND (written_by IS NULL OR written_by != ?) ${order}`,
            scope,
            runId,
          )) ?? pick(`SELECT * FROM memory_notes WHERE scope = ? AND pinned = 0 ${order}`, scope)
    );
  }

  /** Drops a note (and the record of who drew on it). A run may not forget a pinned one. */
  forget(input: { scope: string; key: string; by: Fence | null; now: number }): {
    status: 'forgotten' | 'absent' | 'pinned';
  } {
    if (input.by) {
      this.#fence(input.by);
      if (input.scope === GLOBAL_SCOPE)
        throw new InvalidArgumentError('forget: a run forgets its own workspace’s notes only.');
    }
    const note = this.#note(input.scope, input.key);
    if (!note) return { status: 'absent' };
    if (note.pinned && input.by) return { status: 'pinned' };
    this.#dropNote(note.id);
    return { status: 'forgotten' };
  }

  /** Pins a note (no run may overwrite or forget it) or unpins it: the embedder's alone. */
  pinNote(input: { scope: string; key: string; pinned: boolean; now: number }): { status: 'done' | 'absent' } {
    const note = this.#note(input.scope, input.key);
    if (!note) return { status: 'absent' };
    this.#statements
      .get('UPDATE memory_notes SET pinned = ?, updated_at = ? WHERE note_id = ?')
      .run(input.pinned ? 1 : 0, input.now, note.id);
    return { status: 'done' };
  }

  /** Records that a run drew on notes; each note counts a run once, however often it draws. */
  drawNotes(input: { by: Fence; noteIds: number[]; how: 'block' | 'recall'; now: number }): { drawn: number } {
    this.#fence(input.by);
    let drawn = 0;
    const insert = this.#statements.get(
      'INSERT OR IGNORE INTO memory_draws (note_id, run_id, how, drawn_at) SELECT note_id, ?, ?, ? FROM memory_notes WHERE note_id = ?',
    );
    const count = this.#statements.get('UPDATE memory_notes SET runs = runs + 1 WHERE note_id = ?');
    for (const id of new Set(input.noteIds)) {
      if (insert.run(input.by.runId, input.how, input.now, id).changes === 0) continue;
      count.run(id);
      drawn++;
    }
    return { drawn };
  }

  #note(scope: string, key: string): NoteRecord | null {
    const row = this.#statements.get('SELECT * FROM memory_notes WHERE scope = ? AND key = ?').get(scope, key) as
      | Row
      | undefined;
    return row ? toNote(row) : null;
  }

  #dropNote(id: number): void {
    this.#statements.get('DELETE FROM memory_draws WHERE note_id = ?').run(id);
    this.#statements.get('DELETE FROM memory_notes WHERE note_id = ?').run(id);
  }

  /** Makes a session's row; opening one that exists is refused (its id is the embedder's to choose once). */
  openSession(input: { sessionId: string; root: string; now: number }): void {
    const known = this.#statements.get('SELECT 1 AS one FROM sessions WHERE session_id = ?').get(input.sessionId);
    if (known) {
      throw new InvalidArgumentError(
        `a session ${input.sessionId} is already in this store; resume it with Session.resume(store, id), or open one with another id.`,
      );
    }
    this.#statements
      .get('INSERT INTO sessions (session_id, root, head, created_at) VALUES (?, ?, NULL, ?)')
      .run(input.sessionId, input.root, input.now);
  }

  /** Records a turn as begun, following `parent` (the head the caller read); the head moves only when it ends. */
  beginTurn(input: { sessionId: string; turnId: string; parent: string | null; text: string; now: number }): {
    seq: number;
  } {
    const row = this.#statements
      .get('SELECT COALESCE(MAX(seq), 0) + 1 AS seq FROM turns WHERE session_id = ?')
      .get(input.sessionId) as { seq: number };
    this.#statements
      .get(
        `INSERT INTO turns (turn_id, session_id, parent, seq, run_id, user_text, reply, status, created_at, ended_at)
         VALUES (?, ?, ?, ?, NULL, ?, NULL, 'running', ?, NULL)`,
      )
      .run(input.turnId, input.sessionId, input.parent, row.seq, input.text, input.now);
    return { seq: row.seq };
  }

  /** Records the run that answers a turn. */
  startedTurn(input: { turnId: string; runId: string }): void {
    this.#statements.get('UPDATE turns SET run_id = ? WHERE turn_id = ?').run(input.runId, input.turnId);
  }

  /**
   * Ends a turn and moves its session's head to it by compare-and-swap: only if the head
   * is still the turn's parent. A turn that lost the race is kept, as `conflicted`.
   */
  endTurn(input: {
    turnId: string;
    status: string;
    reply: string | null;
    now: number;
    /** False: the turn's row ends, and the head stays (a turn whose run never started). */
    advance?: boolean;
  }): { advanced: true } | { advanced: false; head: string | null } {
    const turn = this.#statements.get('SELECT session_id, parent FROM turns WHERE turn_id = ?').get(input.turnId) as
      | { session_id: string; parent: string | null }
      | undefined;
    if (!turn) throw new InvalidArgumentError(`no turn ${input.turnId} in this store.`);
    const moved =
      input.advance === false
        ? { changes: 0 }
        : this.#statements
            // Still on the turn's parent, or already on the turn (a paused turn that ends after its resume).
            .get('UPDATE sessions SET head = ? WHERE session_id = ? AND (head IS ? OR head = ?)')
            .run(input.turnId, turn.session_id, turn.parent, input.turnId);
    const advanced = moved.changes === 1;
    const status = advanced || input.advance === false ? input.status : 'conflicted';
    this.#statements
      .get('UPDATE turns SET status = ?, reply = ?, ended_at = ? WHERE turn_id = ?')
      .run(status, input.reply, input.now, input.turnId);
    if (advanced) return { advanced: true };
    const head = this.#statements.get('SELECT head FROM sessions WHERE session_id = ?').get(turn.session_id) as {
      head: string | null;
    };
    return { advanced: false, head: head.head };
  }

  /** Moves a session's head to one of its turns (a branch). */
  moveHead(input: { sessionId: string; turnId: string }): void {
    const moved = this.#statements
      .get(
        'UPDATE sessions SET head = ? WHERE session_id = ? AND EXISTS (SELECT 1 FROM turns WHERE turn_id = ? AND session_id = ?)',
      )
      .run(input.turnId, input.sessionId, input.turnId, input.sessionId);
    if (moved.changes !== 1)
      throw new InvalidArgumentError(
        `turn ${input.turnId} is not a turn of session ${input.sessionId}; nothing was moved.`,
      );
  }

  /** Cancels every child of a tree still waiting in the queue; no lease is needed for a run that never started. */
  cancelQueued(input: { rootId: string; now: number }): { cancelled: string[] } {
    const rows = this.#statements
      .get(`SELECT child_run_id FROM spawn_queue WHERE root_id = ? AND state IN ('pending', 'queued') ORDER BY ordinal`)
      .all(input.rootId) as { child_run_id: string }[];
    for (const { child_run_id } of rows) {
      this.#statements.get(`UPDATE spawn_queue SET state = 'cancelled' WHERE child_run_id = ?`).run(child_run_id);
      const run = this.#run(child_run_id);
      this.#finish(run, run.generation, 0, 'cancelled', null, 'cancelled while queued', input.now, []);
    }
    // A run paused on a person is not being driven either: a cancelled tree does not leave it to be resumed.
    const paused = this.#statements
      .get(`SELECT run_id FROM runs WHERE root_id = ? AND status = 'paused' ORDER BY created_at`)
      .all(input.rootId) as { run_id: string }[];
    for (const { run_id } of paused) {
      const run = this.#run(run_id);
      this.#finish(run, run.generation, run.last_seq, 'cancelled', null, 'cancelled while paused', input.now, []);
    }
    return { cancelled: [...rows.map((row) => row.child_run_id), ...paused.map((row) => row.run_id)] };
  }

  #send(run: RunRow, seq: number, generation: number, msgId: string, message: SentMessage, now: number): void {
    if (!this.#addressExists.get(run.root_id, message.to)) {
      throw new HarnessError(
        ErrorCode.MailboxConflict,
        `run ${run.run_id}: no agent has the address ${JSON.stringify(message.to)} in this tree.`,
      );
    }
    this.#insertMessage.run(msgId, run.root_id, run.run_id, run.address, message.to, message.body, seq, generation);
    this.#event(run, seq, generation, { type: 'message-sent', msgId, to: message.to }, now);
    this.#pending.mail.push({ rootId: run.root_id, to: message.to });
  }

  #finish(
    run: RunRow,
    generation: number,
    seq: number,
    status: RunStatus,
    reply: string | null,
    reason: string,
    now: number,
    events: EventData[],
  ): void {
    for (const event of events) this.#event(run, seq, generation, event, now);
    this.#endRun.run(status, reply, JSON.stringify({ status, reason }), now, run.run_id);
    this.#statements.get('DELETE FROM drafts WHERE run_id = ?').run(run.run_id);
    this.#statements.get('DELETE FROM step_images WHERE run_id = ?').run(run.run_id);
    // Children a step reserved but never committed can no longer be released.
    this.#dropPending(run, '', now);
    if (run.parent_id !== null) {
      const parent = this.#run(run.parent_id);
      const ledger = this.#ledgerById.get(run.run_id) as LedgerRow;
      const said =
        reply === null ? reason : reply.length > LINE_REPLY_CHARS ? `${reply.slice(0, LINE_REPLY_CHARS)}…` : reply;
      const line = `[${run.address} ${status}] ${said.replace(/\s+/g, ' ')} (steps ${ledger.steps_spent}, tokens ${ledger.tokens_spent})`;
      this.#send(run, seq, generation, `${run.address}:end`, { to: parent.address, body: line }, now);
    }
    this.#event(run, seq, generation, { type: 'run-end', status, reply, reason }, now);
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
