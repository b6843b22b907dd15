/**
 * What a program does with its path arguments ({@link PathUse}), and the two shapes most
 * programs take: one that reads every operand, one that writes every operand.
 */
import { GNU_STANDARD, hasOption, type OptionTable, optionValues, parseOptions } from '../options.js';

export interface PathUse {
  reads: string[];
  writes: string[];
  /** Directories whose every entry is read (grep -r, cp -r sources). */
  walkedReads: string[];
  /** Directories whose every entry may be written or removed (rm -r, chmod -R, find -delete). */
  walkedWrites: string[];
  /** A walk follows symbolic links (grep -R, diff -r, cp -rL); otherwise a link is an entry, not what it leads to. */
  followLinks: boolean;
  /**
   * Destinations that receive a source under its own name when they are directories
   * (`cp a b dir` writes `dir/a` and `dir/b`): [directory, source] pairs.
   */
  into: [string, string][];
  /** It creates hard links (ln without -s, cp -l, link): refused. */
  hardLinks: boolean;
  /** It may create or move names another stage's path could then lead through (ln -s, mv, cp -r). */
  changesNames: boolean;
  /** It runs a program the check does not see (sort --compress-program, install --strip-program). */
  runs: string | null;
}

export type PathAnalysis = { ok: true; use: PathUse } | { ok: false; reason: string };

/** A program that touches no path. */
export const NO_PATHS: Readonly<PathUse> = {
  reads: [],
  writes: [],
  walkedReads: [],
  walkedWrites: [],
  followLinks: false,
  into: [],
  hardLinks: false,
  changesNames: false,
  runs: null,
};

export function use(partial: Partial<PathUse>): PathAnalysis {
  return { ok: true, use: { ...NO_PATHS, ...partial } };
}

export type Reader = (program: string, args: readonly string[]) => PathAnalysis | null;

/** A program that reads every operand: `cat`, `head`, `wc`... (null for --help/--version). */
export function readsOperands(table: OptionTable, fileOptions: readonly string[] = [], legacyCount = false): Reader {
  return (program, args) => {
    const words = legacyCount && /^[-+][0-9]/.test(args[0] ?? '') ? args.slice(1) : args;
    const parsed = parseOptions(program, words, { permute: true, ...table, long: { ...GNU_STANDARD, ...table.long } });
    if (!parsed.ok) return parsed;
    if (hasOption(parsed, '--help', '--version')) return null;
    return use({ reads: [...parsed.operands, ...optionValues(parsed, ...fileOptions)] });
  };
}

/** Programs that write (or remove) every operand. */
export function writesOperands(table: OptionTable, recursiveLetters = '', readOptions: readonly string[] = []): Reader {
  return (program, args) => {
    const parsed = parseOptions(program, args, { permute: true, ...table, long: { ...GNU_STANDARD, ...table.long } });
    if (!parsed.ok) return parsed;
    if (hasOption(parsed, '--help', '--version')) return null;
    const recursive = [...recursiveLetters].some((letter) => hasOption(parsed, letter));
    const reads = optionValues(parsed, ...readOptions);
    return recursive ? use({ reads, walkedWrites: parsed.operands }) : use({ reads, writes: parsed.operands });
  };
}
