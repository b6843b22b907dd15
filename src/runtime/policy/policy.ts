/**
 * The permission boundary as data: named layers of allow, deny and ask rules over
 * five acts (read a path, write a path, run an argv, dial a host, call one of the
 * embedder's tools by name). A decision names
 * the rule and the layer that produced it, so every refusal in a trace says why.
 *
 * Under every policy lies {@link FLOOR}, which no layer lifts. Deny wins, within a layer and across layers. Otherwise the latest layer with a rule
 * on the act decides (so `Policy.default().layer('app').allowExec('npm test*')` lets
 * `npm test` run without asking), and within one layer ask beats allow. An act no
 * rule covers is denied (deny-first), and the decision says no rule allowed it.
 *
 * A policy is plain data so it crosses into an agent's thread as is
 * ({@link Policy.toJSON} / {@link Policy.from}).
 */
import { lstatSync, readlinkSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, posix, relative, resolve, sep } from 'node:path';
import { InvalidArgumentError } from '../../errors.js';
import { addressOf, canonicalAddress } from '../exec/containment/address-floor.js';
import { findProgram } from '../exec/find-program.js';
import { checkoutPath } from '../workspace/worktree.js';
import { compileGlob, MAX_GLOB_CHARS } from './globs.js';

export type ActKind = 'read' | 'write' | 'exec' | 'net' | 'tool';
export type Effect = 'allow' | 'deny' | 'ask';

/** Something an agent wants to do. */
export type Act =
  | { kind: 'read'; path: string }
  | { kind: 'write'; path: string }
  | {
      kind: 'exec';
      argv: readonly string[];
      /** Where the command will run (absolute); the workspace root when not given. Its program is resolved from here. */
      cwd?: string;
    }
  | { kind: 'net'; host: string; port: number }
  /**
   * A call to one of the embedder's own tools, decided by its name. `args` is the call's
   * arguments as JSON (cut at 1,000 characters), for the approver to read; rules never
   * match on it.
   */
  | { kind: 'tool'; name: string; args?: string };

export interface PolicyRule {
  effect: Effect;
  act: ActKind;
  pattern: string;
}

export interface PolicyLayer {
  name: string;
  rules: PolicyRule[];
}

/** The serialisable form of a policy. */
export interface PolicyData {
  layers: PolicyLayer[];
}

/** What the policy says about one act, and which rule of which layer said it. */
export type Decision =
  | { effect: 'allow'; rule: string; layer: string; subject: string }
  | { effect: 'ask'; rule: string; layer: string; subject: string }
  | { effect: 'deny'; rule: string | null; layer: string | null; subject: string; reason: string };

const ACTS: readonly ActKind[] = ['read', 'write', 'exec', 'net', 'tool'];

/**
 * Rules under every policy, which no layer can lift: a file inside the workspace may
 * narrow the boundary and never widen it, so the agent may not write the files that
 * configure it, nor any git repository's own files (`.git` at any depth), which git
 * reads code from.
 */
export const FLOOR: PolicyLayer = {
  name: 'floor',
  rules: [
    { effect: 'deny', act: 'write', pattern: 'io.toml' },
    { effect: 'deny', act: 'write', pattern: 'io.local.toml' },
    { effect: 'deny', act: 'write', pattern: '.io-harness' },
    // git reads configuration and hooks from every repository it finds, at any depth: none may be written
    // by the agent (a rule on X covers X/**, and deny rules ignore case).
    { effect: 'deny', act: 'write', pattern: '**/.git' },
  ],
};
const EFFECTS: readonly Effect[] = ['allow', 'deny', 'ask'];

/**
 * A layered, deny-first policy. Builders return a new policy; the original is unchanged.
 *
 * @example
 * const policy = Policy.default()
 *   .layer('app')
 *   .allowExec('npm test*')
 *   .denyExec('npm publish*')
 *   .denyRead('secrets/**');
 */
export class Policy {
  readonly #layers: readonly PolicyLayer[];

  private constructor(layers: readonly PolicyLayer[]) {
    this.#layers = layers;
  }

  /** Reads and writes anywhere in the workspace; asks about every command; dials nothing; calls the embedder's tools. */
  static default(): Policy {
    return new Policy([
      {
        name: 'default',
        rules: [
          { effect: 'allow', act: 'read', pattern: '**' },
          { effect: 'allow', act: 'write', pattern: '**' },
          { effect: 'ask', act: 'exec', pattern: '*' },
          { effect: 'allow', act: 'tool', pattern: '*' },
        ],
      },
    ]);
  }

