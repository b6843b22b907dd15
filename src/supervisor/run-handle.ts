/**
 * A tree's handle, as run(), resume() and join() give it: its result, its cancel, its parts
 * as a stream (./run-stream.ts) and the root's work as the AI SDK's UI message stream
 * (../ui/message-stream.ts).
 */
import type { ServerResponse } from 'node:http';
import type { Q } from '../store/sql.js';
import { pipeUIMessageStream, rootSource, uiMessageResponse } from '../ui/message-stream.js';
import type { RunHandle, TreeResult } from './handles.js';
import { type Observe, rootText, runParts } from './run-stream.js';

/** What a handle reaches its supervisor through. */
export interface HandlePorts {
  observe: Observe;
  read<T>(query: Q<T>): Promise<T>;
  cancel(rootId: string): Promise<void>;
}

export function runHandle<Output>(
  ports: HandlePorts,
  rootId: string,
  result: Promise<TreeResult<Output>>,
): RunHandle<Output> {
  const source = () => rootSource(ports, rootId, rootId, result);
  return {
    rootId,
    result,
    cancel: () => ports.cancel(rootId),
    [Symbol.asyncIterator]: () => runParts(ports.observe, rootId, result),
    textStream: { [Symbol.asyncIterator]: () => rootText(runParts(ports.observe, rootId, result), rootId) },
    toUIMessageStreamResponse: (init?: ResponseInit) => uiMessageResponse(source(), init),
    pipeUIMessageStreamToResponse: (
      response: ServerResponse,
      init?: { status?: number; headers?: Record<string, string> },
    ) => pipeUIMessageStream(source(), response, init),
  };
}
