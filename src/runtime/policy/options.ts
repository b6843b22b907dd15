/**
 * Options read the way the programs themselves read them. GNU and util-linux programs
 * use glibc's `getopt_long`: a long option may be shortened to any prefix that names one
 * option alone (`--chd` is `--chdir`), short options cluster (`-iu NAME`, `-uNAME`), a
 * value follows `=` or comes as the next word, and `--` ends the options. A wrapper's
 * option string starts with `+`, so it stops at the first operand (the command it runs);
 * other programs look for options after operands too, unless `--` came first.
 *
 * What the real parser would reject (an unknown option, an ambiguous prefix, a missing
 * value) makes the program exit without running anything; the checker cannot always tell
 * what a program would make of it, so such an argv is refused rather than guessed at.
 */

export type Arity = 'none' | 'required' | 'optional';

export interface OptionTable {
  /** Short letters and whether each takes a value. */
  short?: Readonly<Record<string, Arity>>;
  /** Long names (without `--`): their arity, and the short letter they stand for, if any. */
  long?: Readonly<Record<string, Arity | readonly [Arity, string]>>;
  /** True for a program that reads options after operands too (GNU's default); false stops at the first operand. */
  permute?: boolean;
}

export interface ParsedOption {
  /** The short letter (`C`) or, for a long option with no letter, `--name` in full. */
  name: string;
  value: string | undefined;
}

export type ParsedOptions = { ok: true; options: ParsedOption[]; operands: string[] } | { ok: false; reason: string };

/**
 * Parses `args` (the words after the program's name) as `getopt_long` would with this
 * table. With `permute: false` the operands are the first operand and everything after it.
 */
export function parseOptions(program: string, args: readonly string[], table: OptionTable): ParsedOptions {
  const options: ParsedOption[] = [];
  const operands: string[] = [];
  const fail = (reason: string): ParsedOptions => ({ ok: false, reason: `${program}: ${reason}` });
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === '--') {
      operands.push(...args.slice(i + 1));
      break;
    }
    if (arg === '-' || !arg.startsWith('-')) {
      if (!table.permute) {
        operands.push(...args.slice(i));
        break;
      }
      operands.push(arg);
      continue;
    }
    if (arg.startsWith('--')) {
      const eq = arg.indexOf('=');
      const typed = arg.slice(2, eq === -1 ? undefined : eq);
      const found = longOption(typed, table);
      if (typeof found === 'string') return fail(found);
      const [name, arity, letter] = found;
      let value = eq === -1 ? undefined : arg.slice(eq + 1);
      if (arity === 'none' && value !== undefined) return fail(`--${name} takes no value`);
      if (arity === 'required' && value === undefined) {
        if (i + 1 >= args.length) return fail(`--${name} needs a value`);
        value = args[++i];
      }
      options.push({ name: letter ?? `--${name}`, value });
      continue;
    }
    for (let k = 1; k < arg.length; k++) {
      const letter = arg[k] as string;
      const arity = table.short && Object.hasOwn(table.short, letter) ? table.short[letter] : undefined;
      if (arity === undefined) return fail(`-${letter} is not an option it knows`);
      if (arity === 'none') {
        options.push({ name: letter, value: undefined });
        continue;
      }
      const attached = arg.slice(k + 1);
      if (arity === 'optional') {
        options.push({ name: letter, value: attached === '' ? undefined : attached });
        break;
      }
      if (attached !== '') {
        options.push({ name: letter, value: attached });
      } else {
        if (i + 1 >= args.length) return fail(`-${letter} needs a value`);
        options.push({ name: letter, value: args[++i] });
      }
      break;
    }
  }
  return { ok: true, options, operands };
}

/** A long option by its full name or a prefix naming one option alone; a string says why not. */
function longOption(typed: string, table: OptionTable): [string, Arity, string | undefined] | string {
  const long = table.long ?? {};
  const entry = (name: string): [string, Arity, string | undefined] => {
    const spec = long[name] as Arity | readonly [Arity, string];
    return typeof spec === 'string' ? [name, spec, undefined] : [name, spec[0], spec[1]];
  };
  if (typed !== '' && Object.hasOwn(long, typed)) return entry(typed);
  const matches = typed === '' ? [] : Object.keys(long).filter((name) => name.startsWith(typed));
  if (matches.length === 0) return `--${typed} is not an option it knows`;
  // Prefixes of several names that all mean one option are not ambiguous (glibc compares what they do).
  const meanings = new Set(
    matches.map((name) => {
      const [, arity, letter] = entry(name);
      return `${arity} ${letter ?? name}`;
    }),
  );
  if (matches.length > 1 && meanings.size > 1) {
    return `--${typed} is ambiguous (${matches.map((name) => `--${name}`).join(', ')})`;
  }
  return entry(matches[0] as string);
}

export function hasOption(parsed: Extract<ParsedOptions, { ok: true }>, ...names: string[]): boolean {
  return parsed.options.some((option) => names.includes(option.name));
}

export function optionValues(parsed: Extract<ParsedOptions, { ok: true }>, ...names: string[]): string[] {
  return parsed.options
    .filter((option) => names.includes(option.name) && option.value !== undefined)
    .map((option) => option.value as string);
}

/** `--help` and `--version`: every GNU program takes them (a prefix too) and runs nothing. */
export const GNU_STANDARD: Readonly<Record<string, Arity>> = { help: 'none', version: 'none' };
