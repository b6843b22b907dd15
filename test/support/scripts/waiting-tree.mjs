// A tree that waits: the root spawns `children` agents (3 by default) without waiting on
// them, then reads its inbox; every child reads its inbox; each read waits up to 30
// seconds and nothing ever arrives. It ends only when it is cancelled.
import { scriptedProvider, turn } from '../../../dist/testing/index.js';

export default function waitingTree(options = {}) {
  const children = options.children ?? 3;
  return scriptedProvider((request) => {
    if (request.metadata.address === 'root' && turn(request) === 0) {
      return {
        toolCalls: Array.from({ length: children }, (_, i) => ({
          name: 'spawn_agent',
          args: { task: `wait ${i + 1}`, as: `w${i + 1}`, wait: false },
        })),
      };
    }
    return { toolCalls: [{ name: 'read_messages', args: { wait_secs: 30 } }] };
  });
}
