/**
 * The permission boundary as data: named layers of allow, deny and ask rules over
 * four acts (read a path, write a path, run an argv, dial a host). A decision names
 * the rule and the layer that produced it, so every refusal in a trace says why.
 *
 * Deny wins, within a layer and across layers. Otherwise the latest layer with a rule
 * on the act decides (so `Policy.default().layer('app').allowExec('npm test*')` lets
 * `npm test` run without asking), and within one layer ask beats allow. An act no
 * rule covers is denied (deny-first), and the decision says no rule allowed it.
 *
 * A policy is plain data so it crosses into an agent's thread as is
 * ({@link Policy.toJSON} / {@link Policy.from}).
 */
import { existsSync, realpathSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { minimatch } from 'minimatch';
import { InvalidArgumentError } from '../../errors.js';

export type ActKind = 'read' | 'write' | 'exec' | 'net';
export type Effect = 'allow' | 'deny' | 'ask';

/** Something an agent wants to do. */
export type Act =
  | { kind: 'read'; path: string }
  | { kind: 'write'; path: string }
  | { kind: 'exec'; argv: readonly string[] }
  | { kind: 'net'; host: string; port: number };

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

const ACTS: readonly ActKind[] = ['read', 'write', 'exec', 'net'];
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

  /** Reads and writes anywhere in the workspace; asks about every command; dials nothing. */
  static default(): Policy {
    return new Policy([
      {
        name: 'default',
        rules: [
          { effect: 'allow', act: 'read', pattern: '**' },
          { effect: 'allow', act: 'write', pattern: '**' },
          { effect: 'ask', act: 'exec', pattern: '*' },
        ],
      },
    ]);
  }

  /** Allows every act. For tests and trusted, contained work; say so in your source. */
  static permissive(): Policy {
    return new Policy([
      {
        name: 'permissive',
        rules: ACTS.map((act) => ({ effect: 'allow' as const, act, pattern: act === 'net' ? '*' : '**' })),
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
   * Decides one act. Paths are resolved first (against `root`, `..` removed, the real
   * path of the deepest existing ancestor, NFC) and matched relative to the workspace
   * root when inside it, absolute otherwise.
   */
  decide(act: Act, root: string): Decision {
    const subject = subjectOf(act, root);
    // Deny wins in any layer. Otherwise the latest layer with a matching rule decides
    // (a later layer refines an earlier one), and within a layer ask beats allow.
    let decided: { effect: 'allow' | 'ask'; rule: string; layer: string } | null = null;
    for (const layer of this.#layers) {
      let ask: string | null = null;
      let allow: string | null = null;
      for (const rule of layer.rules) {
        if (rule.act !== act.kind || !matches(rule, act, subject)) continue;
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
    return { effect: 'deny', rule: null, layer: null, subject, reason: `no rule allows ${act.kind} ${subject}` };
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
      `a policy rule's act must be read, write, exec or net, got ${JSON.stringify(rule.act)}.`,
    );
  }
  if (typeof rule.pattern !== 'string' || rule.pattern.trim() === '') {
    throw new InvalidArgumentError(`a ${rule.effect}-${rule.act} rule needs a non-empty pattern.`);
  }
  return { effect: rule.effect, act: rule.act, pattern: rule.pattern };
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
      return `${act.host.toLowerCase()}:${act.port}`;
  }
}

/** Resolves a path as the policy sees it: workspace-relative (posix) inside the root, absolute outside. */
export function resolvePath(path: string, root: string): string {
  const realRoot = realOrSelf(root);
  const absolute = resolve(realRoot, path.normalize('NFC'));
  // The real path of the deepest ancestor that exists: a symlink cannot hide where a path leads.
  let existing = absolute;
  const rest: string[] = [];
  while (!existsSync(existing)) {
    const parent = dirname(existing);
    if (parent === existing) break;
    rest.unshift(basename(existing));
    existing = parent;
  }
  const real = join(realOrSelf(existing), ...rest).normalize('NFC');
  const inside = relative(realRoot, real);
  if (inside === '') return '.';
  if (!inside.startsWith('..') && !isAbsolute(inside)) return inside.split(sep).join('/');
  return real.split(sep).join('/');
}

function realOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return resolve(path);
  }
}

function matches(rule: PolicyRule, act: Act, subject: string): boolean {
  if (act.kind === 'exec') {
    const program = basename(act.argv[0] ?? '');
    return wildcard(rule.pattern, subject) || (!/\s/.test(rule.pattern) && wildcard(rule.pattern, program));
  }
  if (act.kind === 'net') {
    const pattern = rule.pattern.includes(':') ? rule.pattern : `${rule.pattern}:*`;
    return wildcard(pattern.toLowerCase(), subject);
  }
  // A rule on X also covers everything under X; deny rules ignore case.
  const options = { dot: true, nocase: rule.effect === 'deny' };
  const pattern = rule.pattern.endsWith('/') ? rule.pattern.slice(0, -1) : rule.pattern;
  return minimatch(subject, pattern, options) || minimatch(subject, `${pattern}/**`, options);
}

/** `*` matches any run of characters (spaces and slashes included), `?` one character. */
function wildcard(pattern: string, subject: string): boolean {
  const source = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${source}$`, 's').test(subject);
}
