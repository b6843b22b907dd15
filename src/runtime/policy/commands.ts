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
import {
  type Dirent,
  existsSync,
  lstatSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  statSync,
} from 'node:fs';
import { homedir, constants as osConstants } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { EXPANSION_LIMIT, expandPattern, UndecodableName } from './expand.js';
import { GNU_STANDARD, hasOption, type OptionTable, optionValues, type ParsedOption, parseOptions } from './options.js';
import { knowsPaths, NO_PATHS, type PathUse, pathUse, SED_OPTIONS } from './path-programs.js';
import { type Decision, type Policy, type ResolvedProgram, resolveProgram } from './policy.js';
import { parseShell, type ShellRedirect, type ShellStage } from './shell.js';

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
  /** How many path decisions have been made (redirects, path arguments, cd): a stage whose count moved depends on names. */
  pathActs = 0;
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
  // Retargeting: what each stage does to names, and whether its checks depend on them.
  const marks: { changes: string | null; paths: boolean; connector: ShellStage['connector'] }[] = [];
  let changedBefore: string | null = null;
  for (const stage of parsed.stages) {
    const here: Context = { ...ctx, cwds };
    const acts = tally.pathActs;
    if (checkStage(stage, here, tally, (moved) => (cwds = moved))) return true;
    const display = stage.argv.join(' ');
    const paths = tally.pathActs > acts || stage.globs.length > 0 || (stage.argv[0]?.includes('/') ?? false);
    const changes = changesNames(stage.argv, here) ? display : null;
    if (changedBefore !== null && paths) return retargeted(tally, changedBefore, display || line);
    marks.push({ changes, paths, connector: stage.connector });
    changedBefore ??= changes;
  }
  // The stages of one pipeline run side by side: one that changes names retargets any other's paths.
  let group: typeof marks = [];
  for (const mark of marks) {
    group.push(mark);
    if (mark.connector === '|') continue;
    const changer = group.find((member) => member.changes !== null);
    const other = group.find((member) => member !== changer && member.paths);
    if (changer && other) return retargeted(tally, changer.changes as string, line);
    group = [];
  }
  return tally.denied !== null;
}

/** Checks one stage: its variables, `cd`, the command (its words as the shell expands them), its redirects. */
function checkStage(stage: ShellStage, here: Context, tally: Tally, moveTo: (cwds: string[]) => void): boolean {
  const names = Object.keys(stage.assignments);
  const refused = names.find(isRefusedVariable);
  if (refused !== undefined) return tally.refuse('exec.environment', refused, refusedVariable(refused));
  const tampered = names.filter(isCodeLoadingVariable);
  if (tampered.length > 0) {
    tally.ask('exec.environment', tampered.map((name) => `${name}=${stage.assignments[name]}`).join(' '));
  }
  const program = stage.argv[0];
  if (program === 'cd') {
    const moved = changeDirectory(stage.argv.slice(1), here, tally);
    if (moved === null) return true;
    moveTo(moved);
  } else if (program !== undefined && STATE_BUILTINS.has(program)) {
    const exported = stage.argv.slice(1).find((arg) => isRefusedVariable(arg.split('=')[0] ?? ''));
    if (exported !== undefined) return tally.refuse('exec.environment', exported, refusedVariable(exported));
    const set = stage.argv.slice(1).filter((arg) => isCodeLoadingVariable(arg.split('=')[0] ?? ''));
    if (set.length > 0) tally.ask('exec.environment', `${program} ${set.join(' ')}`);
  } else if (program !== undefined) {
    for (const [cwds, argv] of expandedArgv(stage, here, tally) ?? []) {
      if (checkCommand(argv, { ...here, cwds }, tally, NO_HOLES)) return true;
    }
    if (tally.denied) return true;
  }
  for (const redirect of stage.redirects) {
    if (checkRedirect(redirect, here, tally)) return true;
  }
  return false;
}

/**
 * The argv as the shell will pass it, per directory the stage may run in: each pattern
 * expanded against the real directory now. A pattern that expands to a word starting
 * with `-` (a file named like an option) is refused, as is one that expands too far.
 * Null when refused.
 */
