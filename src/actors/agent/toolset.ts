/**
 * Which tools a run has, and what its system prompt says, by the kind of run. Every tool
 * is one declaration (see Tool in runtime/tools.ts) in the file of its family: the tree
 * tools in ./tree-tools.ts, the person tools in ./people.ts, the workspace tools in
 * runtime/workspace/session.ts, the embedder's in ./host-tools.ts.
 */
import type { ContractData } from '../../runtime/contract/contract.js';
import { type ToolDefinitionData, ToolRegistry } from '../../runtime/tools.js';
import { workspaceTools } from '../../runtime/workspace/session.js';
import type { RunRecord } from '../../store/reader.js';
import type { AgentCall } from './context.js';
import { hostTool } from './host-tools.js';
import { MEMORY_TOOLS } from './memory-tools.js';
import { personTools } from './people.js';
import { READ_SKILL } from './skill-tools.js';
import { EXPAND_TOOLS } from './tiers.js';
import { TREE_TOOLS } from './tree-tools.js';

/**
 * One registry per kind of run and set of embedder tools, built once per thread and keyed
 * by the definitions themselves: trees with different tools never share one, and the
 * definitions a tree sends stay byte-identical run to run.
 */
const registries = new Map<string, ToolRegistry<AgentCall>>();
/** Registries kept per thread; past this, the least recently used goes (trees built with fresh tools each time). */
const KEPT_REGISTRIES = 64;

export function registryFor(
  mode: 'agent' | 'workspace' | 'file',
  planGate: boolean,
  tools: readonly ToolDefinitionData[] = [],
  spawn = true,
  skills = false,
  tiers = false,
  memory = false,
): ToolRegistry<AgentCall> {
  const key = `${mode}${planGate ? '+plan' : ''}${spawn ? '' : '-spawn'}${skills ? '+skills' : ''}${tiers ? '+tiers' : ''}${memory ? '+memory' : ''}${tools.length > 0 ? ` ${JSON.stringify(tools)}` : ''}`;
  let registry = registries.get(key);
  if (registry) {
    // Most recently used last.
    registries.delete(key);
    registries.set(key, registry);
  } else {
    registry = new ToolRegistry<AgentCall>();
    for (const tool of TREE_TOOLS) if (spawn || tool.name !== 'spawn_agent') registry.register(tool);
    if (mode !== 'agent') {
      for (const tool of workspaceTools(mode)) registry.register(tool);
      for (const tool of personTools(planGate)) registry.register(tool);
    }
    if (skills) registry.register(READ_SKILL);
    if (memory) for (const tool of MEMORY_TOOLS) registry.register(tool);
    for (const definition of tools) registry.register(hostTool(definition));
    // With tiers, and something to keep back: the one tool that opens a family.
    if (tiers && registry.families().size > 0) registry.register(EXPAND_TOOLS);
    registries.set(key, registry);
    if (registries.size > KEPT_REGISTRIES) registries.delete(registries.keys().next().value as string);
  }
  return registry;
}

let builtIn: ReadonlySet<string> | null = null;

/** The names the runtime's own tools use (read from their declarations); an embedder's tool may not take one. */
export function builtInToolNames(): ReadonlySet<string> {
  builtIn ??= new Set(
    registryFor('workspace', true, [], true, true, true, true)
      .definitions()
      .map((definition) => definition.name),
  );
  return builtIn;
}

export function workspaceSystem(contract: ContractData): string {
  return (
    'You are a coding agent working in a repository. Use the tools to read, search, change and run the project. ' +
    'Change files with edit_file (an exact, unique replacement), patch_file (a unified diff) or write_file. ' +
    'When something about the intent of the task is unclear, ask with ask_operator rather than guess. ' +
    'When the work is done, answer without a tool call, saying what you did.' +
    (contract.planGate
      ? ' This run starts in a planning phase: read what you need, then submit an ordered plan with submit_plan; changes and commands wait until it is approved.'
      : '') +
    (contract.outputSchema ? ' Your final answer must be a single JSON value matching the schema you were given.' : '')
  );
}

export function defaultSystem(run: RunRecord): string {
  return (
    `You are agent "${run.address}" in a tree of agents. ` +
    'Use spawn_agent to hand work to sub-agents, send_message and read_messages to talk to agents of this tree by address, ' +
    'and answer without a tool call when your task is done.'
  );
}
