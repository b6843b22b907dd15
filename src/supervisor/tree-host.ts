/**
 * The tree host: the services of one tree that run on the embedder's thread, as its actors
 * reach them over the host channel (../actors/host-channel.ts) — its approver, plan gate and
 * operator, the waits on its children, the embedder's tools and host models, and the tree's MCP servers'.
 * Everything here is user code or waits on it; a throw of user code answers the actor that
 * asked, never the embedder's process.
 */
import { serveHost } from '../actors/host-channel.js';
import { ErrorCode, HarnessError, InvalidArgumentError } from '../errors.js';
import type { McpConnectOptions } from '../mcp/client.js';
import { checkSpecs, type McpServerSpec } from '../mcp/spec.js';
import type { ContractData } from '../runtime/contract/contract.js';
import { isTerminal } from '../runtime/events.js';
import type {
  ApprovalAnswer,
  ApprovalRequest,
  Approver,
  Operator,
  OperatorQuestion,
  PlanDecision,
  PlanGate,
  PlanReview,
} from '../runtime/policy/approval.js';
import type { Policy } from '../runtime/policy/policy.js';
import type { Completion, ProviderSpec } from '../runtime/provider.js';
import {
  answerHostModel,
  type HostModel,
  type HostModelCall,
  hostModelNames,
} from '../runtime/providers/host-model.js';
import { checkTools, type HostTool, type ToolDefinitionData } from '../runtime/tools/host-tool.js';
import type { HostToolCall, WaitChildResult } from '../runtime/tools/ports.js';
import { TraceQueries } from '../store/queries.js';
import type { RunSpec } from '../store/records.js';
import type { Q } from '../store/sql.js';
import { toolDigest } from './fingerprint.js';
import type { Slot } from './tree.js';

/** The reads the tree host makes, run on whichever backend holds the store. */
const reads = new TraceQueries();

/** What a tree host reaches of the supervisor. */
export interface TreeHostPorts {
  read<T>(body: Q<T>): Promise<T>;
  /** A tree's MCP servers from connecting to stopped: what close() waits for. */
  track(lifetime: Promise<void>): void;
}

/** The people a tree's runs may ask: each null when this process was given none. */
export interface TreePeople {
  /** Answers the policy's asks for every agent of the tree; null denies them. */
  approver: Approver | null;
  planGate: PlanGate | null;
  operator: Operator | null;
}

/** What a tree's stored spec keeps of a tool: enough to refuse a resume that does not give it back as it was. */
export type StoredTool = NonNullable<RunSpec['tools']>[number];

export class TreeHost {
  readonly approver: Approver | null;
  readonly planGate: PlanGate | null;
  readonly operator: Operator | null;
  /** The embedder's tools this tree has, by name; they run on this thread. */
  readonly tools: Map<string, HostTool<never>>;
  /** The host models this tree's runs may ask, by name; they answer on this thread. */
  readonly models: ReadonlyMap<string, HostModel>;
  /** Their definitions as the actors get them, sorted by name. */
  toolDefinitions: ToolDefinitionData[];
  /** The tools that came from the tree's MCP servers: the server of each, by tool name. */
  readonly serverTools = new Map<string, string>();
  /** Fires when the tree is cancelled or stops here: what a tool's call is told to stop by. */
  readonly #abort = new AbortController();
  /** Parents waiting on a child to end, by the child's run id. */
  readonly #waiters = new Map<string, (() => void)[]>();
  /** Tool calls running on this thread, by run and call id: what `abortTool` stops. */
  readonly #toolCalls = new Map<string, AbortController>();
  readonly #ports: TreeHostPorts;

  constructor(
    people: TreePeople,
    tools: readonly HostTool<never>[],
    models: ReadonlyMap<string, HostModel>,
    ports: TreeHostPorts,
  ) {
    this.models = models;
    this.approver = people.approver;
    this.planGate = people.planGate;
    this.operator = people.operator;
    this.tools = new Map(tools.map((item) => [item.name, item]));
    this.toolDefinitions = tools.map((item) => item.definition).sort(byName);
    this.#ports = ports;
  }

  /** The tree was cancelled or stopped here: every tool call of it is told to stop. */
  abort(): void {
    this.#abort.abort();
  }

