/**
 * A tree as this supervisor drives it: its runs' slots, admission under its concurrency cap
 * (parents coming back from a wait first, then queued children first in first out), and
 * settling once nothing of it is left to run. What its actors ask of this thread is its
 * {@link TreeHost}'s; the leases of its runs are the supervisor's {@link Leases}.
 */
import type { AgentInput, AgentOutput, HostedActor, RunExit } from '../actors/agent.js';
import type { StoreClient } from '../actors/store.js';
import type { Clock } from '../clock.js';
import { ActorExitedError, deserializeError, ErrorCode, HarnessError, LeaseLostError } from '../errors.js';
import type { HarnessEvent } from '../runtime/events.js';
import { keptPaths } from '../runtime/exec/containment/kept.js';
import { type LiveEvent, publishLive } from '../runtime/live.js';
import type { ProviderSpec } from '../runtime/provider.js';
import type { HostModel } from '../runtime/providers/host-model.js';
import { scrubError } from '../runtime/secrets.js';
import type { HostTool } from '../runtime/tools/host-tool.js';
import { TraceQueries } from '../store/queries.js';
import type { ActorHosting } from './actor-hosting.js';
import type { EventBus } from './event-bus.js';
import type { TreeResult } from './handles.js';
import type { Leases } from './leases.js';
import { outputQuery } from './output.js';
import { TreeHost, type TreeHostPorts, type TreePeople } from './tree-host.js';

/** The reads a tree makes, run on whichever backend holds the store. */
const reads = new TraceQueries();

/**
 * One pass at a time, and none lost: a pass requested while one runs (or while `blocked`
 * says something it must not overlap is under way) is owed, and runs once more after it.
 * A tree's admission and its settling each hold one, and so do a host's claims (see
 * ./leases.ts).
 *
 * @example
 * if (!latch.request()) return; // a pass is under way: it runs once more after
 * try { do { ... } while (latch.again()); } finally { latch.done(); }
 */
export class RunAgain {
  #running = false;
  #owed = false;

  /** A pass is under way. */
  get running(): boolean {
    return this.#running;
  }

  /**
   * Asks for a pass. True: none was under way, and the caller runs one now, then calls
   * `done()`. False: one is under way (or `blocked`), and one more is owed after it.
   */
  request(blocked = false): boolean {
    if (this.#running || blocked) {
      this.#owed = true;
      return false;
    }
    this.#running = true;
    this.#owed = false;
    return true;
  }

  /** Whether a pass was asked for since this one began (the ask is taken): run once more. */
  again(): boolean {
    const owed = this.#owed;
    this.#owed = false;
    return owed;
  }

  /** The pass under way is over. */
  done(): void {
    this.#running = false;
  }
}

/** A tree's life in this process, state by state. */
export type TreeState =
  /** driving its runs: admitting queued children into free slots, settling once none is left */
  | 'running'
  /** cancel() was called: it admits nothing more, and every actor is cancelled as it starts */
  | 'cancelled'
  /** every run of it is terminal: its result resolved from the store, its iterators ended */
  | 'settled'
  /**
   * stopped in this process without ending its runs (an error, a lost lease, close()): its
   * result rejected, its actors halted and their leases given back; what it committed
   * stays, and it can be resumed
   */
  | 'failed';

/** One run this supervisor drives: the actor driving it, and its place in the tree's admission. */
export interface Slot {
  tree: Tree;
  runId: string;
  address: string;
  generation: number;
  /** Counts against the concurrency cap (every spawned agent; not the root). */
  counted: boolean;
  /** Parked on a child and not holding a slot. */
  parked: boolean;
  /** The actor driving the run: its control port, its host channel, its exit. */
  actor: HostedActor;
  /** Halted (its tree stopped here): nothing it says is acted on any more. */
  halted: boolean;
}

