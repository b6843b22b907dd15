// A model that follows a program given in its options: for each address, a list of
// replies, one per turn; the last one repeats. Lets a test say exactly what every
// agent of a tree does.
import { scriptedProvider, turn } from '../../../dist/testing/index.js';

export default function programModel(options = {}) {
  const programs = options.programs ?? {};
  return scriptedProvider(
    (request) => {
      const list = programs[request.metadata.address] ?? programs['*'] ?? [{ text: 'done' }];
      const reply = list[Math.min(turn(request), list.length - 1)];
      return reply;
    },
    { latencyMs: options.latencyMs ?? 0 },
  );
}
