/**
 * The programs whose arguments the checker reads as paths: which words a program reads,
 * which it writes, and which it walks (a recursive copy, a recursive grep), found by
 * parsing its options with its own table (options.ts), so an option's value is never
 * taken for a file and `--` is honoured. `allowExec('cat*')` then still refuses
 * `cat secrets/.env` under `denyRead('secrets/**')`.
 *
 * A program not in this table keeps the plain exec rule: its arguments are not file acts.
 */
import { GNU_STANDARD, hasOption, type OptionTable, optionValues, parseOptions } from './options.js';

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

function use(partial: Partial<PathUse>): PathAnalysis {
  return { ok: true, use: { ...NO_PATHS, ...partial } };
}

type Reader = (program: string, args: readonly string[]) => PathAnalysis | null;

/** A program that reads every operand: `cat`, `head`, `wc`... (null for --help/--version). */
function readsOperands(table: OptionTable, fileOptions: readonly string[] = [], legacyCount = false): Reader {
  return (program, args) => {
    const words = legacyCount && /^[-+][0-9]/.test(args[0] ?? '') ? args.slice(1) : args;
    const parsed = parseOptions(program, words, { permute: true, ...table, long: { ...GNU_STANDARD, ...table.long } });
    if (!parsed.ok) return parsed;
    if (hasOption(parsed, '--help', '--version')) return null;
    return use({ reads: [...parsed.operands, ...optionValues(parsed, ...fileOptions)] });
  };
}

const CAT: OptionTable = {
  short: {
    A: 'none',
    b: 'none',
    e: 'none',
    E: 'none',
    n: 'none',
    s: 'none',
    t: 'none',
    T: 'none',
    u: 'none',
    v: 'none',
  },
  long: {
    'show-all': 'none',
    'number-nonblank': 'none',
    'show-ends': 'none',
    number: 'none',
    'squeeze-blank': 'none',
    'show-tabs': 'none',
    'show-nonprinting': 'none',
  },
};

const HEAD: OptionTable = {
  short: { c: 'required', n: 'required', q: 'none', v: 'none', z: 'none' },
  long: {
    bytes: 'required',
    lines: 'required',
    quiet: 'none',
    silent: 'none',
    verbose: 'none',
    'zero-terminated': 'none',
  },
};

const TAIL: OptionTable = {
  short: { c: 'required', f: 'none', F: 'none', n: 'required', q: 'none', s: 'required', v: 'none', z: 'none' },
  long: {
    bytes: 'required',
    follow: 'optional',
    lines: 'required',
    'max-unchanged-stats': 'required',
    pid: 'required',
    quiet: 'none',
    retry: 'none',
    silent: 'none',
    'sleep-interval': 'required',
    verbose: 'none',
    'zero-terminated': 'none',
  },
};

const WC: OptionTable = {
  short: { c: 'none', l: 'none', m: 'none', w: 'none', L: 'none' },
  long: {
    bytes: 'none',
    chars: 'none',
    lines: 'none',
    words: 'none',
    'max-line-length': 'none',
    'files0-from': ['required', 'F'],
    total: 'required',
  },
};

const CUT: OptionTable = {
  short: { b: 'required', c: 'required', d: 'required', f: 'required', n: 'none', s: 'none', z: 'none' },
  long: {
    bytes: ['required', 'b'],
    characters: ['required', 'c'],
    delimiter: ['required', 'd'],
    fields: ['required', 'f'],
    complement: 'none',
    'only-delimited': ['none', 's'],
    'output-delimiter': 'required',
    'zero-terminated': ['none', 'z'],
  },
};

const TAC: OptionTable = {
  short: { b: 'none', r: 'none', s: 'required' },
  long: { before: 'none', regex: 'none', separator: 'required' },
};

const BASE64: OptionTable = {
  short: { d: 'none', i: 'none', w: 'required' },
  long: { decode: 'none', 'ignore-garbage': 'none', wrap: 'required' },
};