  /** Serves what the slot's actor asks of this thread over its host channel. */
  serve(slot: Slot): void {
    serveHost(
      {
        approve: (request) => this.#approve(request),
        reviewPlan: (plan) => this.#reviewPlan(plan),
        askOperator: (question) => this.#askOperator(question),
        waitChild: (request) => this.#waitChild(slot, request),
        callTool: (call) => this.#callTool(slot, call),
        checkTool: async (request) => {
          const found = this.#treeTool(slot, request.runId, request.name);
          return 'tool' in found ? found.tool.check(request.args) : found.missing;
        },
        abortTool: async (request) => {
          this.#toolCalls.get(`${request.runId}:${request.callId}`)?.abort();
        },
        complete: (call) => this.#complete(slot, call),
      },
      slot.actor.host,
    );
  }

  /**
   * Starts or dials the tree's MCP servers and adds their tools to the tree's. The servers
   * stop when `until` (the tree's result) settles, and close() waits for that. Loaded only
   * here: the protocol's SDK stays out of a program whose trees have no servers.
   */
  async connectServers(
    specs: McpServerSpec[],
    options: McpConnectOptions,
    where: string,
    until: Promise<unknown>,
  ): Promise<void> {
    const { McpServers } = await import('../mcp/client.js');
    const connecting = McpServers.connect(specs, options);
    this.#ports.track(
      connecting.then(
        async (servers) => {
          await until.catch(() => undefined);
          await servers.close();
        },
        () => undefined,
      ),
    );
    const servers = await connecting;
    const names = specs.map((spec) => spec.name);
    for (const item of servers.tools()) {
      if (this.tools.has(item.name)) {
        throw new InvalidArgumentError(
          `${where}: the MCP server ${serverOf(item.name, names)} offers ${item.name}, and the tree has a tool of that name already; rename the server or the tool.`,
        );
      }
      this.tools.set(item.name, item);
      this.serverTools.set(item.name, serverOf(item.name, names));
    }
    this.toolDefinitions = [...this.tools.values()].map((item) => item.definition).sort(byName);
  }

  /** The tools as the tree's stored spec keeps them. */
  storedTools(): StoredTool[] {
    return this.toolDefinitions.map((item) => storedTool(item, this.serverTools.get(item.name)));
  }

  /** The tool `name` of the tree whose run `runId` this actor drives, or what the model is told when there is none. */
  #treeTool(slot: Slot, runId: string, name: string): { tool: HostTool<never> } | { missing: string } {
    if (slot.runId !== runId)
      throw new HarnessError(ErrorCode.Internal, `a tool call for run ${runId} from another run's actor`);
    const tool = this.tools.get(name);
    return tool ? { tool } : { missing: `there is no tool named ${JSON.stringify(name)} in this process.` };
  }

  /** Runs one of the tree's own tools for an agent: validated, bounded, and never a throw into the tree. */
  async #callTool(slot: Slot, call: HostToolCall): Promise<{ content: string; isError: boolean }> {
    const found = this.#treeTool(slot, call.runId, call.name);
    if (!('tool' in found)) return { content: found.missing, isError: true };
    // The call's own signal: the tree's end, or the agent saying its step stopped.
    const key = `${call.runId}:${call.callId}`;
    const stop = new AbortController();
    this.#toolCalls.set(key, stop);
    try {
      return await found.tool.call(call.args, {
        rootId: call.rootId,
        runId: call.runId,
        address: call.address,
        callId: call.callId,
        signal: AbortSignal.any([this.#abort.signal, stop.signal]),
      });
    } finally {
      this.#toolCalls.delete(key);
    }
  }

  /** Asks one of the tree's host models for an agent: its signal is the tree's end or the agent's step stopping. */
  async #complete(slot: Slot, call: HostModelCall): Promise<Completion> {
    if (slot.runId !== call.runId)
      throw new HarnessError(ErrorCode.Internal, `a model call for run ${call.runId} from another run's actor`);
    const model = this.models.get(call.name);
    if (!model) throw missingModel(call.name, this.models);
    const key = `${call.runId}:${call.callId}`;
    const stop = new AbortController();
    this.#toolCalls.set(key, stop);
    const signal = AbortSignal.any([this.#abort.signal, stop.signal]);
    try {
      // Asked after the tree was cancelled (the request was on its way): the function is not called at all.
      if (signal.aborted) return unanswered();
      const completion = await answerHostModel(
        model,
        call,
        { rootId: slot.tree.rootId, address: slot.address },
        signal,
      );
      if (!signal.aborted) return completion;
    } catch (error) {
      if (!signal.aborted) throw error;
    } finally {
      this.#toolCalls.delete(key);
    }
    // Stopped (the tree's cancel or end, or the agent's step): the agent ends the call on its
    // side by its own signal, so no answer goes back that could race that signal and be taken.
    return unanswered();
  }

  /** Puts an ask to the tree's approver; with no approver the answer is deny. */
  async #approve(request: ApprovalRequest): Promise<ApprovalAnswer> {
    const approver = this.approver;
    if (!approver) return 'deny';
    const answer = await approver.decide(request);
    if (answer !== 'approve' && answer !== 'deny' && answer !== 'defer') {
      throw new InvalidArgumentError(
        `the approver answered ${JSON.stringify(answer)}; an approver answers 'approve', 'deny' or 'defer'.`,
      );
    }
    return answer;
  }

  /** Shows a plan to the tree's plan gate; with none in this process the answer is defer (the plan is stored). */
  async #reviewPlan(plan: PlanReview): Promise<PlanDecision> {
    const gate = this.planGate;
    if (!gate) return { decision: 'defer' };
    const decision = await gate.review(plan);
    const kind = (decision as { decision?: unknown })?.decision;
    if (kind !== 'approve' && kind !== 'correct' && kind !== 'cancel' && kind !== 'defer') {
      throw new InvalidArgumentError(
        `the plan gate answered ${JSON.stringify(decision)}; it answers { decision: 'approve' | 'correct' | 'cancel' | 'defer' }.`,
      );
    }
    return decision;
  }

  /** Puts an agent's question to the tree's operator; with none in this process the question is deferred. */
  async #askOperator(question: OperatorQuestion): Promise<string | { defer: true }> {
    const operator = this.operator;
    if (!operator) return { defer: true };
    const answer = await operator.answer(question);
    if (typeof answer !== 'string' && (answer as { defer?: unknown })?.defer !== true) {
      throw new InvalidArgumentError('the operator answers with a string, or { defer: true }.');
    }
    return answer;
  }

  /** A parent waiting on a child gives its slot up while it waits, so waiting never starves the tree of slots. */
  async #waitChild(
    slot: Slot,
    body: { runId: string; childId: string; timeoutMs: number | null },
  ): Promise<WaitChildResult> {
    const tree = slot.tree;
    const ended = async () => {
      const child = await this.#ports.read(reads.run(body.childId));
      return child !== null && isTerminal(child.status);
    };
    let outcome: 'ended' | 'background' = 'ended';
    if (!(await ended())) {
      if (slot.counted) await tree.park(slot);
      outcome = await this.#childEnd(body.childId, body.timeoutMs, ended);
      if (slot.parked) await tree.unpark(slot);
    }
    if (outcome === 'background') return { status: 'background' };
    const child = await this.#ports.read(reads.run(body.childId));
    const account = await this.#ports.read(reads.account(body.childId));
    return {
      status: 'ended',
      childStatus: child?.status ?? 'failed',
      reply: child?.reply ?? null,
      reason: child?.outcome?.reason ?? null,
      steps: account?.spent.steps ?? 0,
      tokens: account?.spent.tokens ?? 0,
    };
  }

  /** Resolves when the child ends (`ended`), or after `timeoutMs` (`background`). */
  #childEnd(childId: string, timeoutMs: number | null, ended: () => Promise<boolean>): Promise<'ended' | 'background'> {
    const waiters = this.#waiters;
    return new Promise<'ended' | 'background'>((resolve) => {
      let timer: NodeJS.Timeout | null = null;
      const onEnd = () => {
        if (timer) clearTimeout(timer);
        resolve('ended');
      };
      const list = waiters.get(childId) ?? [];
      list.push(onEnd);
      waiters.set(childId, list);
      if (timeoutMs !== null) {
        timer = setTimeout(() => {
          const current = waiters.get(childId);
          if (current)
            waiters.set(
              childId,
              current.filter((fn) => fn !== onEnd),
            );
          resolve('background');
        }, timeoutMs);
      }
      // The child may have ended between the check and the registration.
      void ended().then(
        (yes) => {
          if (yes) onEnd();
        },
        () => undefined,
      );
    });
  }

  /** Whether a parent of the tree waits on a child. */
  get waiting(): boolean {
    return this.#waiters.size > 0;
  }

  /** The run `runId` ended: the parents waiting on it go on. */
  childEnded(runId: string): void {
    const waiters = this.#waiters.get(runId);
    if (!waiters) return;
    this.#waiters.delete(runId);
    for (const waiter of waiters) waiter();
  }

  /** Wakes the parents waiting on children of the tree `rootId` that have ended, wherever they ran. */
  async wakeEnded(rootId: string): Promise<void> {
    const runs = await this.#ports.read(reads.runs(rootId)).catch(() => []);
    for (const run of runs) if (isTerminal(run.status)) this.childEnded(run.runId);
  }
}

