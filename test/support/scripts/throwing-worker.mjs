// A worker thread that answers each request by throwing one of the runtime's error
// classes, named by the request, as the agent and store actors reply to a failed request.
import { parentPort } from 'node:worker_threads';
import { errorReply } from '../../../dist/actors/protocol.js';
import {
  ActorExitedError,
  CodeNotKeptError,
  ConflictError,
  ContainmentUnavailableError,
  HarnessError,
  InvalidArgumentError,
  LeaseLostError,
  OutputSchemaError,
  StoreError,
} from '../../../dist/errors.js';
import { ProviderError } from '../../../dist/runtime/providers/types.js';

const samples = {
  ProviderError: () => {
    const error = new ProviderError({
      kind: 'http',
      provider: 'openai',
      message: 'openai answered 429: slow down',
      statusCode: 429,
      retryAfterMs: 1500,
      responseBody: '{"error":{"type":"rate_limit"}}',
      rateLimits: { requests: { limit: 100, remaining: 0, resetMs: 1500 } },
    });
    error.details.attempts = [{ provider: 'openai', kind: 'http', statusCode: 429 }];
    return error;
  },
  ConflictError: () => new ConflictError('run-1', { owner: 'o', pid: 7, host: 'h', expiresAt: 1 }),
  LeaseLostError: () => new LeaseLostError('run-1', 3, 4),
  InvalidArgumentError: () => new InvalidArgumentError('pass a number', { details: { field: 'steps' } }),
  OutputSchemaError: () => new OutputSchemaError('$ref', '/properties/a', 'the schema uses $ref'),
  StoreError: () => new StoreError('STORE_NOT_SQLITE', 'not a SQLite file'),
  ActorExitedError: () => new ActorExitedError('ACTOR_EXITED', 'the worker exited'),
  ContainmentUnavailableError: () =>
    new ContainmentUnavailableError('the bubblewrap rung cannot be had', {
      rung: 'bubblewrap',
      reason: 'not installed',
    }),
  CodeNotKeptError: () =>
    new CodeNotKeptError('will not load planted-pkg', {
      package: 'planted-pkg',
      path: '/tmp/node_modules/planted-pkg',
    }),
  HarnessError: () => new HarnessError('RUN_NOT_FOUND', 'run x is not in the store', { details: { runId: 'x' } }),
};

parentPort.on('message', (message) => {
  if (message.type !== 'request') return;
  parentPort.postMessage(errorReply(message.id, samples[message.body.make]()));
});
