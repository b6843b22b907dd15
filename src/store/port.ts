/**
 * The store port: every write the runtime makes and the reads an agent makes, as one
 * interface the rest of the code depends on. Writes are named operations with an input
 * and a result ({@link StoreOperations}, read off the write rules' own types in
 * rules/index.ts); the store actor's request protocol is derived from that map, and so is
 * every client of it. Reads are async, so a backend that is not in-process SQLite can
 * implement them; the SQLite backend answers them from its reader connection at once.
 */
import type { TraceQueries } from './queries.js';
import type { StoreOperation, StoreOperations, StoreRequest } from './rules/index.js';
import type { Q } from './sql.js';

export type { StoreOperation, StoreOperations } from './rules/index.js';
/** One write as a message: the operation's name and its input. */
export type StoreRequestBody = StoreRequest;

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
  'accounts',
  'cost',
  'question',
  'intent',
  'intents',
  'hasAddress',
  'inbox',
  'notes',
] as const;
export type AgentRead = (typeof AGENT_READS)[number];

/** The reads, async: each answers what the trace holds once every write it follows has committed. */
export type StoreReads = {
  [K in AgentRead]: (...args: Parameters<TraceQueries[K]>) => Promise<Answered<ReturnType<TraceQueries[K]>>>;
};

type Answered<G> = G extends Q<infer R> ? R : never;

/** The port an agent runs against: the store's writes and its reads. */
export interface StorePort extends StoreWrites, StoreReads {}

/**
 * An agent's reads over any backend, each run through `query`: a SQLite reader's, answered
 * at once, or a PostgreSQL store's, awaited. One member per read, so each is typed by its
 * query and a read missing here fails to compile.
 */
export function storeReads(queries: TraceQueries, query: <T>(body: Q<T>) => Promise<T>): StoreReads {
  return {
    run: (...args) => query(queries.run(...args)),
    spec: (...args) => query(queries.spec(...args)),
    steps: (...args) => query(queries.steps(...args)),
    events: (...args) => query(queries.events(...args)),
    draft: (...args) => query(queries.draft(...args)),
    stepImages: (...args) => query(queries.stepImages(...args)),
    patch: (...args) => query(queries.patch(...args)),
    modelCalls: (...args) => query(queries.modelCalls(...args)),
    account: (...args) => query(queries.account(...args)),
    accounts: (...args) => query(queries.accounts(...args)),
    cost: (...args) => query(queries.cost(...args)),
    question: (...args) => query(queries.question(...args)),
    intent: (...args) => query(queries.intent(...args)),
    intents: (...args) => query(queries.intents(...args)),
    hasAddress: (...args) => query(queries.hasAddress(...args)),
    inbox: (...args) => query(queries.inbox(...args)),
    notes: (...args) => query(queries.notes(...args)),
  };
}
