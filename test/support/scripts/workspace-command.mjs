// A workspace run that runs one command, then answers. `argv` names the command.
import { assistantTurns } from '../../../dist/testing/index.js';

export function commandScript(options) {
  const steps = [
    { text: 'running it', toolCalls: [{ name: 'exec', args: { argv: options.argv } }] },
    { text: 'the command is done' },
  ];
  return (call) => steps[Math.min(assistantTurns(call), steps.length - 1)];
}
