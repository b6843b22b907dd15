/**
 * Our workspace tools served over MCP (`io-harness/mcp-server`): another MCP client (an
 * IDE, another harness) calls `read_file`, `grep`, `write_file`, `exec` and the rest, and
 * every call is a step of a run of our own in the store, under the policy, the approver,
 * the containment, the intent journal and the trace the server was started with.
 *
 * How: the served run's model is the client. The run's provider is a host model of this
 * server's (../runtime/providers/host-model.ts), asked over the run's host channel like any
 * model call: each request waits for the client's next `tools/call`, which it answers as
 * a completion with that one tool call; the request
 * after it carries the observation, which is the call's answer to the client. The agent
 * loop does the rest as it does for any model, so nothing served here has a path of its
 * own around the boundary, and nothing a client sends can change the policy.
 *
 * A run ends when the client goes (or is idle for `idleMs`, so no model request is held
 * past the HTTP client's own timeouts); the next call starts another run.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { InvalidArgumentError } from '../errors.js';
import { TaskContract } from '../runtime/contract/contract.js';
import { type Approver, CallbackApprover } from '../runtime/policy/approval.js';
import { Policy } from '../runtime/policy/policy.js';
import { hostModel } from '../runtime/providers/builders.js';
import type { HostModelAnswer } from '../runtime/providers/host-model.js';
import { workspaceTools } from '../runtime/tools/families/workspace.js';
import type { Store } from '../store/sqlite/store.js';
import { Supervisor } from '../supervisor/supervisor.js';

export interface WorkspaceMcpServerOptions {
  /** The workspace the tools reach. Ignored when `contract` is given (its root is used). */
  root?: string;
  /** The store the served runs are kept in. */
  store: Store;
  /** The policy every call is decided by. Default `Policy.default()`: reads and writes inside the root. */
  policy?: Policy;
  /** Answers the policy's asks. Default: every ask is denied (no person is at an MCP client's call). */
  approver?: Approver;
  /**
   * The contract of each served run (its containment, tool mask, budget). Default: a
   * workspace contract on `root`. A masked tool is not served.
   */
  contract?: TaskContract;
  /** A run with no call for this long ends; the next call starts another. Default 240 000 ms. */
  idleMs?: number;
  /**
   * Calls one run takes; the next starts another run. Every model request of a run carries
   * its transcript, so runs are kept this short. Default 200.
   */
  callsPerRun?: number;
  /** The name the server gives itself to the client. Default `io-harness`. */
  name?: string;
  /** A supervisor of `store` to run on (several servers may share one); it is not closed with the server. Default: one of its own. */
  supervisor?: Supervisor;
}

const DEFAULT_IDLE_MS = 240_000;
/** Calls one run takes by default (see {@link WorkspaceMcpServerOptions.callsPerRun}). */
const CALLS_PER_RUN = 200;
/** The name the served runs' model is given under: the client. */
const CLIENT_MODEL = 'mcp-client';

/** The longest a Node timer holds: a bound for the waits on a client. */
const LONGEST_WAIT_MS = 2_147_483_647;

type CallAnswer = { content: { type: 'text'; text: string }[]; isError: boolean };

const CLOSED: CallAnswer = {
  content: [{ type: 'text', text: 'this server is closed; the call was not run.' }],
  isError: true,
};

interface Pending {
  name: string;
  args: Record<string, unknown>;
  id: string;
  resolve(answer: CallAnswer): void;
}

/** One served run: its model requests, answered from the client's calls. */
class ServedRun {
  readonly rootId: string;
  readonly ended: Promise<void>;
  #inFlight: Pending | null = null;
  readonly #queue: Pending[] = [];
  #waiter: ((next: Pending | null) => void) | null = null;
  #closed = false;
  #taken = 0;

  constructor(
    readonly server: WorkspaceMcpServer,
    handle: { rootId: string; result: Promise<unknown> },
  ) {
    this.rootId = handle.rootId;
    this.ended = handle.result.then(
      (result) => this.#end(`the run serving these calls ended ${describe(result)}`),
      (error: unknown) => this.#end(`the run serving these calls failed: ${(error as Error).message}`),
    );
  }

  get open(): boolean {
    return !this.#closed;
  }

  call(pending: Pending): void {
    if (this.#closed) {
      // Ended between being chosen and the call: the next run takes it.
      this.server.requeue(pending);
      return;
    }
    if (this.#waiter) {
      const wake = this.#waiter;
      this.#waiter = null;
      wake(pending);
    } else this.#queue.push(pending);
  }

