// One benchmark actor: commits `steps` steps of its own run through the store actor,
// each awaited before the next, exactly as an agent actor does.
import { parentPort, workerData } from 'node:worker_threads';
import { StoreClient } from '../../dist/actors/store.js';
import { stepInput } from './rows.mjs';

const { port, fence, steps } = workerData;
const store = new StoreClient(port);
parentPort.once('message', async () => {
  for (let seq = 1; seq <= steps; seq++) await store.call('commitStep', stepInput(fence, seq));
  parentPort.postMessage('done');
});
parentPort.postMessage('ready');
