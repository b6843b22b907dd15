/**
 * The one-shot entry point: hand it a contract and a provider, get back an outcome.
 * It drives one tree to its end on the store's shared supervisor (./shared.ts: started by
 * the first call, reused by the next, holding nothing up while idle), or on a supervisor
 * of its own when its options cannot share one. Embedders who want the event bus, or a
 * supervisor's lifetime in their hands, hold a Supervisor themselves and read the same
 * outcome with {@link outcomeOf}.
 */

import { InvalidArgumentError } from '../errors.js';
import type { McpServerSpec } from '../mcp/spec.js';
import type { Budget } from '../runtime/budget.js';
import { TaskContract } from '../runtime/contract/contract.js';
import type { OutputSchemaInput } from '../runtime/contract/output-schema.js';
import type { Approver, Operator, PlanGate } from '../runtime/policy/approval.js';
import { Policy } from '../runtime/policy/policy.js';
import type { ProviderSpec, TranscriptEntry } from '../runtime/provider.js';
import type { HostModel } from '../runtime/providers/host-model.js';
import type { HostTool as Tool } from '../runtime/tools/host-tool.js';
import type { PostgresStore } from '../store/postgres/index.js';
import type { Store } from '../store/sqlite/store.js';
import { outcomeQuery, type RunResult } from './outcome.js';
import { onSharedSupervisor } from './shared.js';

export { type Outcome, outcomeOf, outcomeQuery, type RunResult } from './outcome.js';

import type { RetriedGate, RunOptions, Supervisor, SupervisorOptions } from './supervisor.js';

export interface RunWithOptions {
  /** Names the session for the vendors' prompt caches (see RunOptions.session). */
  session?: string;
  /** Turns the root's transcript begins with (a session's earlier turns; see {@link Session}). */
  history?: TranscriptEntry[];
  /** The tree's own caps on its agents (see RunOptions). */
  maxTotalAgents?: number;
  maxConcurrentAgents?: number;
  /** False: no agent of the tree is offered spawn_agent (see RunOptions.spawn). */
  spawn?: boolean;
  /** True: a first completion that stops on text ends the run as a reply, with no step (see RunOptions.reply). */
  reply?: boolean;
  /**
   * Options for the supervisor the run is on (a contract's lease ttl wins over `leaseTtlMs`).
   * Calls on one store whose options are the same plain values (none at all, say) share one
   * supervisor; options holding a clock, tools, models, MCP servers or in-process isolation
   * get a supervisor of their own, started and closed with the call.
   */
  supervisor?: SupervisorOptions;
  /** Reviews the plan of a contract opened with a plan gate; without one the plan is stored and the run pauses. */
  planGate?: PlanGate;
  /** Answers the agent's questions about intent; without one the question is stored and the run pauses. */
  operator?: Operator;
  /**
   * Receives the supervisor the run is on and its root's id, e.g. to observe the tree's events
   * or cancel it; a promise it returns is awaited. A shared supervisor drives other calls'
   * trees too: filter by `rootId`, unsubscribe when the call returns, and close it only to
   * end every call on it.
   */
  onStart?: (supervisor: Supervisor<Store | PostgresStore>, rootId: string) => unknown;
  /** The embedder's own tools for the run (made with `tool()`). */
  tools?: readonly Tool<never>[];
  /** Host models for the run: what a `{ kind: 'host', name }` provider asks (see RunOptions.models). */
  models?: Record<string, HostModel>;
  /**
   * MCP servers for this run: decided by its policy, started (stdio, inside its
   * containment) or dialled (HTTP) before it, their tools joining `tools` as
   * `<server>__<tool>`, stopped when it ends (see RunOptions.mcp). A resume needs them
   * again: `supervisor.resume(runId, { mcp })`.
   */
  mcp?: McpServerSpec[];
  /** Directories holding skills for the run (see RunOptions.skills). */
  skills?: string[];
}

/**
 * A run with no workspace and no contract, as runWith takes it: the task is the first
 * argument, and these its options. Such a run is offered no file tools or commands and
 * none of their instructions: its first request is the task, the embedder's tools, and
 * (with `outputSchema`) the answer's shape.
 */
export interface PlainRunOptions<Output = unknown> extends RunWithOptions {
  /** The shape the answer must have: checked, re-prompted twice at most, parsed into `output` (see RunOptions.outputSchema). */
  outputSchema?: OutputSchemaInput<Output>;
  /** Replaces the default system prompt. */
  system?: string;
  /** The run's ceilings. */
  budget?: Budget;
  /** What its agents may read, write, run and dial (the embedder's tools are decided by it). */
  policy?: Policy;
  /** Answers the policy's asks. */
  approver?: Approver;
}

/** What a run is made from: a contract (a workspace run), or a task and a plain run's options. */
export type RunTarget<Output> = { contract: TaskContract<Output> } | { task: string; plain: PlainRunOptions<Output> };

/**
 * Runs a task to its outcome: a plain run (no workspace; a typed answer with `outputSchema`),
 * or, given a contract, a workspace run.
 *
 * @example
 * const Summary = z.object({ title: z.string(), points: z.array(z.string()) });
 * const result = await runWith('Summarise the release notes below: ...', provider, store, { outputSchema: Summary });
 * if (result.output) console.log(result.output.title);
 */
