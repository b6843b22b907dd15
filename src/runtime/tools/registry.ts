/**
 * The tool registry an agent actor dispatches through, and the registry each kind of run
 * gets. Definitions are emitted in a stable order (by name) and are byte-identical from
 * run to run, because prompt caches key on them.
 */

import { checkArguments } from '../arguments.js';
import type { CodeActLanguage } from '../codeact/codeact.js';
import type { DocumentFormat } from '../documents/documents.js';
import { keptOfSent, type ToolCall, type ToolDefinition } from '../provider.js';
import type { AgentCall } from './context.js';
import { runProgramTool } from './families/codeact.js';
import { hostTool } from './families/host.js';
import { MEMORY_TOOLS } from './families/memory.js';
import { personTools } from './families/people.js';
import { READ_SKILL } from './families/skills.js';
import { EXPAND_TOOLS } from './families/tiers.js';
import { TREE_TOOLS } from './families/tree.js';
import type { StepContext, Tool, ToolDefinitionData, ToolKind, ToolResult } from './tool.js';

/**
 * The most bytes (UTF-8) of JSON one call's arguments may have: the largest write
 * (8 MiB, see MAX_WRITE_BYTES) with room for its path. A call above it is not run, and
 * is not stored beyond its start.
 */
export const MAX_CALL_ARGUMENTS_BYTES = 8 * 1024 * 1024 + 64 * 1024;
/**
 * Refused arguments up to this size are kept as sent (the model sees its own call, next
 * to what was wrong with it); larger ones are replaced by `{}` and their start, so the
 * store holds no more of them than that.
 */
const KEPT_REFUSED_CHARS = 4096;
/** An observation names at most this many problems with the arguments. */
const SHOWN_PROBLEMS = 10;

/** How deep a call's arguments may nest (objects and arrays); deeper is refused before anything walks them. */
export const MAX_ARGUMENT_DEPTH = 64;

/** Whether a value nests objects or arrays more than `limit` deep, found without recursion. */
export function nestedDeeperThan(value: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop() as [unknown, number];
    if (item === null || typeof item !== 'object') continue;
    if (depth >= limit) return true;
    for (const child of Object.values(item as Record<string, unknown>)) stack.push([child, depth + 1]);
  }
  return false;
}

export class ToolRegistry<Context extends StepContext = StepContext> {
  readonly #tools = new Map<string, Tool<Context>>();
  /** Definitions by the families they hold (`*` for all), each computed once. */
  readonly #definitions = new Map<string, ToolDefinition[]>();

  register(tool: Tool<Context>): this {
    this.#tools.set(tool.name, tool);
    this.#definitions.clear();
    return this;
  }