  /**
   * Allows every act, programs that run arbitrary code included. For tests and trusted,
   * contained work; say so in your source. (The floor still holds.)
   */
  static permissive(): Policy {
    return new Policy([
      {
        name: 'permissive',
        rules: [
          // First, so it is the rule that answers for a program running arbitrary code.
          { effect: 'allow' as const, act: 'exec' as const, pattern: '<arbitrary code>*' },
          ...ACTS.map((act) => ({
            effect: 'allow' as const,
            act,
            pattern: act === 'net' || act === 'tool' ? '*' : '**',
          })),
        ],
      },
    ]);
  }

  /** A policy with no rules: every act is denied until a layer allows it. */
  static empty(): Policy {
    return new Policy([]);
  }

  /** Rebuilds a policy from its data, checking every rule. */
  static from(data: PolicyData): Policy {
    if (typeof data !== 'object' || data === null || !Array.isArray(data.layers)) {
      throw new InvalidArgumentError('Policy.from needs { layers: [{ name, rules: [{ effect, act, pattern }] }] }.');
    }
    return new Policy(data.layers.map((layer) => checkLayer(layer)));
  }

  get layers(): readonly PolicyLayer[] {
    return this.#layers;
  }

  /** Starts a new named layer; the rules added next belong to it. */
  layer(name: string): Policy {
    if (typeof name !== 'string' || name.trim() === '') {
      throw new InvalidArgumentError('Policy.layer(name) needs a non-empty name; decisions name the layer.');
    }
    return new Policy([...this.#layers, { name, rules: [] }]);
  }

  #add(effect: Effect, act: ActKind, pattern: string): Policy {
    const rule = checkRule({ effect, act, pattern });
    const layers = this.#layers.length === 0 ? [{ name: 'policy', rules: [] }] : this.#layers;
    const last = layers[layers.length - 1] as PolicyLayer;
    return new Policy([...layers.slice(0, -1), { name: last.name, rules: [...last.rules, rule] }]);
  }

  allowRead(pattern: string): Policy {
    return this.#add('allow', 'read', pattern);
  }
  denyRead(pattern: string): Policy {
    return this.#add('deny', 'read', pattern);
  }
  askRead(pattern: string): Policy {
    return this.#add('ask', 'read', pattern);
  }
  allowWrite(pattern: string): Policy {
    return this.#add('allow', 'write', pattern);
  }
  denyWrite(pattern: string): Policy {
    return this.#add('deny', 'write', pattern);
  }
  askWrite(pattern: string): Policy {
    return this.#add('ask', 'write', pattern);
  }
  allowExec(pattern: string): Policy {
    return this.#add('allow', 'exec', pattern);
  }
  denyExec(pattern: string): Policy {
    return this.#add('deny', 'exec', pattern);
  }
  askExec(pattern: string): Policy {
    return this.#add('ask', 'exec', pattern);
  }
  allowNet(pattern: string): Policy {
    return this.#add('allow', 'net', pattern);
  }
  denyNet(pattern: string): Policy {
    return this.#add('deny', 'net', pattern);
  }
  /**
   * Puts each connection to a matching host (`host` or `host:port`, `*` any run of
   * characters) to the tree's approver, at the moment a command's connection reaches the
   * egress proxy; one question per host and port for the run.
   */
  askNet(pattern: string): Policy {
    return this.#add('ask', 'net', pattern);
  }
  /**
   * Lets the agents call the embedder's tools whose names match (`*` matches any run of
   * characters). Tool rules ignore case, whatever their effect: `Delete_All` is `delete_all`.
   */
  allowTool(pattern: string): Policy {
    return this.#add('allow', 'tool', pattern);
  }
  denyTool(pattern: string): Policy {
    return this.#add('deny', 'tool', pattern);
  }
  /** Puts each call of a matching tool to the tree's approver first. */
  askTool(pattern: string): Policy {
    return this.#add('ask', 'tool', pattern);
  }

  /**
   * Decides one act. Paths are resolved first (against `root`, `..` removed, the real
   * path of the deepest existing ancestor, NFC) and matched relative to the workspace
   * root when inside it, absolute otherwise.
   */
  decide(act: Act, root: string): Decision {
    // No file can be named, and no program run, with a NUL in a path or an argument (the
    // system calls throw): denied here, so no caller's decision can throw on one.
    const parts =
      act.kind === 'exec' ? act.argv : act.kind === 'net' ? [act.host] : act.kind === 'tool' ? [act.name] : [act.path];
    if (parts.some((part) => part.includes('\0'))) {
      const subject = JSON.stringify(parts.join(' ')).slice(1, -1);
      return {
        effect: 'deny',
        rule: 'input.nul',
        layer: 'runtime',
        subject,
        reason: 'it contains a NUL character (\\u0000), which no path or argument can hold; send it without one',
      };
    }
    const subject = subjectOf(act, root);
    const decided = this.#decideSubject(act, root, subject);
    // A path in a checkout the harness made of the repository (a child's worktree, a
    // git_worktree) is the same file as the one at its place in the workspace: decided as
    // that too, the stricter answer kept, so a copy under .git is no way around a rule.
    const inner = act.kind === 'read' || act.kind === 'write' ? checkoutPath(subject) : null;
    if (inner === null || decided.effect === 'deny') return decided;
    const again = this.#decideSubject(act, root, inner);
    if (again.effect === 'deny' || (again.effect === 'ask' && decided.effect === 'allow')) return { ...again, subject };
    return decided;
  }

  #decideSubject(act: Act, root: string, subject: string): Decision {
    // An exec act's program is resolved once per decision, not once per rule.
    const names = act.kind === 'exec' ? execNames(act, root) : null;
    // Deny wins in any layer. Otherwise the latest layer with a matching rule decides
    // (a later layer refines an earlier one), and within a layer ask beats allow.
    let decided: { effect: 'allow' | 'ask'; rule: string; layer: string } | null = null;
    for (const layer of [FLOOR, ...this.#layers]) {
      let ask: string | null = null;
      let allow: string | null = null;
      for (const rule of layer.rules) {
        if (rule.act !== act.kind) continue;
        if (act.kind === 'exec' && names ? !execMatches(rule, act, names) : !matches(rule, act, subject)) continue;
        const name = `${rule.effect}-${rule.act} ${rule.pattern}`;
        if (rule.effect === 'deny') {
          return { effect: 'deny', rule: name, layer: layer.name, subject, reason: `denied by ${name}` };
        }
        if (rule.effect === 'ask') ask ??= name;
        else allow ??= name;
      }
      if (ask !== null) decided = { effect: 'ask', rule: ask, layer: layer.name };
      else if (allow !== null) decided = { effect: 'allow', rule: allow, layer: layer.name };
    }
    if (decided) return { ...decided, subject };
    return {
      effect: 'deny',
      rule: null,
      layer: null,
      subject,
      reason: `no rule allows ${act.kind} ${subject}; add a layer that does (for example .allow${act.kind[0]?.toUpperCase()}${act.kind.slice(1)}(...))`,
    };
  }

  toJSON(): PolicyData {
    return {
      layers: this.#layers.map((layer) => ({ name: layer.name, rules: layer.rules.map((rule) => ({ ...rule })) })),
    };
  }
}

function checkLayer(layer: unknown): PolicyLayer {
  const candidate = layer as PolicyLayer;
  if (typeof candidate !== 'object' || candidate === null || typeof candidate.name !== 'string') {
    throw new InvalidArgumentError('a policy layer needs a name and a rules array.');
  }
  if (!Array.isArray(candidate.rules)) {
    throw new InvalidArgumentError(`policy layer ${candidate.name} needs a rules array.`);
  }
  return { name: candidate.name, rules: candidate.rules.map((rule) => checkRule(rule)) };
}

function checkRule(rule: PolicyRule): PolicyRule {
  if (!EFFECTS.includes(rule?.effect)) {
    throw new InvalidArgumentError(
      `a policy rule's effect must be allow, deny or ask, got ${JSON.stringify(rule?.effect)}.`,
    );
  }
  if (!ACTS.includes(rule.act)) {
    throw new InvalidArgumentError(
      `a policy rule's act must be read, write, exec, net or tool, got ${JSON.stringify(rule.act)}.`,
    );
  }
  if (typeof rule.pattern !== 'string' || rule.pattern.trim() === '') {
    throw new InvalidArgumentError(`a ${rule.effect}-${rule.act} rule needs a non-empty pattern.`);
  }
  // Paths are matched in NFC; so are the patterns, however they were typed.
  const checked = { effect: rule.effect, act: rule.act, pattern: rule.pattern.normalize('NFC') };
  // Compiled now, with the compiler the decisions use, so a pattern that cannot be is
  // refused here, naming the rule, and the first decision cannot throw.
  const name = `${checked.effect}-${checked.act} ${quoteCut(checked.pattern)}`;
  if (checked.pattern.length > MAX_GLOB_CHARS) {
    throw new InvalidArgumentError(
      `the rule ${name} cannot be used: its pattern is ${checked.pattern.length} characters long, above the limit of ${MAX_GLOB_CHARS}; write a shorter pattern (or several rules).`,
    );
  }
  if (checked.act === 'net') {
    const bare = checked.pattern.trim();
    if (!bare.startsWith('[') && (bare.match(/:/g) ?? []).length > 1 && !addressOf(bare)) {
      throw new InvalidArgumentError(
        `the rule ${name} cannot be used: an IPv6 address in a net rule goes in brackets, with the port after them: [2001:db8::1] or [2001:db8::1]:443.`,
      );
    }
  }
  if (checked.act === 'read' || checked.act === 'write') {
    try {
      glob(checked.pattern, checked.effect === 'deny');
    } catch (error) {
      throw new InvalidArgumentError(`the rule ${name} cannot be used: ${(error as Error).message}.`);
    }
  }
  return checked;
}

/**
 * A host as net rules see it: lower case, no trailing dot, and an address in its one
 * canonical spelling (IPv4 as four decimal bytes, an IPv4-mapped IPv6 address as its
 * IPv4, other IPv6 in brackets as RFC 5952 writes it), so that `0x7f000002`, `127.2` and
 * `[::ffff:127.0.0.2]` are all the `127.0.0.2` a rule names.
 */
export function netHost(host: string): string {
  let name = host.trim().toLowerCase();
  while (name.endsWith('.')) name = name.slice(0, -1);
  const address = addressOf(name);
  if (!address) return name;
  const canonical = canonicalAddress(address);
  return canonical.includes(':') ? `[${canonical}]` : canonical;
}

const netPatterns = new Map<string, string>();

/**
 * A net rule's pattern as it is matched: `host:port`, the port `*` when none is given, the
 * host in {@link netHost}'s spelling where it is an address. An IPv6 address goes in
 * brackets (`[2001:db8::1]`, `[2001:db8::1]:443`); one written bare is read as an address
 * with no port.
 */
export function netPattern(pattern: string): string {
  const known = netPatterns.get(pattern);
  if (known !== undefined) return known;
  const text = pattern.trim().toLowerCase();
  let host = text;
  let port = '*';
  const bracketed = /^(\[[^\]]*\])(?::(.*))?$/.exec(text);
  if (bracketed) {
    host = bracketed[1] as string;
    port = bracketed[2] ?? '*';
  } else if (!addressOf(text) || !text.includes(':')) {
    const colon = text.lastIndexOf(':');
    if (colon >= 0) {
      host = text.slice(0, colon);
      port = text.slice(colon + 1);
    }
  }
  const literal = /[*?]/.test(host) ? host : netHost(host);
  const result = `${literal}:${port}`;
  if (netPatterns.size < 10_000) netPatterns.set(pattern, result);
  return result;
}