const SUMS: OptionTable = {
  short: { b: 'none', c: 'none', t: 'none', z: 'none', w: 'none' },
  long: {
    binary: 'none',
    check: 'none',
    tag: 'none',
    text: 'none',
    zero: 'none',
    'ignore-missing': 'none',
    quiet: 'none',
    status: 'none',
    strict: 'none',
    warn: 'none',
  },
};

const NL: OptionTable = {
  short: {
    b: 'required',
    d: 'required',
    f: 'required',
    h: 'required',
    i: 'required',
    l: 'required',
    n: 'required',
    p: 'none',
    s: 'required',
    v: 'required',
    w: 'required',
  },
  long: {
    'body-numbering': 'required',
    'section-delimiter': 'required',
    'footer-numbering': 'required',
    'header-numbering': 'required',
    'line-increment': 'required',
    'join-blank-lines': 'required',
    'number-format': 'required',
    'no-renumber': 'none',
    'number-separator': 'required',
    'starting-line-number': 'required',
    'number-width': 'required',
  },
};

const GREP: OptionTable = {
  short: {
    ...Object.fromEntries([...'0123456789'].map((digit) => [digit, 'none' as const])),
    A: 'required',
    B: 'required',
    C: 'required',
    D: 'required',
    d: 'required',
    e: 'required',
    f: 'required',
    m: 'required',
    X: 'required',
    E: 'none',
    F: 'none',
    G: 'none',
    P: 'none',
    a: 'none',
    b: 'none',
    c: 'none',
    H: 'none',
    h: 'none',
    i: 'none',
    y: 'none',
    L: 'none',
    l: 'none',
    n: 'none',
    o: 'none',
    q: 'none',
    R: 'none',
    r: 'none',
    s: 'none',
    T: 'none',
    U: 'none',
    u: 'none',
    V: 'none',
    v: 'none',
    w: 'none',
    x: 'none',
    Z: 'none',
    z: 'none',
  },
  long: {
    'after-context': ['required', 'A'],
    'before-context': ['required', 'B'],
    context: ['required', 'C'],
    devices: ['required', 'D'],
    directories: ['required', 'd'],
    regexp: ['required', 'e'],
    file: ['required', 'f'],
    'max-count': ['required', 'm'],
    'basic-regexp': ['none', 'G'],
    'extended-regexp': ['none', 'E'],
    'fixed-strings': ['none', 'F'],
    'fixed-regexp': ['none', 'F'],
    'perl-regexp': ['none', 'P'],
    'ignore-case': ['none', 'i'],
    'no-ignore-case': 'none',
    'word-regexp': ['none', 'w'],
    'line-regexp': ['none', 'x'],
    'null-data': ['none', 'z'],
    'no-messages': ['none', 's'],
    'invert-match': ['none', 'v'],
    version: ['none', 'V'],
    help: 'none',
    'byte-offset': ['none', 'b'],
    'line-number': ['none', 'n'],
    'no-filename': ['none', 'h'],
    'with-filename': ['none', 'H'],
    label: 'required',
    'only-matching': ['none', 'o'],
    quiet: ['none', 'q'],
    silent: ['none', 'q'],
    'binary-files': 'required',
    text: ['none', 'a'],
    recursive: ['none', 'r'],
    'dereference-recursive': ['none', 'R'],
    include: 'required',
    exclude: 'required',
    'exclude-from': 'required',
    'exclude-dir': 'required',
    'files-without-match': ['none', 'L'],
    'files-with-matches': ['none', 'l'],
    count: ['none', 'c'],
    'initial-tab': ['none', 'T'],
    null: ['none', 'Z'],
    color: 'optional',
    colour: 'optional',
    'line-buffered': 'none',
    binary: ['none', 'U'],
  },
  permute: true,
};

