// Root spawns options.children agents without waiting (in one step), then reads its
// inbox until every child has reported, then answers. Each child takes options.steps
// steps. With options.finishEarly the root answers at once instead of reading.
import { scriptedProvider, toolResults, turn } from '../../../dist/testing/index.js';

export default function fanoutModel(options = {}) {
  const children = options.children ?? 4;
  const steps = options.steps ?? 1;
  return scriptedProvider(
    (request) => {
      const step = turn(request);
      if (request.metadata.address === 'root') {
        if (step === 0) {
          return {
            toolCalls: Array.from({ length: children }, (_, i) => ({
              name: 'spawn_agent',
              args: { task: `child ${i + 1}`, as: `c${i + 1}`, wait: false },
            })),
          };
        }
        if (options.finishEarly) return { text: 'not waiting for anyone' };
        const reports = toolResults(request)
          .filter((r) => r.name === 'read_messages' && r.content.startsWith('['))
          .flatMap((r) => JSON.parse(r.content)).length;
        if (reports < children) return { toolCalls: [{ name: 'read_messages', args: { wait_secs: 30 } }] };
        return { text: `${reports} reports` };
      }
      if (step < steps - 1) return { toolCalls: [{ name: 'read_messages', args: {} }] };
      return { text: `${request.metadata.address} done` };
    },
    { latencyMs: options.latencyMs ?? 0 },
  );
}
