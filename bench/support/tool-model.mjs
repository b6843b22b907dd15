// A model that answers at once and calls one tool per step: `name` with `args`.
import { scriptedProvider } from 'io-harness/testing';

export default function toolModel(options = {}) {
  const steps = options.steps ?? 100;
  return scriptedProvider((request) => {
    const step = request.transcript.filter((entry) => entry.role === 'assistant').length;
    if (step >= steps) return { text: 'done', usage: { inputTokens: 10, outputTokens: 2 } };
    return {
      text: 'next',
      toolCalls: [{ name: options.name, args: options.args }],
      usage: { inputTokens: 10, outputTokens: 2 },
    };
  });
}
