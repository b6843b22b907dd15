// A model (run inside the agent's thread) that streams a read_file call, then, before its
// completion ends, changes the file on disk. The read's result shows which state it saw:
// the state before the change means it started while the completion was still streaming.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export default function earlyRead(options) {
  return {
    name: 'early',
    async complete(request, _signal, hooks) {
      const turn = request.transcript.filter((entry) => entry.role === 'assistant').length;
      if (turn > 0) return { text: 'done', toolCalls: [], usage: { inputTokens: 10, outputTokens: 1 }, model: 'early' };
      const calls = [
        { id: 'call_0', name: 'read_file', args: { path: options.file } },
        { id: 'call_1', name: 'write_file', args: { path: 'other.txt', content: 'x\n' } },
      ];
      if (options.announce) hooks?.onToolCall?.(calls[0], 0);
      // Everything the model says after the call: here, the file changes meanwhile.
      writeFileSync(join(options.root, options.file), 'changed while the completion was still streaming\n');
      if (options.announce) hooks?.onToolCall?.(calls[1], 1);
      return { text: 'reading', toolCalls: calls, usage: { inputTokens: 10, outputTokens: 5 }, model: 'early' };
    },
  };
}
