/**
 * Wrappers: programs that run another command (`env`, `nice`, `timeout`, `stdbuf`,
 * `command`, `xargs`, `nohup`, `time`, `setsid`, `busybox` ...), each read with its own
 * option table, so the command they run is checked as exactly what it is.
 */
import { constants as osConstants } from 'node:os';
import { resolve } from 'node:path';
import {
  GNU_STANDARD,
  hasOption,
  type OptionTable,
  optionValues,
  type ParsedOption,
  parseOptions,
} from '../options.js';
import { type Effect, type Handler, unreadable, wrapper } from './effects.js';
import { isCodeLoadingVariable, isRefusedVariable, refusedVariable } from './environment.js';

export const ENV_OPTIONS: OptionTable = {
  short: { i: 'none', '0': 'none', u: 'required', C: 'required', S: 'required', v: 'none' },
  long: {
    'ignore-environment': ['none', 'i'],
    null: ['none', '0'],
    unset: ['required', 'u'],
    chdir: ['required', 'C'],
    'split-string': ['required', 'S'],
    debug: ['none', 'v'],
    'default-signal': 'optional',
    'ignore-signal': 'optional',
    'block-signal': 'optional',
    'list-signal-handling': 'none',
    ...GNU_STANDARD,
  },
};

export const env: Handler = (args, ctx) => {
  const parsed = parseOptions('env', args, ENV_OPTIONS);
  if (!parsed.ok) return unreadable(parsed.reason);
  if (hasOption(parsed, 'S')) {
    return [
      { kind: 'refuse', rule: 'shell.unsupported', reason: 'env -S splits a string into a command by its own rules' },
    ];
  }
  if (hasOption(parsed, '--help', '--version')) return [];
  let rest = parsed.operands;
  if (rest[0] === '-') rest = rest.slice(1);
  // env refuses -0 with a command (it only prints the environment that way).
  if (hasOption(parsed, '0') && rest.some((word) => !word.includes('='))) return [];
  // env takes every word holding an `=` as an assignment, up to the first that holds none.
  const assigned: string[] = [];
  while (rest[0]?.includes('=')) {
    assigned.push(rest[0]);
    rest = rest.slice(1);
  }
  const effects: Effect[] = [];
  const tampered = assigned.filter((pair) => isCodeLoadingVariable(pair.slice(0, pair.indexOf('='))));
  if (tampered.length > 0) effects.push({ kind: 'environment', subject: tampered.join(' ') });
  const refused = assigned.find((pair) => isRefusedVariable(pair.slice(0, pair.indexOf('='))));
  if (refused !== undefined) return [{ kind: 'refuse', rule: 'exec.environment', reason: refusedVariable(refused) }];
  const chdirs = optionValues(parsed, 'C');
  const chdir = chdirs[chdirs.length - 1];
  const cwds = chdir === undefined ? undefined : ctx.cwds.map((cwd) => resolve(cwd, chdir));
  effects.push({ kind: 'inner', argv: rest, ...(cwds ? { cwds } : {}) });
  return effects;
};

/** nice: `-N`, `--N` and `-+N` adjustments may stand among its options (coreutils reads them first). */
export const nice: Handler = (args) => {
  const kept = args.filter((arg, index) => {
    const before = args.slice(0, index);
    const ended = before.includes('--') || before.some((word) => !word.startsWith('-'));
    return ended || !/^-[-+]?[0-9]/.test(arg);
  });
  const parsed = parseOptions('nice', kept, {
    short: { n: 'required' },
    long: { adjustment: ['required', 'n'], ...GNU_STANDARD },
  });
  if (!parsed.ok) return unreadable(parsed.reason);
  if (hasOption(parsed, '--help', '--version')) return [];
  // An adjustment that is not a number makes nice exit before it runs anything.
  if (optionValues(parsed, 'n').some((value) => !/^[-+]?[0-9]+$/.test(value))) return [];
  return [{ kind: 'inner', argv: parsed.operands }];
};

/** A duration timeout takes: a number with an optional s, m, h or d. */
const DURATION = /^([0-9]+\.?[0-9]*|\.[0-9]+)([smhd])?$/;

/** A signal by name (with or without SIG) or number, as timeout and kill take them. */
function isSignal(value: string): boolean {
  if (/^[0-9]+$/.test(value)) return Number(value) < 65;
  const name = value.toUpperCase().replace(/^SIG/, '');
  return Object.hasOwn(osConstants.signals, `SIG${name}`) || /^RTM(IN|AX)([+-][0-9]+)?$/.test(name);
}

/** timeout [options] DURATION command: a bad duration or signal makes it exit without running the command. */
export const timeout: Handler = (args) => {
  const parsed = parseOptions('timeout', args, {
    short: { k: 'required', s: 'required', v: 'none' },
    long: {
      'kill-after': ['required', 'k'],
      signal: ['required', 's'],
      verbose: ['none', 'v'],
      foreground: 'none',
      'preserve-status': 'none',
      ...GNU_STANDARD,
    },
  });
  if (!parsed.ok) return unreadable(parsed.reason);
  if (hasOption(parsed, '--help', '--version')) return [];
  const duration = parsed.operands[0];
  if (duration === undefined || !DURATION.test(duration)) return [];
  if (optionValues(parsed, 'k').some((value) => !DURATION.test(value))) return [];
  if (optionValues(parsed, 's').some((value) => !isSignal(value))) return [];
  return [{ kind: 'inner', argv: parsed.operands.slice(1) }];
};

