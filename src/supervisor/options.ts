/**
 * What users hand the supervisor: the options objects (Supervisor.start, run, resume), and
 * their checks at the edge, one zod schema each, strict about its keys, with messages that
 * say what was wrong and what to do. The deeper checks (a provider spec, a budget, the tools) stay with
 * what they check and run after the shape is known to be right. Main thread only: agent
 * threads never load zod (its start cost was measured at ~40 ms a thread).
 */
import { z } from 'zod';
import type { Isolation } from '../actors/host.js';
import type { Clock } from '../clock.js';
import { InvalidArgumentError, shownValue } from '../errors.js';
import type { McpServerSpec } from '../mcp/spec.js';
import type { AgentDefinition } from '../runtime/agents.js';
import type { Budget } from '../runtime/budget.js';
import type { TaskContract } from '../runtime/contract/contract.js';
import type { OutputSchemaInput } from '../runtime/contract/output-schema.js';
import { oneOf, problemsOf, quotedKeys, text, wholeNumber as whole, withMethod } from '../runtime/edges.js';
import type { Approver, Operator, PlanGate } from '../runtime/policy/approval.js';
import type { Policy } from '../runtime/policy/policy.js';
import type { ProviderSpec, TranscriptEntry } from '../runtime/provider.js';
import type { HostModel } from '../runtime/providers/host-model.js';
import type { SkillRoot } from '../runtime/skills.js';
import type { HostTool as Tool } from '../runtime/tools/host-tool.js';

export interface SupervisorOptions {
  /** At most this many spawned agents of one tree run at once; the rest wait in the durable queue. Default 16. */
  maxConcurrentAgents?: number;
  /** A tree may spawn at most this many agents in all; the spawn that would cross it is refused. Default 1000. */
  maxTotalAgents?: number;
  /** How long a lease lasts without renewal. Renewed every third of it while the run is driven. Default 30 000 ms. */
  leaseTtlMs?: number;
  /** The clock leases are computed with. */
  clock?: Clock;
  /**
   * How agent actors are hosted on threads. `'shared'` (the default): on a pool of
   * `threads` worker threads, many actors to a thread — an agent mostly waits on its
   * model, and a thread costs ~24 MB and tens of milliseconds to start. `'thread'`: each
   * live actor on a thread of its own, as isolated as worker threads get (its own heap and
   * event loop; a thread that dies takes only its actor), at a thread's cost per agent.
   * `'in-process'`: every actor, and the store actor, on the calling thread over message
   * channels, with no worker thread started at all — for stepping through a run with a
   * debugger's breakpoints, and for tests of tree logic. An actor that blocks the event
   * loop blocks the supervisor with it.
   */
  isolation?: Isolation;
  /** With shared isolation, how many threads host the actors. Default: the cores available. */
  threads?: number;
  /** With thread isolation, how long an idle thread is kept for the next actor. Default 10 000 ms. */
  idleThreadMs?: number;
  /** Agent threads to start (and wait for) in `start()`, so the first agents do not pay the thread start. Default 0. */
  warmWorkers?: number;
  /** Test hook: `op:n:phase` SIGKILLs the whole process inside the store actor at that point. */
  killAt?: string | null;
  /** The embedder's own tools (made with `tool()`), for every tree this supervisor runs or resumes. */
  tools?: readonly Tool<never>[];
  /**
   * Models served by the embedder's own code, by name, for every tree this supervisor runs
   * or resumes: a provider `{ kind: 'host', name }` asks the function of that name on this
   * thread (see docs/guides/providers.md, "A model of your own").
   */
  models?: Record<string, HostModel>;
  /**
   * MCP servers every tree of this supervisor has: started (stdio) or dialled (HTTP) for
   * each tree it runs or resumes, under that tree's policy and inside its containment, their
   * tools named `<server>__<tool>`, stopped when the tree ends (see docs/guides/mcp.md).
   */
  mcp?: McpServerSpec[];
  /**
   * The name this supervisor's leases give its host. Default: the machine's name, tagged with
   * its boot and pid namespace. A lease held on this host whose process is gone is taken at
   * once; one held on another host only when its ttl lapses. Give two supervisors on one
   * machine different names to have them treat each other as separate hosts; never give one
   * name to two machines (each would take the other's live runs as dead).
   */
  host?: string;
  /**
   * On PostgreSQL, where several hosts share trees: the most agents this supervisor drives at
   * once across every tree (each tree's own cap holds across all hosts regardless). 0: a host
   * that drives the roots it starts (and resumes) and leaves their spawned agents to the
   * others. Default: no limit of the host's own.
   */
  maxHostAgents?: number;
  /**
   * On PostgreSQL: how often it looks at the store for work another host's hint may have
   * missed (a queued agent, a lapsed lease, a child that ended, mail). Default 1 000 ms.
   */
  pollMs?: number;
}