/** A pattern as an error message shows it: whole when short, its start when long. */
function quoteCut(pattern: string): string {
  return pattern.length > 80 ? `${pattern.slice(0, 80)}… (${pattern.length} characters)` : pattern;
}

/** The string a rule is matched against: a resolved path, the argv as one line, or host:port. */
export function subjectOf(act: Act, root: string): string {
  switch (act.kind) {
    case 'read':
    case 'write':
      return resolvePath(act.path, root);
    case 'exec':
      return act.argv.join(' ');
    case 'net':
      return `${netHost(act.host)}:${act.port}`;
    case 'tool':
      return act.name;
  }
}

/** Resolves a path as the policy sees it: workspace-relative (posix) inside the root, absolute outside. */
export function resolvePath(path: string, root: string): string {
  let realRoot = realRoots.get(root);
  if (realRoot === undefined) {
    realRoot = realOrSelf(root);
    realRoots.set(root, realRoot);
  }
  // Resolved with the bytes the kernel will open (Linux does not normalise names: an NFD
  // link and its NFC spelling are two files), and only then put in NFC to match patterns.
  const real = realTarget(resolve(realRoot, path)).normalize('NFC');
  const inside = relative(realRoot, real);
  if (inside === '') return '.';
  if (!escapes(inside)) return inside.split(sep).join('/');
  return real.split(sep).join('/');
}

