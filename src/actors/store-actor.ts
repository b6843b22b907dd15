/**
 * The store actor's logic: serves the requests of the supervisor (on `main`) and of each
 * agent actor (on the ports attached through it) from the one backend writer, grouped
 * into one transaction per turn of the event loop. Hosted on a worker thread of its own
 * (./store-worker.ts) or, with `isolation: 'in-process'`, on the supervisor's thread
 * (./store.ts, `startStoreActor`). See ./store.ts for the protocol.
 */
import type { MessagePort } from 'node:worker_threads';
import { holdSecrets } from '../runtime/secrets.js';
import { type BatchResult, type BatchWrites, storeBackend } from '../store/backend.js';
import { errorReply, okReply, type Reply, type Request } from './protocol.js';
import type { StoreControl, StoreOutput, StoreRequestBody, StoreSyncBody, StoreWorkerData } from './store.js';

/** The store actor's end of a channel: to the supervisor, or to one agent actor. */
export interface StorePeer {
  on(event: 'message', fn: (message: unknown) => void): unknown;
  postMessage(message: unknown): void;
}

interface Queued {
  reply(message: Reply): void;
  request: Request<StoreRequestBody>;
}

/** Opens the writer of the backend the target names: SQLite's batches are answered at once, PostgreSQL's awaited. */
async function openBackend(data: StoreWorkerData, main: StorePeer): Promise<BatchWrites> {
  return (await storeBackend(data.target)).openBatchWriter({
    // Other hosts' commits reach this one's supervisor as hints (see store/postgres/notify.ts).
    onHint: (hint) => {
      const message: StoreOutput = { type: 'hint', hint };
      main.postMessage(message);
    },
  });
}

function parseKillPoint(spec: string | null): { op: string; n: number; phase: string } | null {
  if (!spec) return null;
  const [op, n, phase] = spec.split(':');
  return { op: op as string, n: Number(n), phase: phase as string };
}

/**
 * Opens the backend, serves `main` and every port attached through it, and posts
 * `ready`. `exit` is called once a `close` has been served and the backend closed.
 */
export async function serveStore(data: StoreWorkerData, main: StorePeer, exit: () => void): Promise<void> {
  const actor = new StoreActor(await openBackend(data, main), data, main, exit);
  actor.listen(main);
  const ready: StoreOutput = { type: 'ready' };
  main.postMessage(ready);
}

class StoreActor {
  readonly #store: BatchWrites;
  readonly #main: StorePeer;
  readonly #exit: () => void;
  readonly #killPoint: { op: string; n: number; phase: string } | null;
  readonly #batchesSeen = new Map<string, number>();
  #queue: Queued[] = [];
  /** How many requests have been queued, and served, since the actor started. */
  #received = 0;
  #served = 0;
  /** Syncs waiting for every request queued before them to be served (see StoreSyncBody). */
  #syncs: { after: number; answer: () => void }[] = [];
  #scheduled = false;
  /** A batch is being served (PostgreSQL's take turns of the event loop): the next waits for it. */
  #serving = false;
  #closing = false;

  constructor(store: BatchWrites, data: StoreWorkerData, main: StorePeer, exit: () => void) {
    this.#store = store;
    this.#main = main;
    this.#exit = exit;
    this.#killPoint = parseKillPoint(data.killAt);
  }

  /** Counts this batch against the kill point; true when it is the batch to die in. */
  #isKillBatch(batch: Queued[]): boolean {
    const killPoint = this.#killPoint;
    if (!killPoint) return false;
    const op = killPoint.op;
    if (op !== '*' && !batch.some((item) => item.request.body.op === op)) return false;
    const seen = (this.#batchesSeen.get(op) ?? 0) + 1;
    this.#batchesSeen.set(op, seen);
    return seen === killPoint.n;
  }

  #maybeKill(phase: string, armed: boolean): void {
    if (armed && this.#killPoint?.phase === phase) process.kill(process.pid, 'SIGKILL');
  }

  /** Serves what is queued on the next turn of the event loop. */
  #schedule(): void {
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => void this.#flush());
    }
  }

  async #flush(): Promise<void> {
    this.#scheduled = false;
    if (this.#serving) return;
    this.#serving = true;
    try {
      // What arrived while a batch was served is the next batch, up to the writer's most.
      while (this.#queue.length > 0 || this.#syncs.length > 0) {
        const batch = this.#queue.splice(0, this.#store.maxBatch ?? this.#queue.length);
        try {
          await this.#serve(batch);
        } finally {
          this.#served += batch.length;
          const served = this.#served;
          const synced = this.#syncs.filter((sync) => sync.after <= served);
          this.#syncs = this.#syncs.filter((sync) => sync.after > served);
          for (const { answer } of synced) answer();
        }
      }
    } finally {
      this.#serving = false;
    }
  }

  async #serve(batch: Queued[]): Promise<void> {
    if (batch.length === 0) return;
    // The test hook costs nothing when no kill point is set.
    const armed = this.#isKillBatch(batch);
    this.#maybeKill('before', armed);
    let done: BatchResult;
    try {
      done = await this.#store.run(
        batch.map(({ request }) => request.body),
        () => this.#maybeKill('inside', armed),
      );
    } catch (error) {
      for (const item of batch) item.reply(errorReply(item.request.id, error));
      return;
    }
    this.#maybeKill('after', armed);
    const { notifications, outcomes } = done;
    const { events, mail, spawned, ended } = notifications;
    if (events.length + mail.length + spawned.length + ended.length > 0) {
      const message: StoreOutput = { type: 'notify', notifications };
      this.#main.postMessage(message);
    }
    batch.forEach((item, index) => {
      const outcome = outcomes[index];
      item.reply(outcome?.ok ? okReply(item.request.id, outcome.value) : errorReply(item.request.id, outcome?.error));
    });
  }

  listen(port: StorePeer): void {
    port.on('message', (message: unknown) => {
      const typed = message as Request<StoreRequestBody | StoreSyncBody> | StoreControl;
      if (typed.type === 'request' && typed.body.op === 'sync') {
        const { id } = typed;
        this.#syncs.push({ after: this.#received, answer: () => port.postMessage(okReply(id, undefined)) });
        this.#schedule();
      } else if (typed.type === 'request') {
        this.#queue.push({ request: typed as Request<StoreRequestBody>, reply: (reply) => port.postMessage(reply) });
        this.#received++;
        this.#schedule();
      } else if (typed.type === 'secrets') {
        holdSecrets(typed.values);
      } else if (typed.type === 'attach') {
        this.listen(typed.port as MessagePort);
      } else if (typed.type === 'close' && !this.#closing) {
        this.#closing = true;
        setImmediate(() => void this.#close());
      }
    });
  }

  async #close(): Promise<void> {
    await this.#flush();
    while (this.#serving) await new Promise((resolve) => setImmediate(resolve));
    await this.#store.close();
    const closed: StoreOutput = { type: 'closed' };
    this.#main.postMessage(closed);
    this.#exit();
  }
}
