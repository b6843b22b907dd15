/**
 * The file piscina loads on every thread of the runtime's pools (the agent actors', the
 * search's), standing in front of the real entry named by the pool's `workerData.entry`.
 *
 * piscina first `require`s its file. On Node 20.19 and later, requiring an ES module
 * instantiates its whole graph synchronously, and a thread terminated inside that window
 * (a pool closed, or a task aborted, while a thread is still starting) takes the whole
 * process down with a fatal V8 error. This file is CommonJS, required the classic way,
 * and it imports the real entry asynchronously, which a termination stops safely.
 */
import { workerData } from 'node:worker_threads';

type Handler = (task: unknown) => unknown;

const entry = (workerData as { entry?: unknown } | null)?.entry;
if (typeof entry !== 'string') throw new Error('a pool thread needs workerData.entry: the URL of its entry module');
// Started as the thread starts, so the entry's modules load before its first task.
const loaded: Promise<{ default: Handler }> = import(entry);
loaded.catch(() => undefined);

export = async function runTask(task: unknown): Promise<unknown> {
  const module = await loaded;
  return module.default(task);
};