const grep: Reader = (program, args) => {
  const parsed = parseOptions(program, args, GREP);
  if (!parsed.ok) return parsed;
  if (hasOption(parsed, 'V', '--help')) return null;
  const patterned = hasOption(parsed, 'e', 'f');
  const operands = patterned ? parsed.operands : parsed.operands.slice(1);
  const recursive =
    hasOption(parsed, 'r', 'R') || optionValues(parsed, 'd').some((value) => 'recurse'.startsWith(value));
  const files = operands.length === 0 && recursive ? ['.'] : operands;
  const reads = [...optionValues(parsed, 'f', '--exclude-from')];
  return recursive
    ? use({ reads, walkedReads: files, followLinks: hasOption(parsed, 'R') })
    : use({ reads: [...reads, ...files] });
};

const SED: OptionTable = {
  short: {
    n: 'none',
    e: 'required',
    f: 'required',
    l: 'required',
    i: 'optional',
    E: 'none',
    r: 'none',
    s: 'none',
    u: 'none',
    z: 'none',
    b: 'none',
  },
  long: {
    quiet: ['none', 'n'],
    silent: ['none', 'n'],
    debug: 'none',
    expression: ['required', 'e'],
    file: ['required', 'f'],
    'in-place': ['optional', 'i'],
    'line-length': ['required', 'l'],
    'null-data': ['none', 'z'],
    'zero-terminated': ['none', 'z'],
    'regexp-extended': ['none', 'r'],
    separate: ['none', 's'],
    sandbox: 'none',
    unbuffered: ['none', 'u'],
    posix: 'none',
    'follow-symlinks': 'none',
    binary: ['none', 'b'],
    ...GNU_STANDARD,
  },
  permute: true,
};

/** @internal sed's options, for commands.ts (which checks the script itself). */
export const SED_OPTIONS = SED;

const sed: Reader = (program, args) => {
  const parsed = parseOptions(program, args, SED);
  if (!parsed.ok) return parsed;
  if (hasOption(parsed, '--help', '--version')) return null;
  const files = hasOption(parsed, 'e', 'f') ? parsed.operands : parsed.operands.slice(1);
  const reads = [...optionValues(parsed, 'f'), ...files];
  return use({ reads, writes: hasOption(parsed, 'i') ? files : [] });
};

const SORT: OptionTable = {
  short: {
    b: 'none',
    c: 'none',
    C: 'none',
    d: 'none',
    f: 'none',
    g: 'none',
    h: 'none',
    i: 'none',
    k: 'required',
    m: 'none',
    M: 'none',
    n: 'none',
    o: 'required',
    r: 'none',
    R: 'none',
    s: 'none',
    S: 'required',
    t: 'required',
    T: 'required',
    u: 'none',
    V: 'none',
    z: 'none',
  },
  long: {
    'ignore-leading-blanks': ['none', 'b'],
    'dictionary-order': ['none', 'd'],
    'ignore-case': ['none', 'f'],
    'general-numeric-sort': ['none', 'g'],
    'human-numeric-sort': ['none', 'h'],
    'ignore-nonprinting': ['none', 'i'],
    'month-sort': ['none', 'M'],
    'numeric-sort': ['none', 'n'],
    'random-sort': ['none', 'R'],
    'random-source': 'required',
    reverse: ['none', 'r'],
    sort: 'required',
    'version-sort': ['none', 'V'],
    'batch-size': 'required',
    check: 'optional',
    'compress-program': 'required',
    debug: 'none',
    'files0-from': 'required',
    key: ['required', 'k'],
    merge: ['none', 'm'],
    output: ['required', 'o'],
    stable: ['none', 's'],
    'buffer-size': ['required', 'S'],
    'field-separator': ['required', 't'],
    'temporary-directory': ['required', 'T'],
    parallel: 'required',
    unique: ['none', 'u'],
    'zero-terminated': ['none', 'z'],
    ...GNU_STANDARD,
  },
  permute: true,
};

