/**
 * The tree tools every agent has: spawn_agent (a child with this agent's policy, narrowed,
 * and a budget no larger than what is left), send_message and read_messages (mail inside
 * the tree, delivered when the step commits and consumed exactly once).
 */
import { randomUUID } from 'node:crypto';
import type { StoreOperations } from '../../../store/port.js';
import type { AgentDefinition } from '../../agents.js';
import type { ArgumentSchema } from '../../arguments.js';
import { Policy, type PolicyData } from '../../policy/policy.js';
import { commonGitDir, worktreeBranch, worktreePath } from '../../workspace/worktree.js';
import type { AgentCall, MailWait, RunContext } from '../context.js';
import type { Tool, ToolResult } from '../tool.js';

export interface SpawnArgs {
  task: string;
  /** A named agent of the tree's roster: its system prompt, deny rules and ceilings. */
  agent?: string;
  as?: string;
  wait?: boolean;
  background_after_secs?: number;
  budget?: { steps?: number; tokens?: number; wall_secs?: number };
  max_wait_secs?: number;
  policy?: { deny?: RuleLists; allow?: RuleLists };
}

/** Patterns per act, as a spawn names them. */
export interface RuleLists {
  read?: string[];
  write?: string[];
  exec?: string[];
  net?: string[];
}

const RULE_LISTS: ArgumentSchema = {
  type: 'object',
  properties: {
    read: { type: 'array', items: { type: 'string', minLength: 1 } },
    write: { type: 'array', items: { type: 'string', minLength: 1 } },
    exec: { type: 'array', items: { type: 'string', minLength: 1 } },
    net: { type: 'array', items: { type: 'string', minLength: 1 } },
  },
  additionalProperties: false,
};

export interface SendArgs {
  to: string;
  body: string;
}

export interface ReadArgs {
  wait_secs?: number;
  limit?: number;
}

const spawnParameters: ArgumentSchema = {
  type: 'object',
  properties: {
    task: { type: 'string', minLength: 1, description: 'What the new agent is to do.' },
    agent: {
      type: 'string',
      maxLength: 130,
      description: 'Start one of the named agents the system prompt lists, with its own instructions and limits.',
    },
    as: {
      type: 'string',
      description: 'An address for the new agent, unique within this tree; derived from yours when omitted.',
    },
    wait: {
      type: 'boolean',
      description: 'Wait for the agent to finish and return its result (default true). False returns at once.',
    },
    background_after_secs: {
      type: 'number',
      exclusiveMinimum: 0,
      description: 'With wait, stop waiting after this many seconds; the agent carries on and reports to your inbox.',
    },
    budget: {
      type: 'object',
      description: 'Ceilings for the new agent; never more than you have left.',
      properties: {
        steps: { type: 'integer', minimum: 0 },
        tokens: { type: 'integer', minimum: 0 },
        wall_secs: { type: 'number', minimum: 0 },
      },
      additionalProperties: false,
    },
    max_wait_secs: {
      type: 'number',
      minimum: 0,
      description: 'Lower the longest inbox wait the new agent may ask for.',
    },
    policy: {
      type: 'object',
      description:
        'Narrow what the new agent may do: `deny` adds rules (patterns per act) on top of your own policy. A child can never be allowed more than you.',
      properties: { deny: RULE_LISTS, allow: RULE_LISTS },
      additionalProperties: false,
    },
  },
  required: ['task'],
  additionalProperties: false,
};

const sendParameters: ArgumentSchema = {
  type: 'object',
  properties: {
    to: { type: 'string', minLength: 1, description: 'The address of an agent in this tree.' },
    body: { type: 'string', description: 'The message.' },
  },
  required: ['to', 'body'],
  additionalProperties: false,
};

const readParameters: ArgumentSchema = {
  type: 'object',
  properties: {
    wait_secs: {
      type: 'number',
      minimum: 0,
      description: 'If the inbox is empty, wait up to this many seconds for a message (capped by the run).',
    },
    limit: {
      type: 'integer',
      minimum: 1,
      description: 'Return at most this many messages; the rest stay for a later read.',
    },
  },
  additionalProperties: false,
};

/** Wakes an inbox wait when mail for this agent is committed, or the run is cancelled. */
export class MailWake implements MailWait {
  #waiter: (() => void) | null = null;

  wake(): void {
    this.#waiter?.();
  }

  /** Resolves `elapsed` after `ms`, or `woken` at the next wake. */
  wait(ms: number): Promise<'woken' | 'elapsed'> {
    return new Promise<'woken' | 'elapsed'>((resolve) => {
      const done = (how: 'woken' | 'elapsed'): void => {
        clearTimeout(timer);
        this.#waiter = null;
        resolve(how);
      };
      const timer = setTimeout(() => done('elapsed'), ms);
      this.#waiter = () => done('woken');
    });
  }
}