/** True when a path relative to a directory leads out of it (`..`, `../x`, or another root). */
export function escapes(relativePath: string): boolean {
  return relativePath === '..' || relativePath.startsWith(`..${sep}`) || isAbsolute(relativePath);
}

/**
 * Where a path really leads: the real path of its deepest existing ancestor, plus the
 * rest — and a dangling link on the way is followed to the target it would create, so a
 * link cannot hide where a write lands.
 */
export function realTarget(absolute: string, hops = 0): string {
  // Walked up with lstat calls that do not throw (an exception costs more than the system
  // call): a path that exists takes one lstat and one realpath.
  let existing = absolute;
  const rest: string[] = [];
  for (;;) {
    // lstat without throwing: whether it exists, and whether it is a link, in one call.
    const stat = lstatSync(existing, { throwIfNoEntry: false });
    if (stat && !stat.isSymbolicLink()) break;
    if (stat && statSync(existing, { throwIfNoEntry: false })) break;
    if (stat && hops < 40) {
      // A dangling link: follow it to the target a write would create.
      let target: string;
      try {
        target = readlinkSync(existing);
      } catch {
        // Gone or replaced since the lstat (a command racing the decision): look again, counted as a hop.
        return realTarget(absolute, hops + 1);
      }
      return realTarget(join(resolve(dirname(existing), target), ...rest), hops + 1);
    }
    const parent = dirname(existing);
    if (parent === existing) break;
    rest.unshift(basename(existing));
    existing = parent;
  }
  return join(realOrSelf(existing), ...rest);
}