const sort: Reader = (program, args) => {
  const parsed = parseOptions(program, args, SORT);
  if (!parsed.ok) return parsed;
  if (hasOption(parsed, '--help', '--version')) return null;
  const compress = optionValues(parsed, '--compress-program')[0];
  return use({
    reads: [...parsed.operands, ...optionValues(parsed, '--random-source', '--files0-from')],
    writes: [...optionValues(parsed, 'o'), ...optionValues(parsed, 'T').map((dir) => `${dir}/`)],
    runs: compress === undefined ? null : `sort --compress-program runs ${compress}`,
  });
};

const UNIQ: OptionTable = {
  short: {
    c: 'none',
    d: 'none',
    D: 'none',
    f: 'required',
    i: 'none',
    s: 'required',
    u: 'none',
    w: 'required',
    z: 'none',
  },
  long: {
    count: 'none',
    repeated: 'none',
    'all-repeated': 'optional',
    'skip-fields': 'required',
    'ignore-case': 'none',
    'skip-chars': 'required',
    unique: 'none',
    'check-chars': 'required',
    'zero-terminated': 'none',
    group: 'optional',
    ...GNU_STANDARD,
  },
  permute: true,
};

/** uniq INPUT OUTPUT: the second operand is written. */
const uniq: Reader = (program, args) => {
  const parsed = parseOptions(program, args, UNIQ);
  if (!parsed.ok) return parsed;
  if (hasOption(parsed, '--help', '--version')) return null;
  return use({ reads: parsed.operands.slice(0, 1), writes: parsed.operands.slice(1, 2) });
};

const DIFF_VALUES = 'CUWxXSIFDL';
const DIFF: OptionTable = {
  short: Object.fromEntries(
    [...'qscuenyltTrNiEZbwBadpHPAvh', ...DIFF_VALUES].map((letter) => [
      letter,
      DIFF_VALUES.includes(letter) ? ('required' as const) : ('none' as const),
    ]),
  ),
  permute: true,
};

/**
 * diff's long options are many; every `--name=value` and `--name` is taken as it is and
 * only its file operands and its -X/--exclude-from files are read. A long option whose
 * value is a separate word would be read as a file too: checked as a read, never missed.
 */
const diff: Reader = (program, args) => {
  const shortOnly = args.filter((arg) => !arg.startsWith('--') || arg === '--');
  const parsed = parseOptions(program, shortOnly, DIFF);
  if (!parsed.ok) return parsed;
  if (args.some((arg) => arg === '--help' || arg === '--version')) return null;
  const longFiles = args
    .filter((arg) => /^--(exclude-from|from-file|to-file)=/.test(arg))
    .map((arg) => arg.slice(arg.indexOf('=') + 1));
  const recursive = hasOption(parsed, 'r') || args.includes('--recursive');
  const files = [...parsed.operands];
  return recursive
    ? use({ reads: [...optionValues(parsed, 'X'), ...longFiles], walkedReads: files, followLinks: true })
    : use({ reads: [...files, ...optionValues(parsed, 'X'), ...longFiles] });
};

const COPY_COMMON = {
  b: 'none',
  f: 'none',
  i: 'none',
  n: 'none',
  S: 'required',
  t: 'required',
  T: 'none',
  u: 'none',
  v: 'none',
  Z: 'none',
} as const;

const CP: OptionTable = {
  short: {
    ...COPY_COMMON,
    a: 'none',
    d: 'none',
    H: 'none',
    l: 'none',
    L: 'none',
    P: 'none',
    p: 'none',
    R: 'none',
    r: 'none',
    s: 'none',
    x: 'none',
  },
  long: {
    archive: ['none', 'a'],
    'attributes-only': 'none',
    backup: 'optional',
    'copy-contents': 'none',
    dereference: ['none', 'L'],
    force: ['none', 'f'],
    interactive: ['none', 'i'],
    link: ['none', 'l'],
    'no-clobber': ['none', 'n'],
    'no-dereference': ['none', 'P'],
    'no-preserve': 'required',
    'no-target-directory': ['none', 'T'],
    'one-file-system': ['none', 'x'],
    parents: 'none',
    preserve: 'optional',
    recursive: ['none', 'R'],
    reflink: 'optional',
    'remove-destination': 'none',
    sparse: 'required',
    'strip-trailing-slashes': 'none',
    suffix: ['required', 'S'],
    'symbolic-link': ['none', 's'],
    'target-directory': ['required', 't'],
    update: 'optional',
    verbose: ['none', 'v'],
    context: 'optional',
    ...GNU_STANDARD,
  },
  permute: true,
};