/**
 * What a stopped model call is answered with: nothing, ever. A new promise each time,
 * held by nothing, so the call's continuation is collected with it (one shared promise
 * that never settles would keep every such continuation, and its request, for good).
 */
function unanswered(): Promise<never> {
  return new Promise<never>(() => undefined);
}

/** The tools a tree has: the supervisor's and its own, no two with one name. */
export function treeTools(base: readonly HostTool<never>[], own: unknown, where: string): HostTool<never>[] {
  const tools = [...base, ...checkTools(own, where)];
  const names = new Set<string>();
  for (const item of tools) {
    if (names.has(item.name)) {
      throw new InvalidArgumentError(
        `${where}: the tool ${item.name} is given twice (by the supervisor and by this call); give it once.`,
      );
    }
    names.add(item.name);
  }
  return tools;
}

/** The MCP servers a tree has: the supervisor's and its own, checked, no two with one name. */
export function treeServers(base: readonly McpServerSpec[], own: unknown, where: string): McpServerSpec[] {
  if (own === undefined) return [...base];
  const given = checkSpecs(own, where);
  const twice = given.find((spec) => base.some((mine) => mine.name === spec.name));
  if (twice) {
    throw new InvalidArgumentError(
      `${where}: the MCP server ${twice.name} is given twice (by the supervisor and by this call); give it once.`,
    );
  }
  return [...base, ...given];
}

