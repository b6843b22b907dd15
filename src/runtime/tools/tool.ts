/**
 * The one Tool type: a tool is a name, a description, the JSON Schema of its arguments,
 * what kind of act it is, and a handler given its arguments and the step context. Every
 * tool the runtime has is one such declaration in the file of its family (./families/);
 * the embedder's tools and MCP servers' tools are adapted into it (./families/host.ts).
 */

import type { QuestionInput } from '../../store/records.js';
import type { ArgumentSchema } from '../arguments.js';
import type { EventData } from '../events.js';
import type { ImageAttachment } from '../images.js';
import type { CommandCheck } from '../policy/commands/index.js';
import type { Act, Decision } from '../policy/policy.js';

/**
 * What a tool that threw threw: its class, its message and its stack (cut), kept with the
 * observation in the trace (scrubbed of secrets like every row) so a failure is never only
 * a line the model read.
 */
export interface ToolFailure {
  name: string;
  message: string;
  stack: string | null;
}

/** The most characters of a thrown error's stack that are kept. */
const KEPT_STACK_CHARS = 4_000;

/** `error` as a {@link ToolFailure}: anything thrown, an Error or not. */
export function toolFailure(error: unknown): ToolFailure {
  if (error instanceof Error) {
    const stack = typeof error.stack === 'string' ? error.stack.slice(0, KEPT_STACK_CHARS) : null;
    return { name: error.constructor?.name || error.name || 'Error', message: String(error.message), stack };
  }
  let message: string;
  try {
    message = String(error);
  } catch {
    message = Object.prototype.toString.call(error);
  }
  return { name: typeof error, message, stack: null };
}

export interface ToolResult {
  content: string;
  isError: boolean;
  /** Set when the tool threw: what it threw (see {@link ToolFailure}). */
  error?: ToolFailure;
  /** Images the observation attaches (checked by the tool that made them; see ../images.ts). */
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

/** The halt of a step whose run the supervisor cancelled. */
export const CANCELLED: Halt = { kind: 'stop', reason: 'cancelled by the supervisor' };

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
  /** For an act of a program (see ../codeact/): its number in the program; absent for a model's own call. */
  readonly act?: number;
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
