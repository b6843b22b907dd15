/**
 * The agent actor's thread: it wires the ports (the store actor's port and a reader
 * connection, the supervisor over the parent port) and dispatches the supervisor's
 * messages to the run it hosts. The loop itself is ./agent/loop.ts; the protocol is ./agent.ts.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { systemClock } from '../clock.js';
import type { LivePort } from '../runtime/live.js';
import { type StorePort, sqliteReads } from '../store/port.js';
import { TraceReader } from '../store/reader.js';
import { type AgentRun, runAgent } from './agent/loop.js';
import type { AgentInput, AgentOutput, AgentWorkerData } from './agent.js';
import { connectHost } from './host-channel.js';
import type { Endpoint } from './protocol.js';
import { StoreClient } from './store.js';

const data = workerData as AgentWorkerData;
const main = parentPort as NonNullable<typeof parentPort>;
// A small page cache: a thread per agent, and each agent reads little.
const reader = new TraceReader(data.storePath, { cacheKiB: 1024 });
const writes = new StoreClient(data.storePort as unknown as Endpoint);
data.storePort.on('close', () => writes.fail('the store actor closed its port'));
const store: StorePort = { ...sqliteReads(reader), call: (op, input) => writes.call(op, input) };
const host = connectHost(data.hostPort);

let current: AgentRun | null = null;
/** Whether the main thread wants live events now. */
let live = false;
/** Live events were sent since the last flush. */
let unflushed = false;
let nextFlush = 1;
const flushes = new Map<number, () => void>();
/** The longest a step waits for its live events to be handed on before it commits. */
const LIVE_FLUSH_BOUND_MS = 1_000;

main.on('message', (message: AgentInput) => {
  const input = message;
  if (input.type === 'start') {
    live = input.live === true;
    const runId = input.runId;
    const port: LivePort = {
      publish: (liveData) => {
        if (!live) return;
        unflushed = true;
        const out: AgentOutput = { type: 'live', runId, data: liveData, at: Date.now() };
        main.postMessage(out);
      },
      flush: () => {
        if (!unflushed) return Promise.resolve();
        unflushed = false;
        // The reply comes back over the same port as the live events, after them. Nothing
        // durable waits on it for long: past the bound, the step commits regardless.
        const id = nextFlush++;
        return new Promise<void>((resolve) => {
          const timer = setTimeout(done, LIVE_FLUSH_BOUND_MS);
          function done(): void {
            clearTimeout(timer);
            flushes.delete(id);
            resolve();
          }
          flushes.set(id, done);
          const out: AgentOutput = { type: 'live-flush', id };
          main.postMessage(out);
        });
      },
    };
    const { agent, exit } = runAgent(input, { store, host, clock: systemClock, live: port });
    current = agent;
    void exit.then((outcome) => {
      current = null;
      const out: AgentOutput = { type: 'run-exit', runId: input.runId, exit: outcome };
      main.postMessage(out);
    });
  } else if (input.type === 'mail') {
    current?.wakeMail();
  } else if (input.type === 'cancel') {
    current?.cancel();
  } else if (input.type === 'live') {
    live = input.on;
  } else if (input.type === 'live-flushed') {
    flushes.get(input.id)?.();
  }
});

const ready: AgentOutput = { type: 'ready' };
main.postMessage(ready);
