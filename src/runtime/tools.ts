/**
 * The tool registry an agent actor dispatches through. A tool is a name, a
 * description, a zod schema for its arguments (emitted as JSON Schema for the model)
 * and a handler. Definitions are emitted in a stable order and are byte-identical
 * from run to run, because prompt caches key on them.
 */
import { z } from 'zod';
import type { ToolDefinition } from './provider.js';

export interface ToolResult {
  content: string;
  isError: boolean;
  /** Set when the call was refused by a rule; the refusal is an event naming it. */
  refusal?: { rule: string; reason: string };
}

export interface Tool<Context> {
  name: string;
  description: string;
  schema: z.ZodType<Record<string, unknown>>;
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
        .map((tool) => {
          const { $schema: _ignored, ...parameters } = z.toJSONSchema(tool.schema) as Record<string, unknown>;
          return { name: tool.name, description: tool.description, parameters };
        });
    }
    return this.#definitions;
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
    const parsed = tool.schema.safeParse(args);
    if (!parsed.success) {
      const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(arguments)'}: ${issue.message}`);
      return { content: `the arguments to ${name} are not valid: ${problems.join('; ')}.`, isError: true };
    }
    return tool.handler(parsed.data, context, callIndex);
  }
}