/** A workspace root's real path, looked up once (the paths under it are resolved on every decision). */
const realRoots = new Map<string, string>();

function realOrSelf(path: string): string {
  try {
    // The system's realpath(3): one call, where the JavaScript one stats every component.
    return realpathSync.native(path);
  } catch {
    return resolve(path);
  }
}

function matches(rule: PolicyRule, act: Act, subject: string): boolean {
  // Tool names ignore case, every rule of every effect: `deny-tool evil__delete*` also refuses
  // `evil__Delete_All`, which a server may list beside it as another tool.
  if (act.kind === 'tool') return wildcard(rule.pattern.toLowerCase(), subject.toLowerCase());
  if (act.kind === 'net') return wildcard(netPattern(rule.pattern), subject);
  // A path outside the workspace is matched only by a rule written as an absolute path:
  // `**` means everything in the workspace, not everything on the machine.
  if (subject.startsWith('/') && !rule.pattern.startsWith('/')) return false;
  // The workspace root itself (a search from the top) is covered by the rules that cover all of it.
  if (subject === '.')
    return rule.pattern === '**' || rule.pattern === '*' || rule.pattern === '.' || rule.pattern === './**';
  // A rule on X also covers everything under X; deny rules ignore case.
  return glob(rule.pattern, rule.effect === 'deny').some((matcher) => matcher.match(subject));
}

/**
 * The deny rule that covers reading `subject` (workspace-relative, posix, or absolute as
 * {@link resolvePath} gives it) and the layer it is in, or null when no deny rule does: a
 * path is kept from the run's commands only where a rule denies it in so many words, not
 * where no rule happens to allow it. Nothing is resolved here, so a walk of a large tree
 * can ask about every entry.
 */
export function readDeniedBy(policy: Policy, subject: string): { rule: string; layer: string } | null {
  for (const layer of [FLOOR, ...policy.layers])
    for (const rule of layer.rules)
      if (rule.act === 'read' && rule.effect === 'deny' && matches(rule, { kind: 'read', path: subject }, subject))
        return { rule: `deny-read ${rule.pattern}`, layer: layer.name };
  return null;
}

/** Whether any layer denies reading something in so many words (see {@link readDeniedBy}). */
export function deniesReads(policy: Policy): boolean {
  return [FLOOR, ...policy.layers].some((layer) =>
    layer.rules.some((rule) => rule.act === 'read' && rule.effect === 'deny'),
  );
}

/** A compiled glob. */
interface Matcher {
  match(subject: string): boolean;
}

/** Compiled matchers, by pattern: a decision matches against every rule, so each glob is compiled once. */
const globs = new Map<string, Matcher[]>();