  /** Ends the run at its next model request (now, when one waits): it finishes, its steps kept. */
  close(): void {
    this.#closed = true;
    for (const pending of this.#queue.splice(0)) pending.resolve(CLOSED);
    const wake = this.#waiter;
    this.#waiter = null;
    wake?.(null);
  }

  /** Answers the run's model request: the observation goes to the call it answers, and the next call becomes the next completion. */
  async answer(): Promise<HostModelAnswer> {
    const done = this.#inFlight;
    this.#inFlight = null;
    if (done) done.resolve(this.server.observation(this.rootId, done.id));
    // A full run ends here; the calls still queued go to the next run, in order.
    if (this.#taken >= this.server.callsPerRun) {
      this.#closed = true;
      for (const pending of this.#queue.splice(0)) this.server.requeue(pending);
      return { text: 'The MCP client is done.' };
    }
    const next = this.#queue.shift() ?? (this.#closed ? null : await this.#next());
    if (next === null) return { text: 'The MCP client is done.' };
    this.#inFlight = next;
    this.#taken++;
    return { text: '', toolCalls: [{ id: next.id, name: next.name, args: next.args }] };
  }

  #next(): Promise<Pending | null> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        if (this.#waiter !== wake) return;
        this.#closed = true;
        this.#waiter = null;
        resolve(null);
      }, this.server.idleMs);
      const wake = (next: Pending | null) => {
        clearTimeout(timer);
        resolve(next);
      };
      this.#waiter = wake;
    });
  }

  #end(reason: string): void {
    this.#closed = true;
    const answer: CallAnswer = { content: [{ type: 'text', text: `${reason}; the call was not run.` }], isError: true };
    const done = this.#inFlight;
    this.#inFlight = null;
    // A call whose step was committed before the run ended did run: its observation is its answer.
    if (done) done.resolve(this.server.answered(this.rootId, done.id) ?? answer);
    for (const pending of this.#queue.splice(0)) pending.resolve(answer);
  }
}

function describe(result: unknown): string {
  const value = result as { status?: string; reason?: string | null };
  return `${value.status ?? 'unknown'}${value.reason ? ` (${value.reason})` : ''}`;
}

/**
 * An MCP server of our workspace tools. Connect it to a transport (stdio, or streamable
 * HTTP from the SDK) with {@link connect}; {@link close} ends its run and its supervisor.
 */
export class WorkspaceMcpServer {
  readonly store: Store;
  readonly idleMs: number;
  readonly callsPerRun: number;
  /** The SDK's server: what a transport is connected to. */
  readonly mcp: Server;
  readonly #policy: Policy;
  readonly #approver: Approver;
  readonly #contract: TaskContract;
  readonly #tools: { name: string; description: string; inputSchema: Record<string, unknown> }[];
  #supervisor: Supervisor | null = null;
  #ownSupervisor = true;
  #run: ServedRun | null = null;
  #runs: string[] = [];
  #calls = 0;
  #closed: Promise<void> | null = null;

  private constructor(options: WorkspaceMcpServerOptions) {
    if (options.contract === undefined && typeof options.root !== 'string') {
      throw new InvalidArgumentError('WorkspaceMcpServer.start(): give the workspace as `root` (or a `contract`).');
    }
    this.store = options.store;
    this.idleMs = options.idleMs ?? DEFAULT_IDLE_MS;
    this.callsPerRun = options.callsPerRun ?? CALLS_PER_RUN;
    for (const [key, value] of Object.entries({ idleMs: this.idleMs, callsPerRun: this.callsPerRun })) {
      if (!Number.isInteger(value) || value < 1 || value > LONGEST_WAIT_MS) {
        throw new InvalidArgumentError(
          `WorkspaceMcpServer.start(): ${key} must be a whole number from 1 to ${LONGEST_WAIT_MS}, got ${JSON.stringify(value)}.`,
        );
      }
    }
    this.#policy = options.policy ?? Policy.default();
    this.#approver = options.approver ?? new CallbackApprover(() => 'deny');
    this.#contract =
      options.contract ??
      TaskContract.workspace('Serve the tool calls of an MCP client, one call a step.', options.root as string);
    const data = this.#contract.toJSON();
    // What judges or stages a model's work has no meaning for a client's calls: refused, not ignored.
    const judged = [
      data.planGate ? 'a plan gate' : null,
      data.toolTiers ? 'tool tiers' : null,
      data.outputSchema ? 'an output schema' : null,
      data.verification.kind !== 'none' ? 'a verification gate' : null,
    ].filter((item) => item !== null);
    if (judged.length > 0) {
      throw new InvalidArgumentError(
        `WorkspaceMcpServer.start(): the contract has ${judged.join(' and ')}, which a served client's calls cannot meet; serve a contract without ${judged.length === 1 ? 'it' : 'them'}.`,
      );
    }
    const masked = new Set(data.toolMask);
    this.#tools = workspaceTools(data.mode)
      // The workspace's own tools, never the tree's, a person's or expand_tools (those are not workspace tools).
      .filter((tool) => !masked.has(tool.name))
      .map((tool) => ({
        name: tool.name,
        description: tool.description,
        inputSchema: tool.parameters as unknown as Record<string, unknown>,
      }))
      .sort((a, b) => (a.name < b.name ? -1 : 1));
    this.mcp = new Server({ name: options.name ?? 'io-harness', version: '0.1.0' }, { capabilities: { tools: {} } });
    this.mcp.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: this.#tools }));
    this.mcp.setRequestHandler(CallToolRequestSchema, async (request) => {
      const { name, arguments: args } = request.params;
      if (!this.#tools.some((tool) => tool.name === name)) {
        const known = this.#tools.map((tool) => tool.name).join(', ');
        return {
          content: [
            { type: 'text', text: `there is no tool named ${JSON.stringify(name)} here; the tools are: ${known}.` },
          ],
          isError: true,
        };
      }
      return this.#call(name, (args ?? {}) as Record<string, unknown>);
    });
    this.mcp.onclose = () => void this.close();
  }

