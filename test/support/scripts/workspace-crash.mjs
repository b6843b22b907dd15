// A workspace run in three steps, for the crash-and-rewind test. Each step's writes are
// idempotent (write_file), so a step re-run after a crash asks for the same thing.
import { assistantTurns } from '../../../dist/testing/index.js';

export function crashScript() {
  const steps = [
    {
      text: 'creating and changing',
      toolCalls: [
        { name: 'write_file', args: { path: 'created.txt', content: 'made by the run\n' } },
        { name: 'write_file', args: { path: 'kept.txt', content: 'changed once\n' } },
      ],
    },
    {
      text: 'changing another',
      toolCalls: [
        { name: 'write_file', args: { path: 'late.txt', content: 'changed in step two\n' } },
        { name: 'write_file', args: { path: 'kept.txt', content: 'changed twice\n' } },
      ],
    },
    { text: 'all written' },
  ];
  return (call) => steps[Math.min(assistantTurns(call), steps.length - 1)];
}
