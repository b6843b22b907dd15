/** The store actor's thread: wires the thread's port to the store actor (./store-actor.ts). See ./store.ts for the protocol. */
import { parentPort, workerData } from 'node:worker_threads';
import type { StoreWorkerData } from './store.js';
import { serveStore } from './store-actor.js';

await serveStore(workerData as StoreWorkerData, parentPort as NonNullable<typeof parentPort>, () => process.exit(0));
