/**
 * What the check knows of a command before it decides it: where it runs (the context),
 * which arguments are not known yet (the holes), and what each program does beyond its
 * argv (its effects, as a program's handler reads them from its arguments). The helpers
 * here are what every handler reads its arguments with.
 */
import type { OptionTable } from '../options.js';
import { hasOption, parseOptions } from '../options.js';
import type { PathUse } from '../path-programs/index.js';
import type { Policy, ResolvedProgram } from '../policy.js';

export interface Context {
  readonly policy: Policy;
  readonly root: string;
  /** Every directory the command may run in (a `cd` that may or may not have worked adds one). */
  readonly cwds: readonly string[];
  readonly depth: number;
}

/**
 * Arguments not known when the command is checked: `xargs` appends its input (trailing),
 * `find -exec` and `xargs -I` fill in a marker. A deny rule refuses the command if it
 * could match once they are filled.
 */
export interface Holes {
  trailing: boolean;
  marker: string | null;
  /** What a filled marker starts with (a `find` start point); null when it could be anything. */
  fill: readonly string[] | null;
}

export const NO_HOLES: Holes = { trailing: false, marker: null, fill: null };

export type Effect =
  /**
   * Code the check cannot see. `untrusted`: code the agent could have written (a
   * repository's configuration), which a rule naming the program does not allow.
   */
  | { kind: 'arbitrary'; why: string; untrusted?: boolean }
  | { kind: 'inner'; argv: string[]; holes?: Holes; cwds?: string[] }
  | { kind: 'line'; line: string }
  | { kind: 'scripts'; manager: string; dir: string; names: ScriptName[]; extra: string[] }
  | { kind: 'environment'; subject: string }
  | { kind: 'paths'; use: PathUse }
  | { kind: 'refuse'; rule: string; reason: string };

export interface ScriptName {
  name: string;
  required: boolean;
}

export type Handler = (args: string[], ctx: Context, program?: ResolvedProgram) => Effect[];

/** A record's own entry: an argv word is never a key of Object.prototype (`constructor`). */
export function own<T>(record: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

export interface Options {
  /** Short letters that take a value (`-n 5`, `-n5`). */
  short?: string;
  /** Short letters whose value, if any, is attached (`-i{}`). */
  attached?: string;
  /** Long names that take a value (`--signal TERM`, `--signal=TERM`). */
  long?: readonly string[];
}

export interface Parsed {
  options: [string, string | undefined][];
  rest: string[];
}

/** Leading options, stopping at the first operand or `--` (how wrappers read their argv). */
export function leadingOptions(args: readonly string[], spec: Options): Parsed {
  const options: [string, string | undefined][] = [];
  let i = 0;
  for (; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === '--') {
      i++;
      break;
    }
    if (arg === '-' || !arg.startsWith('-')) break;
    if (arg.startsWith('--')) {
      const eq = arg.indexOf('=');
      const name = eq === -1 ? arg : arg.slice(0, eq);
      let value = eq === -1 ? undefined : arg.slice(eq + 1);
      if (value === undefined && spec.long?.includes(name)) value = args[++i];
      options.push([name, value]);
      continue;
    }
    for (let k = 1; k < arg.length; k++) {
      const letter = arg[k] as string;
      if (spec.short?.includes(letter)) {
        const attached = arg.slice(k + 1);
        options.push([`-${letter}`, attached !== '' ? attached : args[++i]]);
        break;
      }
      if (spec.attached?.includes(letter)) {
        options.push([`-${letter}`, arg.slice(k + 1)]);
        break;
      }
      options.push([`-${letter}`, undefined]);
    }
  }
  return { options, rest: args.slice(i) };
}

export function has(parsed: Parsed, ...names: string[]): boolean {
  return parsed.options.some(([name]) => names.includes(name));
}

export function optionValue(parsed: Parsed, ...names: string[]): string | undefined {
  return parsed.options.find(([name]) => names.includes(name))?.[1];
}

/** A refusal: the checker cannot tell how the program reads its options, so nothing is guessed. */
export function unreadable(reason: string): Effect[] {
  return [{ kind: 'refuse', rule: 'exec.options', reason: `${reason}; the command is refused rather than guessed at` }];
}

/**
 * A wrapper read with its own option table (stopping at the first operand, as its `+`
 * option string does): `--help`/`--version` run nothing, an option it would reject is
 * refused, and the command is what follows its options and `skip` operands.
 */
export function wrapper(program: string, table: OptionTable, skip = 0, runsNothing: readonly string[] = []): Handler {
  return (args) => {
    const parsed = parseOptions(program, args, table);
    if (!parsed.ok) return unreadable(parsed.reason);
    if (hasOption(parsed, '--help', '--version', ...runsNothing)) return [];
    return [{ kind: 'inner', argv: parsed.operands.slice(skip) }];
  };
}

const INFO_ONLY = new Set(['--version', '-v', '-V', '--help', '-h', '-version', '-help', 'version', 'help']);

/** True when the args only ask for a version or help. */
export function infoOnly(args: readonly string[]): boolean {
  return args.length > 0 && args.every((arg) => INFO_ONLY.has(arg));
}

export function arbitrary(why: string): Handler {
  return (args) => (infoOnly(args) ? [] : [{ kind: 'arbitrary', why }]);
}

/** Arbitrary unless the first operand is one of `safe` (a subcommand that runs no project code). */
export function arbitraryUnless(why: string, safe: readonly string[]): Handler {
  return (args) => {
    if (infoOnly(args)) return [];
    const sub = args.find((arg) => !arg.startsWith('-'));
    return sub !== undefined && safe.includes(sub) ? [] : [{ kind: 'arbitrary', why }];
  };
}
