/**
 * The table of programs the check reads: each name's handler, which says what the
 * program runs beyond its argv. A name not in it runs nothing the check must follow.
 */
import type { ResolvedProgram } from '../policy.js';
import { arbitrary, arbitraryUnless, type Context, type Effect, type Handler } from './effects.js';
import { find, rsync, scp, tar } from './file-tools.js';
import { git } from './git.js';
import { npx, packageManager } from './packages.js';
import { SHELLS, shell } from './shells.js';
import { awk, sed } from './text-tools.js';
import {
  busybox,
  command,
  corepack,
  env,
  exec,
  nice,
  nohup,
  setsid,
  stdbuf,
  time,
  timeout,
  xargs,
} from './wrappers.js';

/** What running `name` with `args` does beyond its argv, as its handler reads it; nothing for a name not in the table. */
export function analyze(name: string, args: readonly string[], ctx: Context, program?: ResolvedProgram): Effect[] {
  const handler = handlerOf(name);
  return handler ? handler([...args], ctx, program) : [];
}

/** The handler of a program by name: the table's, or a versioned interpreter's. */
export function handlerOf(name: string): Handler | undefined {
  return Object.hasOwn(PROGRAMS, name) ? PROGRAMS[name] : familyOf(name);
}

const INTERPRETER = 'an interpreter runs code the check cannot see';
const BUILD = 'a build tool or test runner runs project code';

const PROGRAMS: Record<string, Handler> = {
  env,
  timeout,
  nice,
  nohup,
  command,
  exec,
  stdbuf,
  time,
  setsid,
  busybox,
  corepack,
  xargs,
  find,
  awk,
  gawk: awk,
  mawk: awk,
  nawk: awk,
  sed,
  gsed: sed,
  tar,
  gtar: tar,
  bsdtar: tar,
  ssh: arbitrary('ssh runs commands (remote, ProxyCommand, LocalCommand)'),
  rsync,
  scp,
  git,
  npm: packageManager('npm'),
  pnpm: packageManager('pnpm'),
  yarn: packageManager('yarn'),
  bun: packageManager('bun'),
  npx,
  pnpx: npx,
  bunx: npx,
  deno: arbitraryUnless(INTERPRETER, ['fmt', 'lint', 'check', 'doc', 'info', 'types', 'completions']),
  go: arbitraryUnless(BUILD, ['version', 'env', 'fmt', 'doc', 'help']),
  cargo: arbitraryUnless(BUILD, ['fmt', 'version', 'help', 'tree', 'metadata']),
  dotnet: arbitrary(BUILD),
  pip: arbitraryUnless('pip install runs package build code', ['list', 'show', 'freeze', 'check', 'help', 'config']),
  pip3: arbitraryUnless('pip install runs package build code', ['list', 'show', 'freeze', 'check', 'help', 'config']),
  uv: arbitraryUnless(BUILD, ['version', 'help', 'tree']),
  fish: arbitrary('a shell whose syntax the parser does not read'),
  csh: arbitrary('a shell whose syntax the parser does not read'),
  tcsh: arbitrary('a shell whose syntax the parser does not read'),
  pwsh: arbitrary('a shell whose syntax the parser does not read'),
  powershell: arbitrary('a shell whose syntax the parser does not read'),
  nu: arbitrary('a shell whose syntax the parser does not read'),
  xonsh: arbitrary('a shell whose syntax the parser does not read'),
  elvish: arbitrary('a shell whose syntax the parser does not read'),
  watch: arbitrary('watch runs its arguments through sh -c'),
  script: arbitrary('script runs a shell'),
  strace: arbitrary('strace runs a command'),
  ltrace: arbitrary('ltrace runs a command'),
  gdb: arbitrary('gdb runs commands'),
  flock: arbitrary('flock runs a command'),
  chroot: arbitrary('chroot runs a command'),
  unshare: arbitrary('unshare runs a command'),
  nsenter: arbitrary('nsenter runs a command'),
  chrt: arbitrary('chrt runs a command'),
  taskset: arbitrary('taskset runs a command'),
  ionice: arbitrary('ionice runs a command'),
  parallel: arbitrary('parallel runs commands'),
  expect: arbitrary(INTERPRETER),
  vim: arbitrary('an editor runs commands'),
  vi: arbitrary('an editor runs commands'),
  nvim: arbitrary('an editor runs commands'),
  emacs: arbitrary('an editor runs commands'),
  less: arbitrary('less runs LESSOPEN and ! commands'),
  man: arbitrary('man runs a pager'),
};

for (const name of SHELLS) PROGRAMS[name] = shell;
for (const name of [
  'node',
  'nodejs',
  'tsx',
  'ts-node',
  'ts-node-esm',
  'babel-node',
  'esno',
  'perl',
  'ruby',
  'irb',
  'php',
  'lua',
  'luajit',
  'Rscript',
  'R',
  'julia',
  'java',
  'jshell',
  'groovy',
  'scala',
  'kotlin',
  'osascript',
  'tclsh',
  'wish',
  'swift',
  'erl',
  'elixir',
  'iex',
  'ghci',
  'runghc',
  'clojure',
  'racket',
  'guile',
  'sbcl',
]) {
  PROGRAMS[name] = arbitrary(INTERPRETER);
}
for (const name of [
  'make',
  'gmake',
  'bmake',
  'just',
  'rake',
  'ninja',
  'cmake',
  'gradle',
  'mvn',
  'ant',
  'bazel',
  'bazelisk',
  'buck',
  'scons',
  'meson',
  'pytest',
  'py.test',
  'tox',
  'nox',
  'poetry',
  'pdm',
  'hatch',
  'pipx',
  'uvx',
  'vitest',
  'jest',
  'mocha',
  'ava',
  'tap',
  'playwright',
  'cypress',
  'karma',
  'eslint',
  'prettier',
  'vite',
  'webpack',
  'rollup',
  'gulp',
  'grunt',
  'turbo',
  'nx',
  'lerna',
  'nodemon',
  'pm2',
  'bundle',
  'composer',
]) {
  PROGRAMS[name] = arbitrary(BUILD);
}

/** Versioned interpreter names: python3.12, perl5.36, ruby3.2, php8.2, lua5.4, pypy3. */
function familyOf(name: string): Handler | undefined {
  if (/^(python|pypy|perl|ruby|php|lua|node)[0-9.]*$/.test(name)) return arbitrary(INTERPRETER);
  if (/^(ipython|jupyter)/.test(name)) return arbitrary(INTERPRETER);
  return undefined;
}
