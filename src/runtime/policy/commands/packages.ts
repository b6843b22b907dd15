/**
 * Package managers (npm, pnpm, yarn, bun, npx): a package script is read from
 * package.json and checked as a line; install, pack and publish run lifecycle scripts
 * and the packages' own code.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { type Effect, type Handler, infoOnly, leadingOptions, optionValue, own } from './effects.js';

const NPM_VALUE_OPTIONS = [
  '--prefix',
  '-C',
  '--workspace',
  '-w',
  '--script-shell',
  '--userconfig',
  '--globalconfig',
  '--cache',
  '--registry',
  '--loglevel',
  '--node-options',
  '--tag',
  '--otp',
  '--access',
  '--include',
  '--omit',
  '--filter',
  '-F',
  '--dir',
  '--cwd',
  '--reporter',
];

const NPM_SUBCOMMANDS: Record<string, string> = {
  'run-script': 'run',
  run: 'run',
  rum: 'run',
  urn: 'run',
  test: 'test',
  t: 'test',
  tst: 'test',
  start: 'start',
  stop: 'stop',
  restart: 'restart',
  exec: 'exec',
  x: 'exec',
  dlx: 'exec',
  install: 'install',
  i: 'install',
  in: 'install',
  add: 'install',
  isntall: 'install',
  ci: 'install',
  'clean-install': 'install',
  ic: 'install',
  'install-clean': 'install',
  'install-test': 'install',
  it: 'install',
  cit: 'install',
  rebuild: 'install',
  rb: 'install',
  update: 'install',
  up: 'install',
  upgrade: 'install',
  link: 'install',
  ln: 'install',
  pack: 'pack',
  publish: 'publish',
  version: 'version',
  init: 'create',
  create: 'create',
  innit: 'create',
  explore: 'create',
  edit: 'create',
  'install-ci-test': 'install',
};

const LIFECYCLE: Record<string, string[]> = {
  install: ['preinstall', 'install', 'postinstall', 'preprepare', 'prepare', 'postprepare'],
  pack: ['prepack', 'prepare', 'postpack'],
  publish: ['prepublishOnly', 'prepack', 'prepare', 'postpack', 'publish', 'postpublish'],
  version: ['preversion', 'version', 'postversion'],
  restart: ['prerestart', 'restart', 'postrestart', 'prestop', 'stop', 'poststop', 'prestart', 'start', 'poststart'],
};

const DIR_OPTIONS = ['--prefix', '-C', '--dir', '--cwd'];

const BUN_BUILTINS = new Set([
  'test',
  'install',
  'i',
  'add',
  'a',
  'remove',
  'rm',
  'update',
  'link',
  'unlink',
  'pm',
  'build',
  'init',
  'create',
  'c',
  'upgrade',
  'outdated',
  'publish',
  'audit',
  'patch',
  'repl',
]);

/** The manager's own flags, where it runs, and its positional words (flag values skipped). */
function scanManagerArgs(args: readonly string[]): { flags: string[]; dir: string | undefined; positions: number[] } {
  const flags: string[] = [];
  const positions: number[] = [];
  let dir: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === '--') break;
    if (!arg.startsWith('-')) {
      positions.push(i);
      // What follows `exec`/`x`/`dlx` belongs to the program it runs.
      if (positions.length === 1 && ['exec', 'x', 'dlx'].includes(arg)) break;
      continue;
    }
    flags.push(arg);
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg : arg.slice(0, eq);
    const value = eq === -1 ? (NPM_VALUE_OPTIONS.includes(name) ? args[++i] : undefined) : arg.slice(eq + 1);
    if (value !== undefined) flags.push(value);
    if (DIR_OPTIONS.includes(name) && value !== undefined) dir = value;
  }
  return { flags, dir, positions };
}

