/**
 * Programs that write, move, link or remove names (cp, mv, ln, install, rm, tee, touch,
 * mkdir, chmod, dd ...): which operands they write, where a source lands under a
 * directory, and whether they make hard links or change names another path could lead
 * through.
 */
import { GNU_STANDARD, hasOption, type OptionTable, optionValues, parseOptions } from '../options.js';
import { type Reader, use, writesOperands } from './use.js';

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

/** The programs that write, by name. */
export const WRITING: Record<string, Reader> = {
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