function expandedArgv(stage: ShellStage, ctx: Context, tally: Tally): [string[], string[]][] | null {
  if (stage.globs.length === 0) return [[[...ctx.cwds], stage.argv]];
  const variants = new Map<string, [string[], string[]]>();
  for (const cwd of ctx.cwds) {
    const argv: string[] = [];
    for (const [index, word] of stage.argv.entries()) {
      const glob = stage.globs.find((candidate) => candidate.index === index);
      let words: string[];
      try {
        words = glob ? (expandPattern(glob.pattern, cwd) ?? [word]) : [word];
      } catch (error) {
        if (!(error instanceof UndecodableName)) throw error;
        tally.refuse('shell.glob', word, `the pattern ${word}: ${error.message}; name the files another way`);
        return null;
      }
      if (words.length > EXPANSION_LIMIT) {
        tally.refuse(
          'shell.glob',
          word,
          `the pattern ${word} expands to more than ${EXPANSION_LIMIT} words; name fewer files`,
        );
        return null;
      }
      const option =
        glob && words !== null ? words.find((expanded) => expanded !== word && expanded.startsWith('-')) : undefined;
      if (option !== undefined) {
        tally.refuse(
          'shell.glob',
          word,
          `the pattern ${word} expands to ${option}, a file named like an option, which ${stage.argv[0]} would read as one; write ./${word} to keep file names from being options`,
        );
        return null;
      }
      argv.push(...words);
    }
    const key = JSON.stringify(argv);
    const variant = variants.get(key);
    if (variant) variant[0].push(cwd);
    else variants.set(key, [[cwd], argv]);
  }
  return [...variants.values()];
}

function retargeted(tally: Tally, changer: string, later: string): true {
  return tally.refuse(
    'shell.retarget',
    later,
    `\`${changer}\` can create, move or link names that a path checked in the same line (\`${later}\`) would then lead through, and every path is decided before the line runs; run them as separate commands`,
  );
}

/** Programs that never create, move or link a name another stage's path could lead through. */
const KEEPS_NAMES = new Set([
  'echo',
  'printf',
  'true',
  'false',
  'test',
  '[',
  'pwd',
  'sleep',
  'date',
  'basename',
  'dirname',
  'realpath',
  'readlink',
  'which',
  'stat',
  'file',
  'tr',
  'seq',
  'ls',
  'du',
  'df',
  'id',
  'whoami',
  'uname',
  'env',
  'printenv',
  'expr',
  'jq',
]);