export async function runWith<Output = unknown>(
  task: string,
  provider: ProviderSpec,
  store: Store | PostgresStore,
  options?: PlainRunOptions<Output>,
): Promise<RunResult<Output>>;
/**
 * Runs a contract to its outcome.
 *
 * @example
 * const store = await Store.open('runs.db');
 * const contract = TaskContract.workspace('the tests fail; fix them', repoDir)
 *   .withVerification(Verification.command(['npm', 'test']));
 * const policy = Policy.default().layer('app').allowExec('npm test*');
 * const result = await runWith(contract, OpenRouter.fromEnv(), store, policy, new ApproveAll());
 * if (result.outcome.kind === 'finished') console.log(result.reply);
 */
export async function runWith<Output = unknown>(
  contract: TaskContract<Output>,
  provider: ProviderSpec,
  store: Store | PostgresStore,
  policy?: Policy,
  approver?: Approver,
  options?: RunWithOptions,
): Promise<RunResult<Output>>;
export async function runWith<Output = unknown>(
  first: TaskContract<Output> | string,
  provider: ProviderSpec,
  store: Store | PostgresStore,
  fourth?: Policy | PlainRunOptions<Output>,
  approver?: Approver,
  options: RunWithOptions = {},
): Promise<RunResult<Output>> {
  if (typeof first === 'string') {
    if (fourth instanceof Policy)
      throw new InvalidArgumentError(
        'runWith(task, provider, store, options): a plain run takes its policy in options ({ policy }); a workspace run is runWith(contract, provider, store, policy).',
      );
    const plain = (fourth ?? {}) as PlainRunOptions<Output>;
    return onSharedSupervisor(store, plain.supervisor ?? {}, (supervisor) =>
      runOn(supervisor, { task: first, plain }, provider, plain.policy ?? null, plain.approver, plain),
    );
  }
  if (!(first instanceof TaskContract)) {
    throw new InvalidArgumentError(
      'runWith needs a task or a TaskContract first, e.g. runWith("summarise this", provider, store) or TaskContract.workspace("the tests fail; fix them", repoDir).',
    );
  }
  const data = first.toJSON();
  const supervisorOptions = {
    ...options.supervisor,
    ...(data.leaseTtlMs === null ? {} : { leaseTtlMs: data.leaseTtlMs }),
  };
  return onSharedSupervisor(store, supervisorOptions, (supervisor) =>
    runOn(supervisor, first, provider, (fourth as Policy | undefined) ?? Policy.default(), approver, options),
  );
}

/** runWith on a supervisor already running (a session given one): the run's tree, to its outcome; the supervisor stays up. */
export async function runOn<Output = unknown>(
  supervisor: Supervisor<Store | PostgresStore>,
  target: TaskContract<Output> | RunTarget<Output>,
  provider: ProviderSpec,
  policy: Policy | null,
  approver: Approver | undefined,
  options: RunWithOptions,
): Promise<RunResult<Output>> {
  const made: RunTarget<Output> = target instanceof TaskContract ? { contract: target } : target;
  const runOptions: RunOptions<Output> = {
    ...('contract' in made
      ? { contract: made.contract }
      : {
          task: made.task,
          ...(made.plain.outputSchema === undefined ? {} : { outputSchema: made.plain.outputSchema }),
          ...(made.plain.system === undefined ? {} : { system: made.plain.system }),
          ...(made.plain.budget === undefined ? {} : { budget: made.plain.budget }),
        }),
    provider,
    ...(policy ? { policy } : {}),
    ...(approver ? { approver } : {}),
    ...(options.session ? { session: options.session } : {}),
    ...(options.history ? { history: options.history } : {}),
    ...(options.planGate ? { planGate: options.planGate } : {}),
    ...(options.operator ? { operator: options.operator } : {}),
    ...(options.tools ? { tools: options.tools } : {}),
    ...(options.models ? { models: options.models } : {}),
    ...(options.mcp ? { mcp: options.mcp } : {}),
    ...(options.maxTotalAgents === undefined ? {} : { maxTotalAgents: options.maxTotalAgents }),
    ...(options.maxConcurrentAgents === undefined ? {} : { maxConcurrentAgents: options.maxConcurrentAgents }),
    ...(options.spawn === undefined ? {} : { spawn: options.spawn }),
    ...(options.reply === undefined ? {} : { reply: options.reply }),
    ...(options.skills === undefined ? {} : { skills: options.skills }),
  };
  const handle = supervisor.run(runOptions);
  try {
    await options.onStart?.(supervisor, handle.rootId);
  } catch (error) {
    // Nothing the caller set up holds the tree: it does not run on unowned.
    await handle.cancel().catch(() => undefined);
    await handle.result.catch(() => undefined);
    throw error;
  }
  await handle.result;
  // The answer was checked against the contract's own schema: the type holds.
  return (await supervisor.read(outcomeQuery(handle.rootId))) as RunResult<Output>;
}

/**
 * {@link Supervisor.retryGate} for when no supervisor of the embedder's is running: on the
 * store's shared supervisor, re-runs the run's gate against the workspace it left and
 * records the evaluation.
 */
export async function retryGate(
  store: Store | PostgresStore,
  runId: string,
  options: { reviewer?: ProviderSpec } = {},
): Promise<RetriedGate> {
  return onSharedSupervisor(store, {}, (supervisor) => supervisor.retryGate(runId, options));
}
