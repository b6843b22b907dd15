/**
 * `run_program` (`withCodeAct()`): the model hands over a whole program, and the run's own
 * tools are functions inside it. The program is run by the run's programs
 * (../../codeact/run-programs.ts); each call it makes is an act dispatched as the model's
 * own calls are (src/actors/agent/program-acts.ts). Which tools a program may not call is
 * decided here ({@link NOT_IN_PROGRAMS}).
 */
import type { ArgumentSchema } from '../../arguments.js';
import type { CodeActLanguage } from '../../codeact/codeact.js';
import type { AgentCall } from '../context.js';
import type { Tool } from '../tool.js';

export const RUN_PROGRAM = 'run_program';

/**
 * The tools no program may call: itself (a program does not start another), the tree's
 * (a spawn, a message or a wait is the model's own step to take), a person's (a question
 * pauses the run, which a program cannot wait through) and the tier opener (it changes
 * what the next request offers).
 */
export const NOT_IN_PROGRAMS: ReadonlySet<string> = new Set([
  RUN_PROGRAM,
  'spawn_agent',
  'send_message',
  'read_messages',
  'ask_operator',
  'submit_plan',
  'expand_tools',
]);

/** The most characters a program's source may have. */
export const MAX_PROGRAM_CHARS = 256 * 1024;

const DESCRIPTION = [
  'Run a whole program instead of a chain of tool calls: a loop over many files is one call.',
  'Every other tool you have is a function of the same name inside the program, taking the same arguments',
  '(in Python by keyword or in order; in JavaScript one object of them, or in order) and returning its text.',
  'A tool that fails raises ToolError; an act the policy refuses raises Refused (a ToolError) with .rule and .layer: catch it and go on.',
  "call_tool(name, args) calls a tool by name. The program's own writes and network are refused:",
  'change files with the write tools, print what you want to see. Returns how it ended, its acts and what it printed.',
].join(' ');

/** The `run_program` tool, offering `languages` (those this host can run). */
export function runProgramTool(languages: readonly CodeActLanguage[]): Tool<AgentCall> {
  const parameters: ArgumentSchema = {
    type: 'object',
    properties: {
      language: { type: 'string', enum: [...languages], description: 'The language the program is written in.' },
      source: {
        type: 'string',
        maxLength: MAX_PROGRAM_CHARS,
        description: 'The whole program: source code, not a command line.',
      },
    },
    required: ['language', 'source'],
    additionalProperties: false,
  };
  return {
    name: RUN_PROGRAM,
    description: DESCRIPTION,
    parameters,
    kind: 'acts',
    execute: async (args, call) => {
      const programs = call.workspace?.programs;
      if (!programs || !call.acts)
        return { content: `${RUN_PROGRAM} is not available in this run (withCodeAct).`, isError: true };
      if (call.planning) {
        const reason = `${RUN_PROGRAM} waits for an approved plan: this run is in its planning phase, so read what you need and call submit_plan.`;
        return { content: reason, isError: true, refusal: { rule: 'plan-gate', reason } };
      }
      const { language, source } = args as { language: string; source: string };
      return programs.run(language, source, call.acts, call);
    },
  };
}
