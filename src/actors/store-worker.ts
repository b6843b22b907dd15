/** The store actor's thread. See ./store.ts for the protocol. */
import { type MessagePort, parentPort, workerData } from 'node:worker_threads';
import { holdSecrets } from '../runtime/secrets.js';
import { BatchWriter } from '../store/local.js';
import type { Notifications } from '../store/records.js';
import { errorReply, okReply, type Reply, type Request } from './protocol.js';
import type { StoreControl, StoreOutput, StoreRequestBody, StoreSyncBody, StoreWorkerData } from './store.js';

const data = workerData as StoreWorkerData;
const main = parentPort as NonNullable<typeof parentPort>;

interface Queued {
  reply(message: Reply): void;
  request: Request<StoreRequestBody>;
}

/** The backend's batch writer: SQLite's answers at once, PostgreSQL's is awaited. */
interface Batches {
  run(
    writes: readonly { op: string; input: unknown }[],
    beforeCommit: () => void,
  ):
    | { outcomes: ({ ok: true; value: unknown } | { ok: false; error: unknown })[]; notifications: Notifications }
    | Promise<{
        outcomes: ({ ok: true; value: unknown } | { ok: false; error: unknown })[];
        notifications: Notifications;
      }>;
  close(): void | Promise<void>;
}

async function openPostgres(target: NonNullable<StoreWorkerData['postgres']>): Promise<Batches> {
  const writer = await (await import('../store/postgres/batch.js')).PostgresBatchWriter.open(target);
  // Other hosts' commits reach this one's supervisor as hints (see store/postgres/notify.ts).
  await writer.listen((hint) => {
    const message: StoreOutput = { type: 'hint', hint };
    main.postMessage(message);
  });
  return writer;
}

const store: Batches = data.postgres
  ? await openPostgres(data.postgres)
  : new BatchWriter(data.path, { synchronous: data.synchronous });
const killPoint = parseKillPoint(data.killAt);
const batchesSeen = new Map<string, number>();
let queue: Queued[] = [];
/** Syncs waiting for the batch after them to be served (see StoreSyncBody). */
let syncs: (() => void)[] = [];
let scheduled = false;
/** A batch is being served (PostgreSQL's take turns of the event loop): the next waits for it. */
let serving = false;
let closing = false;

function parseKillPoint(spec: string | null): { op: string; n: number; phase: string } | null {
  if (!spec) return null;
  const [op, n, phase] = spec.split(':');
  return { op: op as string, n: Number(n), phase: phase as string };
}

/** Counts this batch against the kill point; true when it is the batch to die in. */
function isKillBatch(batch: Queued[]): boolean {
  if (!killPoint) return false;
  const op = killPoint.op;
  if (op !== '*' && !batch.some((item) => item.request.body.op === op)) return false;
  const seen = (batchesSeen.get(op) ?? 0) + 1;
  batchesSeen.set(op, seen);
  return seen === killPoint.n;
}

function maybeKill(phase: string, armed: boolean): void {
  if (armed && killPoint?.phase === phase) process.kill(process.pid, 'SIGKILL');
}

/** Serves what is queued on the next turn of the event loop. */
function schedule(): void {
  if (!scheduled) {
    scheduled = true;
    setImmediate(() => void flush());
  }
}

async function flush(): Promise<void> {
  scheduled = false;
  if (serving) return;
  serving = true;
  try {
    // What arrived while a batch was served is the next batch.
    while (queue.length > 0 || syncs.length > 0) {
      const batch = queue;
      queue = [];
      const synced = syncs;
      syncs = [];
      try {
        await serve(batch);
      } finally {
        for (const answer of synced) answer();
      }
    }
  } finally {
    serving = false;
  }
}

async function serve(batch: Queued[]): Promise<void> {
  if (batch.length === 0) return;
  // The test hook costs nothing when no kill point is set.
  const armed = isKillBatch(batch);
  maybeKill('before', armed);
  let done: Awaited<ReturnType<Batches['run']>>;
  try {
    done = await store.run(
      batch.map(({ request }) => request.body),
      () => maybeKill('inside', armed),
    );
  } catch (error) {
    batch.forEach((item) => {
      item.reply(errorReply(item.request.id, error));
    });
    return;
  }
  maybeKill('after', armed);
  const { notifications, outcomes } = done;
  if (
    notifications.events.length +
      notifications.mail.length +
      notifications.spawned.length +
      notifications.ended.length >
    0
  ) {
    const message: StoreOutput = { type: 'notify', notifications };
    main.postMessage(message);
  }
  batch.forEach((item, index) => {
    const outcome = outcomes[index];
    item.reply(outcome?.ok ? okReply(item.request.id, outcome.value) : errorReply(item.request.id, outcome?.error));
  });
}

function listen(port: {
  on(event: 'message', fn: (m: unknown) => void): unknown;
  postMessage(m: unknown): void;
}): void {
  port.on('message', (message: unknown) => {
    const typed = message as Request<StoreRequestBody | StoreSyncBody> | StoreControl;
    if (typed.type === 'request' && typed.body.op === 'sync') {
      const { id } = typed;
      syncs.push(() => port.postMessage(okReply(id, undefined)));
      schedule();
    } else if (typed.type === 'request') {
      queue.push({ request: typed as Request<StoreRequestBody>, reply: (reply) => port.postMessage(reply) });
      schedule();
    } else if (typed.type === 'secrets') {
      holdSecrets(typed.values);
    } else if (typed.type === 'attach') {
      listen(typed.port as MessagePort);
    } else if (typed.type === 'close' && !closing) {
      closing = true;
      setImmediate(async () => {
        await flush();
        while (serving) await new Promise((resolve) => setImmediate(resolve));
        await store.close();
        const closed: StoreOutput = { type: 'closed' };
        main.postMessage(closed);
        process.exit(0);
      });
    }
  });
}

listen(main);
const ready: StoreOutput = { type: 'ready' };
main.postMessage(ready);