  /**
   * Definitions sorted by name, computed once: every tool, or with `families` the core and
   * the tools of those families only (a tier, see {@link Tool.family}).
   */
  definitions(families?: ReadonlySet<string>): ToolDefinition[] {
    const key = families ? [...families].sort().join(' ') : '*';
    let definitions = this.#definitions.get(key);
    if (!definitions) {
      definitions = [...this.#tools.values()]
        .filter((tool) => !families || tool.family === undefined || families.has(tool.family))
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
        .map((tool) => ({
          name: tool.name,
          description: tool.description,
          parameters: tool.parameters as unknown as Record<string, unknown>,
        }));
      this.#definitions.set(key, definitions);
    }
    return definitions;
  }

  /** The family the tool `name` is in; undefined for a core tool or no such tool. */
  family(name: string): string | undefined {
    return this.#tools.get(name)?.family;
  }

  /** The families past the core and their tools' names, each sorted by name. */
  families(): Map<string, string[]> {
    const families = new Map<string, string[]>();
    for (const tool of this.#tools.values()) {
      if (tool.family === undefined) continue;
      families.set(tool.family, [...(families.get(tool.family) ?? []), tool.name]);
    }
    return new Map([...families.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([f, names]) => [f, names.sort()]));
  }

  /** The kind of act the tool `name` is, or null when there is no such tool. */
  kind(name: string): ToolKind | null {
    return this.#tools.get(name)?.kind ?? null;
  }

  /** True when `name` is a tool here and `args` are valid for it. */
  accepts(name: string, args: Record<string, unknown>): boolean {
    const tool = this.#tools.get(name);
    return tool !== undefined && tool.checkedBy !== 'host' && checkArguments(tool.parameters, args).length === 0;
  }

  /**
   * A call as the run keeps it. A call whose arguments are far over the limits is marked
   * invalid and its arguments dropped (their start kept), before the step's completion,
   * its events or its effects are stored: a 50 MB argument is refused, not recorded.
   */
  screen(call: ToolCall): ToolCall {
    if (call.invalid) return call;
    if (nestedDeeperThan(call.args, MAX_ARGUMENT_DEPTH)) {
      const reason = `the arguments to ${keptOfSent(call.name)} are nested more than ${MAX_ARGUMENT_DEPTH} levels deep, so it was not run; no tool takes arguments nested that far.`;
      return { id: call.id, name: call.name, args: {}, invalid: { reason, sent: '(nested too deep to keep)' } };
    }
    const text = JSON.stringify(call.args) ?? '';
    if (text.length <= KEPT_REFUSED_CHARS) return call;
    const bytes = Buffer.byteLength(text);
    const reason =
      bytes > MAX_CALL_ARGUMENTS_BYTES
        ? `the arguments to ${keptOfSent(call.name)} are ${bytes} bytes of JSON, above the limit of ${MAX_CALL_ARGUMENTS_BYTES} bytes for one call, so it was not run; send smaller arguments (a write of at most 8 MiB, one file at a time).`
        : this.#problems(call.name, call.args);
    if (reason === null) return call;
    return { id: call.id, name: call.name, args: {}, invalid: { reason, sent: keptOfSent(text) } };
  }

  /** Validates the arguments and runs the tool; an unknown tool or bad arguments is an error observation, not a crash. */
  async dispatch(name: string, args: Record<string, unknown>, context: Context): Promise<ToolResult> {
    const tool = this.#tools.get(name);
    const problems = this.#problems(name, args);
    if (!tool || problems !== null) return { content: problems ?? '', isError: true };
    return tool.execute(args, context);
  }

  /**
   * Starts a call early (see {@link Tool.early}) when its tool can and its arguments are
   * good; null when it is not started.
   */
  startEarly(name: string, args: Record<string, unknown>, context: Context): ToolResult | Promise<ToolResult> | null {
    const tool = this.#tools.get(name);
    if (!tool?.early) return null;
    if (tool.checkedBy !== 'host' && checkArguments(tool.parameters, args).length > 0) return null;
    return tool.early(args, context);
  }

  /** What is wrong with a call to `name` with `args`, for the model; null when nothing is. */
  #problems(name: string, args: Record<string, unknown>): string | null {
    const tool = this.#tools.get(name);
    if (!tool) {
      const known = [...this.#tools.keys()].sort().join(', ');
      return `there is no tool named ${JSON.stringify(keptOfSent(name))}; the tools are: ${known}.`;
    }
    if (tool.checkedBy === 'host') return null;
    const problems = checkArguments(tool.parameters, args);
    if (problems.length === 0) return null;
    const more = problems.length > SHOWN_PROBLEMS ? `; and ${problems.length - SHOWN_PROBLEMS} more` : '';
    return `the arguments to ${name} are not valid: ${problems.slice(0, SHOWN_PROBLEMS).join('; ')}${more}.`;
  }
}

/** Which tools a run has: what {@link registryFor} builds a registry from. */
export interface RegistryOptions {
  /** The kind of run: `agent` (a run without a contract: the tree tools), or a contract's `workspace` or single-`file` mode. */
  mode: 'agent' | 'workspace' | 'file';
  /** The run opens with a plan gate: `submit_plan` is offered. */
  planGate?: boolean;
  /** The embedder's tools (and MCP servers') the tree has, as they cross into the agent's thread. */
  hostTools?: readonly ToolDefinitionData[];
  /** `spawn_agent` is offered (default true). */
  spawn?: boolean;
  /** The run's spec carries skills: `read_skill` is offered. */
  skills?: boolean;
  /** The contract has tool tiers: `expand_tools` is offered when a family is kept back. */
  tiers?: boolean;
  /** The contract has durable memory: `remember`, `recall` and `forget` are offered. */
  memory?: boolean;
  /** The contract asks for the git tools (`withGit()`). */
  git?: boolean;
  /** The contract names language servers (`withLsp()`): their five tools are offered. */
  lsp?: boolean;
  /** The contract asks for a browser (`withBrowser()`): its six tools are offered. */
  browser?: boolean;
  /** The languages this host can run the contract's programs in (`withCodeAct()`): `run_program` is offered with them. */
  codeact?: readonly CodeActLanguage[];
  /** The document formats the contract asks for (`withDocuments()`): each format's tools are offered. */
  documents?: readonly DocumentFormat[];
  /**
   * The workspace's tools for a `workspace` or `file` run (./families/workspace.ts's
   * `workspaceTools`), handed in by whoever has loaded them: a thread that hosts only
   * runs without a workspace never loads the file tools, the commands or their policy.
   */
  workspaceTools?: (
    mode: 'workspace' | 'file',
    options?: { git?: boolean; lsp?: boolean; browser?: boolean; documents?: readonly DocumentFormat[] },
  ) => readonly Tool<AgentCall>[];
}

/**
 * One registry per kind of run and set of embedder tools, built once per thread and keyed
 * by the definitions themselves: trees with different tools never share one, and the
 * definitions a tree sends stay byte-identical run to run.
 */
const registries = new Map<string, ToolRegistry<AgentCall>>();
/** Registries kept per thread; past this, the least recently used goes (trees built with fresh tools each time). */
const KEPT_REGISTRIES = 64;

/**
 * The registry of a run with `options`: every tool is one declaration in the file of its
 * family (./families/), the embedder's adapted by ./families/host.ts.
 */
export function registryFor(options: RegistryOptions): ToolRegistry<AgentCall> {
  const {
    mode,
    planGate = false,
    hostTools = [],
    spawn = true,
    skills = false,
    tiers = false,
    memory = false,
    git = false,
    lsp = false,
    browser = false,
    codeact = [],
    documents = [],
    workspaceTools,
  } = options;
  const key = `${mode}${planGate ? '+plan' : ''}${spawn ? '' : '-spawn'}${skills ? '+skills' : ''}${tiers ? '+tiers' : ''}${memory ? '+memory' : ''}${git ? '+git' : ''}${lsp ? '+lsp' : ''}${browser ? '+browser' : ''}${codeact.length > 0 ? `+codeact:${codeact.join(',')}` : ''}${documents.length > 0 ? `+documents:${documents.join(',')}` : ''}${hostTools.length > 0 ? ` ${JSON.stringify(hostTools)}` : ''}`;
  let registry = registries.get(key);
  if (registry) {
    // Most recently used last.
    registries.delete(key);
    registries.set(key, registry);
  } else {
    registry = new ToolRegistry<AgentCall>();
    for (const tool of TREE_TOOLS) if (spawn || tool.name !== 'spawn_agent') registry.register(tool);
    if (mode !== 'agent') {
      if (!workspaceTools) throw new Error(`a ${mode} run's registry needs its workspace tools`);
      for (const tool of workspaceTools(mode, { git, lsp, browser, documents })) registry.register(tool);
      for (const tool of personTools(planGate)) registry.register(tool);
      if (mode === 'workspace' && codeact.length > 0) registry.register(runProgramTool(codeact));
    }
    if (skills) registry.register(READ_SKILL);
    if (memory) for (const tool of MEMORY_TOOLS) registry.register(tool);
    for (const definition of hostTools) registry.register(hostTool(definition));
    // With tiers, and something to keep back: the one tool that opens a family.
    if (tiers && registry.families().size > 0) registry.register(EXPAND_TOOLS);
    registries.set(key, registry);
    if (registries.size > KEPT_REGISTRIES) registries.delete(registries.keys().next().value as string);
  }
  return registry;
}
