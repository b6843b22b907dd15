/**
 * The store actor: one worker thread holding the only read-write connection to the
 * store file. Requests from the supervisor and from every agent actor (each over a
 * port of its own) are grouped into one transaction per turn of the event loop;
 * each request runs in a savepoint, so it stays all-or-nothing on its own, and no
 * reply is sent before the transaction that holds it has committed.
 */
import { EventEmitter } from 'node:events';
import { MessageChannel, type MessagePort, Worker } from 'node:worker_threads';
import { ErrorCode } from '../errors.js';
import type { StoreOperation, StoreOperations, StoreRequestBody, StoreWrites } from '../store/port.js';
import type { WorkHint } from '../store/postgres/notify.js';
import type { Notifications } from '../store/records.js';
import type { StoreTarget } from '../store/target.js';
import { type Endpoint, RequestClient } from './protocol.js';

export type { StoreOperation, StoreOperations, StoreRequestBody } from '../store/port.js';

/**
 * A request outside the store port: answered once every request that reached the store
 * actor before it has been served and what their commits announced has been posted, with
 * no transaction of its own. Replies and notifications share the port, in order, so when
 * it resolves every notification of an earlier commit has been handled.
 */
export type StoreSyncBody = { op: 'sync' };

/**
 * Messages the main thread sends the store worker besides requests. `secrets`: values the
 * worker scrubs from every write from now on (see runtime/secrets.ts); sent on the port
 * before the writes that may carry them, so it is held when they are served.
 */
export type StoreControl =
  | { type: 'attach'; port: MessagePort }
  | { type: 'secrets'; values: string[] }
  | { type: 'close' };

/** Messages the store worker sends the main thread besides replies. */
export type StoreOutput =
  | { type: 'ready' }
  | { type: 'notify'; notifications: Notifications }
  /** What another host's commit hinted at, on PostgreSQL (see store/postgres/notify.ts). */
  | { type: 'hint'; hint: WorkHint }
  | { type: 'closed' };

export interface StoreWorkerData {
  /** The store the actor writes, on the backend it names. */
  target: StoreTarget;
  /** A test hook: `op:n:phase` SIGKILLs the process at that point. */
  killAt: string | null;
}

/**
 * A write as the client posts it. {@link StoreClient.call}'s signature checks the input
 * against its operation; the actor reads the message back as a {@link StoreRequestBody}.
 */
type PostedWrite = { op: StoreOperation; input: unknown };

/** A typed client of the store actor over any endpoint (the worker itself, or a port). */
export class StoreClient implements StoreWrites {
  readonly #client: RequestClient<PostedWrite | StoreSyncBody>;

  constructor(endpoint: Endpoint, onOther?: (message: { type: string }) => void) {
    this.#client = new RequestClient<PostedWrite | StoreSyncBody>(endpoint, onOther);
  }

  /** See {@link StoreSyncBody}. */
  sync(): Promise<void> {
    return this.#client.request<undefined>({ op: 'sync' });
  }

  /** See {@link RequestClient.onPendingChange}. */
  set onPendingChange(listener: ((count: number) => void) | null) {
    this.#client.onPendingChange = listener;
  }

  call<K extends StoreOperation>(op: K, input: StoreOperations[K][0]): Promise<StoreOperations[K][1]> {
    return this.#client.request<StoreOperations[K][1]>({ op, input });
  }

  fail(message: string): void {
    this.#client.fail(ErrorCode.StoreActorExited, message);
  }
}

export const STORE_WORKER_URL = new URL('./store-worker.js', import.meta.url);

/**
 * The store actor as the supervisor holds it: a worker thread, or the same actor on the
 * supervisor's own thread behind the same surface ({@link startStoreActor}).
 */
export interface StoreActorHandle extends Endpoint {
  on(event: 'message', listener: (value: unknown) => void): unknown;
  on(event: 'exit', listener: () => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  once(event: 'exit', listener: () => void): unknown;
  /** Whether the actor holds the process up (see the supervisor's keep-alive). */
  ref(): void;
  unref(): void;
}

/**
 * Starts the store actor where `where` says and resolves once it has opened the store:
 * on a worker thread of its own, or on this thread (`isolation: 'in-process'`).
 */
export async function startStoreActor(
  data: StoreWorkerData,
  where: 'thread' | 'in-process',
): Promise<StoreActorHandle> {
  if (where === 'thread') return startStoreWorker(data);
  const channel = new MessageChannel();
  const handle = new InProcessStore(channel.port1, channel.port2);
  const ready = new Promise<void>((resolve) => {
    const onMessage = (message: unknown) => {
      if ((message as StoreOutput).type !== 'ready') return;
      handle.off('message', onMessage);
      resolve();
    };
    handle.on('message', onMessage);
  });
  const { serveStore } = await import('./store-actor.js');
  await serveStore(data, channel.port2, () => handle.exited());
  await ready;
  return handle;
}

/**
 * The store actor on the supervisor's thread, behind a worker's surface: its messages go
 * through a `MessageChannel`, cloned as between threads, and it "exits" when it has
 * served a close.
 */
class InProcessStore extends EventEmitter implements StoreActorHandle {
  readonly #port: MessagePort;
  readonly #actorPort: MessagePort;

  constructor(port: MessagePort, actorPort: MessagePort) {
    super();
    this.#port = port;
    this.#actorPort = actorPort;
    port.on('message', (message) => this.emit('message', message));
  }

  postMessage(value: unknown, transferList?: readonly (MessagePort | ArrayBuffer)[]): void {
    this.#port.postMessage(value, transferList);
  }

  ref(): void {
    this.#port.ref();
    this.#actorPort.ref();
  }

  unref(): void {
    this.#port.unref();
    this.#actorPort.unref();
  }

  /** The actor closed its store: as a worker's exit. */
  exited(): void {
    // The `closed` message is posted just before: let it arrive first, as from a thread.
    setImmediate(() => {
      this.#port.close();
      this.#actorPort.close();
      this.emit('exit', 0);
    });
  }
}

/** Starts the store worker and resolves once it has opened the file. */
export async function startStoreWorker(data: StoreWorkerData): Promise<Worker> {
  const worker = new Worker(STORE_WORKER_URL, { workerData: data });
  await new Promise<void>((resolve, reject) => {
    const onMessage = (message: StoreOutput | { type: 'reply' }) => {
      if (message.type === 'ready') {
        worker.off('message', onMessage);
        worker.off('error', reject);
        resolve();
      }
    };
    worker.on('message', onMessage);
    worker.once('error', reject);
  });
  return worker;
}
