/**
 * The leases of the runs a supervisor drives: what it claims them with, renewing them while
 * their actors run, giving them back, and taking them on resume. On PostgreSQL, where
 * several hosts share trees, admission is a claim too: runnable agents (queued ones, and runs
 * whose lease lapsed) are claimed from the rows, counted against each tree's cap whichever
 * host holds them, prompted by the hints other hosts' commits send and by a poll as a
 * safety net.
 */
import type { StoreClient } from '../actors/store.js';
import type { Clock } from '../clock.js';
import { InvalidArgumentError } from '../errors.js';
import type { WorkHint } from '../store/postgres/notify.js';
import { TraceQueries } from '../store/queries.js';
import type { LeaseClaim, RunRecord } from '../store/records.js';
import type { Q } from '../store/sql.js';
import { idleInTransactionMs, type StoreTarget } from '../store/target.js';
import { post, RunAgain, type Tree } from './tree.js';

const QUERIES = new TraceQueries();

/**
 * Refuses a lease ttl a takeover could wait out: on PostgreSQL a host stopped in the middle
 * of a write holds the store's write lock until the server ends its transaction (after the
 * store's `idleInTransactionTimeoutMs`), so the other hosts' takeover, due once the ttl has
 * passed, would wait behind it, or for ever when the server never ends it.
 */
export function checkLeaseTtl(leaseTtlMs: number, target: StoreTarget, where: string): void {
  if (target.kind !== 'postgres') return;
  const idle = idleInTransactionMs(target);
  const fix = `Raise leaseTtlMs above the timeout, or open the store with a shorter one: PostgresStore.open(url, { idleInTransactionTimeoutMs }) well below leaseTtlMs.`;
  if (idle === 0) {
    throw new InvalidArgumentError(
      `${where}: the store was opened with idleInTransactionTimeoutMs: 0, so PostgreSQL never ends a transaction a stopped host leaves open, and no other host could take that host's runs (it would wait on the store's write lock for ever). Open it with a timeout below leaseTtlMs (${leaseTtlMs} ms).`,
      { details: { leaseTtlMs, idleInTransactionTimeoutMs: idle } },
    );
  }
  if (leaseTtlMs <= idle) {
    throw new InvalidArgumentError(
      `${where}: leaseTtlMs (${leaseTtlMs} ms) must be longer than the store's idleInTransactionTimeoutMs (${idle} ms). A host stopped in the middle of a write holds the store's write lock until PostgreSQL ends that transaction, so a takeover due after ${leaseTtlMs} ms would wait behind it. ${fix}`,
      { details: { leaseTtlMs, idleInTransactionTimeoutMs: idle } },
    );
  }
}

/** The most runs one claim takes: a pass that takes this many claims again. */
const CLAIM_BATCH = 16;

/** What the leases reach of the supervisor. */
export interface LeasePorts {
  readonly owner: string;
  readonly store: StoreClient;
  /** A read of the store, answered once every write before it has committed. */
  read<T>(body: Q<T>): Promise<T>;
  /** The trees the supervisor drives, by root. */
  readonly trees: ReadonlyMap<string, Tree>;
  /** The supervisor accepts work (its state is running). */
  running(): boolean;
}

export interface LeaseOptions {
  /** The name its leases give this host. */
  host: string;
  leaseTtlMs: number;
  clock: Clock;
  /** PostgreSQL: admission shared with every other host on the store. */
  shared: boolean;
  /** Shared: how often the store is looked at for work a hint may have missed. */
  pollMs: number;
  /** Shared: the most agents this host drives at once across every tree. */
  maxHostAgents: number;
}

/** A run whose lease resume() took: the actor to start for it. */
export interface TakenRun {
  runId: string;
  generation: number;
  address: string;
}

export class Leases {
  readonly #ports: LeasePorts;
  readonly #options: LeaseOptions;
  /** A claim is on its way to the store; another asked for meanwhile runs after it. */
  readonly #claiming = new RunAgain();
  #renewTimer: NodeJS.Timeout | null = null;
  #pollTimer: NodeJS.Timeout | null = null;