const MV: OptionTable = {
  short: COPY_COMMON,
  long: {
    backup: 'optional',
    force: ['none', 'f'],
    interactive: ['none', 'i'],
    'no-clobber': ['none', 'n'],
    'no-copy': 'none',
    'strip-trailing-slashes': 'none',
    suffix: ['required', 'S'],
    'target-directory': ['required', 't'],
    'no-target-directory': ['none', 'T'],
    update: 'optional',
    verbose: ['none', 'v'],
    context: ['none', 'Z'],
    ...GNU_STANDARD,
  },
  permute: true,
};

const LN: OptionTable = {
  short: {
    b: 'none',
    d: 'none',
    F: 'none',
    f: 'none',
    i: 'none',
    L: 'none',
    n: 'none',
    P: 'none',
    r: 'none',
    s: 'none',
    S: 'required',
    t: 'required',
    T: 'none',
    v: 'none',
  },
  long: {
    backup: 'optional',
    directory: ['none', 'd'],
    force: ['none', 'f'],
    interactive: ['none', 'i'],
    logical: ['none', 'L'],
    'no-dereference': ['none', 'n'],
    physical: ['none', 'P'],
    relative: ['none', 'r'],
    symbolic: ['none', 's'],
    suffix: ['required', 'S'],
    'target-directory': ['required', 't'],
    'no-target-directory': ['none', 'T'],
    verbose: ['none', 'v'],
    ...GNU_STANDARD,
  },
  permute: true,
};

/** cp, mv, ln, install: sources and a destination (the last operand, or -t DIR). */
function copyLike(table: OptionTable, kind: 'cp' | 'mv' | 'ln' | 'install'): Reader {
  return (program, args) => {
    const parsed = parseOptions(program, args, table);
    if (!parsed.ok) return parsed;
    if (hasOption(parsed, '--help', '--version')) return null;
    if (kind === 'install' && hasOption(parsed, 'd')) return use({ writes: parsed.operands });
    const target = optionValues(parsed, 't').pop();
    const operands = parsed.operands;
    const sources = target !== undefined ? operands : operands.slice(0, -1);
    const destination = target ?? (operands.length >= 2 ? operands[operands.length - 1] : undefined);
    // `ln -s TARGET` alone links into the working directory; `cp x` alone copies nothing.
    const dest = destination ?? (kind === 'ln' && operands.length === 1 ? '.' : undefined);
    const lone = destination === undefined && kind === 'ln' ? operands : sources;
    const into: [string, string][] = dest === undefined ? [] : lone.map((source) => [dest, source]);
    const writes = dest === undefined ? [] : [dest];
    // -r, -R, --recursive and -a all copy a tree (the table maps --recursive to R).
    const recursive = hasOption(parsed, 'r', 'R', 'a');
    switch (kind) {
      case 'ln': {
        const symbolic = hasOption(parsed, 's');
        // A symbolic link's target is not read; a hard link is a second name for a file.
        return use({ writes, into, hardLinks: !symbolic, changesNames: true });
      }
      case 'mv':
        return use({ reads: sources, writes: [...sources, ...writes], into, changesNames: true });
      case 'install': {
        const strip = optionValues(parsed, '--strip-program')[0];
        return use({
          reads: sources,
          writes,
          into,
          runs: strip === undefined ? null : `install --strip-program runs ${strip}`,
        });
      }
      case 'cp': {
        const links = hasOption(parsed, 'l');
        const keepsLinks =
          recursive ||
          hasOption(parsed, 'd', 'P', 's') ||
          optionValues(parsed, '--preserve').some((value) => /links|all/.test(value));
        return use({
          reads: recursive ? [] : sources,
          walkedReads: recursive ? sources : [],
          followLinks: hasOption(parsed, 'L'),
          writes,
          into,
          hardLinks: links,
          changesNames: keepsLinks,
        });
      }
    }
  };
}

