/**
 * Programs that read files and print what they hold (cat, head, grep, sed, sort, diff
 * ...): each read with its own option table, so an option's value is never taken for a
 * file. A few also write (`sed -i`, `sort -o`, uniq's second operand).
 */
import { GNU_STANDARD, hasOption, type OptionTable, optionValues, parseOptions } from '../options.js';
import { type Reader, readsOperands, use } from './use.js';

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

/** @internal sed's options, for the sed handler (commands/text-tools.ts, which checks the script itself). */
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

/** The programs that read, by name. */
export const READING: Record<string, Reader> = {
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
};