function compile(pattern: string, options: { dot: boolean; nocase: boolean }): Matcher {
  if (pattern === '**') return { match: () => true };
  const compiled = compileGlob(pattern, options);
  if (!compiled.ok) throw new Error(`its pattern ${compiled.problem}`);
  const glob = compiled.glob;
  // The literal start of the pattern, before its first special character: a subject that
  // does not begin with it cannot match, and most do not — a cheap test before the glob.
  const literal = /^[^*?[\]{}()!+@\\]*/.exec(pattern)?.[0] ?? '';
  if (literal === '') return glob;
  const prefix = options.nocase ? literal.toLowerCase() : literal;
  return {
    match: (subject) => (options.nocase ? subject.toLowerCase() : subject).startsWith(prefix) && glob.match(subject),
  };
}

function glob(pattern: string, nocase: boolean): Matcher[] {
  const key = `${nocase ? 'i' : 's'}${pattern}`;
  let matchers = globs.get(key);
  if (!matchers) {
    const options = { dot: true, nocase };
    const base = pattern.endsWith('/') ? pattern.slice(0, -1) : pattern;
    matchers = [compile(base, options), compile(`${base}/**`, options)];
    // `X/**` covers `X` itself too: a rule on what is inside a directory covers listing it.
    if (base.endsWith('/**') && base.length > 3) matchers.push(compile(base.slice(0, -3), options));
    globs.set(key, matchers);
  }
  return matchers;
}

/**
 * `*` matches any run of characters (spaces and slashes included), `?` one character.
 * Matched by walking both strings, going back only to the last `*`: at most pattern
 * length times subject length steps, where a regular expression of several `.*` can
 * take exponential time on a long argv that does not match.
 */
function wildcard(pattern: string, subject: string): boolean {
  let p = 0;
  let s = 0;
  let star = -1;
  let resume = 0;
  while (s < subject.length) {
    const c = pattern[p];
    if (c === '*') {
      star = p++;
      resume = s;
    } else if (p < pattern.length && (c === '?' || c === subject[s])) {
      p++;
      s++;
    } else if (star !== -1) {
      p = star + 1;
      s = ++resume;
    } else {
      return false;
    }
  }
  while (pattern[p] === '*') p++;
  return p === pattern.length;
}

// ---------------------------------------------------------------------------------------
// Programs

/**
 * The program an argv's first word really runs, found the way `execvp` finds it: a word
 * holding a `/` is a path from the working directory (the kernel resolves it: `..` after
 * a symlink goes up from where the link leads), a bare word is looked up on PATH.
 */
export interface ResolvedProgram {
  /** The first word as written. */
  spelled: string;
  /**
   * The name the program is decided as. A bare name is itself: PATH's directories are the
   * machine's, and their aliases (`sh` for dash, `awk` for mawk) are its naming. A path is
   * the bare name it spells when PATH finds the same file under that name (`/usr/bin/npm`
   * is `npm`), and otherwise the name of the file it leads to (`./tools/ls` linked to
   * `/bin/sh` is `dash`; `echo./../../usr/bin/curl` is `curl`).
   */
  identity: string;
  /** The real path of the file that runs, or null when nothing is found (a builtin, a name not on PATH). */
  real: string | null;
  /** True when the file that runs is in the workspace (the agent can write it). */
  inWorkspace: boolean;
}

/**
 * Bare names looked up on PATH lately: a decision resolves its program, and one command
 * is decided several times (as itself, as arbitrary code, inside a wrapper). Kept for a
 * second, and only while no PATH entry is relative or inside the workspace, whose files
 * the agent can change.
 */
const lookups = new Map<string, { at: number; found: string | null; real: string | null; inWorkspace: boolean }>();
const LOOKUP_MS = 1000;

/** A bare name on PATH: the file found, its real path, whether it is in the workspace. */
function lookUp(
  name: string,
  cwd: string,
  root: string,
): { found: string | null; real: string | null; inWorkspace: boolean } {
  const path = process.env.PATH ?? '';
  const key = `${root}\0${cwd}\0${path}\0${name}`;
  const now = Date.now();
  const hit = lookups.get(key);
  if (hit !== undefined && now - hit.at <= LOOKUP_MS) return hit;
  const located = findProgram(name, process.env.PATH, cwd);
  const found = located.kind === 'found' ? located.path : null;
  const entry = {
    at: now,
    found,
    real: found === null ? null : realOrNull(found),
    // The entry's own directory decides: a workspace directory on PATH is the agent's, wherever its links lead.
    inWorkspace: found !== null && isInside(realOrNull(dirname(found)) ?? found, root),
  };
  if (cacheablePath(path, root)) {
    if (lookups.size > 1000) lookups.clear();
    lookups.set(key, entry);
  }
  return entry;
}

