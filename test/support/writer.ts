/** Direct use of the store's write operations, for unit tests of their semantics on a real file. */
import type Database from 'better-sqlite3';
import { HOST } from '../../dist/store/liveness.js';
import type { CommitStepInput, Fence, SpawnInput } from '../../dist/store/records.js';
import { openWriter } from '../../dist/store/sqlite/schema.js';
import { type StoreWriter, sqliteWriter } from '../../dist/store/sqlite/writer.js';
import { tempStorePath } from './processes.js';

export interface Claim {
  owner: string;
  pid?: number;
  host?: string;
  ttlMs?: number;
  now?: number;
}

export function claimOf(claim: Claim) {
  return {
    owner: claim.owner,
    pid: claim.pid ?? process.pid,
    host: claim.host ?? HOST,
    ttlMs: claim.ttlMs ?? 60_000,
    now: claim.now ?? Date.now(),
  };
}

/** A fresh store file with its writer. */
export function openStoreWriter(): { db: Database.Database; writer: StoreWriter } {
  const db = openWriter(tempStorePath());
  return { db, writer: sqliteWriter(db) };
}

/** What creates a root run with no ceilings under `claim`. */
export function rootInput(runId: string, claim: Claim) {
  return {
    runId,
    task: 't',
    spec: { provider: null },
    ceilings: { steps: null, tokens: null, wallMs: null },
    maxTotalAgents: null,
    maxConcurrentAgents: null,
    maxWaitSecs: 30,
    claim: claimOf(claim),
  };
}

/** Creates a root run with no ceilings under `claim`; returns its fence. */
export function createRoot(writer: StoreWriter, runId: string, claim: Claim): Fence {
  const { generation } = writer.call('createRoot', rootInput(runId, claim));
  return { runId, generation, owner: claim.owner };
}

/** A spawn by `fence`'s run of `newRunId` under spawn key `key`: queued at once, asking for nothing; `extra` says more. */
export function spawnInput(fence: Fence, key: string, newRunId: string, extra: Partial<SpawnInput> = {}): SpawnInput {
  return {
    ...fence,
    key,
    task: 'child task',
    as: null,
    asked: { steps: null, tokens: null, wallMs: null },
    maxWaitSecs: null,
    newRunId,
    queueNow: true,
    now: Date.now(),
    ...extra,
  };
}

const completion = { text: '', toolCalls: [], usage: { inputTokens: 1, outputTokens: 1 }, model: 'm' };

/** A step with nothing in it but what `extra` says. */
export function emptyStep(fence: Fence, seq: number, extra: Partial<CommitStepInput> = {}): CommitStepInput {
  return {
    ...fence,
    seq,
    completion,
    observations: [],
    usage: completion.usage,
    consumed: [],
    sent: [],
    spawned: [],
    events: [],
    final: null,
    now: Date.now(),
    ...extra,
  };
}
