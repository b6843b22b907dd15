/**
 * The store port: every write the runtime makes and the reads an agent makes, as one
 * interface the rest of the code depends on. Writes are named operations with an input
 * and a result ({@link StoreOperations}); the store actor's request protocol is derived
 * from that map, and so is every client of it. Reads are async, so a backend that is not
 * in-process SQLite can implement them; the SQLite backend answers them from a
 * {@link TraceReader} at once.
 */
import type { EventData, RunStatus } from '../runtime/events.js';
import type { Completion } from '../runtime/provider.js';
import type { TraceReader } from './reader.js';
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
  QuestionInput,
  RememberInput,
  RememberResult,
  RestorePointInput,
  SpawnInput,
  SpawnResult,
} from './records.js';

/** Every write the store serves: its input and its result. */
export interface StoreOperations {
  createRoot: [CreateRootInput, { generation: number }];
  acquireLease: [LeaseClaim & { runId: string }, { generation: number }];
  renewLeases: [
    { owner: string; leases: { runId: string; generation: number }[]; expiresAt: number },
    { lost: string[] },
  ];
  releaseLease: [Fence, undefined];
  admit: [LeaseClaim & { childId: string }, { status: 'admitted'; generation: number } | { status: 'gone' }];
  claim: [
    LeaseClaim & { roots: string[]; limit: number; driving?: string[] },
    { claimed: { runId: string; rootId: string; address: string; generation: number; resumed: boolean }[] },
  ];
  park: [Fence & { want: 'park' | 'back'; now: number }, { granted: boolean }];
  spawn: [SpawnInput, SpawnResult];
  commitStep: [CommitStepInput, CommitStepResult];
  endRun: [EndRunInput, undefined];
  recordEvents: [Fence & { events: EventData[]; now: number }, undefined];
  cancelQueued: [{ rootId: string; now: number }, { cancelled: string[] }];
  recordRestorePoint: [RestorePointInput, { created: boolean }];
  dropBacklog: [{ runId: string; now: number }, { cancelled: string[] }];
  beginIntent: [IntentInput, IntentBegin];
  finishIntent: [Fence & { seq: number; key: string; result: string; outcome: string; now: number }, undefined];
  pause: [
    Fence & {
      seq: number;
      completion: Completion;
      partial: unknown;
      question: QuestionInput;
      events: EventData[];
      now: number;
    },
    undefined,
  ];
  answer: [{ questionId: string; answer: unknown; by: string; now: number }, { runId: string; rootId: string }];
  resumePaused: [
    LeaseClaim & { runId: string },
    { status: 'resumed'; generation: number } | { status: 'waiting'; open: string[] },
  ];
  clearStepImages: [Fence & { seq: number; paths: string[]; now: number }, undefined];
  regate: [
    { runId: string; events: EventData[]; passed: boolean; reply: string | null; now: number },
    { status: RunStatus },
  ];
  openSession: [{ sessionId: string; root: string; now: number }, undefined];
  beginTurn: [{ sessionId: string; turnId: string; parent: string | null; text: string; now: number }, { seq: number }];
  startedTurn: [{ turnId: string; runId: string }, undefined];
  endTurn: [
    { turnId: string; status: string; reply: string | null; now: number; advance?: boolean },
    { advanced: true } | { advanced: false; head: string | null },
  ];
  moveHead: [{ sessionId: string; turnId: string }, undefined];
  steer: [
    { runId: string; kind: 'steer' | 'interrupt'; text: string | null; by: string; now: number },
    { steerId: number },
  ];
  takeSteers: [Fence & { now: number }, { steers: string[]; interrupt: boolean }];
  endReply: [
    Fence & { completion: Completion; calls: ModelCallRecord[]; events: EventData[]; now: number },
    { status: 'finished' | 'exhausted' },
  ];
  remember: [RememberInput, RememberResult];
  forget: [
    { scope: string; key: string; by: Fence | null; now: number },
    { status: 'forgotten' | 'absent' | 'pinned' },
  ];
  pinNote: [{ scope: string; key: string; pinned: boolean; now: number }, { status: 'done' | 'absent' }];
  drawNotes: [{ by: Fence; noteIds: number[]; how: 'block' | 'recall'; now: number }, { drawn: number }];
}
export type StoreOperation = keyof StoreOperations;
/** One write as a message: the operation's name and its input. */
export type StoreRequestBody = { [K in StoreOperation]: { op: K; input: StoreOperations[K][0] } }[StoreOperation];

const OPERATIONS: Record<StoreOperation, true> = {
  openSession: true,
  beginTurn: true,
  startedTurn: true,
  endTurn: true,
  moveHead: true,
  steer: true,
  takeSteers: true,
  endReply: true,
  createRoot: true,
  acquireLease: true,
  renewLeases: true,
  releaseLease: true,
  admit: true,
  claim: true,
  park: true,
  spawn: true,
  commitStep: true,
  endRun: true,
  recordEvents: true,
  cancelQueued: true,
  recordRestorePoint: true,
  dropBacklog: true,
  beginIntent: true,
  finishIntent: true,
  pause: true,
  answer: true,
  resumePaused: true,
  clearStepImages: true,
  regate: true,
  remember: true,
  forget: true,
  pinNote: true,
  drawNotes: true,
};
/** The names of the store's writes, for a backend that dispatches them by name. */
export const STORE_OPERATIONS = Object.freeze(Object.keys(OPERATIONS) as StoreOperation[]);

/** True when `op` names one of the store's writes. */
export function isStoreOperation(op: unknown): op is StoreOperation {
  return typeof op === 'string' && Object.hasOwn(OPERATIONS, op);
}

/** The writes: one call per operation, committed before it resolves. */
export interface StoreWrites {
  call<K extends StoreOperation>(op: K, input: StoreOperations[K][0]): Promise<StoreOperations[K][1]>;
}

/** The reads an agent makes of the store while it runs. */
export const AGENT_READS = [
  'run',
  'spec',
  'steps',
  'events',
  'draft',
  'stepImages',
  'patch',
  'modelCalls',
  'account',
  'cost',
  'question',
  'intent',
  'hasAddress',
  'inbox',
  'notes',
] as const;
export type AgentRead = (typeof AGENT_READS)[number];

/** The reads, async: each answers what the trace holds once every write it follows has committed. */
export type StoreReads = {
  [K in AgentRead]: (...args: Parameters<TraceReader[K]>) => Promise<ReturnType<TraceReader[K]>>;
};

/** The port an agent runs against: the store's writes and its reads. */
export interface StorePort extends StoreWrites, StoreReads {}

/** The reads of a SQLite store, answered from a reader connection. */
export function sqliteReads(reader: TraceReader): StoreReads {
  const reads: Record<string, (...args: unknown[]) => Promise<unknown>> = {};
  for (const name of AGENT_READS) {
    const read = reader[name] as (...args: unknown[]) => unknown;
    reads[name] = (...args: unknown[]) => {
      try {
        return Promise.resolve(read.apply(reader, args));
      } catch (error) {
        return Promise.reject(error);
      }
    };
  }
  return reads as unknown as StoreReads;
}
