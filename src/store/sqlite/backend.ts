/** The SQLite backend for the threads (see ../backend.ts): the store actor's batch writer and an agent thread's reads. */
import type { StoreBackend } from '../backend.js';
import type { SqliteTarget } from '../target.js';
import { BatchWriter } from './batch.js';
import { sqliteReads, TraceReader } from './reader.js';

export function sqliteBackend(target: SqliteTarget): StoreBackend {
  return {
    target,
    openBatchWriter: async () => new BatchWriter(target.path, { synchronous: target.synchronous ?? 'NORMAL' }),
    // A small page cache: each agent reads little, and a thread's actors share the connection.
    openReads: () => sqliteReads(new TraceReader(target.path, { cacheKiB: 2048 })),
  };
}
