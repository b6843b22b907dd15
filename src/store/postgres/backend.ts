/** The PostgreSQL backend for the threads (see ../backend.ts): the store actor's batch writer and an agent thread's reads. */
import type { StoreBackend } from '../backend.js';
import { storeReads } from '../port.js';
import { TraceQueries } from '../queries.js';
import type { PostgresStoreTarget } from '../target.js';
import { PostgresBatchWriter } from './batch.js';
import { PostgresStore } from './index.js';

const QUERIES = new TraceQueries();

export function postgresBackend(target: PostgresStoreTarget): StoreBackend {
  return {
    target,
    async openBatchWriter({ onHint }) {
      const writer = await PostgresBatchWriter.open(target);
      // Other hosts' commits reach this one's supervisor as hints (see notify.ts).
      await writer.listen(onHint);
      return writer;
    },
    // The same reads as the store's handle, over a small pool the thread's actors share.
    openReads: () => {
      const store = PostgresStore.attach(target, { max: 4 });
      return storeReads(QUERIES, (body) => store.query(body));
    },
  };
}