/** Sorted by name, so the tool definitions a tree sends are the same bytes whatever order they were given in. */
function byName(a: { name: string }, b: { name: string }): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

/**
 * The MCP server whose tool this is: the longest of the servers' names it starts with,
 * then `__` (a bundle's server is itself `<plugin>__<server>`).
 */
function serverOf(name: string, servers: readonly string[]): string {
  let best = '';
  for (const server of servers) if (name.startsWith(`${server}__`) && server.length > best.length) best = server;
  return best || name.slice(0, name.indexOf('__'));
}

function storedTool(definition: ToolDefinitionData, server: string | undefined): StoredTool {
  return {
    name: definition.name,
    effect: definition.effect,
    ...(server === undefined ? {} : { server }),
    digest: toolDigest(definition),
  };
}

/**
 * How a tree's MCP servers are decided and contained: by its policy, at its workspace, inside
 * its run's containment; a tree without a contract, in the default containment at each
 * server's own cwd (see McpConnectOptions.contain).
 */
export function serverOptions(
  policy: Policy | null,
  contract: ContractData | null,
  approver: Approver | undefined,
): McpConnectOptions {
  return {
    ...(policy ? { policy } : {}),
    ...(contract ? { root: contract.root, contain: contract.sandbox ? { sandbox: contract.sandbox } : {} } : {}),
    ...(approver ? { approver } : {}),
  };
}

/**
 * Tools live in the process, not the store: a tree started with tools needs them all again,
 * each with the effect it had (a tool that acted is journaled; given back as one that only
 * reads, an interrupted call would run again).
 */
