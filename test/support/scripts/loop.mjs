// One agent taking `steps` steps, each a call to read_messages with no wait, then a
// final answer. `latencyMs` slows each model call; `exitAtStep` makes the worker
// thread exit once (a marker file remembers it did) to test an actor dying mid-run.
import { existsSync, writeFileSync } from 'node:fs';
import { scriptedProvider, turn } from '../../../dist/testing/index.js';

export default function loopModel(options = {}) {
  const steps = options.steps ?? 5;
  return scriptedProvider(
    (request) => {
      const step = turn(request);
      if (options.exitAtStep !== undefined && step === options.exitAtStep && !existsSync(options.marker)) {
        writeFileSync(options.marker, 'exited');
        process.exit(3);
      }
      if (step < steps) return { text: `step ${step}`, toolCalls: [{ name: 'read_messages', args: {} }] };
      return { text: `done after ${steps} steps` };
    },
    { latencyMs: options.latencyMs ?? 0 },
  );
}