const GIT_READ_ONLY = new Set([
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

/** Whether running `argv` may create, move or link a name (a symbolic link, a renamed directory): unknown programs may. */
function changesNames(argv: readonly string[], ctx: Context, depth = 0): boolean {
  const program = argv[0];
  if (program === undefined || STATE_BUILTINS.has(program) || program === 'cd') return false;
  if (depth > MAX_DEPTH) return true;
  const name = resolveProgram(program, ctx.cwds[0] ?? ctx.root, ctx.root).identity;
  const args = argv.slice(1);
  if (KEEPS_NAMES.has(name) && name !== 'env') return false;
  if (knowsPaths(name)) {
    const paths = pathUse(name, args);
    return paths === null ? false : !paths.ok || paths.use.changesNames;
  }
  if (name === 'git') {
    const parsed = parseGitCommandLine(args);
    return 'error' in parsed || (parsed.sub !== null && !GIT_READ_ONLY.has(parsed.sub));
  }
  if (['env', 'timeout', 'nice', 'nohup', 'stdbuf', 'setsid', 'time', 'command', 'exec'].includes(name)) {
    const inner = analyze(name, args, ctx).filter((effect) => effect.kind === 'inner');
    return inner.length === 0 ? false : inner.some((effect) => changesNames(effect.argv, ctx, depth + 1));
  }
  return true;
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
  tally.pathActs++;
  const kind = redirect.op === '<' || redirect.op === '<&' ? 'read' : 'write';
  const seen = new Set<string>();
  for (const cwd of ctx.cwds) {
    for (const path of danglingChain(resolve(cwd, redirect.target))) {
      const links = hardLinked(path);
      if (links > 0) return hardLinkRefusal(tally, path, links);
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
  tally.pathActs++;
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
  /**
   * Code the check cannot see. `untrusted`: code the agent could have written (a
   * repository's configuration), which a rule naming the program does not allow.
   */
  | { kind: 'arbitrary'; why: string; untrusted?: boolean }
  | { kind: 'inner'; argv: string[]; holes?: Holes; cwds?: string[] }
  | { kind: 'line'; line: string }
  | { kind: 'scripts'; manager: string; dir: string; names: ScriptName[]; extra: string[] }
  | { kind: 'environment'; subject: string }
  | { kind: 'paths'; use: PathUse }
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
  if (CODE_BUILTINS.has(program)) {
    return tally.refuse('shell.unsupported', subject, `${program} runs a string or a file as shell code`);
  }
  // The program each directory it may run in resolves it to; usually one for all of them.
  const groups = new Map<string, { resolved: ResolvedProgram; cwds: string[] }>();
  for (const cwd of ctx.cwds) {
    const resolved = resolveProgram(program, cwd, ctx.root);
    const key = `${resolved.identity}\0${resolved.real}`;
    const group = groups.get(key);
    if (group) group.cwds.push(cwd);
    else groups.set(key, { resolved, cwds: [cwd] });
  }
  for (const { resolved, cwds } of groups.values()) {
    if (checkProgram(argv, resolved, { ...ctx, cwds }, tally, holes)) return true;
  }
  return false;
}

/** Checks an argv whose program resolves to `resolved` in every one of `ctx.cwds`. */
function checkProgram(
  argv: readonly string[],
  resolved: ResolvedProgram,
  ctx: Context,
  tally: Tally,
  holes: Holes,
): boolean {
  const subject = display(argv, holes);
  const name = resolved.identity;
  const privileged = [name, basename(resolved.spelled)].find((candidate) => PRIVILEGED.has(candidate));
  if (privileged !== undefined) {
    return tally.refuse('exec.privilege', subject, `${privileged} runs a command with another user's privileges`);
  }
  const outer = decideExec(argv, ctx, holes);
  if (tally.add(outer)) return true;
  const effects = analyze(name, argv.slice(1), ctx, resolved);
  if (resolved.inWorkspace) effects.unshift({ kind: 'arbitrary', why: 'a program in the workspace' });
  const unknownArgs = holes.trailing || (holes.marker !== null && argv.some((arg) => arg.includes(holes.marker ?? '')));
  if (unknownArgs && knowsPaths(name)) {
    effects.unshift({ kind: 'arbitrary', why: `${name} reads or writes paths that are not known when it is checked` });
  } else {
    const paths = pathUse(name, argv.slice(1));
    if (paths && !paths.ok)
      effects.unshift({
        kind: 'refuse',
        rule: 'exec.options',
        reason: `${paths.reason}; the command is refused rather than guessed at`,
      });
    else if (paths) {
      if (paths.use.runs !== null) effects.unshift({ kind: 'arbitrary', why: paths.use.runs });
      effects.push({ kind: 'paths', use: paths.use });
    }
  }
  if (unknownArgs && handlerOf(name) !== undefined) {
    // Arguments from input could be `-exec`, `-c core.pager=...`, a program text: whatever it reads them as.
    effects.unshift({ kind: 'arbitrary', why: `${name} reads arguments that are not known when it is checked` });
  }
  let capped = false;
  for (const effect of effects) {
    switch (effect.kind) {
      case 'arbitrary':
        if (effect.untrusted && capArbitraryCode(argv, null, outer, ctx, tally)) return true;
        if (!effect.untrusted && !capped && capArbitraryCode(argv, resolved, outer, ctx, tally)) return true;
        capped ||= !effect.untrusted;
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
      case 'paths':
        if (checkPaths(effect.use, subject, ctx, tally)) return true;
        break;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------------------
// Paths a program reads and writes

/** How many entries a recursive read or write is walked through before the check gives up. */
export const WALK_LIMIT = 20_000;

/** A regular file with more than one name: another name may lie outside the workspace or under a denied path. */
function hardLinked(path: string): number {
  const stat = statSync(path, { throwIfNoEntry: false });
  return stat?.isFile() && stat.nlink > 1 ? stat.nlink : 0;
}

function hardLinkRefusal(tally: Tally, path: string, links: number): true {
  return tally.refuse(
    'fs.hard-link',
    path,
    `${path} has ${links} names (hard links): another may lie outside the workspace or under a denied path, so it is neither read nor written; remove the extra link or copy the file`,
  );
}

/** Decides one path act in every directory the command may run in; true when refused. */
function decidePath(kind: 'read' | 'write', word: string, ctx: Context, tally: Tally, seen: Set<string>): boolean {
  if (word === '' || word === '-' || word === '/dev/null') return false;
  tally.pathActs++;
  for (const cwd of ctx.cwds) {
    const absolute = resolve(cwd, word);
    const chain = kind === 'write' ? danglingChain(absolute) : [absolute];
    for (const path of chain) {
      const links = hardLinked(path);
      if (links > 0) return hardLinkRefusal(tally, path, links);
      const decision = ctx.policy.decide({ kind, path }, ctx.root);
      if (seen.has(`${kind} ${decision.subject}`)) continue;
      seen.add(`${kind} ${decision.subject}`);
      if (tally.add(decision)) return true;
    }
  }
  return false;
}

/**
 * Every entry under a directory a recursive command reads or writes, decided one by one.
 * A symbolic link is followed only when the command follows links (`grep -R`); otherwise
 * the command reads or removes the link itself, not what it leads to.
 */
function walkPaths(
  kind: 'read' | 'write',
  word: string,
  follow: boolean,
  subject: string,
  ctx: Context,
  tally: Tally,
  seen: Set<string>,
): boolean {
  if (decidePath(kind, word, ctx, tally, seen)) return true;
  let count = 0;
  const visited = new Set<string>();
  for (const cwd of ctx.cwds) {
    const stack = [resolve(cwd, word)];
    while (stack.length > 0) {
      const dir = stack.pop() as string;
      let entries: Dirent[];
      try {
        entries = readdirSync(dir, { withFileTypes: true });
      } catch {
        continue;
      }
      for (const entry of entries) {
        if (++count > WALK_LIMIT) {
          return tally.refuse(
            'exec.walk-limit',
            subject,
            `${subject} reaches more than ${WALK_LIMIT} entries under ${word}, more than the check walks; name narrower paths`,
          );
        }
        const path = join(dir, entry.name);
        const link = entry.isSymbolicLink();
        if (link && !follow) continue;
        const links = hardLinked(path);
        if (links > 0) return hardLinkRefusal(tally, path, links);
        // Allowed entries are not listed one by one; what asks or refuses is.
        const decision = ctx.policy.decide({ kind, path }, ctx.root);
        const key = `${kind} ${decision.subject}`;
        if (decision.effect !== 'allow' && !seen.has(key)) {
          seen.add(key);
          if (tally.add(decision)) return true;
        }
        const directory = link ? statSync(path, { throwIfNoEntry: false })?.isDirectory() : entry.isDirectory();
        if (!directory) continue;
        const real = link ? realpathSync.native(path) : path;
        if (visited.has(real)) continue;
        visited.add(real);
        stack.push(real);
      }
    }
  }
  return false;
}

/** The paths a known program reads and writes, decided like a file tool's; true when refused. */
function checkPaths(use: PathUse, subject: string, ctx: Context, tally: Tally): boolean {
  if (use.hardLinks) {
    return tally.refuse(
      'exec.hard-link',
      subject,
      'it makes a hard link, a second name for a file that no rule on either name can tell apart; copy the file or make a symbolic link',
    );
  }
  const seen = new Set<string>();
  for (const word of use.reads) if (decidePath('read', word, ctx, tally, seen)) return true;
  for (const word of use.writes)
    if (decidePath('write', word.replace(/\/+$/, '') || '/', ctx, tally, seen)) return true;
  for (const [dir, source] of use.into) {
    for (const cwd of ctx.cwds) {
      if (!statSync(resolve(cwd, dir), { throwIfNoEntry: false })?.isDirectory()) continue;
      const name = basename(source.replace(/\/+$/, ''));
      if (name !== '' && decidePath('write', join(resolve(cwd, dir), name), ctx, tally, seen)) return true;
    }
  }
  for (const word of use.walkedReads) {
    if (walkPaths('read', word, use.followLinks, subject, ctx, tally, seen)) return true;
  }
  for (const word of use.walkedWrites) {
    if (walkPaths('write', word, use.followLinks, subject, ctx, tally, seen)) return true;
  }
  return false;
}

function display(argv: readonly string[], holes: Holes): string {
  return holes.trailing ? `${argv.join(' ')} <args>`.trimStart() : argv.join(' ');
}

/** Decides an argv; with unknown arguments, a deny rule that could match once they are filled refuses it. */
function decideExec(argv: readonly string[], ctx: Context, holes: Holes): Decision {
  const decision = ctx.policy.decide({ kind: 'exec', argv, cwd: ctx.cwds[0] ?? ctx.root }, ctx.root);
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
function capArbitraryCode(
  argv: readonly string[],
  resolved: ResolvedProgram | null,
  outer: Decision,
  ctx: Context,
  tally: Tally,
): boolean {
  const act = { kind: 'exec' as const, argv: [ARBITRARY_CODE, ...argv] };
  const second = ctx.policy.decide(act, ctx.root);
  if (second.effect === 'deny' && second.rule !== null) return tally.add(second);
  if (second.effect === 'allow' && patternOf(second.rule).startsWith(ARBITRARY_CODE)) {
    tally.add(second);
    return false;
  }
  if (outer.effect === 'allow' && resolved !== null && namesProgram(patternOf(outer.rule), resolved)) return false;
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

/**
 * Whether a rule's pattern names the program: its literal start is the program's name,
 * whole — its identity, its real path, or the path as written. A program in the workspace
 * is named only by its path.
 */
function namesProgram(pattern: string, resolved: ResolvedProgram): boolean {
  const literal = pattern.split(/[*?]/)[0] ?? '';
  const first = literal.split(' ')[0] ?? '';
  if (first === '') return false;
  if (first === resolved.spelled || (resolved.real !== null && first === resolved.real)) return true;
  return !resolved.inWorkspace && first === resolved.identity;
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

function analyze(name: string, args: readonly string[], ctx: Context, program?: ResolvedProgram): Effect[] {
  const handler = handlerOf(name);
  return handler ? handler([...args], ctx, program) : [];
}

function handlerOf(name: string): Handler | undefined {
  return Object.hasOwn(PROGRAMS, name) ? PROGRAMS[name] : familyOf(name);
}

type Handler = (args: string[], ctx: Context, program?: ResolvedProgram) => Effect[];

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

/** A refusal: the checker cannot tell how the program reads its options, so nothing is guessed. */
function unreadable(reason: string): Effect[] {
  return [{ kind: 'refuse', rule: 'exec.options', reason: `${reason}; the command is refused rather than guessed at` }];
}

/**
 * A wrapper read with its own option table (stopping at the first operand, as its `+`
 * option string does): `--help`/`--version` run nothing, an option it would reject is
 * refused, and the command is what follows its options and `skip` operands.
 */
function wrapper(program: string, table: OptionTable, skip = 0, runsNothing: readonly string[] = []): Handler {
  return (args) => {
    const parsed = parseOptions(program, args, table);
    if (!parsed.ok) return unreadable(parsed.reason);
    if (hasOption(parsed, '--help', '--version', ...runsNothing)) return [];
    return [{ kind: 'inner', argv: parsed.operands.slice(skip) }];
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
const shell: Handler = (args, _ctx, program) => {
  const real = basename(program?.real ?? program?.identity ?? '');
  return /^(bash|rbash)$/.test(real) ? bashShell(args) : dashShell(args);
};

const ENV_OPTIONS: OptionTable = {
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

const env: Handler = (args, ctx) => {
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
const nice: Handler = (args) => {
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
const timeout: Handler = (args) => {
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
const stdbuf: Handler = (args) => {
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
const command: Handler = (args) => {
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

const xargs: Handler = (args) => {
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

/** find -exec/-execdir/-ok/-okdir: the command is checked with `{}` as a path under a start point. */
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

const find: Handler = (args) => {
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
/**
 * sed: the files its script reads (`r`, `R`) and writes (`w`, `W`, the `w` flag of `s`)
 * are decided as paths; an `e` command's text is checked as a shell line; what runs the
 * pattern space (`e` alone, the `e` flag of `s`) or a script the check cannot read is
 * code the check cannot see, which a rule naming sed does not allow.
 */
const sed: Handler = (args) => {
  const parsed = parseOptions('sed', args, SED_OPTIONS);
  if (!parsed.ok) return unreadable(parsed.reason);
  if (hasOption(parsed, 'f')) return [{ kind: 'arbitrary', why: 'a sed script read from a file' }];
  if (hasOption(parsed, '--sandbox')) return [];
  const scripts = optionValues(parsed, 'e');
  const script = (scripts.length > 0 ? scripts : parsed.operands.slice(0, 1)).join('\n');
  const found = sedScript(script);
  const effects: Effect[] = [];
  if (found.unknown !== null) effects.push({ kind: 'arbitrary', untrusted: true, why: found.unknown });
  for (const line of found.lines) effects.push({ kind: 'line', line });
  if (found.reads.length > 0 || found.writes.length > 0) {
    effects.push({ kind: 'paths', use: { ...NO_PATHS, reads: found.reads, writes: found.writes } });
  }
  return effects;
};

/** What a sed script does beyond editing text: files it reads and writes, lines it runs, or why the check cannot tell. */
interface SedScript {
  reads: string[];
  writes: string[];
  lines: string[];
  unknown: string | null;
}

const SED_SPECIAL_FILES = new Set(['/dev/stdout', '/dev/stderr', '/dev/stdin']);

/** Reads a sed script as GNU sed does, command by command; what it cannot follow is `unknown`. */
function sedScript(script: string): SedScript {
  const found: SedScript = { reads: [], writes: [], lines: [], unknown: null };
  let i = 0;
  const n = script.length;
  const cannot = (why: string): SedScript => ({ ...found, unknown: why });
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
  /** The rest of the line (a file name, a command, a label), leading blanks skipped. */
  const restOfLine = (): string => {
    while (i < n && (script[i] === ' ' || script[i] === '\t')) i++;
    const end = script.indexOf('\n', i);
    const text = script.slice(i, end === -1 ? n : end);
    i = end === -1 ? n : end;
    return text;
  };
  const file = (list: string[]): void => {
    const name = restOfLine();
    if (name !== '' && !SED_SPECIAL_FILES.has(name)) list.push(name);
  };
  for (;;) {
    skipSpace();
    if (i >= n) return found;
    if (!address()) return cannot('a sed script the check cannot read');
    if (script[i] === ',') {
      i++;
      if (!address()) return cannot('a sed script the check cannot read');
    }
    while (i < n && /[\s!]/.test(script[i] as string)) i++;
    const command = script[i];
    i++;
    if (command === undefined) return found;
    if (command === 'r' || command === 'R') file(found.reads);
    else if (command === 'w' || command === 'W') file(found.writes);
    else if (command === 'e') {
      const line = restOfLine();
      if (line === '') return cannot('sed e runs the pattern space as a command');
      found.lines.push(line);
    } else if (command === '{' || command === '}') {
      // a block
    } else if (command === 's' || command === 'y') {
      const delimiter = script[i];
      i++;
      if (delimiter === undefined || delimiter === '\n' || delimiter === '\\') {
        return cannot('a sed script the check cannot read');
      }
      if (!delimited(delimiter) || !delimited(delimiter)) return cannot('a sed script the check cannot read');
      if (command === 's') {
        while (i < n && /[gpiImMe0-9w]/.test(script[i] as string)) {
          const flag = script[i];
          i++;
          if (flag === 'e') return cannot('the e flag of sed s runs the result as a command');
          if (flag === 'w') {
            file(found.writes);
            break;
          }
        }
      }
    } else if ('aictTbv:'.includes(command)) {
      restOfLine();
    } else if (!'=dDgGhHlnNpPqQxzFL#'.includes(command)) {
      return cannot(`the sed command ${JSON.stringify(command)} is not one the check reads`);
    } else {
      if (command === '#') restOfLine();
      if ('qQlL'.includes(command)) while (i < n && /[0-9 ]/.test(script[i] as string)) i++;
    }
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

const git: Handler = (args, ctx) => {
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

/**
 * Variables refused outright, wherever a line or a wrapper sets them: git's own
 * (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_CONFIG_*`, `GIT_EXEC_PATH`, `GIT_SSH_COMMAND`,
 * `GIT_TRACE*`, ...) move where git reads its configuration and code and where it writes
 * files, which no exec rule about git can see. (The runtime's own environment for
 * commands holds none of them.)
 */
function isRefusedVariable(name: string): boolean {
  return /^GIT_/i.test(name);
}

function refusedVariable(pair: string): string {
  const name = pair.includes('=') ? pair.slice(0, pair.indexOf('=')) : pair;
  return `setting ${name}: git's variables move where it reads configuration and code and where it writes; set nothing of git's from a command`;
}

/**
 * `argv` with the assignments `withheld` names taken out of every `env` it runs, at the
 * head or inside any program the check reads an inner command of (`timeout 5 env
 * LD_PRELOAD=x cmd`, `xargs env …`, `find . -exec env … ;`, `busybox env …`), as the check
 * parses it: a command the model wrote gets the variables its contained environment would
 * not have given it no more than one handed down from the harness. What cannot be read is
 * returned as it is (the check has already asked or refused about it).
 */
export function dropWithheldAssignments(
  argv: readonly string[],
  withheld: (name: string) => boolean,
  depth = 0,
): string[] {
  const [program, ...args] = argv;
  if (program === undefined || depth > 16) return [...argv];
  const name = basename(program);
  if (name === 'env') {
    const parsed = parseOptions('env', args, ENV_OPTIONS);
    if (!parsed.ok || hasOption(parsed, 'S')) return [...argv];
    const at = sliceAt(args, parsed.operands);
    if (at === null) return [...argv];
    let rest = parsed.operands;
    const lead = rest[0] === '-' ? ['-'] : [];
    rest = rest.slice(lead.length);
    const kept: string[] = [];
    while (rest[0]?.includes('=')) {
      const pair = rest[0];
      if (!withheld(pair.slice(0, pair.indexOf('=')))) kept.push(pair);
      rest = rest.slice(1);
    }
    return [program, ...args.slice(0, at), ...lead, ...kept, ...dropWithheldAssignments(rest, withheld, depth + 1)];
  }
  let effects: Effect[];
  try {
    // Only the shape of the inner commands is wanted here, not a decision: no policy, no paths.
    const context = { policy: null as unknown as Policy, root: '/', cwds: ['/'], depth: 0 };
    effects = handlerOf(name)?.([...args], context) ?? [];
  } catch {
    return [...argv];
  }
  // Each inner command, where it stands as written in the arguments, rewritten in place, last first.
  const inner = effects
    .flatMap((effect) => (effect.kind === 'inner' ? [effect.argv] : []))
    .map((words) => ({ words, at: sliceAt(args, words) }))
    .filter((found): found is { words: string[]; at: number } => found.at !== null && found.words.length > 0)
    .sort((a, b) => b.at - a.at);
  const out = [...args];
  for (const { words, at } of inner)
    out.splice(at, words.length, ...dropWithheldAssignments(words, withheld, depth + 1));
  return [program, ...out];
}

/** Where `words` stand in `args`, as one run, the last such place; null where they do not. */
function sliceAt(args: readonly string[], words: readonly string[]): number | null {
  for (let at = args.length - words.length; at >= 0; at--) {
    if (words.every((word, index) => args[at + index] === word)) return at;
  }
  return null;
}

// ---------------------------------------------------------------------------------------
// The table

const INTERPRETER = 'an interpreter runs code the check cannot see';
const BUILD = 'a build tool or test runner runs project code';

const PROGRAMS: Record<string, Handler> = {
  env,
  timeout,
  nice,
  nohup: wrapper('nohup', { long: GNU_STANDARD }),
  command,
  // dash's exec takes no options: the word after it is the command, even `--` or `-x`.
  exec: (args) => [{ kind: 'inner', argv: args }],
  stdbuf,
  time: wrapper(
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
  ),
  setsid: wrapper(
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
  ),
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
