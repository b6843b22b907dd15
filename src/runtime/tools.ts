/**
 * The tool registry an agent actor dispatches through. A tool is a name, a
 * description, the JSON Schema of its arguments and a handler. Definitions are
 * emitted in a stable order (by name) and are byte-identical from run to run,
 * because prompt caches key on them.
 */
import { type ArgumentSchema, checkArguments } from './arguments.js';
import type { ToolDefinition } from './provider.js';

export interface ToolResult {
  content: string;
  isError: boolean;
  /**
   * Set when the call was refused by a rule; the refusal is an event naming the rule and
   * the layer it belongs to (a policy layer, `boundary` for the command checker's own
   * rules, `runtime` for the runtime's: tool masks, the plan gate, the workspace root).
   */
  refusal?: { rule: string; reason: string; layer?: string };
}

export interface Tool<Context> {
  name: string;
  description: string;
  parameters: ArgumentSchema;
  handler(args: Record<string, unknown>, context: Context, callIndex: number): Promise<ToolResult>;
}

export class ToolRegistry<Context> {
  readonly #tools = new Map<string, Tool<Context>>();
  #definitions: ToolDefinition[] | null = null;

  register(tool: Tool<Context>): this {
    this.#tools.set(tool.name, tool);
    this.#definitions = null;
    return this;
  }

  /** Definitions sorted by name, computed once. */
  definitions(): ToolDefinition[] {
    if (!this.#definitions) {
      this.#definitions = [...this.#tools.values()]
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
        .map((tool) => ({
          name: tool.name,
          description: tool.description,
          parameters: tool.parameters as unknown as Record<string, unknown>,
        }));
    }
    return this.#definitions;
  }

  /** True when `name` is a tool here and `args` are valid for it. */
  accepts(name: string, args: Record<string, unknown>): boolean {
    const tool = this.#tools.get(name);
    return tool !== undefined && checkArguments(tool.parameters, args).length === 0;
  }

  /** Validates the arguments and runs the tool; an unknown tool or bad arguments is an error observation, not a crash. */
  async dispatch(
    name: string,
    args: Record<string, unknown>,
    context: Context,
    callIndex: number,
  ): Promise<ToolResult> {
    const tool = this.#tools.get(name);
    if (!tool) {
      const known = [...this.#tools.keys()].sort().join(', ');
      return { content: `there is no tool named ${JSON.stringify(name)}; the tools are: ${known}.`, isError: true };
    }
    const problems = checkArguments(tool.parameters, args);
    if (problems.length > 0) {
      return { content: `the arguments to ${name} are not valid: ${problems.join('; ')}.`, isError: true };
    }
    return tool.handler(args, context, callIndex);
  }
}
