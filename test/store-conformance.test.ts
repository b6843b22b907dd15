/** The store port's conformance suite: on SQLite and on PostgreSQL, each in-process and behind the store actor's thread. */
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { StoreClient, startStoreWorker } from '../dist/actors/store.js';
import { AGENT_READS, type StoreReads } from '../dist/store/port.js';
import { PostgresStore } from '../dist/store/postgres/index.js';
import { openLocalStore } from '../dist/store/sqlite/local.js';
import { sqliteReads, TraceReader } from '../dist/store/sqlite/reader.js';
import { storePortConformance } from './support/conformance.js';
import { freshDatabase } from './support/postgres.js';
import { tempStorePath } from './support/processes.js';

storePortConformance('SQLite, in-process', async () => {
  const path = tempStorePath();
  const store = openLocalStore(path);
  return {
    port: store,
    close: () => {
      store.close();
      rmSync(dirname(path), { recursive: true, force: true });
    },
  };
});

storePortConformance('SQLite, behind the store actor', async () => {
  const path = tempStorePath();
  const worker = await startStoreWorker({ target: { kind: 'sqlite', path, synchronous: 'NORMAL' }, killAt: null });
  const client = new StoreClient(worker);
  const reader = new TraceReader(path);
  return {
    port: { ...sqliteReads(reader), call: (op, input) => client.call(op, input) },
    close: async () => {
      reader.close();
      await worker.terminate();
      rmSync(dirname(path), { recursive: true, force: true });
    },
  };
});

storePortConformance('PostgreSQL', async () => {
  const database = await freshDatabase();
  const store = await PostgresStore.open(database.url);
  return {
    port: store,
    close: async () => {
      await store.close();
      await database.drop();
    },
  };
});

storePortConformance('PostgreSQL, behind the store actor', async () => {
  const database = await freshDatabase();
  const reads = await PostgresStore.open(database.url);
  const worker = await startStoreWorker({
    target: { kind: 'postgres', connectionString: database.url },
    killAt: null,
  });
  const client = new StoreClient(worker);
  return {
    port: { ...readsOf(reads), call: (op, input) => client.call(op, input) },
    close: async () => {
      await worker.terminate();
      await reads.close();
      await database.drop();
    },
  };
});

/** The reads of a PostgreSQL store as a plain object (its methods live on its prototype). */
function readsOf(store: PostgresStore): StoreReads {
  const reads: Record<string, unknown> = {};
  for (const name of AGENT_READS)
    reads[name] = (...args: unknown[]) => (store[name] as (...a: unknown[]) => unknown)(...args);
  return reads as unknown as StoreReads;
}
