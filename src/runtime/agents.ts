/**
 * An agent roster: named agent definitions a `spawn_agent` may name with `agent`. A
 * definition gives the child its system prompt, deny rules on top of its parent's policy
 * (a child can only narrow), and ceilings no larger than what the parent has left. A
 * bundle's definitions are named `<plugin>__<agent>`, so a child's trace and spend say
 * which bundle introduced it.
 */
import { InvalidArgumentError } from '../errors.js';

/** Patterns per act that a definition denies its agents. */
export interface AgentDeny {
  read?: string[];
  write?: string[];
  exec?: string[];
  net?: string[];
}

/** A named agent a spawn may ask for. */
export interface AgentDefinition {
  /** Lowercase letters, digits, `_` and `-` (a bundle's: `<plugin>__<agent>`), at most 130. */
  name: string;
  /** What it is for: the roster line the spawning agent reads. */
  description: string;
  /** Its system prompt, in place of the default one. */
  system: string;
  /** Deny rules added to the policy it inherits, in a layer named after it. */
  deny?: AgentDeny;
  /** Ceilings for it; a spawn's own can lower them, and neither exceeds what the parent has left. */
  budget?: { steps?: number; tokens?: number; wallSecs?: number };
  /**
   * True: each agent started from it works in a git worktree of its own, on a branch named
   * for its run, made from its parent's HEAD; its writes and commits stay there, and its
   * parent sees its work on that branch. Needs the git tools (`withGit()`).
   */
  worktree?: boolean;
}

export const AGENT_NAME = /^[a-z0-9][a-z0-9_-]{0,129}$/;
/** The most characters of a definition's system prompt. */
export const MAX_AGENT_SYSTEM_CHARS = 32 * 1024;
const ACTS = ['read', 'write', 'exec', 'net'] as const;

/**
 * The definitions checked and copied, sorted by name; a clear error, prefixed by `where`,
 * for a bad one. `git`: whether the tree's contract offers the git tools (a worktree needs them).
 */
export function checkAgents(list: unknown, where: string, git = true): AgentDefinition[] {
  if (!Array.isArray(list))
    throw new InvalidArgumentError(`${where}: agents must be an array of { name, description, system }.`);
  const seen = new Set<string>();
  const out = list.map((item, index): AgentDefinition => {
    const at = `${where}: agents[${index}]`;
    if (typeof item !== 'object' || item === null || Array.isArray(item))
      throw new InvalidArgumentError(`${at} must be an object { name, description, system }.`);
    const { name, description, system, deny, budget, worktree, ...rest } = item as Record<string, unknown>;
    const unknown = Object.keys(rest);
    if (unknown.length > 0)
      throw new InvalidArgumentError(
        `${at} has ${unknown.join(', ')}; a definition has name, description, system, deny, budget and worktree.`,
      );
    if (typeof name !== 'string' || !AGENT_NAME.test(name))
      throw new InvalidArgumentError(
        `${at}: name must be 1 to 130 lowercase letters, digits, _ or -, got ${JSON.stringify(name)}.`,
      );
    if (seen.has(name)) throw new InvalidArgumentError(`${where}: two agents are named ${name}; give each its own.`);
    seen.add(name);
    if (typeof description !== 'string' || description.trim() === '' || description.length > 1024)
      throw new InvalidArgumentError(
        `${at} (${name}): description must say, in 1 to 1,024 characters, what it is for.`,
      );
    if (typeof system !== 'string' || system.trim() === '' || system.length > MAX_AGENT_SYSTEM_CHARS)
      throw new InvalidArgumentError(
        `${at} (${name}): system must be its system prompt, 1 to ${MAX_AGENT_SYSTEM_CHARS} characters.`,
      );
    const definition: AgentDefinition = { name, description: description.replace(/\s+/g, ' ').trim(), system };
    if (worktree !== undefined && worktree !== false) {
      if (worktree !== true) throw new InvalidArgumentError(`${at} (${name}): worktree must be true or false.`);
      if (!git)
        throw new InvalidArgumentError(
          `${at} (${name}) asks for a worktree of its own, which its git tools commit in: add withGit() to the contract (a workspace whose root is a git repository's top).`,
        );
      definition.worktree = true;
    }
    if (deny !== undefined) {
      if (typeof deny !== 'object' || deny === null || Array.isArray(deny))
        throw new InvalidArgumentError(`${at} (${name}): deny must be { read?, write?, exec?, net? }, each a list.`);
      const lists: AgentDeny = {};
      for (const [act, patterns] of Object.entries(deny)) {
        if (!(ACTS as readonly string[]).includes(act))
          throw new InvalidArgumentError(`${at} (${name}): deny.${act} is not an act; use read, write, exec or net.`);
        if (!Array.isArray(patterns) || patterns.some((p) => typeof p !== 'string' || p.trim() === ''))
          throw new InvalidArgumentError(`${at} (${name}): deny.${act} must be a list of patterns.`);
        lists[act as (typeof ACTS)[number]] = [...patterns];
      }
      definition.deny = lists;
    }
    if (budget !== undefined) {
      if (typeof budget !== 'object' || budget === null || Array.isArray(budget))
        throw new InvalidArgumentError(`${at} (${name}): budget must be { steps?, tokens?, wallSecs? }.`);
      const ceilings: NonNullable<AgentDefinition['budget']> = {};
      for (const [key, value] of Object.entries(budget)) {
        if (key !== 'steps' && key !== 'tokens' && key !== 'wallSecs')
          throw new InvalidArgumentError(
            `${at} (${name}): budget.${key} is not a ceiling; use steps, tokens or wallSecs.`,
          );
        const whole = key !== 'wallSecs';
        if (typeof value !== 'number' || !(value > 0) || !Number.isFinite(value) || (whole && !Number.isInteger(value)))
          throw new InvalidArgumentError(
            `${at} (${name}): budget.${key} must be a ${whole ? 'whole number' : 'number of seconds'} above 0.`,
          );
        ceilings[key] = value;
      }
      definition.budget = ceilings;
    }
    return definition;
  });
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** The system block's lines for a roster: one a definition, in the spec's (sorted) order. */
export function rosterCatalogue(agents: readonly AgentDefinition[]): string {
  return [
    'Agents you can start by name (spawn_agent with agent set to the name; each has its own instructions and limits):',
    ...agents.map(
      (agent) =>
        `- ${agent.name}: ${agent.description}${agent.worktree ? ' (works in a git worktree of its own)' : ''}`,
    ),
  ].join('\n');
}
