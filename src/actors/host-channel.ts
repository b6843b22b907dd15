/**
 * The host channel: everything an agent asks of the main thread (its approver, plan gate
 * and operator, the waits on children, the embedder's tools) over one typed interface,
 * {@link AgentHost}, on a MessagePort of its own. comlink carries the calls; errors cross as
 * the runtime's own classes (see errors.ts), and when the main thread's side goes away
 * every call still waiting is rejected with a typed error rather than left hanging.
 */
import type { MessagePort } from 'node:worker_threads';
import { expose, transferHandlers, wrap } from 'comlink/dist/esm/comlink.mjs';
import nodeEndpoint from 'comlink/dist/esm/node-adapter.mjs';
import { ActorExitedError, deserializeError, ErrorCode, type SerializedError, serializeError } from '../errors.js';
import type { AgentHost } from '../runtime/tools/ports.js';

/** The methods of the host, by name: a new method of AgentHost must be named here too. */
const METHODS: Record<keyof AgentHost, true> = {
  approve: true,
  reviewPlan: true,
  askOperator: true,
  waitChild: true,
  callTool: true,
  checkTool: true,
  abortTool: true,
  complete: true,
};

let installed = false;

/** Errors thrown on one side are rebuilt as their class on the other (comlink's own handler keeps only the message). */
function installErrorTransfer(): void {
  if (installed) return;
  installed = true;
  const base = transferHandlers.get('throw');
  if (!base) return;
  transferHandlers.set('throw', {
    canHandle: base.canHandle,
    serialize: (thrown: unknown) => [{ error: serializeError((thrown as { value: unknown }).value) }, []],
    deserialize: (data: unknown) => {
      throw deserializeError((data as { error: SerializedError }).error);
    },
  });
}

/** Serves `host` on `port` (the main thread's side). */
export function serveHost(host: AgentHost, port: MessagePort): void {
  installErrorTransfer();
  expose(host, nodeEndpoint(port));
}

/** The host as an agent's thread sees it, over `port`. */
export function connectHost(port: MessagePort): AgentHost {
  installErrorTransfer();
  const remote = wrap<AgentHost>(nodeEndpoint(port));
  let gone: ActorExitedError | null = null;
  const waiting = new Set<(error: Error) => void>();
  port.on('close', () => {
    gone = new ActorExitedError(
      ErrorCode.ActorExited,
      "the main thread's side of the host channel closed (the supervisor closed or its thread ended)",
    );
    for (const reject of waiting) reject(gone);
    waiting.clear();
  });
  const host: Partial<Record<keyof AgentHost, (input: never) => Promise<unknown>>> = {};
  for (const method of Object.keys(METHODS) as (keyof AgentHost)[]) {
    host[method] = (input: never) => {
      if (gone) return Promise.reject(gone);
      return new Promise((resolve, reject) => {
        waiting.add(reject);
        (remote[method] as (value: never) => Promise<unknown>)(input).then(
          (value) => {
            waiting.delete(reject);
            resolve(value);
          },
          (error: unknown) => {
            waiting.delete(reject);
            reject(error);
          },
        );
      });
    };
  }
  return host as AgentHost;
}