/** What a tree reaches of the supervisor that drives it. */
export interface TreePorts extends TreeHostPorts {
  readonly owner: string;
  /** On PostgreSQL: admission is shared with every host on the store (see Leases.claimPass). */
  readonly shared: boolean;
  readonly clock: Clock;
  readonly store: StoreClient;
  readonly leases: Leases;
  readonly actors: ActorHosting;
  readonly bus: EventBus;
  /** The supervisor accepts work (its state is running). */
  running(): boolean;
  /** Whether anyone listens to live events. */
  liveWanted(): boolean;
  /** The tree stopped here (settled or failed): the supervisor lets it go. */
  forget(tree: Tree): void;
}

/** What a tree is started with: its cap, and what this process gives its runs. */
export interface TreeInit {
  rootId: string;
  maxConcurrent: number;
  /** The provider as handed in, keys included; null when resumed without one (the stored spec is used). */
  provider: ProviderSpec | null;
  /** A review gate's provider as handed in, keys included. */
  reviewer: ProviderSpec | null;
  people: TreePeople;
  tools: readonly HostTool<never>[];
  /** The host models its runs may ask, by name. */
  models: ReadonlyMap<string, HostModel>;
}

/** Tells an actor something, unless it was halted. */
export function post(slot: Slot, message: AgentInput): void {
  if (!slot.halted) slot.actor.control.postMessage(message);
}

