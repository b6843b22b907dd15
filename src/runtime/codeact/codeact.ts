/**
 * Programs instead of call chains (`TaskContract.withCodeAct`, `[codeact]` in the user's
 * io.toml): what a contract asks for, checked. The interpreters are found by
 * ./interpreters.ts, a program is run by ./program.ts, the run's programs are kept by
 * ./run-programs.ts, and the tool the model calls is ../tools/families/codeact.ts.
 */
import { isAbsolute } from 'node:path';
import { InvalidArgumentError } from '../../errors.js';

/** The languages a program may be written in: Python (`python3`) and JavaScript (the host's `node`). */
export const CODEACT_LANGUAGES = ['javascript', 'python'] as const;
export type CodeActLanguage = (typeof CODEACT_LANGUAGES)[number];

/** What `withCodeAct` takes. */
export interface CodeActOptions {
  /** The languages offered, where this host has a usable interpreter for them. Default both. */
  languages?: readonly CodeActLanguage[];
  /** The Python to run: a name looked up in the system's directories (default `python3`), or an absolute path. */
  python?: string;
  /** The node to run: a name looked up in the system's directories (default `node`), or an absolute path. */
  node?: string;
  /** How many tool calls (acts) one program may make; the next ends it. Default 100. */
  maxActs?: number;
  /** How many bytes one program may print on both streams together; past them it is ended. Default 32 KiB. */
  maxOutputBytes?: number;
  /** How long one program may run, in seconds, the time its acts take included. Default 120. */
  timeoutSecs?: number;
}

/** A contract's CodeAct settings, checked, as stored with the run. */
export interface CodeActData {
  languages: CodeActLanguage[];
  python: string;
  node: string;
  maxActs: number;
  maxOutputBytes: number;
  timeoutSecs: number;
}

export const DEFAULT_MAX_ACTS = 100;
export const DEFAULT_MAX_PROGRAM_OUTPUT = 32 * 1024;
/** The most either bound may be set to. */
const MAX_ACTS_LIMIT = 10_000;
const MAX_OUTPUT_LIMIT = 8 * 1024 * 1024;

const OPTIONS = ['languages', 'python', 'node', 'maxActs', 'maxOutputBytes', 'timeoutSecs'];
export const DEFAULT_PROGRAM_TIMEOUT_SECS = 120;

/** A whole number in [1, max], or an error naming the option. */
function bound(name: string, value: unknown, max: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1 || value > max)
    throw new InvalidArgumentError(
      `withCodeAct: ${name} must be a whole number from 1 to ${max}; got ${JSON.stringify(value)}.`,
    );
  return value;
}

/** A program's time limit: seconds above 0, at most an hour. */
function seconds(value: unknown): number {
  if (typeof value !== 'number' || !(value > 0) || value > 3600)
    throw new InvalidArgumentError(
      `withCodeAct: timeoutSecs is how long one program may run, in seconds, above 0 and at most 3600; got ${JSON.stringify(value)}.`,
    );
  return value;
}

/** An interpreter's name (looked up in the system's directories) or absolute path. */
function interpreter(name: string, value: unknown): string {
  if (typeof value !== 'string' || value === '' || (!isAbsolute(value) && value.includes('/')))
    throw new InvalidArgumentError(
      `withCodeAct: ${name} is a program's name, looked up in the system's directories (like ${name === 'python' ? 'python3' : 'node'}), or its absolute path; got ${JSON.stringify(value)}.`,
    );
  return value;
}

/** Checks what `withCodeAct` (or `[codeact]`) was given; the defaults filled in. */
export function checkCodeActOptions(options: CodeActOptions | undefined): CodeActData {
  const given = options ?? {};
  if (typeof given !== 'object' || given === null || Array.isArray(given))
    throw new InvalidArgumentError(`withCodeAct takes { ${OPTIONS.join(', ')} }.`);
  for (const key of Object.keys(given))
    if (!OPTIONS.includes(key))
      throw new InvalidArgumentError(
        `withCodeAct: unknown option ${JSON.stringify(key)}; the options are ${OPTIONS.join(', ')}.`,
      );
  const languages = given.languages ?? CODEACT_LANGUAGES;
  if (
    !Array.isArray(languages) ||
    languages.length === 0 ||
    languages.some((language) => !CODEACT_LANGUAGES.includes(language))
  )
    throw new InvalidArgumentError(
      `withCodeAct: languages is a non-empty list of ${CODEACT_LANGUAGES.map((name) => JSON.stringify(name)).join(' and ')}; got ${JSON.stringify(languages)}.`,
    );
  return {
    languages: [...new Set(languages)].sort() as CodeActLanguage[],
    python: interpreter('python', given.python ?? 'python3'),
    node: interpreter('node', given.node ?? 'node'),
    maxActs: given.maxActs === undefined ? DEFAULT_MAX_ACTS : bound('maxActs', given.maxActs, MAX_ACTS_LIMIT),
    maxOutputBytes:
      given.maxOutputBytes === undefined
        ? DEFAULT_MAX_PROGRAM_OUTPUT
        : bound('maxOutputBytes', given.maxOutputBytes, MAX_OUTPUT_LIMIT),
    timeoutSecs: given.timeoutSecs === undefined ? DEFAULT_PROGRAM_TIMEOUT_SECS : seconds(given.timeoutSecs),
  };
}