  constructor(ports: LeasePorts, options: LeaseOptions) {
    this.#ports = ports;
    this.#options = options;
  }

  /** A claim is being read: no tree may settle under it. */
  get claiming(): boolean {
    return this.#claiming.running;
  }

  /** Renews every third of the ttl from now on, and (shared) polls. */
  start(): void {
    const period = Math.max(10, Math.floor(this.#options.leaseTtlMs / 3));
    this.#renewTimer = setInterval(() => void this.renew(), period);
    this.#renewTimer.unref();
    if (this.#options.shared) {
      this.#pollTimer = setInterval(() => this.poll(), this.#options.pollMs);
      this.#pollTimer.unref();
    }
  }

  stop(): void {
    if (this.#renewTimer) clearInterval(this.#renewTimer);
    if (this.#pollTimer) clearInterval(this.#pollTimer);
  }

  /** What a lease this supervisor takes says: its owner, process, host and expiry. */
  claim(): LeaseClaim {
    return {
      owner: this.#ports.owner,
      pid: process.pid,
      host: this.#options.host,
      ttlMs: this.#options.leaseTtlMs,
      now: this.#options.clock.now(),
    };
  }

  /** Gives a lease back without waiting; the store ignores a stale one. */
  release(runId: string, generation: number): void {
    this.#ports.store.call('releaseLease', { runId, generation, owner: this.#ports.owner }).catch(() => undefined);
  }

  /**
   * Takes the leases of a tree's running runs, and resumes each paused run whose questions
   * are all answered (the others stay paused), into `taken` as it goes: on a refusal (a
   * live owner's lease) what was taken so far is there to give back.
   */
  async take(running: RunRecord[], paused: RunRecord[], taken: TakenRun[]): Promise<void> {
    const store = this.#ports.store;
    for (const run of running) {
      const { generation } = await store.call('acquireLease', { runId: run.runId, ...this.claim() });
      taken.push({ runId: run.runId, generation, address: run.address });
    }
    // A paused run goes on once every question it waits on is answered; otherwise it stays paused.
    for (const run of paused) {
      const resumed = await store.call('resumePaused', { runId: run.runId, ...this.claim() });
      if (resumed.status === 'resumed')
        taken.push({ runId: run.runId, generation: resumed.generation, address: run.address });
    }
  }

  /** Gives back the leases `take` took, one after another. */
  async giveBack(taken: TakenRun[]): Promise<void> {
    for (const lease of taken) {
      await this.#ports.store.call('releaseLease', { ...lease, owner: this.#ports.owner }).catch(() => undefined);
    }
  }

  /** Renews the lease of every run with an actor here; a lease found taken is lost (see Tree.loseLease). */
  async renew(): Promise<void> {
    const { trees, store, owner } = this.#ports;
    if (!this.#ports.running()) return;
    const leases: { runId: string; generation: number }[] = [];
    for (const tree of trees.values()) {
      for (const slot of tree.slots.values())
        if (!slot.halted) leases.push({ runId: slot.runId, generation: slot.generation });
    }
    if (leases.length === 0) return;
    try {
      const { lost } = await store.call('renewLeases', {
        owner,
        leases,
        expiresAt: this.#options.clock.now() + this.#options.leaseTtlMs,
      });
      // Only the slot the renewal was for: one started since under a newer lease is this host's own.
      const renewed = new Map(leases.map((lease) => [lease.runId, lease.generation]));
      for (const runId of lost) {
        for (const tree of trees.values()) {
          const slot = tree.slots.get(runId);
          if (slot && slot.generation === renewed.get(runId)) tree.loseLease(slot);
        }
      }
    } catch {
      // The store actor's exit is handled where it is detected.
    }
  }

  /**
   * Shared admission (PostgreSQL): claims the runnable agents of this supervisor's trees that
   * their caps and this host's allow, and starts an actor for each. One pass at a time; one
   * asked for meanwhile runs after it. A claim the store refuses is tried at the next pass.
   */
  async claimPass(): Promise<void> {
    const { trees } = this.#ports;
    if (!this.#ports.running()) return;
    if (!this.#claiming.request()) return;
    try {
      do {
        const driven = [...trees.values()].filter((tree) => !tree.ended && !tree.adopting);
        // A cancelled tree admits nothing more: whatever reached its queue since is cancelled
        // too, and so is a run whose host died holding it (see store/rules/cancel.ts).
        // A store that cannot take it now is asked at the next pass.
        for (const tree of driven)
          if (tree.state === 'cancelled') await this.askCancel(tree.rootId, tree.cancelReason).catch(() => undefined);
        const roots = driven.filter((tree) => tree.state !== 'cancelled').map((tree) => tree.rootId);
        let held = 0;
        for (const tree of driven) for (const slot of tree.slots.values()) if (slot.counted && !slot.parked) held++;
        const limit = Math.min(CLAIM_BATCH, this.#options.maxHostAgents - held);
        if (roots.length === 0 || limit < 1 || !this.#ports.running()) break;
        const driving = driven.flatMap((tree) => [...tree.slots.keys()]);
        const { claimed } = await this.#ports.store.call('claim', { ...this.claim(), roots, limit, driving });
        for (const run of claimed) {
          const tree = trees.get(run.rootId);
          if (!tree || tree.ended || tree.slots.has(run.runId)) {
            this.release(run.runId, run.generation);
            continue;
          }
          tree.startActor(run.runId, run.address, run.generation, run.runId !== run.rootId, run.resumed);
        }
        // A full batch: there may be more to claim, so one more pass is asked for.
        if (claimed.length === limit) this.#claiming.request();
      } while (this.#claiming.again() && this.#ports.running());
    } catch {
      // The store refused this pass (or is closing): the next hint or poll tries again.
    } finally {
      this.#claiming.done();
      for (const tree of [...trees.values()]) tree.settleIfOwed();
    }
  }

  /**
   * Shared admission's safety net: what another host's hints would have said, looked up in
   * the store. Waiting parents whose child ended are woken, every actor re-reads its inbox
   * if it waits on it, and this host claims what is runnable and settles what has ended.
   */
  poll(): void {
    if (!this.#ports.running()) return;
    for (const tree of [...this.#ports.trees.values()]) {
      if (tree.host.waiting) void tree.host.wakeEnded(tree.rootId);
      for (const slot of tree.slots.values()) post(slot, { type: 'mail' });
      this.#cancelIfAsked(tree);
      tree.look();
    }
  }

  /** Asks in the store for the cancel of tree `rootId` (see store/rules/cancel.ts), as this supervisor. */
  askCancel(rootId: string, reason: string | null): Promise<unknown> {
    return this.#ports.store.call('askCancel', {
      rootId,
      reason,
      owner: this.#ports.owner,
      now: this.#options.clock.now(),
    });
  }

  /** A cancel another host asked for (see store/rules/cancel.ts): what this host drives of the tree is cancelled. */
  #cancelIfAsked(tree: Tree): void {
    if (tree.state !== 'running') return;
    this.#ports.read(QUERIES.cancelAsked(tree.rootId)).then(
      (asked) => {
        if (asked && tree.state === 'running') void tree.cancel(asked.reason ?? undefined);
      },
      // The store cannot be read (it is closing): the next poll looks again.
      () => undefined,
    );
  }

  /** What another host's commit hinted at: mail for an actor here, a child ended, work to claim. */
  onHint(hint: WorkHint): void {
    if (hint.all) {
      this.poll();
      return;
    }
    const trees = this.#ports.trees;
    for (const mail of hint.mail) {
      const slot = trees.get(mail.rootId)?.byAddress.get(mail.to);
      if (slot) post(slot, { type: 'mail' });
    }
    // A hint that a child ended wakes its parent only once the store says so (a hint proves nothing).
    const ends = new Set(hint.ended.map((ended) => ended.rootId));
    for (const rootId of ends) {
      const tree = trees.get(rootId);
      if (tree?.host.waiting) void tree.host.wakeEnded(rootId);
    }
    // Only a hinted cancel is read back: the other hints cost no read.
    for (const rootId of hint.cancels) {
      const tree = trees.get(rootId);
      if (tree) this.#cancelIfAsked(tree);
    }
    for (const rootId of hint.roots) trees.get(rootId)?.look();
  }
}
