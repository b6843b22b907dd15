/**
 * git, read as git.c reads its own options: configuration keys and subcommands that run
 * commands, a repository the agent could have written (its configuration and hooks are
 * code), and subcommands that print file contents under a policy that denies some reads.
 */
import { lstatSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { NO_PATHS } from '../path-programs/index.js';
import type { Policy } from '../policy.js';
import { type Context, type Effect, type Handler, own, unreadable } from './effects.js';

export const GIT_READ_ONLY = new Set([
  'status',
  'diff',
  'log',
  'show',
  'grep',
  'blame',
  'rev-parse',
  'ls-files',
  'ls-tree',
  'cat-file',
  'describe',
  'shortlog',
  'version',
  'help',
  'rev-list',
  'show-ref',
  'for-each-ref',
  'merge-base',
  'name-rev',
  'check-ignore',
  'check-attr',
]);

const GIT_CODE_KEYS: readonly RegExp[] = [
  /^core\.(hookspath|sshcommand|pager|editor|fsmonitor|askpass|gitproxy|alternaterefscommand)$/,
  /^sequence\.editor$/,
  /^alias\./,
  /\.command$/,
  /\.cmd$/,
  /^diff\.external$/,
  /\.textconv$/,
  /^filter\./,
  /\.driver$/,
  /^pager\./,
  /\.program$/,
  /\.helper$/,
  /^credential\./,
  /^uploadpack\.packobjectshook$/,
  /\.(uploadpack|receivepack)$/,
  /^protocol\./,
  /^include\.path$/,
  /^includeif\./,
  /^web\.browser$/,
  /^interactive\.difffilter$/,
];

function isGitCodeKey(key: string): boolean {
  const lower = key.toLowerCase();
  return GIT_CODE_KEYS.some((pattern) => pattern.test(lower));
}

/** git's own options before the subcommand, as git.c reads them: exact names, no abbreviations. */
export interface GitCommandLine {
  /** The subcommand (`--version`/`-v` read as `version`, `--help`/`-h` as `help`); null when none. */
  sub: string | null;
  rest: string[];
  /** `-C` directories, in order (each relative to the one before). */
  chdirs: string[];
  gitDir: string | null;
  /** `-c key=value` and `--config-env key=VAR` keys. */
  configKeys: string[];
  /** It prints a path or the command list and exits, running nothing. */
  exits: boolean;
  execPath: boolean;
  pager: boolean;
}

const GIT_FLAGS = new Set([
  '--no-pager',
  '-P',
  '--no-replace-objects',
  '--bare',
  '--literal-pathspecs',
  '--no-literal-pathspecs',
  '--glob-pathspecs',
  '--noglob-pathspecs',
  '--icase-pathspecs',
  '--no-optional-locks',
]);

/** @internal Reads git's options before the subcommand, or says why it cannot. */
export function parseGitCommandLine(args: readonly string[]): GitCommandLine | { error: string } {
  const line: GitCommandLine = {
    sub: null,
    rest: [],
    chdirs: [],
    gitDir: null,
    configKeys: [],
    exits: false,
    execPath: false,
    pager: false,
  };
  let i = 0;
  const value = (option: string): string | { error: string } => {
    const next = args[i + 1];
    if (next === undefined) return { error: `git ${option} needs a value` };
    i++;
    return next;
  };
  for (; i < args.length; i++) {
    const arg = args[i] as string;
    if (!arg.startsWith('-')) break;
    if (['--help', '-h', '--version', '-v'].includes(arg)) break;
    let taken: string | { error: string } | null = null;
    if (arg.startsWith('--exec-path')) {
      if (arg[11] === '=') line.execPath = true;
      else line.exits = true;
    } else if (['--html-path', '--man-path', '--info-path'].includes(arg) || arg.startsWith('--list-cmds=')) {
      line.exits = true;
    } else if (arg === '-p' || arg === '--paginate') {
      line.pager = true;
    } else if (GIT_FLAGS.has(arg)) {
      // changes nothing the check looks at
    } else if (arg === '--git-dir' || arg.startsWith('--git-dir=')) {
      taken = arg === '--git-dir' ? value(arg) : arg.slice(10);
      if (typeof taken === 'string') line.gitDir = taken;
    } else if (['--namespace', '--work-tree', '--super-prefix', '--shallow-file'].includes(arg)) {
      taken = value(arg);
    } else if (/^--(namespace|work-tree|super-prefix)=/.test(arg)) {
      // a value attached
    } else if (arg === '-c' || arg === '--config-env') {
      taken = value(arg);
      if (typeof taken === 'string') line.configKeys.push(taken.split('=')[0] ?? '');
    } else if (arg.startsWith('--config-env=')) {
      line.configKeys.push(arg.slice(13).split('=')[0] ?? '');
    } else if (arg === '-C') {
      taken = value(arg);
      if (typeof taken === 'string') line.chdirs.push(taken);
    } else {
      return { error: `git: unknown option ${arg}` };
    }
    if (taken !== null && typeof taken !== 'string') return taken;
    if (line.exits) return line;
  }
  const first = args[i];
  if (first === undefined) return line;
  line.sub =
    first === '--version' || first === '-v' ? 'version' : first === '--help' || first === '-h' ? 'help' : first;
  line.rest = args.slice(i + 1);
  return line;
}

/** True when `arg` is a long option git's parse-options would read as one of `names` (a prefix of two letters or more). */
function gitLong(arg: string, ...names: string[]): boolean {
  if (!arg.startsWith('--') || arg.length < 4) return false;
  const typed = arg.slice(2).split('=')[0] as string;
  return names.some((name) => name.startsWith(typed));
}

/** Subcommands that print the contents of files (of the work tree, the index or history). */
const GIT_PRINTS_CONTENT = new Set([
  'diff',
  'show',
  'grep',
  'cat-file',
  'blame',
  'annotate',
  'archive',
  'format-patch',
  'range-diff',
  'whatchanged',
  'bundle',
  'fast-export',
  'stash',
  'notes',
  'show-index',
  'unpack-file',
  'diff-files',
  'diff-index',
  'diff-tree',
]);

/** Subcommands that print contents only with a patch option (`log -p`, `status -v`, `add -p`...). */
const GIT_PATCH_OPTIONS: Readonly<Record<string, RegExp>> = {
  log: /^(-p|-u|-c|-W|--cc|--patch|--patch-with-stat|--patch-with-raw|--word-diff.*|--color-words.*|--function-context|--full-diff|--ext-diff|--textconv|--binary|-[a-zA-Z]*[puW][a-zA-Z]*)$/,
  status: /^(-v+|--verbose|-[a-zA-Z]*v[a-zA-Z]*)$/,
  commit: /^(-v+|--verbose|-p|--patch|--interactive|-[a-zA-Z]*[vp][a-zA-Z]*)$/,
  add: /^(-p|-i|-e|--patch|--interactive|--edit|-[a-zA-Z]*[pie][a-zA-Z]*)$/,
  checkout: /^(-p|--patch)$/,
  restore: /^(-p|--patch)$/,
  reset: /^(-p|--patch)$/,
  shortlog: /^(-p|--patch)$/,
};

/** Options with which diff, show and log print names and counts, not contents. */
const GIT_NAMES_ONLY = /^--(stat|numstat|shortstat|name-only|name-status|summary|dirstat)(=.*)?$/;
const GIT_PATCH =
  /^(-p|-u|--patch|--patch-with-stat|--patch-with-raw|-W|--function-context|--word-diff.*|--color-words.*|--cc|-c|--textconv|--ext-diff|-U.*|--unified.*)$/;

function gitPrintsContent(sub: string, rest: readonly string[]): boolean {
  if (
    ['diff', 'show', 'log', 'whatchanged'].includes(sub) &&
    rest.some((arg) => GIT_NAMES_ONLY.test(arg)) &&
    !rest.some((arg) => GIT_PATCH.test(arg) || /^-[a-zA-Z]*[puW]/.test(arg) || arg.includes(':'))
  ) {
    return false;
  }
  if (GIT_PRINTS_CONTENT.has(sub)) return true;
  const patch = own(GIT_PATCH_OPTIONS, sub);
  return patch !== undefined && rest.some((arg) => arg !== '--' && patch.test(arg));
}

/** Whether the policy lets everything in the workspace be read outright (no read is denied or asked). */
function readsEverything(policy: Policy): boolean {
  let all = false;
  for (const layer of policy.layers) {
    for (const rule of layer.rules) {
      if (rule.act !== 'read') continue;
      if (rule.effect !== 'allow') return false;
      if (rule.pattern === '**') all = true;
    }
  }
  return all;
}

/**
 * The repository git would use from `cwd`: `--git-dir`, else the first `.git` (a
 * directory, or a file naming a `gitdir:`) or bare repository found from `cwd` upwards.
 */
function discoverRepository(cwd: string, gitDir: string | null): string | null {
  if (gitDir !== null) return resolve(cwd, gitDir);
  for (let dir = cwd; ; dir = dirname(dir)) {
    const dotGit = join(dir, '.git');
    const stat = lstatSync(dotGit, { throwIfNoEntry: false });
    if (stat?.isDirectory()) return dotGit;
    if (stat?.isFile() || stat?.isSymbolicLink()) {
      try {
        const named = /^gitdir:\s*(.+?)\s*$/m.exec(readFileSync(dotGit, 'utf8'))?.[1];
        return named === undefined ? dotGit : resolve(dir, named);
      } catch {
        return dotGit;
      }
    }
    // A repository without a .git: git takes a directory holding HEAD, and objects/ and refs/
    // of its own or through a `commondir` file, for one. Any directory holding HEAD is taken
    // for a candidate, so the check never finds a different repository than git does.
    if (lstatSync(join(dir, 'HEAD'), { throwIfNoEntry: false })) return dir;
    if (dirname(dir) === dir) return null;
  }
}

/** A repository the agent cannot have written: a `.git` directory (the floor protects every one) or inside one. */
function trustedRepository(repository: string): boolean {
  let real: string;
  try {
    real = realpathSync.native(repository);
  } catch {
    return false;
  }
  return real.split('/').includes('.git') && lstatSync(real).isDirectory();
}

export const git: Handler = (args, ctx) => {
  const parsed = parseGitCommandLine(args);
  if ('error' in parsed) return unreadable(parsed.error);
  if (parsed.exits) return [];
  const effects: Effect[] = [];
  const arb = (why: string): Effect => ({ kind: 'arbitrary', why });
  for (const key of parsed.configKeys) {
    if (isGitCodeKey(key)) effects.push(arb(`git -c ${key}=... runs a command`));
  }
  if (parsed.execPath) effects.push(arb('git --exec-path= runs its subcommands from another directory'));
  if (parsed.pager) effects.push(arb('git -p runs a pager'));
  const sub = parsed.sub;
  const rest = parsed.rest;
  if (sub === null || sub === 'version') return effects;
  if (sub === 'help') {
    if (rest.length > 0) effects.push(arb('git help runs man, a pager or a browser'));
    return effects;
  }
  const cwds = ctx.cwds.map((cwd) => parsed.chdirs.reduce((dir, next) => resolve(dir, next), cwd));
  // git reads configuration (and runs hooks) from whatever repository it finds: one the agent could have written is arbitrary code.
  for (const cwd of cwds) {
    const repository = discoverRepository(cwd, parsed.gitDir);
    if (repository !== null && !trustedRepository(repository)) {
      effects.push({
        kind: 'arbitrary',
        untrusted: true,
        why: `git would read the configuration and hooks of ${repository}, a repository that is not a .git directory, which the agent could have written`,
      });
      break;
    }
  }
  // Options that write their output to a file: the file is decided as a write.
  const outputs: string[] = [];
  for (const [index, arg] of rest.entries()) {
    if (gitLong(arg, 'output', 'output-directory')) {
      const value = arg.includes('=') ? arg.slice(arg.indexOf('=') + 1) : rest[index + 1];
      if (value !== undefined) outputs.push(value);
    } else if (sub === 'format-patch' && arg === '-o' && rest[index + 1] !== undefined) {
      outputs.push(rest[index + 1] as string);
    }
  }
  if (outputs.length > 0) effects.push({ kind: 'paths', use: { ...NO_PATHS, writes: outputs } });
  if (gitPrintsContent(sub, rest) && !readsEverything(ctx.policy)) {
    const refusal = gitReadRefusal(sub, rest, cwds, ctx);
    if (refusal) return [...effects, refusal];
  }
  switch (sub) {
    case 'config':
      if (
        rest.some((arg) => isGitCodeKey(arg.split('=')[0] ?? '')) ||
        rest.some((arg) => arg === '-e' || gitLong(arg, 'edit'))
      ) {
        effects.push(arb('git config sets a key whose value is a command'));
      }
      break;
    case 'submodule':
      if (rest.includes('foreach')) {
        const after = rest.slice(rest.indexOf('foreach') + 1).filter((arg) => arg !== '--recursive' && arg !== '-q');
        effects.push(arb('git submodule foreach runs a command'), { kind: 'line', line: after.join(' ') });
      }
      break;
    case 'bisect':
      if (rest[0] === 'run') effects.push(arb('git bisect run runs a command'), { kind: 'inner', argv: rest.slice(1) });
      break;
    case 'rebase':
      for (const [index, arg] of rest.entries()) {
        if (arg === '-x' || (gitLong(arg, 'exec') && !arg.includes('='))) {
          effects.push(arb('git rebase --exec runs a command'), { kind: 'line', line: rest[index + 1] ?? '' });
        } else if (gitLong(arg, 'exec')) {
          effects.push(arb('git rebase --exec runs a command'), {
            kind: 'line',
            line: arg.slice(arg.indexOf('=') + 1),
          });
        } else if (/^-[a-zA-Z]*x./.test(arg)) {
          effects.push(arb('git rebase -x runs a command'), { kind: 'line', line: arg.slice(arg.indexOf('x') + 1) });
        } else if (/^-[a-zA-Z]*x$/.test(arg)) {
          effects.push(arb('git rebase -x runs a command'), { kind: 'line', line: rest[index + 1] ?? '' });
        }
      }
      break;
    case 'filter-branch':
    case 'difftool':
    case 'mergetool':
    case 'instaweb':
    case 'web--browse':
      effects.push(arb(`git ${sub} runs commands`));
      break;
    case 'grep':
      if (rest.some((arg) => /^-[a-zA-Z]*O/.test(arg) || gitLong(arg, 'open-files-in-pager'))) {
        effects.push(arb('git grep -O runs a pager'));
      }
      break;
    default:
      if (
        rest.some((arg) => gitLong(arg, 'upload-pack', 'receive-pack', 'exec') || arg.includes('ext::')) ||
        (['fetch', 'clone', 'ls-remote', 'pull', 'archive', 'push'].includes(sub) &&
          rest.some((arg) => /^-[a-zA-Z]*u/.test(arg)))
      ) {
        effects.push(arb('git runs a remote helper command'));
      }
  }
  return effects;
};

/**
 * A subcommand that prints file contents, under a policy that denies some reads: only
 * plain paths named after `--`, each of which the policy lets be read, so what it prints
 * is what read_file could show. Anything else is refused.
 */
function gitReadRefusal(sub: string, rest: readonly string[], cwds: readonly string[], ctx: Context): Effect | null {
  const refuse = (why: string): Effect => ({
    kind: 'refuse',
    rule: 'exec.git-read',
    reason: `git ${sub} prints the contents of files, and the policy denies reading some: ${why}`,
  });
  if (['cat-file', 'archive', 'bundle', 'fast-export', 'show-index', 'unpack-file', 'notes'].includes(sub)) {
    return refuse('it names objects, not paths, so the check cannot tell whose contents it prints');
  }
  const end = rest.indexOf('--');
  if (end === -1) return refuse('name the paths it may print after -- (for example git diff -- src)');
  const before = rest.slice(0, end);
  if (before.some((arg) => arg.includes(':'))) {
    return refuse('a revision:path names a file in history, which the check does not follow');
  }
  const paths = rest.slice(end + 1);
  if (paths.length === 0) return refuse('name the paths it may print after --');
  for (const path of paths) {
    if (path.startsWith(':') || /[*?[]/.test(path)) {
      return refuse(`the pathspec ${path} is magic or a pattern; name plain paths`);
    }
    for (const cwd of cwds) {
      const decision = ctx.policy.decide({ kind: 'read', path: resolve(cwd, path) }, ctx.root);
      if (decision.effect !== 'allow') return refuse(`reading ${decision.subject} is not allowed outright`);
    }
  }
  return null;
}
