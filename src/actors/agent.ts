/**
 * The agent actor: one worker thread per live agent, driving one run at a time
 * through observe, reason, act, check, stop. It talks to the store actor over a
 * port of its own, to the supervisor over its parent port (start, mail, cancel) and its
 * host channel (what it asks of the main thread), and to nothing else.
 * Threads are pooled: when a run ends the thread takes the next one.
 */
import { type MessagePort, Worker } from 'node:worker_threads';
import type { SerializedError } from '../errors.js';
import type { ToolDefinitionData } from '../runtime/custom-tool.js';
import type { RunStatus } from '../runtime/events.js';
import type { LiveData } from '../runtime/live.js';
import type { ProviderSpec } from '../runtime/provider.js';

/** Supervisor to actor. */
export type AgentInput =
  | {
      type: 'start';
      runId: string;
      generation: number;
      owner: string;
      resumed: boolean;
      /** The tree's provider with its key, when this supervisor has it; the stored spec never carries keys. */
      provider?: ProviderSpec;
      /** A review gate's provider with its key, likewise. */
      reviewer?: ProviderSpec;
      /** Someone listens to the live channel: publish what the run does as it happens. */
      live?: boolean;
      /** The embedder's tools this tree has, as data; the main thread runs them. */
      tools?: ToolDefinitionData[];
    }
  /** A message was committed to this actor's address. */
  | { type: 'mail' }
  /** Stop at the next step boundary and end the run as cancelled. */
  | { type: 'cancel' }
  /** Whether anyone listens to the live channel now (an observer came or went). */
  | { type: 'live'; on: boolean }
  /** Every live event before the flush with this id has been handed on. */
  | { type: 'live-flushed'; id: number };

export type WaitChildResult =
  | {
      status: 'ended';
      childStatus: RunStatus;
      reply: string | null;
      steps: number;
      tokens: number;
      reason: string | null;
    }
  | { status: 'background' };

/** How a run left the actor. */
export type RunExit =
  | { kind: 'ended'; status: RunStatus }
  | { kind: 'lease-lost' }
  | { kind: 'error'; error: SerializedError };

/** Actor to supervisor, besides requests. */
export type AgentOutput =
  | { type: 'ready' }
  | { type: 'run-exit'; runId: string; exit: RunExit }
  /** What the run is doing as it happens (see runtime/live.ts): never a committed fact. */
  | { type: 'live'; runId: string; data: LiveData; at: number }
  /** Asks for a `live-flushed` reply once the live events sent before it are handed on. */
  | { type: 'live-flush'; id: number };

export interface AgentWorkerData {
  storePath: string;
  storePort: MessagePort;
  /** The actor's end of its host channel (see ./host-channel.ts). */
  hostPort: MessagePort;
}

export const AGENT_WORKER_URL = new URL('./agent-worker.js', import.meta.url);

export function startAgentWorker(storePath: string, storePort: MessagePort, hostPort: MessagePort): Worker {
  const data: AgentWorkerData = { storePath, storePort, hostPort };
  return new Worker(AGENT_WORKER_URL, { workerData: data, transferList: [storePort, hostPort] });
}
