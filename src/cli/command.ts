/**
 * What every command of `npx io-harness` is made of: its exit statuses, its input and
 * output, the error that ends it with a status, and the exit status a harness error maps to.
 */
import { nearest } from '../runtime/nearest.js';

/** What a command's exit status says. */
export const EXIT = {
  /** It did what it was asked. */
  ok: 0,
  /** Something failed that is not the caller's to fix (the store could not be read, a bug). */
  failed: 1,
  /** The command line was wrong: an unknown command or option, a missing argument. */
  usage: 2,
  /** What was named is not there: no store file, no such run, question or session. */
  notFound: 3,
  /** Refused, nothing changed: not a store of ours, a newer schema, answered already, a run still live. */
  refused: 4,
  /** `resume` or `follow`: the tree ended other than `finished` (paused, failed, cancelled, ...). */
  unfinished: 5,
} as const;

export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** Whether stderr is a terminal (a progress line is redrawn in place there). */
  tty: boolean;
}

/** An error that ends a command with its own exit status. */
export class CliError extends Error {
  readonly exit: number;
  constructor(message: string, exit: number) {
    super(message);
    this.exit = exit;
  }
}

export interface Command {
  usage: string;
  summary: string;
  /** What the command says under --help, after its usage. */
  help: string;
  options: Record<string, { type: 'string' | 'boolean'; short?: string }>;
  /** The positional arguments it takes: the fewest and the most. */
  positionals: [number, number];
  run(context: Context): Promise<number>;
}

export interface Context {
  io: CliIo;
  positionals: string[];
  values: Record<string, string | boolean | undefined>;
  json: boolean;
  storePath: string;
}

/** The command a slip most likely meant: the nearest by edits, or the one whose start it is (three letters or more). */
export function nearestCommand(given: string, names: readonly string[]): string | null {
  return (
    nearest(given, names) ??
    (given.length >= 3 ? (names.find((name) => name.startsWith(given.toLowerCase())) ?? null) : null)
  );
}

/** Prints a value as JSON, for `--json`. */
export const print = (context: Context, value: unknown) => context.io.out(`${JSON.stringify(value, null, 2)}\n`);

/** The exit status a harness error maps to, by its code. */
export function exitFor(code: string): number {
  if (code === 'STORE_FAILED') return EXIT.failed;
  if (
    code === 'STORE_UNREACHABLE' ||
    code === 'STORE_NOT_FOUND' ||
    code === 'RUN_NOT_FOUND' ||
    code === 'QUESTION_NOT_FOUND' ||
    code === 'NO_RESTORE_POINT' ||
    code === 'WORKSPACE_NOT_FOUND'
  )
    return EXIT.notFound;
  if (code === 'INVALID_ARGUMENT') return EXIT.usage;
  if (
    code === 'ALREADY_ANSWERED' ||
    code === 'CONFLICT' ||
    code === 'RUN_STILL_LIVE' ||
    code === 'REWIND_CONFLICT' ||
    code.startsWith('STORE_')
  )
    return EXIT.refused;
  return EXIT.failed;
}
