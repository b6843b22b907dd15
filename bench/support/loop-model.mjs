// A model that answers at once: `steps` steps each calling read_messages, then a final answer.
import { scriptedProvider } from 'io-harness/testing';

export default function loopModel(options = {}) {
  const steps = options.steps ?? 100;
  return scriptedProvider((request) => {
    const step = request.transcript.filter((entry) => entry.role === 'assistant').length;
    if (step < steps)
      return {
        text: 'next',
        toolCalls: [{ name: 'read_messages', args: {} }],
        usage: { inputTokens: 10, outputTokens: 2 },
      };
    return { text: 'done', usage: { inputTokens: 10, outputTokens: 2 } };
  });
}
