/**
 * An argv decided against the policy's exec rules: with arguments not known yet (a
 * deny rule that could match once they are filled refuses it), and as arbitrary code
 * (allowed only by a rule that names the program).
 */
import { basename } from 'node:path';
import type { Decision, Policy, ResolvedProgram } from '../policy.js';
import type { Context, Holes } from './effects.js';
import type { Tally } from './tally.js';

/** The first word of the act an arbitrary-code program is also decided as (`denyExec('<arbitrary code>*')` refuses them all). */
export const ARBITRARY_CODE = '<arbitrary code>';

export function display(argv: readonly string[], holes: Holes): string {
  return holes.trailing ? `${argv.join(' ')} <args>`.trimStart() : argv.join(' ');
}

/** Decides an argv; with unknown arguments, a deny rule that could match once they are filled refuses it. */
export function decideExec(argv: readonly string[], ctx: Context, holes: Holes): Decision {
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

export function unknownProgram(subject: string, ctx: Context, tally: Tally): boolean {
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
export function capArbitraryCode(
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
