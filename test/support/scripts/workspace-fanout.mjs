// A workspace root that spawns three children without waiting and finishes; child 0's
// model is slow, so with one slot the other two wait in the queue.
import { assistantTurns } from '../../../dist/testing/index.js';

export function fanoutScript() {
  return (call) => {
    const task = String(call.body.messages.find((message) => message.role === 'user')?.content ?? '');
    if (task.startsWith('child 0')) return { text: 'child 0 done', latencyMs: 20_000 };
    if (task.startsWith('child ')) return { text: 'child done' };
    return assistantTurns(call) === 0
      ? {
          text: 'spawning',
          toolCalls: [0, 1, 2].map((i) => ({
            name: 'spawn_agent',
            args: { task: `child ${i}`, wait: false, as: `child-${i}` },
          })),
        }
      : { text: 'root done' };
  };
}
