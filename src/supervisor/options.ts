/**
 * What users hand the supervisor, checked at the edge: one zod schema per options object
 * (Supervisor.start, run, resume), strict about its keys, with messages that say what was
 * wrong and what to do. The deeper checks (a provider spec, a budget, the tools) stay with
 * what they check and run after the shape is known to be right. Main thread only: agent
 * threads never load zod (its start cost was measured at ~40 ms a thread).
 */
import { z } from 'zod';
import { InvalidArgumentError, shownValue } from '../errors.js';
import { oneOf, problemsOf, quotedKeys, text, wholeNumber as whole, withMethod } from '../runtime/edges.js';

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
  policy: z.unknown().optional(),
  approver: people.approver.optional(),
  planGate: people.planGate.optional(),
  operator: people.operator.optional(),
  tools: tools.optional(),
  mcp: mcp.optional(),
});

export const resumeOptionsSchema = z.strictObject({
  provider: provider.optional(),
  approver: people.approver.optional(),
  reviewer: provider.optional(),
  planGate: people.planGate.optional(),
  operator: people.operator.optional(),
  tools: tools.optional(),
  mcp: mcp.optional(),
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
