/**
 * Checks a command as the program it really runs. The argv is decided as written, and
 * so is every command a wrapper runs (`env`, `timeout`, `nice`, `xargs`, `sh -c`, a
 * package script...), recursively; the first deny wins. A program that runs code the
 * check cannot see (an interpreter, a build tool, `find -exec`, an awk program calling
 * `system`) is taken for exactly that: it is allowed only by a rule that names it, and
 * otherwise asks, whatever a broader rule says.
 *
 * What runs a string as shell code (`sh -c`, a package.json script, `awk`'s
 * `system("...")`) is parsed with the project's own parser (shell.ts) and checked
 * stage by stage; a string that cannot be parsed is refused.
 */
import { existsSync, lstatSync, readFileSync, readlinkSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { type Decision, type Policy, resolvePath } from './policy.js';
import { parseShell, type ShellRedirect } from './shell.js';

/** What a command check says: refused (the first deny, with its rule and layer) or allowed/asked, with every decision made. */
export type CommandCheck =
  | { ok: true; decisions: Decision[]; effect: 'allow' | 'ask' }
  | { ok: false; rule: string; layer: string | null; reason: string; decisions: Decision[] };

/** The first word of the act an arbitrary-code program is also decided as (`denyExec('<arbitrary code>*')` refuses them all). */
export const ARBITRARY_CODE = '<arbitrary code>';

/** How deep wrappers, `sh -c` strings and package scripts may nest before the check refuses. */
const MAX_DEPTH = 12;

/**
 * Checks one argv as the program it really runs: the argv itself, then every command it
 * wraps (recursively). `sudo`/`doas` are refused outright (`exec.privilege`).
 *
 * @example
 * checkArgv(['env', 'X=1', 'curl', 'example.com'], policy, root);
 * // { ok: false, rule: 'deny-exec curl*', layer: 'project', ... }
 */
export function checkArgv(argv: readonly string[], policy: Policy, root: string): CommandCheck {
  const tally = new Tally();
  if (argv.length === 0) tally.refuse('exec.empty', '', 'an empty argv runs nothing');
  else checkCommand(argv, { policy, root, cwds: [root], depth: 0 }, tally, NO_HOLES);
  return tally.result();
}

/** @internal checkShell's body (shell.ts): parse a line, then check every stage and redirect. */
export function checkLine(line: string, policy: Policy, root: string): CommandCheck {
  const tally = new Tally();
  checkLineInto(line, { policy, root, cwds: [root], depth: 0 }, tally, true);
  return tally.result();
}

interface Context {
  readonly policy: Policy;
  readonly root: string;
  /** Every directory the command may run in (a `cd` that may or may not have worked adds one). */
  readonly cwds: readonly string[];
  readonly depth: number;
}

/**
 * Arguments not known when the command is checked: `xargs` appends its input (trailing),
 * `find -exec` and `xargs -I` fill in a marker. A deny rule refuses the command if it
 * could match once they are filled.
 */
interface Holes {
  trailing: boolean;
  marker: string | null;
  /** What a filled marker starts with (a `find` start point); null when it could be anything. */
  fill: readonly string[] | null;
}

const NO_HOLES: Holes = { trailing: false, marker: null, fill: null };

class Tally {
  readonly decisions: Decision[] = [];
  denied: { rule: string; layer: string | null; reason: string } | null = null;

  /** Records a decision; true when it denies (the check stops). */
  add(decision: Decision): boolean {
    this.decisions.push(decision);
    if (decision.effect === 'deny' && this.denied === null) {
      this.denied = { rule: decision.rule ?? 'policy.no-rule', layer: decision.layer, reason: decision.reason };
    }
    return this.denied !== null;
  }

  /** A refusal by the boundary itself, not by a policy layer. */
  refuse(rule: string, subject: string, reason: string): true {
    this.add({ effect: 'deny', rule, layer: null, subject, reason });
    return true;
  }

  ask(rule: string, subject: string): void {
    this.decisions.push({ effect: 'ask', rule, layer: 'boundary', subject });
  }

  result(): CommandCheck {
    if (this.denied) return { ok: false, ...this.denied, decisions: this.decisions };
    const effect = this.decisions.some((decision) => decision.effect === 'ask') ? 'ask' : 'allow';
    return { ok: true, decisions: this.decisions, effect };
  }
}

// ---------------------------------------------------------------------------------------
// Lines

function checkLineInto(line: string, ctx: Context, tally: Tally, top: boolean): boolean {
  const parsed = parseShell(line);
  if (!parsed.ok) return tally.refuse('shell.unsupported', line, `the line is refused: ${parsed.reason}`);
  if (top && parsed.stages.length === 0) return tally.refuse('exec.empty', line, 'the line runs no command');
  let cwds = [...ctx.cwds];
  for (const stage of parsed.stages) {
    const here: Context = { ...ctx, cwds };
    const names = Object.keys(stage.assignments);
    const tampered = names.filter(isCodeLoadingVariable);
    if (tampered.length > 0) {
      tally.ask('exec.environment', tampered.map((name) => `${name}=${stage.assignments[name]}`).join(' '));
    }
    const program = stage.argv[0];
    if (program === 'cd') {
      const moved = changeDirectory(stage.argv.slice(1), here, tally);
      if (moved === null) return true;
      cwds = moved;
    } else if (program !== undefined && STATE_BUILTINS.has(program)) {
      const set = stage.argv.slice(1).filter((arg) => isCodeLoadingVariable(arg.split('=')[0] ?? ''));
      if (set.length > 0) tally.ask('exec.environment', `${program} ${set.join(' ')}`);
    } else if (program !== undefined) {
      if (checkCommand(stage.argv, here, tally, NO_HOLES)) return true;
    }
    for (const redirect of stage.redirects) {
      if (checkRedirect(redirect, here, tally)) return true;
    }
  }
  return tally.denied !== null;
}

/** Builtins that change only the shell's own state: no program runs, nothing to decide (names they export are checked). */
const STATE_BUILTINS = new Set([
  'export',
  'readonly',
  'declare',
  'typeset',
  'local',
  'unset',
  'set',
  'shift',
  ':',
  'true',
  'false',
  'exit',
  'return',
  'umask',
  'wait',
]);

function checkRedirect(redirect: ShellRedirect, ctx: Context, tally: Tally): boolean {
  if (redirect.op === '<<' || redirect.op === '<<<') return false;
  if ((redirect.op === '>&' || redirect.op === '<&') && /^([0-9]+-?|-)$/.test(redirect.target)) return false;
  if (redirect.target === '/dev/null') return false;
  const kind = redirect.op === '<' || redirect.op === '<&' ? 'read' : 'write';
  const seen = new Set<string>();
  for (const cwd of ctx.cwds) {
    for (const path of danglingChain(resolve(cwd, redirect.target))) {
      const decision = ctx.policy.decide({ kind, path }, ctx.root);
      if (seen.has(decision.subject)) continue;
      seen.add(decision.subject);
      if (tally.add(decision)) return true;
    }
  }
  return false;
}

/**
 * A path and, when it is a symlink to nothing yet, where it leads: `>` follows a dangling
 * link and creates its target, which the path as written does not show.
 */
function danglingChain(path: string): string[] {
  const chain = [path];
  let current = path;
  for (let hop = 0; hop < 8; hop++) {
    let link: string;
    try {
      if (!lstatSync(current).isSymbolicLink() || existsSync(current)) break;
      link = readlinkSync(current);
    } catch {
      break;
    }
    current = resolve(dirname(current), link);
    chain.push(current);
  }
  return chain;
}

/** A `cd`: the directory is read-checked; later stages may run in it or where they were (it may fail). */
function changeDirectory(args: string[], ctx: Context, tally: Tally): string[] | null {
  const operands = args.filter((arg) => !/^-[LPe@]+$/.test(arg));
  const target = operands[0] ?? homedir();
  if (target === '-') {
    tally.refuse('shell.unsupported', 'cd -', 'cd - goes to a directory the check does not track');
    return null;
  }
  if (/[*?[]/.test(target)) {
    tally.refuse('shell.unsupported', `cd ${target}`, `cd to a pattern (${target}) goes where the shell expands it`);
    return null;
  }
  const next = new Set(ctx.cwds);
  for (const cwd of ctx.cwds) {
    const dir = resolve(cwd, target);
    if (tally.add(ctx.policy.decide({ kind: 'read', path: dir }, ctx.root))) return null;
    next.add(dir);
  }
  return [...next];
}

// ---------------------------------------------------------------------------------------
// One command

type Effect =
  | { kind: 'arbitrary'; why: string }
  | { kind: 'inner'; argv: string[]; holes?: Holes; cwds?: string[] }
  | { kind: 'line'; line: string }
  | { kind: 'scripts'; manager: string; dir: string; names: ScriptName[]; extra: string[] }
  | { kind: 'environment'; subject: string }
  | { kind: 'refuse'; rule: string; reason: string };

interface ScriptName {
  name: string;
  required: boolean;
}

const PRIVILEGED = new Set(['sudo', 'doas', 'su', 'pkexec', 'run0', 'runuser']);

/** Shell builtins that run a string or a file as code; refused wherever they appear. */
const CODE_BUILTINS = new Set(['eval', 'source', '.', 'alias', 'trap', 'builtin', 'enable', 'let', 'fc', 'shopt']);

/** Checks one argv and everything it runs; true when denied. */
function checkCommand(argv: readonly string[], ctx: Context, tally: Tally, holes: Holes): boolean {
  const subject = display(argv, holes);
  if (ctx.depth > MAX_DEPTH) {
    return tally.refuse('exec.nesting', subject, `commands nest more than ${MAX_DEPTH} deep`);
  }
  const program = argv[0];
  if (program === undefined) {
    // A wrapper whose command comes from the unknown arguments (`xargs env`): any program.
    if (!holes.trailing) return false;
    return unknownProgram(subject, ctx, tally);
  }
  if (holes.marker !== null && program.includes(holes.marker)) return unknownProgram(subject, ctx, tally);
  const name = basename(program);
  if (PRIVILEGED.has(name)) {
    return tally.refuse('exec.privilege', subject, `${name} runs a command with another user's privileges`);
  }
  if (CODE_BUILTINS.has(program)) {
    return tally.refuse('shell.unsupported', subject, `${program} runs a string or a file as shell code`);
  }
  const outer = decideExec(argv, ctx, holes);
  if (tally.add(outer)) return true;
  const effects = analyze(argv, ctx);
  if (insideWorkspace(program, ctx)) effects.unshift({ kind: 'arbitrary', why: 'a program in the workspace' });
  const unknownArgs = holes.trailing || (holes.marker !== null && argv.some((arg) => arg.includes(holes.marker ?? '')));
  if (unknownArgs && handlerOf(name) !== undefined) {
    // Arguments from input could be `-exec`, `-c core.pager=...`, a program text: whatever it reads them as.
    effects.unshift({ kind: 'arbitrary', why: `${name} reads arguments that are not known when it is checked` });
  }
  let capped = false;
  for (const effect of effects) {
    switch (effect.kind) {
      case 'arbitrary':
        if (!capped && capArbitraryCode(argv, outer, ctx, tally)) return true;
        capped = true;
        break;
      case 'refuse':
        return tally.refuse(effect.rule, subject, effect.reason);
      case 'environment':
        tally.ask('exec.environment', effect.subject);
        break;
      case 'inner': {
        const inner: Context = { ...ctx, depth: ctx.depth + 1, cwds: effect.cwds ?? ctx.cwds };
        if (checkCommand(effect.argv, inner, tally, effect.holes ?? holes)) return true;
        break;
      }
      case 'line':
        if (checkLineInto(effect.line, { ...ctx, depth: ctx.depth + 1 }, tally, false)) return true;
        break;
      case 'scripts':
        if (checkScripts(effect, ctx, tally)) return true;
        break;
    }
  }
  return false;
}

function display(argv: readonly string[], holes: Holes): string {
  return holes.trailing ? `${argv.join(' ')} <args>`.trimStart() : argv.join(' ');
}

/** Decides an argv; with unknown arguments, a deny rule that could match once they are filled refuses it. */
function decideExec(argv: readonly string[], ctx: Context, holes: Holes): Decision {
  const decision = ctx.policy.decide({ kind: 'exec', argv }, ctx.root);
  if (decision.effect === 'deny' || (!holes.trailing && holes.marker === null)) return decision;
  const deny = couldBeDenied(argv, ctx.policy, holes);
  return deny ?? decision;
}

function couldBeDenied(argv: readonly string[], policy: Policy, holes: Holes): Decision | null {
  const templates = templatesOf(argv, holes);
  for (const layer of policy.layers) {
    for (const rule of layer.rules) {
      if (rule.act !== 'exec' || rule.effect !== 'deny') continue;
      const pattern = globTokens(rule.pattern);
      if (templates.some((template) => intersects(pattern, template))) {
        const name = `deny-exec ${rule.pattern}`;
        return {
          effect: 'deny',
          rule: name,
          layer: layer.name,
          subject: display(argv, holes),
          reason: `denied by ${name}: the command gets arguments that are not known when it is checked, and they could make it match`,
        };
      }
    }
  }
  return null;
}

function unknownProgram(subject: string, ctx: Context, tally: Tally): boolean {
  const deny = couldBeDenied([], ctx.policy, { trailing: true, marker: null, fill: null });
  if (deny) return tally.add({ ...deny, subject });
  tally.ask('exec.arbitrary-code', `${ARBITRARY_CODE} ${subject}`);
  return false;
}

/**
 * An arbitrary-code program: allowed only when the rule that allowed it names the
 * program (`allowExec('node*')`, never a bare `*`), or a rule allows it as
 * `<arbitrary code> ...`; otherwise it asks. A deny on `<arbitrary code> ...` refuses it.
 */
function capArbitraryCode(argv: readonly string[], outer: Decision, ctx: Context, tally: Tally): boolean {
  const act = { kind: 'exec' as const, argv: [ARBITRARY_CODE, ...argv] };
  const second = ctx.policy.decide(act, ctx.root);
  if (second.effect === 'deny' && second.rule !== null) return tally.add(second);
  if (second.effect === 'allow' && patternOf(second.rule).startsWith(ARBITRARY_CODE)) {
    tally.add(second);
    return false;
  }
  if (outer.effect === 'allow' && namesProgram(patternOf(outer.rule), argv[0] ?? '', ctx)) return false;
  tally.ask('exec.arbitrary-code', `${ARBITRARY_CODE} ${argv.join(' ')}`);
  return false;
}

/** A record's own entry: an argv word is never a key of Object.prototype (`constructor`). */
function own<T>(record: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

function patternOf(rule: string): string {
  return rule.slice(rule.indexOf(' ') + 1);
}

/** Whether a rule's pattern names the program: its literal start is the program's name, whole. */
function namesProgram(pattern: string, program: string, ctx: Context): boolean {
  const literal = pattern.split(/[*?]/)[0] ?? '';
  const first = literal.split(' ')[0] ?? '';
  if (first === '') return false;
  if (first === program) return true;
  // A bare name covers a program outside the workspace by its basename; a workspace file only as written.
  return !insideWorkspace(program, ctx) && first === basename(program);
}

/** A program given as a path into the workspace: its content is the agent's to write. */
function insideWorkspace(program: string, ctx: Context): boolean {
  if (!program.includes('/')) return false;
  return ctx.cwds.some((cwd) => !resolvePath(resolve(cwd, program), ctx.root).startsWith('/'));
}

// ---------------------------------------------------------------------------------------
// Glob intersection: could a deny pattern match an argv whose holes are filled somehow?

type GlobToken = { star: true } | { one: true } | { ch: string };

function globTokens(pattern: string): GlobToken[] {
  return [...pattern].map((ch) => (ch === '*' ? { star: true } : ch === '?' ? { one: true } : { ch }));
}

function literalTokens(text: string): GlobToken[] {
  return [...text].map((ch) => ({ ch }));
}

/** The argv as glob tokens, holes as `*`: as written and by the program's name (as the policy matches). */
function templatesOf(argv: readonly string[], holes: Holes): GlobToken[][] {
  const spellings = [argv];
  const program = argv[0];
  if (program?.includes('/')) spellings.push([basename(program), ...argv.slice(1)]);
  const templates: GlobToken[][] = [];
  for (const spelling of spellings) {
    for (const fill of holes.fill ?? [null]) {
      const tokens: GlobToken[] = [];
      spelling.forEach((arg, index) => {
        if (index > 0) tokens.push({ ch: ' ' });
        if (holes.marker === null || !arg.includes(holes.marker)) {
          tokens.push(...literalTokens(arg));
          return;
        }
        arg.split(holes.marker).forEach((piece, at) => {
          if (at > 0) tokens.push(...literalTokens(fill ?? ''), { star: true });
          tokens.push(...literalTokens(piece));
        });
      });
      templates.push(tokens);
      if (holes.trailing) {
        templates.push(spelling.length === 0 ? [{ star: true }] : [...tokens, { ch: ' ' }, { star: true }]);
      }
    }
  }
  return templates;
}

function intersects(a: GlobToken[], b: GlobToken[]): boolean {
  const seen = new Set<number>();
  const stack: [number, number][] = [[0, 0]];
  while (stack.length > 0) {
    const [i, j] = stack.pop() as [number, number];
    const key = i * (b.length + 1) + j;
    if (seen.has(key)) continue;
    seen.add(key);
    if (i === a.length && j === b.length) return true;
    const x = a[i];
    const y = b[j];
    if (x && 'star' in x) stack.push([i + 1, j]);
    if (y && 'star' in y) stack.push([i, j + 1]);
    if (x && y && !('ch' in x && 'ch' in y && x.ch !== y.ch)) {
      stack.push(['star' in x ? i : i + 1, 'star' in y ? j : j + 1]);
    }
  }
  return false;
}

// ---------------------------------------------------------------------------------------
// What a program runs

function analyze(argv: readonly string[], ctx: Context): Effect[] {
  const program = argv[0] ?? '';
  const name = basename(program);
  const args = argv.slice(1);
  const handler = handlerOf(name);
  return handler ? handler(args, ctx) : [];
}

function handlerOf(name: string): Handler | undefined {
  return Object.hasOwn(PROGRAMS, name) ? PROGRAMS[name] : familyOf(name);
}

type Handler = (args: string[], ctx: Context) => Effect[];

interface Options {
  /** Short letters that take a value (`-n 5`, `-n5`). */
  short?: string;
  /** Short letters whose value, if any, is attached (`-i{}`). */
  attached?: string;
  /** Long names that take a value (`--signal TERM`, `--signal=TERM`). */
  long?: readonly string[];
}

interface Parsed {
  options: [string, string | undefined][];
  rest: string[];
}

/** Leading options, stopping at the first operand or `--` (how wrappers read their argv). */
function leadingOptions(args: readonly string[], spec: Options): Parsed {
  const options: [string, string | undefined][] = [];
  let i = 0;
  for (; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === '--') {
      i++;
      break;
    }
    if (arg === '-' || !arg.startsWith('-')) break;
    if (arg.startsWith('--')) {
      const eq = arg.indexOf('=');
      const name = eq === -1 ? arg : arg.slice(0, eq);
      let value = eq === -1 ? undefined : arg.slice(eq + 1);
      if (value === undefined && spec.long?.includes(name)) value = args[++i];
      options.push([name, value]);
      continue;
    }
    for (let k = 1; k < arg.length; k++) {
      const letter = arg[k] as string;
      if (spec.short?.includes(letter)) {
        const attached = arg.slice(k + 1);
        options.push([`-${letter}`, attached !== '' ? attached : args[++i]]);
        break;
      }
      if (spec.attached?.includes(letter)) {
        options.push([`-${letter}`, arg.slice(k + 1)]);
        break;
      }
      options.push([`-${letter}`, undefined]);
    }
  }
  return { options, rest: args.slice(i) };
}

function has(parsed: Parsed, ...names: string[]): boolean {
  return parsed.options.some(([name]) => names.includes(name));
}

function optionValue(parsed: Parsed, ...names: string[]): string | undefined {
  return parsed.options.find(([name]) => names.includes(name))?.[1];
}

/** A plain wrapper: options, then the command it runs. */
function wrapper(spec: Options, skipOperands = 0): Handler {
  return (args) => {
    const parsed = leadingOptions(args, spec);
    return [{ kind: 'inner', argv: parsed.rest.slice(skipOperands) }];
  };
}

const INFO_ONLY = new Set(['--version', '-v', '-V', '--help', '-h', '-version', '-help', 'version', 'help']);

/** True when the args only ask for a version or help. */
function infoOnly(args: readonly string[]): boolean {
  return args.length > 0 && args.every((arg) => INFO_ONLY.has(arg));
}

function arbitrary(why: string): Handler {
  return (args) => (infoOnly(args) ? [] : [{ kind: 'arbitrary', why }]);
}

/** Arbitrary unless the first operand is one of `safe` (a subcommand that runs no project code). */
function arbitraryUnless(why: string, safe: readonly string[]): Handler {
  return (args) => {
    if (infoOnly(args)) return [];
    const sub = args.find((arg) => !arg.startsWith('-'));
    return sub !== undefined && safe.includes(sub) ? [] : [{ kind: 'arbitrary', why }];
  };
}

const SHELLS = new Set(['sh', 'bash', 'zsh', 'dash', 'ksh', 'mksh', 'ash', 'posh', 'yash', 'ksh93', 'rbash']);

/** `sh -c STRING` is parsed and checked; `sh FILE`, `sh -s` or a bare `sh` (reading stdin) is arbitrary code. */
const shell: Handler = (args) => {
  let command = false;
  let interactive = false;
  let stdin = false;
  let i = 0;
  for (; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === '--' || arg === '-') {
      i++;
      break;
    }
    if (arg.startsWith('--')) {
      if (arg === '--rcfile' || arg === '--init-file') {
        interactive = true;
        i++;
      } else if (!['--norc', '--noprofile', '--posix', '--login', '--verbose', '--noediting'].includes(arg)) {
        return [{ kind: 'arbitrary', why: `the shell option ${arg}` }];
      }
      continue;
    }
    if (!arg.startsWith('-') && !arg.startsWith('+')) break;
    for (const letter of arg.slice(1)) {
      if (letter === 'c') command = true;
      else if (letter === 'i') interactive = true;
      else if (letter === 's') stdin = true;
      else if (letter === 'o' || letter === 'O') i++;
    }
  }
  const operand = args[i];
  const effects: Effect[] = [];
  if (interactive) effects.push({ kind: 'arbitrary', why: 'an interactive shell reads its rc files' });
  if (command) {
    if (operand !== undefined) effects.push({ kind: 'line', line: operand });
    return effects;
  }
  if (stdin || operand === undefined) return [{ kind: 'arbitrary', why: 'a shell reading commands from its input' }];
  return [{ kind: 'arbitrary', why: `a shell running the file ${operand}` }];
};

const env: Handler = (args, ctx) => {
  const parsed = leadingOptions(args, { short: 'uCS', long: ['--unset', '--chdir', '--split-string'] });
  if (has(parsed, '-S', '--split-string')) {
    return [
      { kind: 'refuse', rule: 'shell.unsupported', reason: 'env -S splits a string into a command by its own rules' },
    ];
  }
  let rest = parsed.rest;
  if (rest[0] === '-') rest = rest.slice(1);
  const assigned: string[] = [];
  while (rest[0] !== undefined && /^[^=]+=/.test(rest[0])) {
    assigned.push(rest[0]);
    rest = rest.slice(1);
  }
  const effects: Effect[] = [];
  const tampered = assigned.filter((pair) => isCodeLoadingVariable(pair.slice(0, pair.indexOf('='))));
  if (tampered.length > 0) effects.push({ kind: 'environment', subject: tampered.join(' ') });
  const chdir = optionValue(parsed, '-C', '--chdir');
  const cwds = chdir === undefined ? undefined : ctx.cwds.map((cwd) => resolve(cwd, chdir));
  effects.push({ kind: 'inner', argv: rest, ...(cwds ? { cwds } : {}) });
  return effects;
};

const nice: Handler = (args) => {
  let i = 0;
  while (args[i] !== undefined && /^--?[0-9]+$/.test(args[i] as string)) i++;
  const parsed = leadingOptions(args.slice(i), { short: 'n', long: ['--adjustment'] });
  return [{ kind: 'inner', argv: parsed.rest }];
};

const command: Handler = (args) => {
  const parsed = leadingOptions(args, {});
  if (has(parsed, '-v', '-V')) return [];
  return [{ kind: 'inner', argv: parsed.rest }];
};

const xargs: Handler = (args) => {
  const parsed = leadingOptions(args, {
    short: 'adEILnPs',
    attached: 'iel',
    long: ['--arg-file', '--delimiter', '--max-args', '--max-procs', '--max-chars', '--process-slot-var'],
  });
  let marker = optionValue(parsed, '-I') ?? null;
  if (marker === null && has(parsed, '-i', '--replace')) {
    marker = optionValue(parsed, '-i', '--replace') || '{}';
  }
  const inner = parsed.rest.length > 0 ? parsed.rest : ['echo'];
  return [
    { kind: 'arbitrary', why: 'xargs runs a command with arguments from its input' },
    { kind: 'inner', argv: inner, holes: { trailing: marker === null, marker, fill: null } },
  ];
};

/** find -exec/-execdir/-ok/-okdir: the command is checked with `{}` as a path under a start point. */
const find: Handler = (args) => {
  let first = 0;
  while (/^-[HLP]$|^-O[0-9]$/.test(args[first] ?? '') || args[first] === '-D') first += args[first] === '-D' ? 2 : 1;
  let end = first;
  while (end < args.length && !/^[-(!,]/.test(args[end] as string)) end++;
  const starts = end > first ? args.slice(first, end) : ['.'];
  const effects: Effect[] = [];
  for (let i = end; i < args.length; i++) {
    const arg = args[i] as string;
    if (!['-exec', '-execdir', '-ok', '-okdir'].includes(arg)) continue;
    let close = i + 1;
    while (close < args.length && args[close] !== ';' && args[close] !== '+') close++;
    effects.push({ kind: 'arbitrary', why: `find ${arg} runs a command on each file` });
    const fill = arg === '-exec' || arg === '-ok' ? starts : ['./'];
    effects.push({ kind: 'inner', argv: args.slice(i + 1, close), holes: { trailing: false, marker: '{}', fill } });
    i = close;
  }
  return effects;
};

/** awk: `system(...)`, pipes and `getline` from commands run shell code; literal ones are checked. */
const awk: Handler = (args) => {
  const parsed = leadingOptions(args, {
    short: 'fvFeEilW',
    long: ['--file', '--assign', '--field-separator', '--source', '--exec', '--include', '--load'],
  });
  if (
    has(parsed, '-f', '--file', '-E', '--exec', '-i', '--include', '-l', '--load') ||
    parsed.options.some(([name, value]) => name === '-W' && /^(e|f)/.test(value ?? ''))
  ) {
    return [{ kind: 'arbitrary', why: 'an awk program read from a file' }];
  }
  if (has(parsed, '--sandbox', '-S')) return [];
  const sources = parsed.options.filter(([name]) => name === '-e' || name === '--source').map(([, value]) => value);
  const program = (sources.length > 0 ? sources : [parsed.rest[0]]).filter((text) => text !== undefined).join('\n');
  const effects: Effect[] = [];
  const calls = [...program.matchAll(/\bsystem\s*\(/g)].length;
  const literals = [...program.matchAll(/\bsystem\s*\(\s*"((?:[^"\\]|\\.)*)"\s*\)/g)].map((match) => match[1] ?? '');
  const pipes = program.replace(/\|\|/g, '').includes('|');
  if (calls > 0 || pipes || /@load\b/.test(program)) {
    effects.push({ kind: 'arbitrary', why: 'an awk program that runs commands (system, pipes)' });
  }
  for (const literal of literals) effects.push({ kind: 'line', line: unescapeAwk(literal) });
  for (const match of program.matchAll(/"((?:[^"\\]|\\.)*)"\s*\|(?!\|)/g)) {
    effects.push({ kind: 'line', line: unescapeAwk(match[1] ?? '') });
  }
  for (const match of program.matchAll(/(?<!\|)\|&?\s*"((?:[^"\\]|\\.)*)"/g)) {
    effects.push({ kind: 'line', line: unescapeAwk(match[1] ?? '') });
  }
  return effects;
};

