// The embedder's tools the tool tests give a tree, and the scripted models that call them.
import { appendFileSync } from 'node:fs';
import { z } from 'zod';
import { tool } from '../../../dist/index.js';
import { assistantTurns } from '../../../dist/testing/index.js';

/** An `acts` tool that records each call in a file, then takes `holdMs` to finish. */
export function deployTools(options) {
  return [
    tool({
      name: 'deploy',
      description: 'Deploys the build to a target environment.',
      parameters: z.object({ target: z.enum(['staging', 'prod']) }),
      effect: 'acts',
      async execute({ target }) {
        appendFileSync(options.log, `deploy ${target}\n`);
        await new Promise((resolve) => setTimeout(resolve, options.holdMs ?? 0));
        return { deployed: target };
      },
    }),
  ];
}

/** Calls deploy once, then answers. */
export function deployScript() {
  const steps = [
    { text: 'deploying', toolCalls: [{ name: 'deploy', args: { target: 'prod' } }] },
    { text: 'deployed' },
  ];
  return (call) => steps[Math.min(assistantTurns(call), steps.length - 1)];
}
