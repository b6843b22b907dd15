/**
 * The check itself: a line stage by stage, each stage's command as the program it really
 * runs, and everything that program runs in turn (wrappers, `sh -c` strings, package
 * scripts), recursively, until the first deny.
 */
import { basename, join } from 'node:path';
import { EXPANSION_LIMIT, expandPattern, UndecodableName } from '../expand.js';
import { knowsPaths, pathUse } from '../path-programs/index.js';
import { type ResolvedProgram, resolveProgram } from '../policy.js';
import { parseShell, type ShellStage } from '../shell.js';
import { type Context, type Effect, type Holes, NO_HOLES, own } from './effects.js';
import { isCodeLoadingVariable, isRefusedVariable, refusedVariable } from './environment.js';
import { capArbitraryCode, decideExec, display, unknownProgram } from './exec-rules.js';
import { GIT_READ_ONLY, parseGitCommandLine } from './git.js';
import { quote, readScripts } from './packages.js';
import { changeDirectory, checkPaths, checkRedirect } from './paths.js';
import { analyze, handlerOf } from './programs.js';
import { Tally } from './tally.js';

/** How deep wrappers, `sh -c` strings and package scripts may nest before the check refuses. */
const MAX_DEPTH = 12;

export function checkLineInto(line: string, ctx: Context, tally: Tally, top: boolean): boolean {
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

const PRIVILEGED = new Set(['sudo', 'doas', 'su', 'pkexec', 'run0', 'runuser']);

/** Shell builtins that run a string or a file as code; refused wherever they appear. */
const CODE_BUILTINS = new Set(['eval', 'source', '.', 'alias', 'trap', 'builtin', 'enable', 'let', 'fc', 'shopt']);

/** Checks one argv and everything it runs; true when denied. */
export function checkCommand(argv: readonly string[], ctx: Context, tally: Tally, holes: Holes): boolean {
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
