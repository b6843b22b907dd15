// The embedder's tools and the scripted model of the CodeAct crash test: a program that
// marks three times and then calls a tool that never answers (the process is killed there).
import { appendFileSync, writeFileSync } from 'node:fs';
import { z } from 'zod';
import { tool } from '../../../dist/index.js';
import { assistantTurns } from '../../../dist/testing/index.js';

/** `mark` appends its word to the log; `hang` says it started, then never answers. */
export function markTools(options) {
  return [
    tool({
      name: 'mark',
      description: 'Appends a word to the log.',
      parameters: z.object({ word: z.string() }),
      effect: 'acts',
      async execute({ word }) {
        appendFileSync(options.log, `${word}\n`);
        return { marked: word };
      },
    }),
    tool({
      name: 'hang',
      description: 'Starts something that takes forever.',
      parameters: z.object({}),
      effect: 'acts',
      async execute() {
        writeFileSync(options.started, 'started\n');
        await new Promise(() => undefined);
        return {};
      },
    }),
  ];
}

const SOURCES = {
  python: 'for word in ["one", "two", "three"]:\n    mark(word)\nhang()\nprint("after the hang")\n',
  javascript: 'for (const word of ["one", "two", "three"]) mark(word);\nhang();\nconsole.log("after the hang");\n',
};

/** One program in `options.language`, then an answer. */
export function programScript(options) {
  const steps = [
    { toolCalls: [{ name: 'run_program', args: { language: options.language, source: SOURCES[options.language] } }] },
    { text: 'done' },
  ];
  return (call) => steps[Math.min(assistantTurns(call), steps.length - 1)];
}
