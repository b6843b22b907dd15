// A model that answers at once and works a repository: every step reads one file and
// edits it (a unique line replaced), so each step pays for the file tools, the policy,
// the restore point on first touch, the whole-file diff and the commit that holds it.
import { scriptedProvider } from 'io-harness/testing';

export default function workspaceModel(options = {}) {
  const steps = options.steps ?? 100;
  const files = options.files ?? 200;
  return scriptedProvider((request) => {
    const step = request.transcript.filter((entry) => entry.role === 'assistant').length;
    if (step >= steps) return { text: 'done', usage: { inputTokens: 10, outputTokens: 2 } };
    const index = step % files;
    const round = Math.floor(step / files);
    const path = `src/module-${String(index).padStart(3, '0')}.js`;
    const marker = round === 0 ? `export const version = 0;` : `export const version = ${round};`;
    return {
      text: 'next',
      toolCalls: [
        { name: 'read_file', args: { path } },
        {
          name: 'edit_file',
          args: { path, old_string: marker, new_string: `export const version = ${round + 1};` },
        },
      ],
      usage: { inputTokens: 10, outputTokens: 2 },
    };
  });
}