/** stdbuf needs a mode, each a size or (for output) L; anything else makes it exit. */
export const stdbuf: Handler = (args) => {
  const parsed = parseOptions('stdbuf', args, {
    short: { i: 'required', o: 'required', e: 'required' },
    long: { input: ['required', 'i'], output: ['required', 'o'], error: ['required', 'e'], ...GNU_STANDARD },
  });
  if (!parsed.ok) return unreadable(parsed.reason);
  if (hasOption(parsed, '--help', '--version')) return [];
  const modes = parsed.options.filter((option) => ['i', 'o', 'e'].includes(option.name));
  const valid = (option: ParsedOption) =>
    (option.value === 'L' && option.name !== 'i') || /^[0-9]+([KMGTPEZYRQ](iB|B)?|[kbcw]|B)?$/.test(option.value ?? '');
  if (modes.length === 0 || !modes.every(valid)) return [];
  return [{ kind: 'inner', argv: parsed.operands }];
};

/** dash's `command`: -p, -v, -V clustered, `--`; -v and -V only print. */
export const command: Handler = (args) => {
  const parsed = parseOptions('command', args, { short: { p: 'none', v: 'none', V: 'none' } });
  if (!parsed.ok) return unreadable(parsed.reason);
  if (hasOption(parsed, 'v', 'V')) return [];
  return [{ kind: 'inner', argv: parsed.operands }];
};

const XARGS_OPTIONS: OptionTable = {
  short: {
    '0': 'none',
    a: 'required',
    E: 'required',
    e: 'optional',
    i: 'optional',
    I: 'required',
    l: 'optional',
    L: 'required',
    n: 'required',
    o: 'none',
    p: 'none',
    r: 'none',
    s: 'required',
    t: 'none',
    x: 'none',
    P: 'required',
    d: 'required',
    h: 'none',
    v: 'none',
  },
  long: {
    null: ['none', '0'],
    'arg-file': ['required', 'a'],
    delimiter: ['required', 'd'],
    eof: ['optional', 'e'],
    replace: ['optional', 'i'],
    'max-lines': ['optional', 'l'],
    'max-args': ['required', 'n'],
    'open-tty': ['none', 'o'],
    interactive: ['none', 'p'],
    'no-run-if-empty': ['none', 'r'],
    'max-chars': ['required', 's'],
    verbose: ['none', 't'],
    'show-limits': 'none',
    exit: ['none', 'x'],
    'max-procs': ['required', 'P'],
    'process-slot-var': 'required',
    version: ['none', 'v'],
    help: ['none', 'h'],
  },
};

export const xargs: Handler = (args) => {
  const parsed = parseOptions('xargs', args, XARGS_OPTIONS);
  if (!parsed.ok) return unreadable(parsed.reason);
  if (hasOption(parsed, 'h', 'v')) return [];
  // The last of -I / -i / --replace wins; -i with no value means {}.
  let marker: string | null = null;
  for (const option of parsed.options) {
    if (option.name === 'I') marker = option.value ?? '{}';
    else if (option.name === 'i') marker = option.value === undefined || option.value === '' ? '{}' : option.value;
    else if (option.name === 'l' || option.name === 'L' || option.name === 'n') marker = null;
  }
  const inner = parsed.operands.length > 0 ? parsed.operands : ['echo'];
  return [
    { kind: 'arbitrary', why: 'xargs runs a command with arguments from its input' },
    { kind: 'inner', argv: inner, holes: { trailing: marker === null, marker, fill: null } },
  ];
};

export const nohup: Handler = wrapper('nohup', { long: GNU_STANDARD });

/** dash's exec takes no options: the word after it is the command, even `--` or `-x`. */
export const exec: Handler = (args) => [{ kind: 'inner', argv: args }];

export const time: Handler = wrapper(
  'time',
  {
    short: { a: 'none', f: 'required', o: 'required', p: 'none', q: 'none', v: 'none', h: 'none', V: 'none' },
    long: {
      append: ['none', 'a'],
      format: ['required', 'f'],
      output: ['required', 'o'],
      portability: ['none', 'p'],
      quiet: ['none', 'q'],
      verbose: ['none', 'v'],
      help: ['none', 'h'],
      version: ['none', 'V'],
    },
  },
  0,
  ['h', 'V'],
);

export const setsid: Handler = wrapper(
  'setsid',
  {
    short: { c: 'none', f: 'none', w: 'none', V: 'none', h: 'none' },
    long: {
      ctty: ['none', 'c'],
      fork: ['none', 'f'],
      wait: ['none', 'w'],
      version: ['none', 'V'],
      help: ['none', 'h'],
    },
  },
  0,
  // -c takes the terminal on its input as its own; a command has none, so setsid exits.
  ['h', 'V', 'c'],
);

export const busybox: Handler = (args) =>
  args[0] !== undefined && !args[0].startsWith('-') ? [{ kind: 'inner', argv: args }] : [];

export const corepack: Handler = (args) =>
  ['npm', 'npx', 'pnpm', 'pnpx', 'yarn'].includes(args[0] ?? '') ? [{ kind: 'inner', argv: args }] : [];
