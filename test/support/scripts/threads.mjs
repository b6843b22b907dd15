// Agents that say which thread hosts them: every step's text and every answer is
// `thread <id>` (the worker thread's id). With `children`, the root spawns that many
// agents without waiting in its first step and then answers; every other agent takes
// `steps` steps of read_messages, then answers. `exitAtStep` makes the agent's thread
// exit once at that step (a marker file remembers it did), taking its neighbours with it.
// `waitOnChildren` spawns them waiting on each; `failNewThreads` (a path) is written as the
// root starts, so no agent thread can start after it (the agent worker's test hook).
import { existsSync, writeFileSync } from 'node:fs';
import { threadId } from 'node:worker_threads';
import { scriptedProvider, turn } from '../../../dist/testing/index.js';

export default function threadsModel(options = {}) {
  const children = options.children ?? 0;
  const steps = options.steps ?? 2;
  return scriptedProvider(
    (request) => {
      const step = turn(request);
      const here = `thread ${threadId}`;
      if (request.metadata.address === 'root' && children > 0) {
        if (step > 0) return { text: here };
        if (options.failNewThreads) writeFileSync(options.failNewThreads, 'no new threads');
        return {
          text: here,
          toolCalls: Array.from({ length: children }, (_, i) => ({
            name: 'spawn_agent',
            args: { task: `child ${i + 1}`, as: `c${i + 1}`, wait: options.waitOnChildren === true },
          })),
        };
      }
      if (options.exitAtStep !== undefined && step === options.exitAtStep && !existsSync(options.marker)) {
        writeFileSync(options.marker, 'exited');
        process.exit(3);
      }
      if (step < steps) return { text: here, toolCalls: [{ name: 'read_messages', args: {} }] };
      return { text: here };
    },
    { latencyMs: options.latencyMs ?? 0 },
  );
}