/** Resolves an argv's first word to the program it runs, in `cwd` (absolute), under `root`. */
export function resolveProgram(spelled: string, cwd: string, root: string): ResolvedProgram {
  if (!spelled.includes('/')) {
    const { real, inWorkspace } = lookUp(spelled, cwd, root);
    return { spelled, identity: spelled, real, inWorkspace };
  }
  // Joined as text, not normalised: realpath(3) must see the `..` after a link, as the kernel does.
  const written = spelled.startsWith('/') ? spelled : `${cwd}/${spelled}`;
  const real = realOrNull(written) ?? realTarget(resolve(written));
  const name = basename(spelled);
  const onPath = name === '' || name === '.' || name === '..' ? null : lookUp(name, cwd, root).real;
  const identity = onPath !== null && onPath === real ? name : basename(real);
  return { spelled, identity, real, inWorkspace: isInside(real, root) };
}

const cacheable = new Map<string, boolean>();

/** PATH holds no relative entry and none inside the workspace. */
function cacheablePath(path: string, root: string): boolean {
  const key = `${root}\0${path}`;
  let answer = cacheable.get(key);
  if (answer === undefined) {
    answer = path.split(':').every((entry) => entry.startsWith('/') && !isInside(realOrNull(entry) ?? entry, root));
    if (cacheable.size > 100) cacheable.clear();
    cacheable.set(key, answer);
  }
  return answer;
}

/** Whether a real path (links already resolved) lies in the workspace. */
function isInside(real: string, root: string): boolean {
  let realRoot = realRoots.get(root);
  if (realRoot === undefined) {
    realRoot = realOrSelf(root);
    realRoots.set(root, realRoot);
  }
  return !escapes(relative(realRoot, real));
}

function realOrNull(path: string): string | null {
  try {
    return realpathSync.native(path);
  } catch {
    return null;
  }
}

/** A path written in its one plain form: absolute, no `.`/`..`/empty components. */
function canonicalPath(word: string): boolean {
  return word.startsWith('/') && posix.normalize(word) === word && !word.endsWith('/');
}

/**
 * The names an exec act's program goes by. Allow and ask rules see the program as it
 * really runs: its identity (`curl`, never the text `echo./../../usr/bin/curl`), its real
 * path, and the path as written only when that path is already plain. Deny rules see
 * those and the spelling too, so a deny is never dodged by how a program is written.
 */
interface ExecNames {
  plain: string[];
  spelled: string[];
}

function execNames(act: Extract<Act, { kind: 'exec' }>, root: string): ExecNames {
  const first = act.argv[0] ?? '';
  const program = resolveProgram(first, act.cwd ?? root, root);
  const plain = new Set([program.identity]);
  if (program.real !== null) plain.add(program.real);
  if (canonicalPath(first)) plain.add(first);
  const spelled = [first, basename(first)].filter((name) => !plain.has(name));
  return { plain: [...plain], spelled };
}

/**
 * An allow or ask rule written as a program's name then `*` (`ls*`, `/usr/bin/git*`): the
 * program, with any arguments, and not a longer name (`ls*` is not `lsof`). A deny rule
 * reads the `*` as written, so `denyExec('sh*')` still covers `shred`.
 */
const NAMED_PROGRAM = /^([^\s*?]+)\*$/;

function execMatches(rule: PolicyRule, act: Extract<Act, { kind: 'exec' }>, names: ExecNames): boolean {
  const rest = act.argv.length > 1 ? ` ${act.argv.slice(1).join(' ')}` : '';
  const bare = !rule.pattern.includes(' ');
  if (rule.effect !== 'deny') {
    const named = NAMED_PROGRAM.exec(rule.pattern)?.[1];
    if (named !== undefined) return names.plain.includes(named);
  }
  const candidates = rule.effect === 'deny' ? [...names.plain, ...names.spelled] : names.plain;
  for (const name of candidates) {
    if (wildcard(rule.pattern, name + rest)) return true;
    if (bare && wildcard(rule.pattern, name)) return true;
  }
  return false;
}
