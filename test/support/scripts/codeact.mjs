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

/**
 * A program whose path depends on a file: run again after the file says B, it reads twice
 * more before its mark, which lands at a place nothing was journaled at.
 */
const FROM_FILE = {
  python:
    'if read_file("word.txt").strip() == "B":\n    read_file("word.txt")\n    read_file("word.txt")\nmark("A")\nhang()\n',
  javascript:
    'if (read_file("word.txt").trim() === "B") { read_file("word.txt"); read_file("word.txt"); }\nmark("A");\nhang();\n',
};

/** One program in `options.language` (`options.variant` 'from-file': FROM_FILE's), then an answer. */
export function programScript(options) {
  const source = (options.variant === 'from-file' ? FROM_FILE : SOURCES)[options.language];
  const steps = [
    { toolCalls: [{ name: 'run_program', args: { language: options.language, source } }] },
    { text: 'done' },
  ];
  return (call) => steps[Math.min(assistantTurns(call), steps.length - 1)];
}
