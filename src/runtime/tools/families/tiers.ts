/**
 * Tool tiers (`withToolTiers()` on a contract): a run is offered its core tools (files,
 * commands, the tree, people) from the first step; every other family (`jobs`, `skills`,
 * `mcp`, an embedder's own) is named in one line of the system block and offered from the
 * step after the model calls `expand_tools(family)`. A tool of a family not yet offered
 * is refused (rule `tool-tier`) if the model calls it anyway; the policy and the tool mask
 * decide an offered tool as they decide any other.
 *
 * Which families are open is kept in the trace (`tools-expanded` events), so a resumed run
 * offers what it offered before the crash.
 */
import type { ArgumentSchema } from '../../arguments.js';
import type { AgentCall } from '../context.js';
import type { ToolRegistry } from '../registry.js';
import type { Tool, ToolResult } from '../tool.js';

/** What each family is, for the line in the system block. */
const ABOUT: Record<string, string> = {
  jobs: 'background commands',
  skills: 'reading the skills in the catalogue',
  mcp: 'tools of MCP servers',
  memory: 'durable memory: remember, recall and forget notes kept between runs',
};

/** The tiers of one run: its families and which of them are open. */
export class ToolTiers {
  /** The families past the core, each with its tools' names (sorted). */
  readonly families: ReadonlyMap<string, readonly string[]>;
  /** The families the model has opened. */
  readonly expanded = new Set<string>();

  constructor(registry: ToolRegistry<AgentCall>, expanded: Iterable<string>) {
    this.families = registry.families();
    this.open(expanded);
  }

  /** Opens the families named (as the trace has them); a name that is not a family here is passed over. */
  open(families: Iterable<string>): void {
    for (const family of families) if (this.families.has(family)) this.expanded.add(family);
  }

  /** The families a request offers now: a copy, so a call made in this step opens a family for the next. */
  offered(): ReadonlySet<string> {
    return new Set(this.expanded);
  }

  /** The system block's line naming what is not offered yet; the same bytes every request of the run. */
  line(): string {
    const named = [...this.families.entries()].map(([family, tools]) => {
      const about = ABOUT[family];
      const shown = family === 'mcp' ? servers(tools) : tools.join(', ');
      return `${family} (${tools.length} tool${tools.length === 1 ? '' : 's'}${about ? `, ${about}` : ''}: ${shown})`;
    });
    return `More tools are kept back until asked for, by family: ${named.join('; ')}. Call expand_tools with a family to be offered its tools from the next step.`;
  }
}

/** The MCP servers whose tools a family holds (`<server>__<tool>`), not every tool's name. */
function servers(tools: readonly string[]): string {
  const names = [...new Set(tools.map((name) => name.slice(0, Math.max(0, name.indexOf('__')))))];
  return `from the server${names.length === 1 ? '' : 's'} ${names.join(', ')}`;
}

const EXPAND_PARAMETERS = {
  type: 'object',
  properties: { family: { type: 'string', description: 'The family to offer, as the system prompt names it.' } },
  required: ['family'],
  additionalProperties: false,
} as const satisfies ArgumentSchema;

/** `expand_tools`, offered to a run with tool tiers: opens a family from the next step. */
export const EXPAND_TOOLS: Tool<AgentCall> = {
  name: 'expand_tools',
  description:
    'Be offered the tools of a family the system prompt names as kept back; they are offered from the next step.',
  parameters: EXPAND_PARAMETERS,
  kind: 'reads',
  execute: async (args, call): Promise<ToolResult> => {
    const tiers = call.agent.tiers;
    const family = String(args.family);
    const tools = tiers?.families.get(family);
    if (!tiers || !tools) {
      const known = tiers ? [...tiers.families.keys()].join(', ') : '';
      return {
        content: `there is no family ${JSON.stringify(family.slice(0, 64))} of tools kept back${known ? `; the families are: ${known}` : ''}.`,
        isError: true,
      };
    }
    if (tiers.expanded.has(family)) {
      return { content: `The ${family} tools are already offered: ${tools.join(', ')}.`, isError: false };
    }
    tiers.expanded.add(family);
    call.record({ type: 'tools-expanded', family, tools: [...tools] });
    return {
      content: `The ${tools.length} ${family} tool${tools.length === 1 ? ' is' : 's are'} offered from the next step: ${tools.join(', ')}.`,
      isError: false,
    };
  },
};