export interface ResumeOptions {
  /**
   * The provider again, for a tree whose provider was given a key directly: keys are
   * never stored, so another process must hand it back. Without it the stored spec is
   * used, reading its key from the environment variable it names.
   */
  provider?: ProviderSpec;
  /** Answers the policy's asks for the resumed tree. Without one, every ask is denied. */
  approver?: Approver;
  /** A review gate's provider again, for a reviewer whose key was given directly. */
  reviewer?: ProviderSpec;
  /** Reviews plans of the resumed tree's runs opened with a plan gate. */
  planGate?: PlanGate;
  /** Answers the resumed tree's questions to the operator. */
  operator?: Operator;
  /**
   * The tree's own tools again (tools live in the process, not the store): a tree that was
   * started with tools is refused, naming them, until they are all given back.
   */
  tools?: readonly Tool<never>[];
  /** The tree's own host models again (they live in the process): a tree whose providers name one not given is refused. */
  models?: Record<string, HostModel>;
  /**
   * The tree's own MCP servers again (servers, like tools, live in the process): started or
   * dialled under the tree's stored policy before any run goes on. A tree whose servers'
   * tools are not all given back is refused, naming the servers.
   */
  mcp?: McpServerSpec[];
  /**
   * Go on although the tree has changed under this process since it was started (or since
   * a resume last accepted a change): another release of io-harness, a tool of your own or
   * an MCP server's shown to the model with another description or parameters, a tool the
   * tree did not have. Without it such a resume (or join) is refused with
   * FINGERPRINT_CHANGED, naming each change; with it the changes are recorded in the root's
   * trace (`changes-accepted`) and become the tree's.
   */
  acceptChanges?: boolean;
}

export interface RunOptions<Output = unknown> {
  /** What the root agent is to do (a contract's goal when a contract is given). */
  task?: string;
  /** The model, as data; rebuilt inside each actor's thread. */
  provider: ProviderSpec;
  /** Replaces the default system prompt. */
  system?: string;
  /** The tree's ceilings; no child can raise them. */
  budget?: Budget;
  /**
   * Names the session for the vendors' prompt caches: the key sent (`prompt_cache_key`,
   * `x-session-affinity`) is a digest of it, never the name itself. Default: the tree's id.
   */
  session?: string;
  /** Turns the root's transcript begins with, before its opening turn: a session's earlier turns (see Session). */
  history?: TranscriptEntry[];
  /** False: the tree's agents are not offered spawn_agent, so the root works alone. Default true. */
  spawn?: boolean;
  /**
   * Directories holding skills (a folder with a SKILL.md whose front matter has `name` and
   * `description`; the directory itself, or the folders directly in it). The root is
   * offered read_skill and a catalogue line for each; its read policy decides each file.
   */
  skills?: SkillRoot[];
  /**
   * Named agents a spawn may ask for with `agent` (config.agents() gives a bundle's): each
   * a system prompt, deny rules and ceilings for the child. Stored with the tree, so a
   * resume keeps them.
   */
  agents?: AgentDefinition[];
  /**
   * True: the root's first completion decides what the run is. One that stops on text ends
   * the run there as a reply, with no step row, no gate and no checkpoint (its tokens drawn,
   * its call recorded); one with a tool call goes on from that same completion. What a
   * session's turns do; no gate is skipped for a contract that has one (see Session).
   */
  reply?: boolean;
  /** The longest inbox wait any agent of the tree may ask for. Default 30. */
  maxWaitSecs?: number;
  /** Overrides the supervisor's caps for this tree. */
  maxConcurrentAgents?: number;
  maxTotalAgents?: number;
  /**
   * Makes the tree a workspace run: the root works under this contract (its goal is the
   * task when `task` is left out), with the file tools, exec, gates and output schema.
   */
  contract?: TaskContract<Output>;
  /**
   * The shape the root's final answer must have, for a run without a contract (a contract
   * says it with `withOutputSchema`): a zod schema, an `OutputSchema` or a JSON Schema. The
   * answer is checked; one that does not fit is sent back to the model saying what was
   * wrong, twice at most; `result.output` is the parsed answer, typed by a zod schema's type.
   * The run stays a plain one: no workspace, and none of its tools or instructions.
   */
  outputSchema?: OutputSchemaInput<Output>;
  /** What the tree's agents may read, write, run and dial. Default for a workspace run: {@link Policy.default}. */
  policy?: Policy;
  /** Answers the policy's asks. Without one, every ask is denied. */
  approver?: Approver;
  /** Reviews the plan of a contract opened with a plan gate. Without one, the plan is stored and the run pauses. */
  planGate?: PlanGate;
  /** Answers an agent's questions about intent. Without one, the question is stored and the run pauses. */
  operator?: Operator;
  /** The embedder's own tools for this tree, besides the supervisor's (see `tool()`). */
  tools?: readonly Tool<never>[];
  /** Host models for this tree, besides the supervisor's: what a `{ kind: 'host', name }` provider asks. */
  models?: Record<string, HostModel>;
  /**
   * MCP servers for this tree, besides the supervisor's: each decided by the tree's policy
   * (a stdio server's command as an exec, an HTTP server's host as a dial), started or
   * dialled before the root's first step (stdio ones inside the run's containment), their
   * tools joining the tree's as `<server>__<tool>`, stopped when the tree ends. A server
   * that cannot be reached or is refused fails the tree before any run is stored.
   */
  mcp?: McpServerSpec[];
}