/** npm, pnpm, yarn, bun: scripts from package.json are parsed and checked; the rest is arbitrary code. */
export function packageManager(manager: 'npm' | 'pnpm' | 'yarn' | 'bun'): Handler {
  return (args, ctx) => {
    if (infoOnly(args)) return [];
    const { flags, dir, positions } = scanManagerArgs(args);
    const at = positions[0];
    const raw = at === undefined ? undefined : args[at];
    const rest = at === undefined ? [] : args.slice(at + 1);
    const effects: Effect[] = [];
    const arb = (why: string): Effect => ({ kind: 'arbitrary', why });
    if (flags.some((arg) => /^--(script-shell|node-options)/.test(arg))) {
      effects.push({ kind: 'environment', subject: `${manager} ${flags.join(' ')}` });
    }
    const pkg = packageDir(dir === undefined ? ctx.cwds : ctx.cwds.map((cwd) => resolve(cwd, dir)));
    const scripts = pkg === null ? null : readScripts(pkg);
    if (pkg !== null && npmrcTampered(pkg)) {
      effects.push({ kind: 'environment', subject: `${join(pkg, '.npmrc')} sets script-shell or node-options` });
    }
    const several = flags.some((arg) =>
      /^(-w|--workspaces?|-ws|--include-workspace-root|-r|--recursive|--filter|-F)(=|$)/.test(arg),
    );
    const hooked = (name: string, extra: string[]): Effect => {
      if (several) {
        return { kind: 'refuse', rule: 'exec.package-script', reason: 'scripts of several packages are not checked' };
      }
      if (pkg === null) {
        return { kind: 'refuse', rule: 'exec.package-script', reason: 'no package.json: the script cannot be read' };
      }
      const names = [
        { name: `pre${name}`, required: false },
        { name, required: true },
        { name: `post${name}`, required: false },
      ];
      return { kind: 'scripts', manager, dir: pkg, names, extra: extra.filter((arg, i) => !(i === 0 && arg === '--')) };
    };
    // Optional lifecycle scripts of a command that is arbitrary code anyway.
    const lifecycle = (names: readonly string[]): Effect[] =>
      pkg === null || several
        ? []
        : [{ kind: 'scripts', manager, dir: pkg, names: names.map((name) => ({ name, required: false })), extra: [] }];
    if (manager === 'npm' && raw === undefined) return effects;
    if (manager === 'bun' && raw !== undefined && BUN_BUILTINS.has(raw)) {
      effects.push(arb(`bun ${raw} runs code`));
      return effects;
    }
    const sub = raw === undefined ? 'install' : (own(NPM_SUBCOMMANDS, raw) ?? raw);
    switch (sub) {
      case 'run': {
        const nameAt = positions[1];
        if (nameAt === undefined) return effects;
        const name = args[nameAt] as string;
        if (manager === 'bun' && (scripts === null || own(scripts, name) === undefined)) {
          effects.push(arb(`bun run ${name} runs a file`));
          return effects;
        }
        effects.push(arb(`${manager} run runs a package script`), hooked(name, args.slice(nameAt + 1)));
        return effects;
      }
      case 'test':
      case 'start':
      case 'stop':
        effects.push(arb(`${manager} ${sub} runs a package script`), hooked(sub, rest));
        return effects;
      case 'restart':
        effects.push(arb(`${manager} restart runs package scripts`), ...lifecycle(LIFECYCLE.restart ?? []));
        return effects;
      case 'exec': {
        const parsed = leadingOptions(rest, { short: 'pc', long: ['--package', '--call'] });
        const call = optionValue(parsed, '-c', '--call');
        effects.push(
          arb(`${manager} ${raw} runs a package's program`),
          call !== undefined ? { kind: 'line', line: call } : { kind: 'inner', argv: parsed.rest },
        );
        return effects;
      }
      case 'install':
        effects.push(arb(`${manager} ${raw ?? 'install'} runs the install scripts of packages`));
        effects.push(...lifecycle(LIFECYCLE.install ?? []));
        return effects;
      case 'pack':
      case 'publish':
      case 'version':
        effects.push(arb(`${manager} ${sub} runs lifecycle scripts`), ...lifecycle(own(LIFECYCLE, sub) ?? []));
        return effects;
      case 'create':
        effects.push(arb(`${manager} ${raw} runs a package's code`));
        return effects;
      case 'config':
      case 'set':
        if (
          rest.some((arg) =>
            /script-shell|node-options|shell|editor|browser|viewer|onload-script|init-module/.test(arg),
          )
        ) {
          effects.push(arb(`${manager} config sets a program it runs later`));
        }
        return effects;
      default:
        if (manager === 'npm' || raw === undefined) return effects;
        if (scripts !== null && own(scripts, raw) !== undefined) {
          effects.push(arb(`${manager} ${raw} runs a package script`), hooked(raw, rest));
        } else if (manager === 'bun' || ['workspace', 'workspaces', 'recursive', 'node'].includes(raw)) {
          effects.push(arb(`${manager} ${raw} runs code`));
        }
        return effects;
    }
  };
}

export const npx: Handler = (args) => {
  const parsed = leadingOptions(args, { short: 'pc', long: ['--package', '--call'] });
  const call = optionValue(parsed, '-c', '--call');
  const inner: Effect = call !== undefined ? { kind: 'line', line: call } : { kind: 'inner', argv: parsed.rest };
  return [{ kind: 'arbitrary', why: 'npx runs a package’s program' }, inner];
};

/** The nearest directory holding a package.json, from where the command runs upwards. */
function packageDir(cwds: readonly string[]): string | null {
  for (const cwd of cwds) {
    let dir = cwd;
    for (;;) {
      if (existsSync(join(dir, 'package.json'))) return dir;
      const parent = dirname(dir);
      if (parent === dir) break;
      dir = parent;
    }
  }
  return null;
}

export function readScripts(dir: string): Record<string, unknown> | null {
  try {
    const data = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { scripts?: unknown };
    const scripts = data.scripts;
    return typeof scripts === 'object' && scripts !== null ? (scripts as Record<string, unknown>) : {};
  } catch {
    return null;
  }
}

function npmrcTampered(dir: string): boolean {
  try {
    return /^\s*(script-shell|node-options|shell)\s*=/im.test(readFileSync(join(dir, '.npmrc'), 'utf8'));
  } catch {
    return false;
  }
}

/** Single-quotes an argument the way npm appends it to a script. */
export function quote(arg: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}