/** Stops an actor now, committing nothing more; its run stays as its last commit left it. */
export function halt(slot: Slot): void {
  if (slot.halted) return;
  slot.actor.control.postMessage({ type: 'halt' } satisfies AgentInput);
  slot.halted = true;
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

export class Tree {
  readonly rootId: string;
  readonly maxConcurrent: number;
  /** Spawned agents holding a slot now: the root and parents parked on a child do not count. */
  active = 0;
  readonly slots = new Map<string, Slot>();
  readonly byAddress = new Map<string, Slot>();
  /** Runs being admitted (and the root while it is stored or its runs taken): the tree may not settle under them. */
  readonly admitting = new Set<string>();
  /**
   * A stored tree being taken on by resume() or join(): its tools, servers and fingerprint
   * are still being checked, so no claim takes a run of it yet (see Leases.claimPass).
   */
  adopting = false;
  /** Parents back from a wait, each waiting for a slot before any queued child gets one. */
  readonly resumeQueue: (() => void)[] = [];
  /** What the cancel said, handed to every actor it ends. */
  cancelReason: string | null = null;
  readonly provider: ProviderSpec | null;
  readonly reviewer: ProviderSpec | null;
  /** What its actors ask of this thread: its people, its tools and servers, its waits on children. */
  readonly host: TreeHost;
  readonly result: Promise<TreeResult>;
  #state: TreeState = 'running';
  #resolve!: (result: TreeResult) => void;
  #reject!: (error: Error) => void;
  /** The queue is being read for admission: the tree may not settle under it. */
  readonly #pumping = new RunAgain();
  /** A settle check is reading the store (or was put off while the queue or a claim was read). */
  readonly #settling = new RunAgain();
  readonly #ports: TreePorts;

  constructor(init: TreeInit, ports: TreePorts) {
    this.rootId = init.rootId;
    this.maxConcurrent = init.maxConcurrent;
    this.provider = init.provider;
    this.reviewer = init.reviewer;
    this.#ports = ports;
    this.host = new TreeHost(init.people, init.tools, init.models, ports);
    this.result = new Promise<TreeResult>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    // A tree nobody awaits must not take the embedder's process down with an unhandled rejection.
    this.result.catch(() => undefined);
  }

  get state(): TreeState {
    return this.#state;
  }

  /** Settled or failed: nothing more of it happens here. */
  get ended(): boolean {
    return this.#state === 'settled' || this.#state === 'failed';
  }

  /** Stops every actor at its next step boundary and cancels what is queued. */
  async cancel(reason: string | undefined): Promise<void> {
    this.#state = 'cancelled';
    this.cancelReason = reason ?? null;
    this.host.abort();
    for (const slot of this.slots.values()) post(slot, { type: 'cancel', ...(reason ? { reason } : {}) });
    await this.cancelQueued();
  }

  /** Hosts an actor for a run whose lease this supervisor took, and wires it to the tree. */
  startActor(runId: string, address: string, generation: number, counted: boolean, resumed: boolean): void {
    const ports = this.#ports;
    if (this.ended || !ports.running()) {
      // The tree failed (or the supervisor began closing) while this lease was being taken: give it back at once.
      ports.leases.release(runId, generation);
      return;
    }
    const actor = ports.actors.host({
      type: 'start',
      runId,
      generation,
      owner: ports.owner,
      resumed,
      ...(this.provider ? { provider: this.provider } : {}),
      ...(this.reviewer ? { reviewer: this.reviewer } : {}),
      live: ports.liveWanted(),
      ...(this.host.toolDefinitions.length > 0 ? { tools: this.host.toolDefinitions } : {}),
      ...(this.host.approver ? {} : { approver: false }),
      kept: keptPaths(),
    });
    const slot: Slot = { tree: this, runId, address, generation, counted, parked: false, actor, halted: false };
    this.slots.set(runId, slot);
    this.byAddress.set(address, slot);
    this.host.serve(slot);
    actor.control.on('message', (message: AgentOutput) => {
      if (message.type === 'live') {
        this.#onLive(slot, message);
      } else if (message.type === 'live-flush') {
        // Every live event the actor sent before this has been handed on: say so, so its step commits after them.
        post(slot, { type: 'live-flushed', id: message.id });
      }
    });
    actor.exit.then(
      (exit) => this.#onRunExit(slot, exit),
      (error: Error) => this.#onActorDied(slot, error),
    );
    if (this.#state === 'cancelled')
      post(slot, { type: 'cancel', ...(this.cancelReason ? { reason: this.cancelReason } : {}) });
  }

  /** A live event from an actor: to the diagnostics channels and the observers that asked. */
  #onLive(slot: Slot, message: Extract<AgentOutput, { type: 'live' }>): void {
    if (slot.halted || slot.runId !== message.runId) return;
    const event = {
      ...message.data,
      live: true as const,
      rootId: this.rootId,
      runId: slot.runId,
      address: slot.address,
      at: message.at,
    } as LiveEvent;
    publishLive(event);
    this.#ports.bus.publishLive(event);
  }

  /** A parent gives its slot up while it waits on a child: in memory, or (shared) in its row, for every host to count. */
  async park(slot: Slot): Promise<void> {
    const ports = this.#ports;
    if (ports.shared) {
      await ports.store.call('park', { ...this.#fenceOf(slot), want: 'park', now: ports.clock.now() });
      slot.parked = true;
    } else {
      slot.parked = true;
      this.active--;
    }
    this.pump();
  }

  /** The child ended: the parent takes a slot back before any queued child does, once one is free. */
  async unpark(slot: Slot): Promise<void> {
    const ports = this.#ports;
    if (!ports.shared) {
      await new Promise<void>((resolve) => {
        this.resumeQueue.push(resolve);
        this.pump();
      });
    } else {
      // Asked again at each pass: the slot may be freed on another host.
      while (
        !(await ports.store.call('park', { ...this.#fenceOf(slot), want: 'back', now: ports.clock.now() })).granted
      ) {
        await new Promise<void>((resolve) => this.resumeQueue.push(resolve));
      }
    }
    slot.parked = false;
  }

  #fenceOf(slot: Slot): { runId: string; generation: number; owner: string } {
    return { runId: slot.runId, generation: slot.generation, owner: this.#ports.owner };
  }

  /** Fills free slots: parents coming back from a wait first, then queued children in order. */
  pump(): void {
    if (this.ended || !this.#ports.running()) return;
    if (this.#ports.shared) {
      // Each waiting parent asks for its slot again; then this host claims what it may.
      for (const wake of this.resumeQueue.splice(0)) wake();
      void this.#ports.leases.claimPass();
      return;
    }
    while (this.active < this.maxConcurrent && this.resumeQueue.length > 0) {
      this.active++;
      (this.resumeQueue.shift() as () => void)();
    }
    void this.#admitQueued();
  }

  /**
   * Admits queued children into the free slots, first in first out. The queue is read
   * from the store (awaited on PostgreSQL): one pass at a time per tree, and a pass asked
   * for while one reads runs after it, so no child is admitted twice and none is missed.
   */
  async #admitQueued(): Promise<void> {
    if (!this.#pumping.request()) return;
    const ports = this.#ports;
    try {
      do {
        if (this.ended || !ports.running()) return;
        if (this.#state === 'cancelled') {
          // A cancelled tree admits nothing more: whatever reached the queue since is cancelled too.
          if ((await ports.read(reads.queued(this.rootId, 1))).length > 0) void this.cancelQueued();
          return;
        }
        if (this.maxConcurrent - this.active <= 0) return;
        const queued = await ports.read(reads.queued(this.rootId, this.maxConcurrent + this.admitting.size));
        if (this.#state !== 'running' || !ports.running()) continue;
        // The slots free now, after the read.
        const free = this.maxConcurrent - this.active;
        for (const childId of queued.filter((id) => !this.admitting.has(id)).slice(0, Math.max(0, free)))
          this.#admit(childId);
      } while (this.#pumping.again());
    } catch (error) {
      this.fail(asError(error));
    } finally {
      this.#pumping.done();
      this.settleIfOwed();
    }
  }

  #admit(childId: string): void {
    this.admitting.add(childId);
    this.active++;
    this.#ports.store.call('admit', { childId, ...this.#ports.leases.claim() }).then(
      async (admitted) => {
        if (admitted.status === 'gone') {
          this.admitting.delete(childId);
          this.active--;
          this.look();
          return;
        }
        const child = await this.#ports.read(reads.run(childId)).catch((error: unknown) => error as Error);
        this.admitting.delete(childId);
        this.#guard(() => {
          if (child instanceof Error) throw child;
          if (!child) throw new HarnessError(ErrorCode.RunNotFound, `admitted run ${childId} is not in the store`);
          this.startActor(childId, child.address, admitted.generation, true, false);
        });
      },
      (error) => {
        this.admitting.delete(childId);
        this.fail(error as Error);
      },
    );
  }

  /** Claims (or admits) what the tree may run now, and settles it if nothing of it is left. */
  look(): void {
    this.#guard(() => {
      this.pump();
      this.checkSettled();
    });
  }

  /** Runs supervisor bookkeeping for the tree; anything it throws fails the tree, never the embedder's process. */
  #guard(work: () => void): void {
    try {
      work();
    } catch (error) {
      this.fail(asError(error));
    }
  }

  async cancelQueued(): Promise<void> {
    await this.#ports.store.call('cancelQueued', { rootId: this.rootId, now: this.#ports.clock.now() }).then(
      () => undefined,
      (error: Error) => this.fail(error),
    );
  }

  #onRunExit(slot: Slot, exit: RunExit): void {
    // A halted actor's tree has already stopped here: how it left changes nothing.
    if (slot.halted) return;
    slot.halted = true;
    if (slot.counted && !slot.parked) this.active--;
    if (exit.kind === 'ended') {
      // The run's end was committed before the actor said so, but its events reach this
      // thread over the store actor's port, and the actor's word over another: the slot is
      // kept (so the tree cannot settle) until a round trip to the store actor has brought
      // every notification before it, and observers have seen the run's last events.
      this.pump();
      void this.#ports.store
        .sync()
        .catch(() => undefined)
        .then(() => {
          this.dropSlot(slot);
          this.look();
        });
      return;
    }
    this.dropSlot(slot);
    if (exit.kind === 'lease-lost') {
      this.loseLease(slot);
    } else if (exit.kind === 'error') {
      // The run stays resumable (a provider this process could not build, say): its
      // lease is given back, so a resume need not wait for the lease to lapse.
      this.#ports.leases.release(slot.runId, slot.generation);
      this.fail(deserializeError(exit.error));
    }
  }

  /**
   * The run's lease was taken from this supervisor: observers hear it. Shared, another host
   * drives the run now: this actor is stopped before it tries to commit, and the tree goes on.
   * Otherwise the tree stops here.
   */
  loseLease(slot: Slot): void {
    const { owner, clock } = this.#ports;
    this.#ports.bus.publish([
      {
        type: 'lease-lost',
        owner,
        generation: slot.generation,
        eventId: 0,
        rootId: this.rootId,
        runId: slot.runId,
        seq: null,
        at: clock.now(),
      },
    ] satisfies HarnessEvent[]);
    if (this.#ports.shared) {
      halt(slot);
      this.dropSlot(slot);
      this.look();
    } else this.fail(new LeaseLostError(slot.runId, slot.generation, null));
  }

  dropSlot(slot: Slot): void {
    if (this.slots.get(slot.runId) === slot) this.slots.delete(slot.runId);
    if (this.byAddress.get(slot.address) === slot) this.byAddress.delete(slot.address);
  }

  /** The thread hosting an actor died (or the pool was destroyed): the tree stops here, resumable. */
  #onActorDied(slot: Slot, error: Error): void {
    if (slot.halted) return;
    const isolation = this.#ports.actors.isolation;
    const shared =
      isolation === 'shared'
        ? ', and with it every actor that thread hosted'
        : isolation === 'in-process'
          ? ', with every actor of the in-process host'
          : '';
    this.fail(
      new ActorExitedError(
        ErrorCode.ActorExited,
        `the thread driving run ${slot.runId} (${slot.address}) ended mid-run (${error.message})${shared}; ` +
          `its last committed step is durable and the tree resumes with supervisor.resume("${this.rootId}").`,
      ),
    );
  }

  /** Stops the tree in this process without ending its runs: what was committed stays, and it can be resumed. */
  fail(error: Error): void {
    if (this.ended) return;
    // An error an embedder is handed says no secret this process holds, wherever it was raised.
    scrubError(error);
    this.#state = 'failed';
    this.host.abort();
    this.#ports.forget(this);
    const slots = [...this.slots.values()];
    this.slots.clear();
    for (const slot of slots) {
      halt(slot);
      // Give the lease back so another driver can resume at once; the store ignores a stale one.
      this.#ports.leases.release(slot.runId, slot.generation);
    }
    this.#reject(error);
    void this.#ports.read(reads.runs(this.rootId)).then(
      (runs) => this.#ports.bus.endTree(this.rootId, new Set(runs.map((run) => run.runId))),
      // The store cannot be read (it is closing): the iterators scoped to the tree's root still end.
      () => this.#ports.bus.endTree(this.rootId, new Set()),
    );
  }

  /** Looks again whether the tree has settled, if a look was put off while the queue or a claim was read. */
  settleIfOwed(): void {
    if (this.#settling.again()) this.checkSettled();
  }

  checkSettled(): void {
    if (this.ended || this.slots.size > 0 || this.admitting.size > 0) return;
    // While the queue (or the tree) is being read, the look is owed until that read is done.
    if (!this.#settling.request(this.#pumping.running || this.#ports.leases.claiming)) return;
    void this.#settleIfDone();
  }

  /** Settles the tree when the store has nothing of it left to run: its result, from the store. */
  async #settleIfDone(): Promise<void> {
    const ports = this.#ports;
    try {
      const live = await ports.read(reads.liveCount(this.rootId));
      if (this.ended || this.slots.size > 0 || this.admitting.size > 0) return;
      if (live > 0) {
        // Runs left queued with nothing running to admit them: admit now.
        this.pump();
        return;
      }
      const [root, ledger, runs, output] = await Promise.all([
        ports.read(reads.run(this.rootId)),
        ports.read(reads.ledger(this.rootId)),
        ports.read(reads.runs(this.rootId)),
        ports.read(outputQuery(this.rootId)),
      ]);
      if (this.ended || this.slots.size > 0 || this.admitting.size > 0) return;
      this.#state = 'settled';
      this.host.abort();
      ports.forget(this);
      this.#resolve({
        rootId: this.rootId,
        status: root?.status ?? 'failed',
        reason: root?.outcome?.reason ?? null,
        reply: root?.reply ?? null,
        output,
        spent: ledger?.root.spent ?? { steps: 0, tokens: 0 },
        runs: runs.length,
      });
      // Every event of the tree was delivered before it settled: its scoped iterators end after them.
      ports.bus.endTree(this.rootId, new Set(runs.map((run) => run.runId)));
    } catch (error) {
      this.fail(asError(error));
    } finally {
      this.#settling.done();
      if (!this.ended && this.#settling.again()) this.checkSettled();
    }
  }
}