/** A number of at least 0 (milliseconds or seconds). */
const atLeastZero = (name: string, unit: string) =>
  z.custom<number>((value) => typeof value === 'number' && Number.isFinite(value) && value >= 0, {
    error: (issue) => `${name} must be a number of ${unit} of at least 0, got ${shownValue(issue.input)}`,
  });

/** Checked for its shape here; checkProviderSpec checks it through. */
const provider = z.custom<object>((value) => typeof value === 'object' && value !== null, {
  error: (issue) =>
    `provider must be a provider spec, e.g. OpenAI.create({ model: 'gpt-4.1' }), got ${shownValue(issue.input)}`,
});
/** Checked entry by entry by checkTools. */
const models = z.custom<Record<string, unknown>>(
  (value) => typeof value === 'object' && value !== null && !Array.isArray(value),
  { error: 'models must be an object of functions, { [name]: (request, signal) => answer }' },
);
const tools = z.custom<unknown[]>((value) => Array.isArray(value), {
  error: 'tools must be an array of tool({ ... }) values',
});
/** Checked server by server by checkSpecs. */
const mcp = z.custom<unknown[]>((value) => Array.isArray(value), {
  error: 'mcp must be an array of MCP servers: { name, command: [...] } or { name, url }',
});

/** A host's name in its leases: printable, no spaces, short enough to read in a trace. */
const hostName = z.custom<string>((value) => typeof value === 'string' && /^[\x21-\x7e]{1,200}$/.test(value), {
  error: (issue) =>
    `host must be a name of 1 to 200 printable characters without spaces (e.g. the machine's name), got ${shownValue(issue.input)}`,
});

const people = {
  approver: withMethod('approver', 'decide', 'new ApproveAll()'),
  planGate: withMethod('planGate', 'review', '{ review: async (plan) => ({ decision: "approve" }) }'),
  operator: withMethod('operator', 'answer', '{ answer: async (question) => "yes" }'),
};

export const supervisorOptionsSchema = z
  .strictObject({
    maxConcurrentAgents: whole('maxConcurrentAgents', 1).optional(),
    maxTotalAgents: whole('maxTotalAgents', 1).optional(),
    leaseTtlMs: whole('leaseTtlMs', 1).optional(),
    clock: withMethod('clock', 'now', 'systemClock').optional(),
    isolation: oneOf(
      'isolation',
      ['shared', 'thread', 'in-process'],
      "'shared' (many actors to a thread, the default), 'thread' (a thread each) or 'in-process' (on the calling thread, no worker thread at all)",
    ).optional(),
    threads: whole('threads', 1).optional(),
    idleThreadMs: atLeastZero('idleThreadMs', 'milliseconds').optional(),
    warmWorkers: whole('warmWorkers', 0).optional(),
    killAt: z.string().nullable().optional(),
    tools: tools.optional(),
    models: models.optional(),
    mcp: mcp.optional(),
    host: hostName.optional(),
    maxHostAgents: whole('maxHostAgents', 0).optional(),
    pollMs: whole('pollMs', 10).optional(),
  })
  .superRefine((options, context) => {
    // Each isolation has its own option: given with the other, it would do nothing.
    if (options.isolation === 'thread' && options.threads !== undefined) {
      context.addIssue({
        code: 'custom',
        message:
          "threads sizes the shared pool, and with isolation: 'thread' each agent has a thread of its own; drop threads, or drop isolation: 'thread' to share them",
      });
    }
    if (options.isolation === 'in-process' && (options.threads !== undefined || options.warmWorkers)) {
      context.addIssue({
        code: 'custom',
        message:
          "with isolation: 'in-process' the agents run on the calling thread and no worker thread starts; drop threads and warmWorkers, or pick 'shared' or 'thread'",
      });
    }
    if (options.isolation !== 'thread' && options.idleThreadMs !== undefined) {
      context.addIssue({
        code: 'custom',
        message:
          "idleThreadMs is how long an idle thread of isolation: 'thread' waits for the next agent; the shared pool's threads live as long as the supervisor. Drop it, or set isolation: 'thread'",
      });
    }
  });

