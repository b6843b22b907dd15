/**
 * The tool registry an agent actor dispatches through. A tool is a name, a
 * description, the JSON Schema of its arguments and a handler. Definitions are
 * emitted in a stable order (by name) and are byte-identical from run to run,
 * because prompt caches key on them.
 */

import type { QuestionInput } from '../store/records.js';
import { type ArgumentSchema, checkArguments } from './arguments.js';
import type { EventData } from './events.js';
import type { ImageAttachment } from './images.js';
import type { CommandCheck } from './policy/commands.js';
import type { Act, Decision } from './policy/policy.js';
import { keptOfSent, type ToolCall, type ToolDefinition } from './provider.js';

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

export interface ToolResult {
  content: string;
  isError: boolean;
  /** Images the observation attaches (checked by the tool that made them; see ./images.ts). */
  images?: ImageAttachment[];
  /**
   * Set when the call was refused by a rule; the refusal is an event naming the rule and
   * the layer it belongs to (a policy layer, `boundary` for the command checker's own
   * rules, `runtime` for the runtime's: tool masks, the plan gate, the workspace root).
   */
  refusal?: { rule: string; reason: string; layer?: string };
  /**
   * Set when the call cannot finish without a person: the step stops here. A pause keeps
   * the step as a draft until the question is answered; a stop ends the run (a cancel, a
   * cancelled plan, an aborted command). The result's content is not an observation.
   */
  halt?: Halt;
}

/** Why a step stops at a call: see {@link ToolResult.halt}. */
export type Halt = { kind: 'pause'; question: QuestionInput; events: EventData[] } | { kind: 'stop'; reason: string };

/** A result that halts the step. */
export function halted(halt: Halt): ToolResult {
  return { content: '', isError: true, halt };
}

/**
 * What a tool does, for the policy and for recovery: `reads` only looks (it may start
 * while the completion still streams, and is safe to call again after a crash); `acts`
 * changes the world, so it is journaled as an intent before it is called, and a crash
 * during the call pauses the resumed run for a decision instead of calling it twice.
 */
export type ToolEffect = 'reads' | 'acts';

/** A tool as it crosses into an agent's thread: data only. */
export interface ToolDefinitionData {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  effect: ToolEffect;
  /** The tier the tool is offered in under `withToolTiers()` (see {@link Tool.family}); absent, the core. */
  family?: string;
}

/**
 * What kind of act a tool is: `reads` only looks; `acts` changes the world (the
 * workspace, the tree, a command); `asks` puts something to a person; `host` runs on the
 * main thread (the embedder's own tools, whose declaration says whether they read or act).
 */
export type ToolKind = 'reads' | 'acts' | 'asks' | 'host';

/**
 * What a tool's handler is given for one call: the step it is part of. Everything a tool
 * may do beyond computing its result goes through here, so a tool declared against it
 * gets the policy, the approver, the intent journal, restore points and the trace of
 * every other tool, and nothing else to wire.
 */
export interface StepContext {
  /** Where the call is in its completion, and its id. */
  readonly callIndex: number;
  readonly callId: string;
  /** Fires at a cancel and at the step's deadline: a tool stops what it started. */
  readonly signal: AbortSignal;
  /** True while a run opened with a plan gate has no approved plan: it may only read. */
  readonly planning: boolean;
  /**
   * The result this very call (same tool, same arguments) already has from being started
   * while its completion streamed (see {@link Tool.early}); undefined when it was not.
   * A handler still authorizes the call first, so the trace records the same decision.
   */
  readonly started: ToolResult | Promise<ToolResult> | undefined;
  /** What the run's policy says about an act, asking nobody and recording nothing. */
  decide(act: Act): Decision['effect'];
  /**
   * Decides an act against the run's policy and records the decision in the step; an
   * `ask` goes to the tree's approver (a deferral pauses the run at this call). Resolves
   * null when the act may go on, else the refusal to return to the model.
   */
  authorize(act: Act): Promise<ToolResult | null>;
  /** {@link authorize} for a command already checked as the programs it runs (every stage of a line): one question covers every stage that asks. */
  authorizeCommand(act: Act, check: CommandCheck): Promise<ToolResult | null>;
  /**
   * Runs an effect the runtime can neither inspect nor undo under a journaled intent: one
   * that already ran keeps its recorded result, one a crash interrupted pauses the run for
   * a person to retry, skip or abort.
   */
  intent(kind: string, detail: string, run: () => Promise<ToolResult>): Promise<ToolResult>;
  /** Stores (and commits) what a workspace path held before the run first touched it, fenced by the run's lease. */
  restorePoint(path: string, content: Uint8Array | null): Promise<void>;
  /** Adds an event to the step in progress: it is committed with the step. */
  record(event: EventData): void;
  /** Adds a file's diff to the step in progress. */
  change(change: { path: string; diff: string }): void;
}

/**
 * One tool, whole: what the model sees of it (name, description, parameters), what kind
 * of act it is, and what it does with a call. `Context` is the step context with what
 * the tool's family needs besides (a workspace session, the run's tree).
 */
export interface Tool<Context extends StepContext = StepContext> {
  name: string;
  description: string;
  parameters: ArgumentSchema;
  kind: ToolKind;
  /**
   * Where the arguments are checked: `here` against `parameters` before the handler runs
   * (the runtime's own tools), or `host` by the main thread that runs the tool (the
   * embedder's, whose schemas may use any of JSON Schema).
   */
  checkedBy?: 'here' | 'host';
  /**
   * The family a run with tool tiers (`withToolTiers()`) offers the tool in only after an
   * `expand_tools(family)` call: `jobs`, `skills`, `mcp`, or an embedder's own. Absent, the
   * tool is in the core, offered from the first step.
   */
  family?: string;
  /**
   * Starts a call while its completion still streams, when that is safe: it only reads
   * and the policy allows it outright (no person is asked about a turn that may be
   * abandoned). Returns the started result, or null to wait for the completion. The
   * result is used only if the finished completion makes the same call; its handler then
   * finds it in {@link StepContext.started}.
   */
  early?(args: Record<string, unknown>, context: Context): ToolResult | Promise<ToolResult> | null;
  execute(args: Record<string, unknown>, context: Context): Promise<ToolResult>;
}

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