function unescapeAwk(text: string): string {
  return text.replace(/\\(.)/g, (_, ch: string) => (ch === 'n' ? '\n' : ch === 't' ? '\t' : ch));
}

/** sed: the `e` command and the `e` flag run the pattern space; `w`/`W` write files. */
const sed: Handler = (args) => {
  const parsed = leadingOptions(args, {
    short: 'efl',
    attached: 'i',
    long: ['--expression', '--file', '--line-length'],
  });
  if (has(parsed, '-f', '--file')) return [{ kind: 'arbitrary', why: 'a sed script read from a file' }];
  if (has(parsed, '--sandbox')) return [];
  const scripts = parsed.options.filter(([name]) => name === '-e' || name === '--expression').map(([, value]) => value);
  const script = (scripts.length > 0 ? scripts : [parsed.rest[0]]).filter((text) => text !== undefined).join('\n');
  return sedRunsCode(script)
    ? [{ kind: 'arbitrary', why: 'a sed script with e (runs commands) or w (writes files)' }]
    : [];
};

/** Scans a sed script for `e`, `w`, `W` commands and `e`/`w` flags of `s`; unsure means yes. */
function sedRunsCode(script: string): boolean {
  let i = 0;
  const n = script.length;
  const skipSpace = (): void => {
    while (i < n && /[\s;]/.test(script[i] as string)) i++;
  };
  const delimited = (delimiter: string): boolean => {
    while (i < n && script[i] !== delimiter) {
      if (script[i] === '\\') i++;
      if (script[i] === '\n' && delimiter !== '\n') return false;
      i++;
    }
    if (i >= n) return false;
    i++;
    return true;
  };
  const address = (): boolean => {
    if (script[i] === '/' || script[i] === '\\') {
      if (script[i] === '\\') i++;
      const delimiter = script[i];
      i++;
      if (delimiter === undefined || !delimited(delimiter)) return false;
      while (i < n && /[IM]/.test(script[i] as string)) i++;
    } else {
      while (i < n && /[0-9$~+]/.test(script[i] as string)) i++;
    }
    return true;
  };
  const toEnd = (): void => {
    while (i < n && script[i] !== '\n') i++;
  };
  for (;;) {
    skipSpace();
    if (i >= n) return false;
    if (!address()) return true;
    if (script[i] === ',') {
      i++;
      if (!address()) return true;
    }
    while (i < n && /[\s!]/.test(script[i] as string)) i++;
    const command = script[i];
    i++;
    if (command === undefined) return false;
    if ('ewW'.includes(command)) return true;
    if (command === '{' || command === '}') continue;
    if (command === 's' || command === 'y') {
      const delimiter = script[i];
      i++;
      if (delimiter === undefined || delimiter === '\n' || delimiter === '\\') return true;
      if (!delimited(delimiter) || !delimited(delimiter)) return true;
      if (command === 's') {
        while (i < n && /[gpiImMe0-9w]/.test(script[i] as string)) {
          if (script[i] === 'e' || script[i] === 'w') return true;
          i++;
        }
      }
      continue;
    }
    if ('aicrRbtTv:'.includes(command)) {
      toEnd();
      continue;
    }
    if (!'=dDgGhHlnNpPqQxzFL#'.includes(command)) return true;
    if (command === '#') toEnd();
    if ('qQlL'.includes(command)) while (i < n && /[0-9 ]/.test(script[i] as string)) i++;
  }
}

