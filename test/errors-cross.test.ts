/**
 * Errors cross threads whole: each class the runtime raises, thrown in a worker thread and
 * replied over the thread protocol, is rebuilt on this side as that class, with its fields.
 */
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { RequestClient } from '../dist/actors/protocol.js';
import {
  ActorExitedError,
  CodeNotKeptError,
  ConflictError,
  ContainmentUnavailableError,
  HarnessError,
  InvalidArgumentError,
  LeaseLostError,
  OutputSchemaError,
  registeredErrorClasses,
  StoreError,
} from '../dist/errors.js';
import { ProviderError } from '../dist/index.js';

const worker = new Worker(join(import.meta.dirname, 'support', 'scripts', 'throwing-worker.mjs'));
const client = new RequestClient<{ make: string }>(worker);
afterAll(() => worker.terminate());

async function thrownThere(make: string): Promise<unknown> {
  return client.request({ make }).then(
    () => {
      throw new Error(`the worker did not throw ${make}`);
    },
    (error: unknown) => error,
  );
}

describe('an error thrown in another thread', () => {
  it('is a ProviderError on this side, with its kind, isRetryable and what the vendor said', async () => {
    const error = await thrownThere('ProviderError');
    expect(error).toBeInstanceOf(ProviderError);
    const provider = error as ProviderError;
    expect(provider.kind).toBe('http');
    expect(provider.isRetryable).toBe(true);
    expect(provider.statusCode).toBe(429);
    expect(provider.retryAfterMs).toBe(1500);
    expect(provider.provider).toBe('openai');
    expect(provider.responseBody).toBe('{"error":{"type":"rate_limit"}}');
    expect(provider.rateLimits).toEqual({ requests: { limit: 100, remaining: 0, resetMs: 1500 } });
    expect(provider.message).toBe('openai answered 429: slow down');
    expect(provider.details.attempts).toEqual([{ provider: 'openai', kind: 'http', statusCode: 429 }]);
    expect(provider.stack).toContain('throwing-worker.mjs');
    expect(HarnessError.isInstance(provider)).toBe(true);
  });

  it.each([
    ['ConflictError', ConflictError, { holder: { owner: 'o', pid: 7, host: 'h', expiresAt: 1 } }],
    ['LeaseLostError', LeaseLostError, { code: 'LEASE_LOST', details: { runId: 'run-1', generation: 3, current: 4 } }],
    ['InvalidArgumentError', InvalidArgumentError, { message: 'pass a number', details: { field: 'steps' } }],
    ['OutputSchemaError', OutputSchemaError, { keyword: '$ref', pointer: '/properties/a' }],
    ['StoreError', StoreError, { code: 'STORE_NOT_SQLITE', message: 'not a SQLite file' }],
    ['ActorExitedError', ActorExitedError, { code: 'ACTOR_EXITED', message: 'the worker exited' }],
    [
      'ContainmentUnavailableError',
      ContainmentUnavailableError,
      { code: 'CONTAINMENT_UNAVAILABLE', details: { rung: 'bubblewrap', reason: 'not installed' } },
    ],
    [
      'CodeNotKeptError',
      CodeNotKeptError,
      { code: 'CODE_NOT_KEPT', details: { package: 'planted-pkg', path: '/tmp/node_modules/planted-pkg' } },
    ],
  ] as const)('is a %s on this side, with its fields', async (name, cls, fields) => {
    const error = await thrownThere(name);
    expect(error).toBeInstanceOf(cls);
    expect((error as Error).name).toBe(name);
    expect(error).toMatchObject(fields);
  });

  it('covers every registered class, and a plain HarnessError keeps its code and details', async () => {
    expect(registeredErrorClasses()).toEqual([
      'ActorExitedError',
      'CodeNotKeptError',
      'ConflictError',
      'ContainmentUnavailableError',
      'InvalidArgumentError',
      'LeaseLostError',
      'OutputSchemaError',
      'ProviderError',
      'StoreError',
    ]);
    const error = await thrownThere('HarnessError');
    expect(HarnessError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({
      code: 'RUN_NOT_FOUND',
      details: { runId: 'x' },
      message: 'run x is not in the store',
    });
  });
});
