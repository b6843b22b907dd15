/**
 * Shells, read as they read their own argv: `sh -c STRING` is a line to check; a file,
 * standard input or an interactive shell is code the check cannot see.
 */
import { basename } from 'node:path';
import { type Effect, type Handler, unreadable } from './effects.js';

export const SHELLS = new Set(['sh', 'bash', 'zsh', 'dash', 'ksh', 'mksh', 'ash', 'posh', 'yash', 'ksh93', 'rbash']);

/** dash's option letters (`set -o` names them), and the names `-o` takes. */
const DASH_LETTERS = new Set([...'efIimnsxvVECabup']);
const DASH_NAMES = new Set([
  'errexit',
  'noglob',
  'ignoreeof',
  'interactive',
  'monitor',
  'noexec',
  'stdin',
  'xtrace',
  'verbose',
  'vi',
  'emacs',
  'noclobber',
  'allexport',
  'notify',
  'nounset',
  'privileged',
  'nolog',
  'debug',
]);
const BASH_LETTERS = new Set([...'abefhkmnptuvxBCHPTEirsD']);
const BASH_NAMES = new Set([
  ...DASH_NAMES,
  'braceexpand',
  'errtrace',
  'functrace',
  'hashall',
  'histexpand',
  'history',
  'interactive-comments',
  'keyword',
  'onecmd',
  'physical',
  'pipefail',
  'posix',
]);
const BASH_LONG = new Set(['--norc', '--noprofile', '--posix', '--verbose', '--noediting', '--restricted']);

/**
 * A shell's own argv, read as the shell reads it: dash's rules (options are clusters of
 * letters after `-` or `+`, `-o NAME` takes the next word, `-` or `--` ends them, the
 * command string of `-c` is the first operand), bash's (long options first, then the
 * same, with `-O NAME`). An option the shell would reject is refused; `-l` (a login
 * shell reads its profile) and `-i` are arbitrary code.
 */
function shellFlavour(flavour: 'dash' | 'bash') {
  const letters = flavour === 'dash' ? DASH_LETTERS : BASH_LETTERS;
  const names = flavour === 'dash' ? DASH_NAMES : BASH_NAMES;
  return (args: readonly string[]): Effect[] => {
    let command = false;
    let login = false;
    let interactive = false;
    let stdin = false;
    let i = 0;
    if (flavour === 'bash') {
      for (; i < args.length && (args[i] as string).startsWith('--') && args[i] !== '--'; i++) {
        const arg = args[i] as string;
        if (arg === '--login') login = true;
        else if (arg === '--rcfile' || arg === '--init-file') {
          interactive = true;
          i++;
        } else if (!BASH_LONG.has(arg)) {
          return unreadable(`bash: ${arg} is not an option it takes here`);
        }
      }
    }
    for (; i < args.length; i++) {
      const arg = args[i] as string;
      if (arg === '--' || arg === '-') {
        i++;
        break;
      }
      if (!/^[-+]./.test(arg)) break;
      for (const letter of arg.slice(1)) {
        if (letter === 'c') command = true;
        else if (letter === 'l') login = true;
        else if (letter === 'o' || (letter === 'O' && flavour === 'bash')) {
          const name = args[i + 1];
          if (name === undefined) return unreadable(`${flavour}: -${letter} needs a name`);
          if (letter === 'o' && !names.has(name)) return unreadable(`${flavour}: -o ${name} is not an option it has`);
          i++;
        } else if (!letters.has(letter)) {
          return unreadable(`${flavour}: -${letter} is not an option it has`);
        } else if (letter === 'i') interactive = true;
        else if (letter === 's') stdin = true;
      }
    }
    const operand = args[i];
    const effects: Effect[] = [];
    if (login) {
      return [
        {
          kind: 'refuse',
          rule: 'exec.options',
          reason: `a login shell (-l) runs profile files before its command, which the check does not read`,
        },
      ];
    }
    if (interactive) effects.push({ kind: 'arbitrary', why: 'an interactive shell reads its rc files' });
    if (command) {
      if (operand === undefined) return [];
      effects.push({ kind: 'line', line: operand });
      return effects;
    }
    if (stdin || operand === undefined) return [{ kind: 'arbitrary', why: 'a shell reading commands from its input' }];
    return [{ kind: 'arbitrary', why: `a shell running the file ${operand}` }];
  };
}

const dashShell = shellFlavour('dash');
const bashShell = shellFlavour('bash');

/**
 * `sh -c STRING` is parsed and checked; `sh FILE`, `sh -s` or a bare `sh` (reading stdin)
 * is arbitrary code. The shell is read by what really runs: `sh` is dash on Debian and
 * bash elsewhere. Other shells are read by dash's rules, which take the fewest options.
 */
export const shell: Handler = (args, _ctx, program) => {
  const real = basename(program?.real ?? program?.identity ?? '');
  return /^(bash|rbash)$/.test(real) ? bashShell(args) : dashShell(args);
};
