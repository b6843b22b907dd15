/**
 * An agent thread of the actor pool (see ./agent.ts). Each task is one actor: it wires
 * the actor's ports (its store port and the thread's read connection, its host channel,
 * its control port) and dispatches the supervisor's messages to the run it hosts, until
 * the run leaves. The loop itself is ./agent/loop.ts. Many actors may share this thread:
 * nothing here is shared between them but the read connection and module caches.
 */
import { existsSync } from 'node:fs';
import { systemClock } from '../clock.js';
import { LeaseLostError } from '../errors.js';
import type { LivePort } from '../runtime/live.js';
import { storeBackend } from '../store/backend.js';
import type { StorePort, StoreReads } from '../store/port.js';
import { type StoreTarget, targetKey } from '../store/target.js';
import { runAgent } from './agent/loop.js';
import type { ActorTask, AgentInput, AgentOutput, RunExit, WarmTask } from './agent.js';
import { connectHost } from './host-channel.js';
import type { Endpoint } from './protocol.js';
import { StoreClient } from './store.js';

// Test hook: while the file this names exists, a new agent thread dies as it starts, as one
// out of memory or over a thread limit would (see test/actor-pool.test.ts).
const failStart = process.env.IO_HARNESS_TEST_THREAD_START_FAILS;
if (failStart && existsSync(failStart)) process.exit(70);

// The vendors' HTTP client is loaded as the thread starts, not on its first actor's first model call;
// so is the SQLite backend, the default store's, not on the thread's first actor (storeBackend finds it loaded).
const client = Promise.all([
  import('../runtime/providers/client.js'),
  import('../runtime/providers/http.js').then((http) => http.loadHttpClient()),
]);
const sqlite = import('../store/sqlite/backend.js');

/** The thread's reads, one connection (or small pool) per store, shared by the actors it hosts. */
const readers = new Map<string, Promise<StoreReads>>();

function readsOf(target: StoreTarget): Promise<StoreReads> {
  const key = targetKey(target);
  let reads = readers.get(key);
  if (!reads) {
    reads = storeBackend(target).then((backend) => backend.openReads());
    readers.set(key, reads);
    // A store that could not be opened is tried again by the next actor, not remembered as failed.
    reads.catch(() => readers.delete(key));
  }
  return reads;
}

/** The longest a step waits for its live events to be handed on before it commits. */
const LIVE_FLUSH_BOUND_MS = 1_000;

export default async function hostActor(task: ActorTask | WarmTask): Promise<RunExit | null> {
  if ('warm' in task) {
    // What an agent's first run on a thread loads: the loop (imported above), the HTTP client and the store's backend.
    await Promise.all([client, sqlite]);
    return null;
  }
  const { start, controlPort, hostPort } = task;
  const writes = new StoreClient(task.storePort as unknown as Endpoint);
  task.storePort.on('close', () => writes.fail('the store actor closed its port'));
  /** Set by a halt: nothing more is committed, and the run leaves at once. */
  let halted = false;
  const store: StorePort = {
    ...(await readsOf(task.target)),
    call: (op, input) =>
      halted ? Promise.reject(new LeaseLostError(start.runId, start.generation, null)) : writes.call(op, input),
  };
  const host = connectHost(task.hostPort);
  const post = (out: AgentOutput) => controlPort.postMessage(out);

  /** Whether the main thread wants live events now. */
  let live = start.live === true;
  /** Live events were sent since the last flush. */
  let unflushed = false;
  let nextFlush = 1;
  const flushes = new Map<number, () => void>();
  const livePort: LivePort = {
    publish: (data) => {
      if (!live) return;
      unflushed = true;
      post({ type: 'live', runId: start.runId, data, at: Date.now() });
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
        post({ type: 'live-flush', id });
      });
    },
  };

  const { agent, exit } = runAgent(start, { store, host, clock: task.clock ?? systemClock, live: livePort });
  /**
   * Stops what the step started (the model call, a command, a wait on the host), and the
   * next commit is refused: the run leaves as its last commit left it.
   */
  function halt(): void {
    halted = true;
    agent.cancel();
    hostPort.close();
  }
  // The in-process host dropped: as the end of a thread would, at once and committing nothing more.
  task.signal?.addEventListener('abort', halt, { once: true });
  controlPort.on('message', (input: AgentInput) => {
    if (input.type === 'mail') {
      agent.wakeMail();
    } else if (input.type === 'cancel') {
      agent.cancel(input.reason);
    } else if (input.type === 'halt') {
      halt();
    } else if (input.type === 'live') {
      live = input.on;
    } else if (input.type === 'live-flushed') {
      flushes.get(input.id)?.();
    }
  });
  try {
    return await exit;
  } finally {
    for (const done of flushes.values()) done();
    controlPort.close();
    task.hostPort.close();
    task.storePort.close();
  }
}