/** What the store answers a spawn. */
type SpawnReply = StoreOperations['spawn'][1];

/**
 * A spawn's checks and its reservation: the refusal when a check fails, else the store's
 * reply to come (the request is sent now).
 */
function reserve(
  context: RunContext,
  args: SpawnArgs,
  callIndex: number,
  call: AgentCall | null,
): ToolResult | Promise<SpawnReply> {
  const { run } = context;
  if (context.planning) {
    const reason = 'spawn_agent waits for an approved plan: this run is in its planning phase; call submit_plan.';
    return { content: reason, isError: true, refusal: { rule: 'plan-gate', reason } };
  }
  // Inherit and narrow: a child gets this agent's policy plus deny-only layers, never more.
  const widened = Object.entries(args.policy?.allow ?? {}).filter(([, list]) => (list ?? []).length > 0);
  if (widened.length > 0) {
    const reason = `a child inherits your policy and can only narrow it; the spawn asked to allow ${widened
      .map(([act, list]) => `${act} ${(list ?? []).join(', ')}`)
      .join('; ')}, which you cannot grant.`;
    return {
      content: `spawn refused (policy.narrow-only): ${reason}`,
      isError: true,
      refusal: { rule: 'policy.narrow-only', reason },
    };
  }
  let definition: AgentDefinition | undefined;
  if (args.agent !== undefined) {
    definition = context.agents.find((item) => item.name === args.agent);
    if (!definition) {
      const known = context.agents.map((item) => item.name);
      const reason = `there is no agent ${JSON.stringify(args.agent)} to start; ${known.length > 0 ? `the roster has ${known.join(', ')}` : 'this tree has no named agents'}.`;
      return {
        content: `spawn refused (spawn.agent): ${reason}`,
        isError: true,
        refusal: { rule: 'spawn.agent', reason },
      };
    }
  }
  // A roster agent's own deny rules come first, in a layer named after it; then what the spawn itself narrows.
  const layers: [string, RuleLists][] = [];
  if (definition?.deny) layers.push([definition.name, definition.deny]);
  const deny = args.policy?.deny;
  if (deny) layers.push([`narrowed for ${args.as ?? 'a child'} by ${run.address}`, deny]);
  let policy: PolicyData | undefined;
  for (const [name, lists] of layers) {
    if (!Object.values(lists).some((list) => (list ?? []).length > 0)) continue;
    let narrowed = (
      policy ? Policy.from(policy) : context.policyData ? Policy.from(context.policyData) : Policy.default()
    ).layer(name);
    for (const pattern of lists.read ?? []) narrowed = narrowed.denyRead(pattern);
    for (const pattern of lists.write ?? []) narrowed = narrowed.denyWrite(pattern);
    for (const pattern of lists.exec ?? []) narrowed = narrowed.denyExec(pattern);
    for (const pattern of lists.net ?? []) narrowed = narrowed.denyNet(pattern);
    policy = narrowed.toJSON();
  }
  // The lower of the definition's ceiling and the spawn's own; the store clamps both to what the parent has left.
  const lower = (a: number | undefined, b: number | undefined) =>
    a === undefined ? (b ?? null) : b === undefined ? a : Math.min(a, b);
  const wallSecs = lower(definition?.budget?.wallSecs, args.budget?.wall_secs);
  const asked = {
    steps: lower(definition?.budget?.steps, args.budget?.steps),
    tokens: lower(definition?.budget?.tokens, args.budget?.tokens),
    wallMs: wallSecs === null ? null : Math.round(wallSecs * 1000),
  };
  const request = {
    ...context.fence,
    key: `${run.runId}:${context.seq}:${callIndex}`,
    task: args.task,
    as: args.as ?? null,
    asked,
    maxWaitSecs: args.max_wait_secs ?? null,
    newRunId: randomUUID(),
    queueNow: args.wait !== false,
    ...(policy ? { policy } : {}),
    ...(definition
      ? {
          system: definition.system,
          // Named for the agent under its parent; one too long for an address is numbered as any child is.
          ...(`${run.address}.${definition.name}`.length <= 56
            ? { addressHint: `${run.address}.${definition.name}` }
            : {}),
        }
      : {}),
    now: context.clock.now(),
  };
  if (!definition?.worktree) return context.store.call('spawn', request);
  return childWorktree(context, definition.name, request.newRunId, call).then((made) =>
    'refused' in made ? made.refused : context.store.call('spawn', { ...request, ...made }),
  );
}

/** Whether the roster agent `name` works in a worktree of its own. */
function inWorktree(context: RunContext, name: unknown): boolean {
  return context.agents.some((agent) => agent.name === name && agent.worktree === true);
}

