/**
 * What a piscina pool of the runtime is given to load on its threads: the CommonJS
 * stand-in (./thread-entry.cts, which says why) and the real entry it imports.
 */
import { fileURLToPath } from 'node:url';

const THREAD_ENTRY = fileURLToPath(new URL('./thread-entry.cjs', import.meta.url));

/** piscina's `filename` and `workerData` for a pool whose threads run `entry`'s default export. */
export function poolEntry(entry: URL): { filename: string; workerData: { entry: string } } {
  return { filename: THREAD_ENTRY, workerData: { entry: entry.href } };
}
