/**
 * The thread protocol, in one place. Every message has a `type`; requests carry an
 * `id` their reply repeats; errors cross as {@link SerializedError} and are rebuilt as
 * io-harness error classes. When the thread serving a client exits, every request
 * still pending on it is rejected with a typed error: nothing waits forever.
 */
import type { MessagePort } from 'node:worker_threads';
import { ActorExitedError, deserializeError, type ErrorCode, type SerializedError, serializeError } from '../errors.js';
// Registers ProviderError with the error registry, so a reply rebuilds it as itself.
import '../runtime/providers/types.js';

export type Request<B> = { type: 'request'; id: number; body: B };
export type Reply =
  | { type: 'reply'; id: number; ok: true; value: unknown }
  | { type: 'reply'; id: number; ok: false; error: SerializedError };

export function okReply(id: number, value: unknown): Reply {
  return { type: 'reply', id, ok: true, value };
}

export function errorReply(id: number, error: unknown): Reply {
  return { type: 'reply', id, ok: false, error: serializeError(error) };
}

/** The part of a port or worker a client needs. */
export interface Endpoint {
  postMessage(value: unknown, transferList?: readonly (MessagePort | ArrayBuffer)[]): void;
  on(event: 'message', listener: (value: unknown) => void): unknown;
}

interface Pending {
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/**
 * Request/reply over an endpoint. Messages that are not replies go to `onOther`.
 * {@link RequestClient.fail} rejects everything pending and every later call.
 */
export class RequestClient<B> {
  readonly #endpoint: Endpoint;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #failure: Error | null = null;
  /** Hears how many requests wait for a reply, each time that changes (the supervisor keeps the process up by it). */
  onPendingChange: ((count: number) => void) | null = null;

  constructor(endpoint: Endpoint, onOther?: (message: { type: string }) => void) {
    this.#endpoint = endpoint;
    endpoint.on('message', (message: unknown) => {
      const typed = message as { type: string };
      if (typed.type === 'reply') {
        const reply = message as Reply;
        const pending = this.#pending.get(reply.id);
        if (!pending) return;
        this.#pending.delete(reply.id);
        this.onPendingChange?.(this.#pending.size);
        if (reply.ok) pending.resolve(reply.value);
        else pending.reject(deserializeError(reply.error));
      } else {
        onOther?.(typed);
      }
    });
  }

  get pendingCount(): number {
    return this.#pending.size;
  }

  request<T>(body: B, transferList?: readonly MessagePort[]): Promise<T> {
    if (this.#failure) return Promise.reject(this.#failure);
    const id = this.#nextId++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.onPendingChange?.(this.#pending.size);
      const message: Request<B> = { type: 'request', id, body };
      this.#endpoint.postMessage(message, transferList);
    });
  }

  /** The serving thread is gone: reject all pending requests, and all later ones. */
  fail(code: ErrorCode, message: string): void {
    const error = new ActorExitedError(code, message);
    this.#failure = error;
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
  }
}