/**
 * The contract of a child whose definition asks for a worktree of its own: its parent's,
 * rooted at the worktree (made by the child as it starts; see workspace/worktree.ts), on a
 * branch named for it, from the parent's HEAD. Making it is decided here, in the parent's
 * step, as the git command it is (the policy's command rules, the approver where one
 * asks). Refused where the parent has no git tools, no commit to start from, or the
 * policy says no.
 */
async function childWorktree(
  context: RunContext,
  agent: string,
  runId: string,
  call: AgentCall | null,
): Promise<{ contract: unknown; briefing: string } | { refused: SpawnReply }> {
  const refuse = (reason: string, rule = 'spawn.worktree') => ({
    refused: { status: 'refused' as const, rule, reason },
  });
  const contract = context.contract;
  const workspace = call?.workspace ?? null;
  if (!contract?.git || !workspace || !call)
    return refuse(`${agent} works in a git worktree of its own, and this run has no git tools to make one with.`);
  const gitDir = commonGitDir(contract.root, contract.worktree);
  if (gitDir === null)
    return refuse(
      `${agent} works in a git worktree of its own, and ${contract.root} is not the top of a git repository.`,
    );
  // Loaded here: a run that never asks for a worktree does not load the git tools (nor the command rules).
  const [{ gitProgram, headCommit }, { checkArgv }] = await Promise.all([
    import('./git.js'),
    import('../../policy/commands/index.js'),
  ]);
  const branch = worktreeBranch(agent, runId);
  const root = worktreePath(gitDir, runId);
  const argv = [gitProgram() ?? 'git', 'worktree', 'add', '-b', branch, '--', root];
  const decided = await call.authorizeCommand(
    { kind: 'exec', argv, cwd: contract.root },
    checkArgv(argv, workspace.policy, contract.root),
  );
  if (decided)
    return refuse(
      `${agent} works in a git worktree of its own, and making it was refused: ${decided.content}`,
      decided.refusal?.rule ?? 'spawn.worktree',
    );
  const base = await headCommit(workspace);
  if (base === null)
    return refuse(
      `${agent} works in a git worktree made from your HEAD, and the repository has no commit yet: commit first.`,
    );
  const checkout = contract.worktree?.checkout ?? contract.root;
  const child = { ...contract, root, worktree: { gitDir, repository: contract.root, checkout, branch, base } };
  // Its briefing, stored with it as every run's is (its toolchain as the checkout it is made from has it).
  const { briefingFor } = await import('../../workspace/session.js');
  return { contract: child, briefing: briefingFor(child, contract.root) };
}

/**
 * Reserves ahead the spawns without `wait` among `calls` from `from` on, up to the first
 * call that is not one (a waited spawn starts its child at once, so it is never reserved
 * ahead). Their requests reach the store together, in call order, so a root spawning a
 * thousand agents pays about one round trip, not a thousand.
 */
export function reserveAhead(
  context: RunContext,
  calls: readonly { name: string; args: Record<string, unknown> }[],
  from: number,
  eligible: (index: number) => boolean,
): void {
  const reservations = context.step.reservations;
  // Reserved by an earlier call's pass, which went on to the end of the run of spawns: each
  // call of a thousand looks only at itself, not at every call after it.
  if (reservations.has(from)) return;
  for (let index = from; index < calls.length; index++) {
    const call = calls[index] as { name: string; args: Record<string, unknown> };
    if (call.name !== 'spawn_agent' || call.args.wait !== false) return;
    if (reservations.has(index)) continue;
    if (!eligible(index)) return;
    // A worktree is made from HEAD as its call comes: reserved then, in call order.
    if (inWorktree(context, call.args.agent)) return;
    const reserved = reserve(context, call.args as unknown as SpawnArgs, index, null);
    // A refusal needs no reservation: the call itself finds it again.
    if (!(reserved instanceof Promise)) continue;
    // Taken by its call, or dropped with the step; a failure is the call's to report.
    reserved.catch(() => undefined);
    reservations.set(index, reserved);
  }
}