export function checkToolsGiven(rootId: string, stored: StoredTool[], given: Map<string, HostTool<never>>): void {
  const changed = stored.filter((item) => {
    const now = given.get(item.name);
    return now !== undefined && now.definition.effect !== item.effect;
  });
  if (changed.length > 0) {
    throw new InvalidArgumentError(
      `resume(): ${changed.map((item) => `${item.name} was started as an '${item.effect}' tool`).join('; ')}, and is given back with another effect; give it back as it was. Nothing was resumed.`,
    );
  }
  const missing = stored.filter((item) => !given.has(item.name));
  if (missing.length === 0) return;
  const own = missing.filter((item) => item.server === undefined).map((item) => item.name);
  const servers = [...new Set(missing.flatMap((item) => (item.server === undefined ? [] : [item.server])))];
  const wants: string[] = [];
  if (own.length > 0)
    wants.push(
      `${own.length === 1 ? 'the tool' : 'tools'} ${own.join(', ')} (pass ${own.length === 1 ? 'it' : 'them'} again: resume(rootId, { tools: [...] }))`,
    );
  if (servers.length > 0)
    wants.push(
      `the tools of the MCP ${servers.length === 1 ? 'server' : 'servers'} ${servers.join(', ')} (pass ${servers.length === 1 ? 'it' : 'them'} again: resume(rootId, { mcp: [...] }))`,
    );
  throw new HarnessError(
    ErrorCode.ToolsMissing,
    `tree ${rootId} was started with ${wants.join(' and ')}, which this process was not given. Nothing was resumed, and the tree stays resumable.`,
    { details: { rootId, missing: missing.map((item) => item.name), ...(servers.length > 0 ? { servers } : {}) } },
  );
}

/** The host models a tree has: the supervisor's and its own, no two with one name. */
export function treeModels(
  base: ReadonlyMap<string, HostModel>,
  own: unknown,
  where: string,
): ReadonlyMap<string, HostModel> {
  if (own === undefined) return base;
  if (typeof own !== 'object' || own === null || Array.isArray(own)) {
    throw new InvalidArgumentError(
      `${where}: models must be an object of functions, { [name]: (request, signal) => answer }.`,
    );
  }
  const models = new Map(base);
  for (const [name, model] of Object.entries(own)) {
    if (typeof model !== 'function') {
      throw new InvalidArgumentError(
        `${where}: the host model ${JSON.stringify(name)} is not a function; give (request, signal) => ({ text, toolCalls? }).`,
      );
    }
    if (name.trim() === '') throw new InvalidArgumentError(`${where}: a host model needs a name that is not blank.`);
    if (models.has(name)) {
      throw new InvalidArgumentError(
        `${where}: the host model ${JSON.stringify(name)} is given twice (the supervisor has one of that name); rename one.`,
      );
    }
    models.set(name, model as HostModel);
  }
  return models;
}

/**
 * Refuses a tree whose providers name a host model this process was not given: checked
 * before anything is stored or resumed, so the refusal loses nothing.
 */
export function checkModelsGiven(
  where: string,
  specs: readonly (ProviderSpec | null | undefined)[],
  models: ReadonlyMap<string, HostModel>,
): void {
  const missing = [...new Set(specs.flatMap((spec) => hostModelNames(spec)))].filter((name) => !models.has(name));
  if (missing.length === 0) return;
  throw new HarnessError(
    ErrorCode.ProviderLoadFailed,
    `${where}: the tree's providers name the host ${missing.length === 1 ? 'model' : 'models'} ${missing.map((name) => JSON.stringify(name)).join(', ')}, which this process was not given; pass models: { ${missing.map((name) => `${JSON.stringify(name)}: (request, signal) => answer`).join(', ')} } (host models live in the process, not the store). Nothing was started or resumed.`,
    { details: { missing } },
  );
}

/** What an actor is told when it asks for a host model this tree does not have. */
function missingModel(name: string, models: ReadonlyMap<string, HostModel>): HarnessError {
  const known = [...models.keys()];
  return new HarnessError(
    ErrorCode.ProviderLoadFailed,
    `there is no host model named ${JSON.stringify(name)} in this process${known.length > 0 ? ` (it has ${known.map((item) => JSON.stringify(item)).join(', ')})` : ''}; resume the tree with models: { ${JSON.stringify(name)}: (request, signal) => answer }.`,
  );
}