const INSTALL: OptionTable = {
  short: {
    b: 'none',
    c: 'none',
    C: 'none',
    d: 'none',
    D: 'none',
    g: 'required',
    m: 'required',
    o: 'required',
    p: 'none',
    s: 'none',
    S: 'required',
    t: 'required',
    T: 'none',
    v: 'none',
    Z: 'none',
  },
  long: {
    backup: 'optional',
    compare: ['none', 'C'],
    directory: ['none', 'd'],
    group: ['required', 'g'],
    mode: ['required', 'm'],
    owner: ['required', 'o'],
    'preserve-timestamps': ['none', 'p'],
    strip: ['none', 's'],
    'strip-program': 'required',
    suffix: ['required', 'S'],
    'target-directory': ['required', 't'],
    'no-target-directory': ['none', 'T'],
    verbose: ['none', 'v'],
    'preserve-context': 'none',
    context: 'optional',
    ...GNU_STANDARD,
  },
  permute: true,
};

/** Programs that write (or remove) every operand. */
function writesOperands(table: OptionTable, recursiveLetters = '', readOptions: readonly string[] = []): Reader {
  return (program, args) => {
    const parsed = parseOptions(program, args, { permute: true, ...table, long: { ...GNU_STANDARD, ...table.long } });
    if (!parsed.ok) return parsed;
    if (hasOption(parsed, '--help', '--version')) return null;
    const recursive = [...recursiveLetters].some((letter) => hasOption(parsed, letter));
    const reads = optionValues(parsed, ...readOptions);
    return recursive ? use({ reads, walkedWrites: parsed.operands }) : use({ reads, writes: parsed.operands });
  };
}

const RM: OptionTable = {
  short: { d: 'none', f: 'none', i: 'none', I: 'none', r: 'none', R: 'none', v: 'none' },
  long: {
    dir: ['none', 'd'],
    force: ['none', 'f'],
    interactive: 'optional',
    'one-file-system': 'none',
    'no-preserve-root': 'none',
    'preserve-root': 'optional',
    recursive: ['none', 'r'],
    verbose: ['none', 'v'],
  },
};

const TEE: OptionTable = {
  short: { a: 'none', i: 'none', p: 'none' },
  long: { append: ['none', 'a'], 'ignore-interrupts': ['none', 'i'], 'output-error': 'optional' },
};

const TOUCH: OptionTable = {
  short: { a: 'none', c: 'none', d: 'required', f: 'none', h: 'none', m: 'none', r: 'required', t: 'required' },
  long: {
    time: 'required',
    date: ['required', 'd'],
    'no-create': ['none', 'c'],
    'no-dereference': ['none', 'h'],
    reference: ['required', 'r'],
  },
};

const MKDIR: OptionTable = {
  short: { m: 'required', p: 'none', v: 'none', Z: 'none' },
  long: { mode: ['required', 'm'], parents: ['none', 'p'], verbose: ['none', 'v'], context: 'optional' },
};

const RMDIR: OptionTable = {
  short: { p: 'none', v: 'none' },
  long: { 'ignore-fail-on-non-empty': 'none', parents: ['none', 'p'], verbose: ['none', 'v'] },
};

const TRUNCATE: OptionTable = {
  short: { c: 'none', o: 'none', r: 'required', s: 'required' },
  long: {
    'no-create': ['none', 'c'],
    'io-blocks': ['none', 'o'],
    reference: ['required', 'r'],
    size: ['required', 's'],
  },
};

