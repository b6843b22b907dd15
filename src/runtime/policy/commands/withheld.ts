/**
 * The variables a contained command is not given, taken out of the `env` assignments of
 * the command the model wrote, wherever the check reads one.
 */
import { basename } from 'node:path';
import { hasOption, parseOptions } from '../options.js';
import type { Policy } from '../policy.js';
import type { Effect } from './effects.js';
import { handlerOf } from './programs.js';
import { ENV_OPTIONS } from './wrappers.js';

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