  /** Starts a server on `store`; its runs start with its first call. */
  static async start(options: WorkspaceMcpServerOptions): Promise<WorkspaceMcpServer> {
    const server = new WorkspaceMcpServer(options);
    server.#ownSupervisor = options.supervisor === undefined;
    server.#supervisor = options.supervisor ?? (await Supervisor.start(options.store));
    return server;
  }

  /** Serves one client over `transport` (a `StdioServerTransport`, a `StreamableHTTPServerTransport`). */
  connect(transport: Transport): Promise<void> {
    return this.mcp.connect(transport);
  }

  /** The roots of the runs this server has served, oldest first. */
  get runs(): readonly string[] {
    return this.#runs;
  }

  /** Ends the run in progress (its steps kept, finished), then the supervisor. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      const run = this.#run;
      run?.close();
      await run?.ended;
      if (this.#ownSupervisor) await this.#supervisor?.close();
      await this.mcp.close().catch(() => undefined);
    })();
    return this.#closed;
  }

  async #call(name: string, args: Record<string, unknown>): Promise<CallAnswer> {
    if (this.#closed) return CLOSED;
    return new Promise<CallAnswer>((resolve) => {
      this.requeue({ name, args, id: `mcp-${++this.#calls}`, resolve });
    });
  }

  /** Hands a call to the run being served, starting one when none is open. */
  requeue(pending: Pending): void {
    if (this.#closed) {
      pending.resolve(CLOSED);
      return;
    }
    this.#served().then(
      (run) => (this.#closed ? pending.resolve(CLOSED) : run.call(pending)),
      (error: unknown) =>
        pending.resolve({
          content: [{ type: 'text', text: `no run could be started for the call: ${(error as Error).message}` }],
          isError: true,
        }),
    );
  }

  async #served(): Promise<ServedRun> {
    if (this.#run?.open) return this.#run;
    // The last run is ended before the next starts: one run at a time, in order.
    await this.#run?.ended;
    if (this.#run?.open) return this.#run;
    if (this.#closed) throw new Error('this server is closed');
    const handle = (this.#supervisor as Supervisor).run({
      contract: this.#contract,
      policy: this.#policy,
      approver: this.#approver,
      provider: hostModel(CLIENT_MODEL),
      // Asked on this thread; a request from a run that is no longer served ends it.
      models: { [CLIENT_MODEL]: () => this.#run?.answer() ?? { text: 'No run is served.' } },
    });
    const run = new ServedRun(this, handle);
    this.#run = run;
    this.#runs.push(run.rootId);
    return run;
  }

  /** The answer to the call `callId` of run `rootId`, read from its committed step: the observation, and a refusal's rule and layer. */
  observation(rootId: string, callId: string): CallAnswer {
    try {
      return (
        this.answered(rootId, callId) ?? {
          content: [{ type: 'text', text: 'the call left no observation.' }],
          isError: true,
        }
      );
    } catch (error) {
      return {
        content: [{ type: 'text', text: `the call's answer could not be read: ${(error as Error).message}` }],
        isError: true,
      };
    }
  }

  /** The answer the committed step of call `callId` holds; null when no committed step has it. */
  answered(rootId: string, callId: string): CallAnswer | null {
    const step = this.store.steps(rootId).at(-1);
    const observation = step?.observations.find((item) => item.callId === callId);
    if (!observation) return null;
    const refusal = this.store.events(rootId).find((event) => event.type === 'refusal' && event.callId === callId);
    const refused =
      refusal && refusal.type === 'refusal' ? `\n(refused by rule "${refusal.rule}" of layer "${refusal.layer}")` : '';
    return {
      content: [{ type: 'text', text: `${observation.content}${refused}` }],
      isError: observation.isError,
    };
  }
}