/** chmod MODE FILE...: a mode may look like an option (`-w`), so it is read as chmod reads it. */
const chmod: Reader = (program, args) => {
  const modeLike = /^-[rwxXstugoa=+,0-7-]+$/;
  const options = args.filter((arg) => arg.startsWith('-') && !modeLike.test(arg) && arg !== '--');
  const parsed = parseOptions(program, options, {
    short: { c: 'none', f: 'none', v: 'none', R: 'none' },
    long: {
      changes: 'none',
      silent: 'none',
      quiet: 'none',
      verbose: 'none',
      'no-preserve-root': 'none',
      'preserve-root': 'none',
      reference: 'required',
      recursive: 'none',
      ...GNU_STANDARD,
    },
  });
  if (!parsed.ok) return parsed;
  if (hasOption(parsed, '--help', '--version')) return null;
  const words = args.filter((arg) => !arg.startsWith('-') || modeLike.test(arg));
  const referenced = options.some((arg) => arg.startsWith('--reference') || arg.startsWith('--ref'));
  const dashMode = words.some((word) => word.startsWith('-'));
  const files = words.filter((word) => !word.startsWith('-')).slice(referenced || dashMode ? 0 : 1);
  return hasOption(parsed, 'R', '--recursive') ? use({ walkedWrites: files }) : use({ writes: files });
};

/** dd: `if=` is read, `of=` is written. */
const dd: Reader = (_program, args) => {
  if (args.some((arg) => arg === '--help' || arg === '--version')) return null;
  const value = (key: string) =>
    args.filter((arg) => arg.startsWith(`${key}=`)).map((arg) => arg.slice(key.length + 1));
  return use({ reads: value('if'), writes: value('of') });
};

/** link FILE1 FILE2 makes a hard link; unlink FILE removes a name. */
const link: Reader = (_program, args) => use({ writes: args.slice(1, 2), hardLinks: true });
const unlink: Reader = (_program, args) => use({ writes: args.filter((arg) => arg !== '--') });

const PATH_PROGRAMS: Record<string, Reader> = {
  cat: readsOperands(CAT),
  tac: readsOperands(TAC),
  head: readsOperands(HEAD, [], true),
  tail: readsOperands(TAIL, [], true),
  wc: readsOperands(WC, ['F']),
  cut: readsOperands(CUT),
  nl: readsOperands(NL),
  base64: readsOperands(BASE64),
  md5sum: readsOperands(SUMS),
  sha1sum: readsOperands(SUMS),
  sha224sum: readsOperands(SUMS),
  sha256sum: readsOperands(SUMS),
  sha384sum: readsOperands(SUMS),
  sha512sum: readsOperands(SUMS),
  b2sum: readsOperands(SUMS),
  grep,
  egrep: grep,
  fgrep: grep,
  sed,
  sort,
  uniq,
  diff,
  cp: copyLike(CP, 'cp'),
  mv: copyLike(MV, 'mv'),
  ln: copyLike(LN, 'ln'),
  install: copyLike(INSTALL, 'install'),
  rm: writesOperands(RM, 'rR'),
  rmdir: writesOperands(RMDIR),
  tee: writesOperands(TEE),
  touch: writesOperands(TOUCH, '', ['r']),
  mkdir: writesOperands(MKDIR),
  truncate: writesOperands(TRUNCATE, '', ['r']),
  chmod,
  chown: chmod,
  chgrp: chmod,
  dd,
  link,
  unlink,
};

/**
 * The paths a known program reads and writes, or null when the program is not one the
 * checker knows (or only prints its help). An argv it cannot read is a refusal.
 */
export function pathUse(name: string, args: readonly string[]): PathAnalysis | null {
  const reader = Object.hasOwn(PATH_PROGRAMS, name) ? PATH_PROGRAMS[name] : undefined;
  return reader ? reader(name, args) : null;
}

/** Whether the checker knows how a program treats its path arguments. */
export function knowsPaths(name: string): boolean {
  return Object.hasOwn(PATH_PROGRAMS, name);
}
