// A model that answers at once: `hi…` gets a reply; `read …` reads notes.txt, then answers.
import { scriptedProvider } from 'io-harness/testing';

export default function sessionModel() {
  return scriptedProvider((request) => {
    const last = request.transcript.at(-1);
    const usage = { inputTokens: 10, outputTokens: 2 };
    if (last?.role === 'tool') return { text: 'read it', usage };
    if (last?.role === 'user' && last.text.startsWith('read '))
      return { text: 'reading', toolCalls: [{ name: 'read_file', args: { path: 'notes.txt' } }], usage };
    return { text: 'hello', usage };
  });
}
