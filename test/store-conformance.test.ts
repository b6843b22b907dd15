/** The store port's conformance suite on the SQLite backend: in-process, and behind the store actor's thread. */
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { StoreClient, startStoreWorker } from '../dist/actors/store.js';
import { openLocalStore } from '../dist/store/local.js';
import { sqliteReads } from '../dist/store/port.js';
import { TraceReader } from '../dist/store/reader.js';
import { storePortConformance } from './support/conformance.js';
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
  const worker = await startStoreWorker({ path, synchronous: 'NORMAL', killAt: null });
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