export const runOptionsSchema = z.strictObject({
  task: text('task').optional(),
  provider,
  system: text('system').optional(),
  budget: z
    .custom<object>((value) => typeof value === 'object' && value !== null, {
      error: 'budget must be an object of ceilings, e.g. { steps: 50, tokens: 200000 }',
    })
    .optional(),
  session: text('session').optional(),
  history: z
    .array(
      z.custom<object>((value) => typeof value === 'object' && value !== null, {
        error: 'history entries are transcript turns ({ role, text })',
      }),
    )
    .optional(),
  maxWaitSecs: atLeastZero('maxWaitSecs', 'seconds').optional(),
  maxConcurrentAgents: whole('maxConcurrentAgents', 1).optional(),
  maxTotalAgents: whole('maxTotalAgents', 1).optional(),
  spawn: z.boolean({ error: 'spawn must be true or false' }).optional(),
  skills: z
    .array(
      z.union([text('skills'), z.strictObject({ root: text('skills[].root'), namespace: text('skills[].namespace') })]),
      { error: 'skills must be an array of directories (or { root, namespace })' },
    )
    .optional(),
  // Checked, definition by definition, by checkAgents.
  agents: z.unknown().optional(),
  reply: z.boolean({ error: 'reply must be true or false' }).optional(),
  contract: z.unknown().optional(),
  outputSchema: z
    .custom<object>((value) => typeof value === 'object' && value !== null && !Array.isArray(value), {
      error: 'outputSchema must be a zod schema, an OutputSchema or a JSON Schema object',
    })
    .optional(),
  policy: z.unknown().optional(),
  approver: people.approver.optional(),
  planGate: people.planGate.optional(),
  operator: people.operator.optional(),
  tools: tools.optional(),
  models: models.optional(),
  mcp: mcp.optional(),
});

export const resumeOptionsSchema = z.strictObject({
  provider: provider.optional(),
  approver: people.approver.optional(),
  reviewer: provider.optional(),
  planGate: people.planGate.optional(),
  operator: people.operator.optional(),
  tools: tools.optional(),
  models: models.optional(),
  mcp: mcp.optional(),
  acceptChanges: z.boolean({ error: 'acceptChanges must be true or false' }).optional(),
});

/** The shapes each schema accepts, as zod infers them. */
export type SupervisorOptionsShape = z.input<typeof supervisorOptionsSchema>;
export type RunOptionsShape = z.input<typeof runOptionsSchema>;
export type ResumeOptionsShape = z.input<typeof resumeOptionsSchema>;

/**
 * Checks `value` against `schema`: the value itself when it fits, else an
 * InvalidArgumentError naming every problem (an unknown option by name, with the options
 * there are), prefixed by `where`.
 */
export function checkOptions<T extends z.ZodObject>(schema: T, value: unknown, where: string): z.output<T> {
  if (value === undefined) value = {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidArgumentError(`${where}: options must be an object, got ${shownValue(value)}.`);
  }
  const parsed = schema.safeParse(value);
  if (parsed.success) return value as z.output<T>;
  const known = Object.keys(schema.shape).join(', ');
  const problems = problemsOf(
    parsed.error,
    (keys) =>
      `${keys.length === 1 ? 'there is no option' : 'there are no options'} ${quotedKeys(keys)} (the options are ${known})`,
  );
  throw new InvalidArgumentError(`${where}: ${problems.join('; ')}.`);
}

/** The options' names and the schemas' keys agree: a new option is added to both or fails to compile. */
type SameKeys<A, B> = [keyof A] extends [keyof B] ? ([keyof B] extends [keyof A] ? true : never) : never;
const optionKeysAgree: [
  SameKeys<SupervisorOptions, SupervisorOptionsShape>,
  SameKeys<RunOptions, RunOptionsShape>,
  SameKeys<ResumeOptions, ResumeOptionsShape>,
] = [true, true, true];
void optionKeysAgree;