/** tar options that run a program. */
const tar: Handler = (args) => {
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

const rsync: Handler = (args) => {
  for (const arg of args) {
    if (/^--(rs|rsh|rsync-path)/.test(arg) || /^-[A-Za-z]*e/.test(arg)) {
      return [{ kind: 'arbitrary', why: 'rsync -e/--rsh/--rsync-path runs a program' }];
    }
    if (!arg.startsWith('-') && /^[^/]*:/.test(arg)) return [{ kind: 'arbitrary', why: 'rsync over ssh' }];
  }
  return [];
};

const scp: Handler = (args) =>
  args.some((arg) => /^-[A-Za-z0-9]*[SoF]/.test(arg))
    ? [{ kind: 'arbitrary', why: 'scp -S/-o/-F runs a program' }]
    : [];

/** git config keys whose value is a command (or pulls in one). */
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

const git: Handler = (args) => {
  const effects: Effect[] = [];
  let i = 0;
  for (; i < args.length; i++) {
    const arg = args[i] as string;
    if (!arg.startsWith('-')) break;
    if (arg === '-c' || arg === '--config-env') {
      const pair = args[++i] ?? '';
      const key = pair.split('=')[0] ?? '';
      if (isGitCodeKey(key)) effects.push({ kind: 'arbitrary', why: `git ${arg} ${key}=... runs a command` });
    } else if (arg.startsWith('--config-env=')) {
      const key = arg.slice('--config-env='.length).split('=')[0] ?? '';
      if (isGitCodeKey(key)) effects.push({ kind: 'arbitrary', why: `git --config-env ${key} runs a command` });
    } else if (arg.startsWith('--exec-path=')) {
      effects.push({ kind: 'arbitrary', why: 'git --exec-path= runs its subcommands from another directory' });
    } else if (['-C', '--git-dir', '--work-tree', '--namespace', '--super-prefix', '--list-cmds'].includes(arg)) {
      i++;
    }
  }
  const sub = args[i];
  const rest = args.slice(i + 1);
  const arb = (why: string): Effect => ({ kind: 'arbitrary', why });
  switch (sub) {
    case 'config':
      if (rest.some((arg) => isGitCodeKey(arg.split('=')[0] ?? '')) || rest.includes('--edit') || rest.includes('-e')) {
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
        if (arg === '-x' || arg === '--exec') {
          effects.push(arb('git rebase --exec runs a command'), { kind: 'line', line: rest[index + 1] ?? '' });
        } else if (arg.startsWith('--exec=')) {
          effects.push(arb('git rebase --exec runs a command'), { kind: 'line', line: arg.slice(7) });
        }
      }
      break;
    case 'filter-branch':
    case 'difftool':
    case 'mergetool':
      effects.push(arb(`git ${sub} runs commands`));
      break;
    case 'grep':
      if (rest.some((arg) => arg === '-O' || arg.startsWith('--open-files-in-pager') || /^-O./.test(arg))) {
        effects.push(arb('git grep -O runs a pager'));
      }
      break;
    default:
      if (
        rest.some((arg) => /^--(upload-pack|receive-pack|exec)(=|$)/.test(arg) || arg.startsWith('ext::')) ||
        (['fetch', 'clone', 'ls-remote', 'pull', 'archive'].includes(sub ?? '') && rest.includes('-u'))
      ) {
        effects.push(arb('git runs a remote helper command'));
      }
  }
  return effects;
};

// ---------------------------------------------------------------------------------------
// Package managers

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
function packageManager(manager: 'npm' | 'pnpm' | 'yarn' | 'bun'): Handler {
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

const npx: Handler = (args) => {
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

function readScripts(dir: string): Record<string, unknown> | null {
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
function quote(arg: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

/**
 * A package script and its pre/post hooks, parsed and checked stage by stage. What the
 * allowed `npm test` runs is allowed with it; a stage the policy denies (or a script that
 * cannot be read or parsed) refuses the whole command.
 */
function checkScripts(effect: Extract<Effect, { kind: 'scripts' }>, ctx: Context, tally: Tally): boolean {
  const scripts = readScripts(effect.dir);
  const where = join(effect.dir, 'package.json');
  if (scripts === null) {
    return tally.refuse('exec.package-script', where, `${where} cannot be read, so its scripts cannot be checked`);
  }
  const main = effect.names.find((name) => name.required)?.name;
  for (const { name, required } of effect.names) {
    const script = own(scripts, name);
    if (script === undefined) {
      if (required) return tally.refuse('exec.package-script', where, `${where} has no script ${JSON.stringify(name)}`);
      continue;
    }
    if (typeof script !== 'string') {
      return tally.refuse('exec.package-script', where, `the script ${JSON.stringify(name)} is not a string`);
    }
    const line = name === main && effect.extra.length > 0 ? `${script} ${effect.extra.map(quote).join(' ')}` : script;
    const parsed = parseShell(line);
    if (!parsed.ok) {
      return tally.refuse(
        'exec.package-script',
        line,
        `the ${effect.manager} script ${JSON.stringify(name)} cannot be checked: ${parsed.reason}`,
      );
    }
    const inner = new Tally();
    checkLineInto(line, { ...ctx, cwds: [effect.dir], depth: ctx.depth + 1 }, inner, false);
    if (inner.denied) {
      tally.decisions.push(...inner.decisions);
      const label = `the ${effect.manager} script ${JSON.stringify(name)}`;
      const reason = inner.denied.reason.startsWith(label)
        ? inner.denied.reason
        : `${label} (${script}) is refused: ${inner.denied.reason}`;
      tally.denied = { ...inner.denied, reason };
      return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------------------
// Environment

/** Variables that change which program runs or make a program load code. */
const CODE_LOADING: readonly RegExp[] = [
  /^(PATH|HOME|SHELL|ENV|BASH_ENV|SHELLOPTS|BASHOPTS|PS4|PROMPT_COMMAND|IFS|CDPATH|ZDOTDIR|XDG_CONFIG_HOME)$/,
  /^BASH_FUNC_/,
  /^(LD_|DYLD_)/,
  /^NODE_(OPTIONS|PATH|REPL_EXTERNAL_MODULE)$/,
  /^PYTHON(PATH|STARTUP|HOME|USERBASE|EXECUTABLE)$/,
  /^PERL(5OPT|5LIB|LIB|5DB)$/,
  /^RUBY(OPT|LIB)$/,
  /^GIT_(SSH|SSH_COMMAND|EXTERNAL_DIFF|PAGER|EDITOR|SEQUENCE_EDITOR|ASKPASS|EXEC_PATH|CONFIG.*|PROXY_COMMAND|TEMPLATE_DIR|DIR|WORK_TREE|ALLOW_PROTOCOL)$/,
  /^(PAGER|MANPAGER|EDITOR|VISUAL|BROWSER|SSH_ASKPASS|SUDO_ASKPASS|LESSOPEN|LESSCLOSE)$/,
  /^npm_config_/i,
  /^(JAVA_TOOL_OPTIONS|_JAVA_OPTIONS|JDK_JAVA_OPTIONS|CLASSPATH|GCONV_PATH)$/,
];

function isCodeLoadingVariable(name: string): boolean {
  return CODE_LOADING.some((pattern) => pattern.test(name));
}

// ---------------------------------------------------------------------------------------
// The table

const INTERPRETER = 'an interpreter runs code the check cannot see';
const BUILD = 'a build tool or test runner runs project code';

const PROGRAMS: Record<string, Handler> = {
  env,
  timeout: wrapper({ short: 'sk', long: ['--signal', '--kill-after'] }, 1),
  nice,
  nohup: wrapper({}),
  command,
  exec: wrapper({ short: 'a' }),
  stdbuf: wrapper({ short: 'ioe', long: ['--input', '--output', '--error'] }),
  time: wrapper({ short: 'fo', long: ['--format', '--output'] }),
  setsid: wrapper({}),
  busybox: (args) => (args[0] !== undefined && !args[0].startsWith('-') ? [{ kind: 'inner', argv: args }] : []),
  corepack: (args) =>
    ['npm', 'npx', 'pnpm', 'pnpx', 'yarn'].includes(args[0] ?? '') ? [{ kind: 'inner', argv: args }] : [],
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