export async function spawn(
  context: RunContext,
  args: SpawnArgs,
  callIndex: number,
  call: AgentCall | null,
): Promise<ToolResult> {
  const { run, step } = context;
  const ahead = step.reservations.get(callIndex) as Promise<SpawnReply> | undefined;
  step.reservations.delete(callIndex);
  const reserved = ahead ?? reserve(context, args, callIndex, call);
  if (!(reserved instanceof Promise)) return reserved;
  const result = await reserved;
  if (result.status === 'refused') {
    return {
      content: `spawn refused (${result.rule}): ${result.reason}`,
      isError: true,
      refusal: { rule: result.rule, reason: result.reason },
    };
  }
  const branch = inWorktree(context, args.agent) ? worktreeBranch(args.agent as string, result.childId) : undefined;
  const clampNote =
    (result.clamps.length === 0
      ? ''
      : ` Its budget was narrowed to what you have left: ${result.clamps.map((c) => `${c.field} ${c.asked} -> ${c.granted}`).join(', ')}.`) +
    (branch
      ? ` It works in a git worktree of its own, on branch ${branch}: git_diff with that branch shows its commits.`
      : '');
  if (args.wait === false) {
    if (result.childStatus === 'pending') step.spawned.push(result.childId);
    return {
      content: `spawned agent ${result.address}; it starts once this step commits and reports to your inbox when it ends.${clampNote}`,
      isError: false,
    };
  }
  const timeoutMs = args.background_after_secs === undefined ? null : Math.round(args.background_after_secs * 1000);
  const waited = await context.host.waitChild({ runId: run.runId, childId: result.childId, timeoutMs });
  if (waited.status === 'background') {
    return {
      content: `agent ${result.address} is still working after ${args.background_after_secs}s; it carries on in the background and will report to your inbox.${clampNote}`,
      isError: false,
    };
  }
  return {
    content: JSON.stringify({
      agent: result.address,
      status: waited.childStatus,
      reply: waited.reply,
      reason: waited.childStatus === 'finished' ? undefined : waited.reason,
      cost: { steps: waited.steps, tokens: waited.tokens },
      branch,
      narrowed: result.clamps.length === 0 ? undefined : clampNote.trim(),
    }),
    isError: waited.childStatus !== 'finished',
  };
}

export async function send(context: RunContext, args: SendArgs): Promise<ToolResult> {
  if (!(await context.store.hasAddress(context.run.rootId, args.to))) {
    const reason = `no agent has the address ${JSON.stringify(args.to)} in this tree; an address reaches only inside its own tree.`;
    return { content: reason, isError: true, refusal: { rule: 'mailbox.tree', reason } };
  }
  context.step.sent.push({ to: args.to, body: args.body });
  return { content: `sent to ${args.to}; it is delivered when this step commits.`, isError: false };
}

export async function read(context: RunContext, args: ReadArgs, mail: MailWait): Promise<ToolResult> {
  const { run, step } = context;
  const account = await context.store.account(run.runId);
  const cap = account?.maxWaitSecs ?? 30;
  const asked = args.wait_secs ?? 0;
  const waitSecs = Math.min(asked, cap);
  // The deadline is read on the run's clock; the wait itself is a real timer, so a clock
  // that does not move (a test's) still ends a wait once its time has passed for real.
  const deadline = context.clock.now() + waitSecs * 1000;
  const taken = new Set(step.consumed);
  let elapsed = false;
  for (;;) {
    const fresh = (await context.store.inbox(run.rootId, run.address))
      .filter((message) => !taken.has(message.msgId))
      .slice(0, args.limit ?? Number.POSITIVE_INFINITY);
    if (fresh.length > 0) {
      for (const message of fresh) step.consumed.push(message.msgId);
      return {
        content: JSON.stringify(
          fresh.map((message) => ({ id: message.msgId, from: message.fromAddress, body: message.body })),
        ),
        isError: false,
      };
    }
    const left = deadline - context.clock.now();
    if (elapsed || left <= 0 || context.cancelled) break;
    elapsed = (await mail.wait(left)) === 'elapsed';
  }
  const capped = asked > cap ? ` (the wait asked for ${asked}s was capped at ${cap}s)` : '';
  return { content: `no messages${waitSecs > 0 ? ` after waiting ${waitSecs}s` : ''}${capped}.`, isError: false };
}

/** The tree tools, declared: what the model sees of each, and what a call does. */
export const TREE_TOOLS: readonly Tool<AgentCall>[] = [
  {
    name: 'spawn_agent',
    description:
      'Start a sub-agent on a task. It shares this tree\u2019s budget ledger and can only narrow it. Returns its result when waited for.',
    parameters: spawnParameters,
    kind: 'acts',
    execute: (args, call) => spawn(call.agent, args as unknown as SpawnArgs, call.callIndex, call),
  },
  {
    name: 'send_message',
    description: 'Send a message to another agent of this tree by its address. It is delivered when this step commits.',
    parameters: sendParameters,
    kind: 'acts',
    execute: (args, call) => send(call.agent, args as unknown as SendArgs),
  },
  {
    name: 'read_messages',
    description: 'Read the messages sent to you, oldest first; each is returned exactly once. May wait a bounded time.',
    parameters: readParameters,
    kind: 'reads',
    execute: (args, call) => read(call.agent, args as ReadArgs, call.mail),
  },
];
