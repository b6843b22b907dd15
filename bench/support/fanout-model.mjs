// The fan-out benchmark's model: the root spawns `children` agents without waiting and
// answers; every child takes `steps` steps. Every call takes `latencyMs`.
import { scriptedProvider } from 'io-harness/testing';

export default function fanoutModel(options = {}) {
  const { children = 1000, steps = 3, latencyMs = 200 } = options;
  return scriptedProvider(
    (request) => {
      const step = request.transcript.filter((entry) => entry.role === 'assistant').length;
      if (request.metadata.address === 'root') {
        if (step === 0) {
          return {
            toolCalls: Array.from({ length: children }, (_, i) => ({
              name: 'spawn_agent',
              args: { task: `part ${i}`, wait: false },
            })),
          };
        }
        return { text: 'spawned them all' };
      }
      if (step < steps - 1) return { toolCalls: [{ name: 'read_messages', args: {} }] };
      return { text: 'done' };
    },
    { latencyMs },
  );
}
