/**
 * File tools that can run programs: `find` (its `-exec` commands and the paths it walks
 * and writes), `tar`, `rsync` and `scp` (the options that run a program).
 */
import { NO_PATHS } from '../path-programs/index.js';
import { type Effect, type Handler, unreadable } from './effects.js';

/** GNU find's primaries and operators: an expression that starts with anything else is refused. */
const FIND_PRIMARIES = new Set(
  (
    'amin anewer atime cmin cnewer ctime empty executable false fstype gid group ilname iname inum ipath iregex ' +
    'iwholename links lname mmin mtime name newer nogroup nouser path perm readable regex samefile size true type ' +
    'uid used user wholename writable xtype context delete exec execdir fls fprint fprint0 fprintf ls ok okdir print ' +
    'print0 printf prune quit d depth files0-from follow help ignore_readdir_race maxdepth mindepth mount ' +
    'noignore_readdir_race noleaf regextype version warn nowarn xdev daystart not and or a o'
  )
    .split(' ')
    .map((name) => `-${name}`),
);

/** find -exec/-execdir/-ok/-okdir: the command is checked with `{}` as a path under a start point. */
export const find: Handler = (args) => {
  let first = 0;
  // Its own options come first, each a word of its own (`-HL` is not two of them).
  while (/^-[HLP]$|^-O[0-9]$/.test(args[first] ?? '') || args[first] === '-D') first += args[first] === '-D' ? 2 : 1;
  let end = first;
  while (end < args.length && !/^[-(!,]/.test(args[end] as string)) end++;
  const starts = end > first ? args.slice(first, end) : ['.'];
  const opening = args[end];
  if (
    opening?.startsWith('-') &&
    !FIND_PRIMARIES.has(opening) &&
    !/^-newer[aBcmt][aBcmt]$/.test(opening) &&
    opening !== '--help' &&
    opening !== '--version'
  ) {
    // find would exit on it; refused rather than trusted to, in case this find knows more primaries.
    return unreadable(`find: ${opening} is not a primary it knows`);
  }
  const effects: Effect[] = [];
  const writes: string[] = [];
  const reads: string[] = [];
  for (let i = end; i < args.length; i++) {
    const arg = args[i] as string;
    if (['-fprint', '-fprint0', '-fls', '-fprintf'].includes(arg)) writes.push(args[i + 1] ?? '');
    if (arg === '-files0-from') reads.push(args[i + 1] ?? '');
    if (arg === '-delete') {
      effects.push({ kind: 'paths', use: { ...NO_PATHS, walkedWrites: starts } });
    }
    if (!['-exec', '-execdir', '-ok', '-okdir'].includes(arg)) continue;
    // The command ends at `;`, or at `+` right after `{}`; with neither, find refuses the line and runs nothing.
    let close = i + 1;
    while (close < args.length && args[close] !== ';' && !(args[close] === '+' && args[close - 1] === '{}')) close++;
    if (close >= args.length) return [];
    effects.push({ kind: 'arbitrary', why: `find ${arg} runs a command on each file` });
    const fill = arg === '-exec' || arg === '-ok' ? starts : ['./'];
    effects.push({ kind: 'inner', argv: args.slice(i + 1, close), holes: { trailing: false, marker: '{}', fill } });
    i = close;
  }
  // The start points are listed: names under a denied directory are read too.
  effects.push({ kind: 'paths', use: { ...NO_PATHS, reads: [...starts, ...reads], writes } });
  return effects;
};

/** tar options that run a program. */
export const tar: Handler = (args) => {
  const long = [
    '--to-command',
    '--checkpoint-action',
    '--use-compress-program',
    '--rsh-command',
    '--info-script',
    '--new-volume-script',
  ];
  for (const [index, arg] of args.entries()) {
    if (arg.startsWith('--')) {
      const name = arg.split('=')[0] as string;
      if (name.length >= 5 && long.some((option) => option.startsWith(name))) {
        return [{ kind: 'arbitrary', why: `tar ${name} runs a program` }];
      }
    } else if ((arg.startsWith('-') || index === 0) && /[IF]/.test(arg.replace(/^-/, ''))) {
      return [{ kind: 'arbitrary', why: 'tar -I/-F runs a program' }];
    }
  }
  return [];
};

export const rsync: Handler = (args) => {
  for (const arg of args) {
    if (/^--(rs|rsh|rsync-path)/.test(arg) || /^-[A-Za-z]*e/.test(arg)) {
      return [{ kind: 'arbitrary', why: 'rsync -e/--rsh/--rsync-path runs a program' }];
    }
    if (!arg.startsWith('-') && /^[^/]*:/.test(arg)) return [{ kind: 'arbitrary', why: 'rsync over ssh' }];
  }
  return [];
};

export const scp: Handler = (args) =>
  args.some((arg) => /^-[A-Za-z0-9]*[SoF]/.test(arg))
    ? [{ kind: 'arbitrary', why: 'scp -S/-o/-F runs a program' }]
    : [];
