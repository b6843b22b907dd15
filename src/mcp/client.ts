/**
 * MCP servers' tools as the embedder's own: each server is started (stdio) or dialled
 * (streamable HTTP) with the official SDK, and each of its tools becomes a {@link HostTool}
 * named `<server>__<tool>`, its JSON Schema passed through. From there a call goes the way
 * every tool of the embedder's does: the policy decides it as an act of kind `tool` by
 * that name (allow, deny, or ask the approver), it is journaled as an intent before it is
 * sent (an MCP call is an effect the runtime cannot undo or know the outcome of), its
 * arguments are checked against the schema, and its result is bounded and in the trace.
 * A server that dies is started again once; a second death leaves its tools answering
 * that they are gone, and the tree goes on.
 *
 * This module is for the main thread only: the servers live where the tools are called.
 */

import type { Socket } from 'node:net';
import { resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike, Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { Agent, buildConnector, fetch as undiciFetch } from 'undici';
import { ErrorCode, HarnessError } from '../errors.js';
import { DEFAULT_SANDBOX, type SandboxData } from '../runtime/exec/containment/boundary.js';
import type { ContainedExecutor, ContainedReport } from '../runtime/exec/containment/contained.js';
import { EgressRefusal, type NetTarget, policyGate, targetKey } from '../runtime/exec/containment/proxy.js';
import { executorFor } from '../runtime/exec/factory.js';
import type { Approver } from '../runtime/policy/approval.js';
import type { Act, Policy } from '../runtime/policy/policy.js';
import { type HostTool, type ToolImage, ToolOutput, tool } from '../runtime/tools/host-tool.js';
import { LinearOutputSchemas } from './output-schemas.js';
import { checkSpecs, type McpHttpServer, type McpServerSpec } from './spec.js';
import { ContainedStdioTransport } from './stdio-transport.js';

export type { McpHttpServer, McpServerSpec, McpStdioServer } from './spec.js';

export interface McpConnectOptions {
  /**
   * Decides each server before it is started or dialled: a stdio server's command as an
   * `exec` act (run from `cwd`, else `root`), an HTTP server's host and port as a `net`
   * act. A denial is an McpServerError naming the rule and layer; an ask goes to
   * `approver`, and without one is refused. Without a policy, nothing is checked.
   */
  policy?: Policy;
  /** The workspace the policy's paths are relative to (a run's root). Default: the current directory. */
  root?: string;
  approver?: Approver;
  /**
   * The containment the stdio servers start in, as a run's commands do (writes only under
   * the workspace, protected paths read-only, the network as the policy says, the caps).
   *
   * The workspace a server may write is `root`, or where no `root` is given its own `cwd`
   * (else the current directory); it also writes a HOME and TMPDIR of its own.
   *
   * - Not given (the default): the default sandbox. A server has no network unless the
   *   policy names a host (then only through an egress proxy, to the hosts it allows);
   *   with no policy at all, the egress proxy with the address floor. HTTP servers are
   *   dialled as the policy decided at connect.
   * - `{ sandbox }`: that sandbox (a tree's servers get their run's contract's; `{}` for
   *   the default). Where it sends commands' connections through an egress proxy, the HTTP
   *   servers' connections go through it too: every one read strictly, held to the address
   *   floor (unless the server's `allowLocalAddress`), decided by the policy, and dialled at
   *   the address that was checked.
   * - `'full-access'`: the servers run uncontained, with your user's access, as a contract
   *   `withFullAccess()` runs its commands. Say it only of servers you trust that far.
   */
  contain?: { sandbox?: SandboxData } | 'full-access';
  /** How long connecting to a server (and listing its tools) may take. Default 10,000. */
  connectTimeoutMs?: number;
  /** How long one call may take before it is an observation that says so. Default 60,000. */
  callTimeoutMs?: number;
}

/** A tool a server listed that cannot be offered (a name that does not fit, a schema that is not valid), and why. */
export interface McpSkippedTool {
  server: string;
  tool: string;
  reason: string;
}

/** An MCP server could not be started, reached or spoken to. `details.server` names it. */
export class McpServerError extends HarnessError {
  constructor(server: string, message: string, cause?: unknown, details: Record<string, unknown> = {}) {
    super(ErrorCode.McpServerFailed, `MCP server ${server}: ${message}`, {
      details: { server, ...details },
      ...(cause === undefined ? {} : { cause }),
    });
    this.name = 'McpServerError';
  }
}

/** Wraps a stdio server's command line for the containment it runs in. */
type Wrap = (
  argv: readonly string[],
  cwd: string,
  env: NodeJS.ProcessEnv,
) => { argv: string[]; env: NodeJS.ProcessEnv };

/** Makes one of an HTTP server's connections through the run's egress proxy. */
type Dial = (target: NetTarget, options?: { belowFloor?: boolean }) => Promise<Socket>;

/**
 * A fetch whose every connection is made by `dial` (TLS on top for https), for the SDK's
 * transport: the undici agent it uses, closed with the server.
 */
function routedFetch(dial: Dial, belowFloor: boolean): { fetch: FetchLike; close(): Promise<void> } {
  const tls = buildConnector({});
  const agent = new Agent({
    connect: (options, callback) => {
      const port = Number(options.port) || (options.protocol === 'https:' ? 443 : 80);
      dial({ host: options.hostname, port }, { belowFloor }).then(
        (socket) => {
          if (options.protocol === 'https:') tls({ ...options, httpSocket: socket }, callback);
          else callback(null, socket);
        },
        (error: Error) => callback(error, null),
      );
    },
  });
  return {
    fetch: ((url: string | URL, init?: RequestInit) =>
      undiciFetch(url, { ...(init as object), dispatcher: agent })) as unknown as FetchLike,
    close: () => agent.close(),
  };
}

/** The egress proxy's refusal somewhere in an error's causes (fetch wraps it), if it was one. */
function refusalIn(error: unknown): EgressRefusal | null {
  let seen: unknown = error;
  for (let depth = 0; depth < 6 && seen; depth++) {
    if (seen instanceof EgressRefusal) return seen;
    seen = (seen as { cause?: unknown }).cause;
  }
  return null;
}

/** What a refusal of the proxy says to whoever configured the server, with what to do about the floor. */
function refusalText(refusal: EgressRefusal, spec: McpHttpServer): string {
  const floor =
    refusal.layer === 'address-floor'
      ? ` If the server is on this machine or your own network, set allowLocalAddress: true on ${spec.name}'s spec.`
      : '';
  return `the run's egress proxy refused the connection: ${refusal.reason} (rule ${refusal.rule}, layer ${refusal.layer}).${floor}`;
}

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const DEFAULTS = { connectTimeoutMs: 10_000, callTimeoutMs: 60_000 };
/** What the harness calls itself to the servers it connects to. */
const CLIENT = { name: 'io-harness', version: '0.1.0' };

/** One server: its client, how often it died, and the tools it listed. */
class Connection {
  readonly spec: McpServerSpec;
  readonly #options: typeof DEFAULTS;
  #client: Client | null = null;
  #closed = false;
  /** How many times the server stopped under us. */
  deaths = 0;
  listed: { name: string; description?: string; inputSchema: Record<string, unknown> }[] = [];
  /** Whether it serves resources, and prompts: each offered as two tools that read. */
  resources = false;
  prompts = false;

  constructor(spec: McpServerSpec, options: typeof DEFAULTS, wrap: Wrap | null, dial: Dial | null) {
    this.spec = spec;
    this.#options = options;
    this.#wrap = wrap;
    this.#routed = dial && 'url' in spec ? routedFetch(dial, spec.allowLocalAddress === true) : null;
  }

  readonly #wrap: Wrap | null;
  /** An HTTP server's fetch through the run's egress proxy, where it has one. */
  readonly #routed: { fetch: FetchLike; close(): Promise<void> } | null;

  get gone(): boolean {
    return this.deaths >= 2;
  }

  /** What the policy says about starting or dialling this server; refused with the rule and layer that said no. */
  async authorize(policy: Policy, root: string, approver: Approver | undefined, approved: Set<string>): Promise<void> {
    const spec = this.spec;
    let act: Act;
    if ('url' in spec) {
      const url = new URL(spec.url);
      act = {
        kind: 'net',
        host: url.hostname.replace(/^\[|\]$/g, ''),
        port: url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port),
      };
    } else {
      act = { kind: 'exec', argv: spec.command, cwd: resolve(root, spec.cwd ?? '.') };
    }
    const decision = policy.decide(act, root);
    if (decision.effect === 'allow') return;
    const what = 'url' in spec ? `dialling ${decision.subject}` : `starting ${decision.subject}`;
    if (decision.effect === 'ask') {
      const answer = approver
        ? await approver.decide({
            rootId: '',
            runId: '',
            address: `mcp:${spec.name}`,
            act,
            subject: decision.subject,
            rule: decision.rule,
            layer: decision.layer,
          })
        : null;
      if (answer === 'approve') {
        if (act.kind === 'net') approved.add(targetKey(act));
        return;
      }
      throw new McpServerError(
        spec.name,
        `${what} was not approved (the policy asks: ${decision.rule}, layer ${decision.layer}${approver ? '' : '; no approver was given'}).`,
        undefined,
        { rule: decision.rule, layer: decision.layer },
      );
    }
    throw new McpServerError(
      spec.name,
      `${what} is refused by the policy: ${decision.reason}${decision.rule ? ` (${decision.rule}, layer ${decision.layer})` : ''}.`,
      undefined,
      { rule: decision.rule, layer: decision.layer },
    );
  }

  async open(): Promise<void> {
    // Results are checked against the tools' output schemas with patterns on the linear-time engine.
    const client = new Client(CLIENT, { jsonSchemaValidator: new LinearOutputSchemas() });
    const transport = this.#transport();
    let died = false;
    client.onclose = () => {
      died = true;
      if (this.#client === client) this.#client = null;
    };
    try {
      await client.connect(transport, { timeout: this.#options.connectTimeoutMs });
      const capabilities = client.getServerCapabilities() ?? {};
      const { tools } = capabilities.tools
        ? await client.listTools(undefined, { timeout: this.#options.connectTimeoutMs })
        : { tools: [] };
      this.listed = tools as typeof this.listed;
      this.resources = capabilities.resources !== undefined;
      this.prompts = capabilities.prompts !== undefined;
    } catch (error) {
      await this.#closeClient(client, transport);
      const refusal = refusalIn(error);
      throw new McpServerError(
        this.spec.name,
        this.#why(error, died),
        error,
        refusal ? { rule: refusal.rule, layer: refusal.layer } : {},
      );
    }
    this.#client = client;
    this.#transportInUse = transport;
  }

  #transport(): Transport {
    const spec = this.spec;
    if ('url' in spec) {
      return new StreamableHTTPClientTransport(new URL(spec.url), {
        ...(spec.headers ? { requestInit: { headers: spec.headers } } : {}),
        ...(this.#routed ? { fetch: this.#routed.fetch } : {}),
      });
    }
    const cwd = spec.cwd ?? process.cwd();
    const wrapped = this.#wrap
      ? this.#wrap(spec.command, cwd, { ...getDefaultEnvironment(), ...(spec.env ?? {}) })
      : { argv: spec.command, env: spec.env };
    const [command, ...args] = wrapped.argv as [string, ...string[]];
    return new ContainedStdioTransport({ command, args, env: wrapped.env as Record<string, string> | undefined, cwd });
  }

  /** Closes `client`; a stdio server whose processes outlived every bound is said so (a process warning), not waited on. */
  async #closeClient(client: Client, transport: Transport): Promise<void> {
    await client.close().catch(() => undefined);
    const survivors = transport instanceof ContainedStdioTransport ? transport.survivors : [];
    if (survivors.length === 0) return;
    process.emitWarning(
      `MCP server ${this.spec.name}: process${survivors.length === 1 ? '' : 'es'} ${survivors.join(', ')} (host pid${survivors.length === 1 ? '' : 's'}) still running after it was closed and killed; left running.`,
      { code: 'IO_HARNESS_MCP_SERVER_LINGERS' },
    );
  }

  /** The transport of the client in use, closed with it. */
  #transportInUse: Transport | null = null;

  /** What went wrong connecting, said so that it names what to check. */
  #why(error: unknown, died: boolean): string {
    const message = error instanceof Error ? error.message : String(error);
    const code = (error as { code?: unknown })?.code;
    const spec = this.spec;
    if ('url' in spec) {
      const refusal = refusalIn(error);
      if (refusal) return `could not be dialled at ${spec.url}: ${refusalText(refusal, spec)}`;
      return `did not answer as an MCP server at ${spec.url}: ${message}. Check that it is up and serves MCP there.`;
    }
    const where = `started as ${JSON.stringify(spec.command.join(' '))}`;
    if (code === 'ENOENT') return `could not be started: ${JSON.stringify(spec.command[0])} was not found (${where}).`;
    if (died) return `stopped before it answered (${where}): ${message}. Check that it speaks MCP on its stdout.`;
    return `did not answer as an MCP server (${where}): ${message}.`;
  }

  /** Calls one of its tools; a server that died during the call is started again once, and the call not sent again. */
  async call(tool: string, args: Record<string, unknown>, signal: AbortSignal): Promise<ToolOutput> {
    const result = await this.#request(tool, signal, (client, options) =>
      client.callTool({ name: tool, arguments: args }, undefined, options),
    );
    const output = render(result);
    if (result.isError === true) throw new Error(output.text === '' ? `${tool} reported an error.` : output.text);
    return output;
  }

  /** Lists its resources (`uri` null), or reads one. */
  async resource(uri: string | null, signal: AbortSignal): Promise<string | ToolOutput> {
    if (uri === null) {
      const { resources } = await this.#request('resources/list', signal, (client, options) =>
        client.listResources(undefined, options),
      );
      return JSON.stringify(
        resources.map((item) => ({
          uri: item.uri,
          name: item.name,
          description: item.description,
          mimeType: item.mimeType,
        })),
      );
    }
    const { contents } = await this.#request('resources/read', signal, (client, options) =>
      client.readResource({ uri }, options),
    );
    const parts: string[] = [];
    const images: ToolImage[] = [];
    for (const item of contents) {
      if ('text' in item && typeof item.text === 'string') parts.push(item.text);
      else if ('blob' in item && typeof item.mimeType === 'string' && item.mimeType.startsWith('image/'))
        images.push({ mimeType: item.mimeType, data: String(item.blob) });
      else parts.push(`[resource ${item.uri}, binary, not shown]`);
    }
    return new ToolOutput(parts.join('\n'), { images });
  }

  /** Lists its prompts (`name` null), or gets one filled in with its arguments. */
  async prompt(name: string | null, args: Record<string, string>, signal: AbortSignal): Promise<string> {
    if (name === null) {
      const { prompts } = await this.#request('prompts/list', signal, (client, options) =>
        client.listPrompts(undefined, options),
      );
      return JSON.stringify(
        prompts.map((item) => ({ name: item.name, description: item.description, arguments: item.arguments ?? [] })),
      );
    }
    const { messages } = await this.#request('prompts/get', signal, (client, options) =>
      client.getPrompt({ name, arguments: args }, options),
    );
    return messages
      .map((message) => {
        const content = message.content as Record<string, unknown>;
        return `${message.role}: ${content.type === 'text' ? String(content.text) : `[${String(content.type)}, not shown]`}`;
      })
      .join('\n');
  }

  /** One request (`what`: a tool's name, or the method) to the server; one it died during is not sent again. */
  async #request<T>(
    what: string,
    signal: AbortSignal,
    send: (client: Client, options: { signal: AbortSignal; timeout: number }) => Promise<T>,
  ): Promise<T> {
    const name = this.spec.name;
    if (this.gone)
      throw new Error(`MCP server ${name} stopped twice and is not started again; its tools are unavailable.`);
    if (this.#closed) throw new Error(`MCP server ${name} was closed (McpServers.close()); connect again to call it.`);
    if (!this.#client) await this.#restart(`it had stopped`);
    const client = this.#client as Client;
    try {
      return await send(client, { signal, timeout: this.#options.callTimeoutMs });
    } catch (error) {
      const refusal = refusalIn(error);
      const message =
        refusal && 'url' in this.spec
          ? refusalText(refusal, this.spec)
          : error instanceof Error
            ? error.message
            : String(error);
      if (this.#client !== client && !this.#closed) {
        // The server went away with the call in flight: whether it acted is not known, so the call is not sent again.
        await this.#restart(message).catch(() => undefined);
        throw new Error(
          `MCP server ${name} stopped during the call (${message}); whether ${what} acted is not known. ` +
            (this.gone ? 'It stopped again as it was restarted; its tools are unavailable.' : 'It was started again.'),
        );
      }
      throw new Error(`MCP server ${name} answered ${what} with an error: ${message}`);
    }
  }

  async #restart(reason: string): Promise<void> {
    this.deaths++;
    if (this.gone) throw new Error(`MCP server ${this.spec.name} stopped again (${reason}).`);
    try {
      await this.open();
    } catch (error) {
      this.deaths = 2;
      throw error;
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    const client = this.#client;
    const transport = this.#transportInUse;
    this.#client = null;
    this.#transportInUse = null;
    if (client && transport) await this.#closeClient(client, transport);
    await this.#routed?.close().catch(() => undefined);
  }
}

/**
 * A call's result as the observation the model reads: its text, its images attached
 * (checked as every tool's are: see ToolOutput), a line for each audio clip or binary
 * resource, or, with none of those, its structured content.
 */
function render(result: Awaited<ReturnType<Client['callTool']>>): ToolOutput {
  const parts: string[] = [];
  const images: ToolImage[] = [];
  for (const item of (result.content ?? []) as Record<string, unknown>[]) {
    if (item.type === 'text') parts.push(String(item.text ?? ''));
    else if (item.type === 'image') images.push({ mimeType: String(item.mimeType), data: String(item.data ?? '') });
    else if (item.type === 'audio')
      parts.push(`[audio ${String(item.mimeType)}, ${String(item.data ?? '').length} base64 characters, not shown]`);
    else if (item.type === 'resource_link') parts.push(`[resource ${String(item.uri)}]`);
    else if (item.type === 'resource') {
      const resource = (item.resource ?? {}) as Record<string, unknown>;
      if (typeof resource.text === 'string') parts.push(resource.text);
      else if (typeof resource.mimeType === 'string' && resource.mimeType.startsWith('image/'))
        images.push({ mimeType: resource.mimeType, data: String(resource.blob ?? '') });
      else parts.push(`[resource ${String(resource.uri)}, binary, not shown]`);
    }
  }
  if (parts.length === 0 && images.length === 0 && result.structuredContent !== undefined)
    return new ToolOutput(JSON.stringify(result.structuredContent));
  return new ToolOutput(parts.join('\n'), { images });
}

/**
 * A tool schema without its `$schema`: servers name draft-07 (the SDK's own converter
 * does) for schemas whose keywords mean the same under 2020-12, which the tools are
 * checked by; one that uses a keyword only draft-07 reads is refused there, and skipped.
 */
function withoutDialect(schema: Record<string, unknown>): Record<string, unknown> {
  const { $schema: _dialect, ...rest } = schema;
  return rest;
}

/**
 * A server's resources and prompts, as tools that only read: `<server>__resources` lists
 * them and `<server>__resource` reads one by its URI; `<server>__prompts` and
 * `<server>__prompt` the same for prompts. Decided by the policy by those names, like
 * any tool; not journaled, as they change nothing.
 */
function readingTools(connection: Connection): HostTool<never>[] {
  const server = connection.spec.name;
  const made: HostTool<never>[] = [];
  const reads = (
    name: string,
    description: string,
    properties: Record<string, unknown>,
    required: string[],
    run: (args: Record<string, unknown>, signal: AbortSignal) => Promise<string | ToolOutput>,
  ) => {
    // A tool of the server's own by that name is the one offered.
    if (connection.listed.some((listed) => listed.name === name)) return;
    made.push(
      tool({
        name: `${server}__${name}`,
        description,
        parameters: { type: 'object', properties, required, additionalProperties: false },
        effect: 'reads',
        family: 'mcp',
        execute: (args, context) => run(args as Record<string, unknown>, context.signal),
      }) as unknown as HostTool<never>,
    );
  };
  if (connection.resources) {
    reads(
      'resources',
      `Lists the resources the MCP server ${server} offers: their URIs, names and types.`,
      {},
      [],
      (_args, signal) => connection.resource(null, signal),
    );
    reads(
      'resource',
      `Reads one resource of the MCP server ${server} by its URI.`,
      { uri: { type: 'string' } },
      ['uri'],
      (args, signal) => connection.resource(String(args.uri), signal),
    );
  }
  if (connection.prompts) {
    reads(
      'prompts',
      `Lists the prompts the MCP server ${server} offers, with their arguments.`,
      {},
      [],
      (_args, signal) => connection.prompt(null, {}, signal),
    );
    reads(
      'prompt',
      `Gets one prompt of the MCP server ${server}, filled in with its arguments.`,
      { name: { type: 'string' }, arguments: { type: 'object', additionalProperties: { type: 'string' } } },
      ['name'],
      (args, signal) => connection.prompt(String(args.name), (args.arguments ?? {}) as Record<string, string>, signal),
    );
  }
  return made;
}

/**
 * Connected MCP servers and their tools.
 *
 * @example
 * const mcp = await McpServers.connect([{ name: 'files', command: ['node', 'server.mjs'] }]);
 * const result = await runWith(contract, provider, store, policy, approver, { tools: mcp.tools() });
 * await mcp.close();
 */
export class McpServers {
  readonly #connections: Connection[];
  readonly #tools: HostTool<never>[];
  /** Tools a server listed that are not offered, and why. */
  readonly skipped: readonly McpSkippedTool[];

  /** The executors the stdio servers run in, by the workspace each contains them to; ended with them. */
  readonly #executors: Map<string, ContainedExecutor>;
  /** Each stdio server's executor, by the server's name. */
  readonly #containedBy: Map<string, ContainedExecutor>;

  private constructor(
    connections: Connection[],
    executors: Map<string, ContainedExecutor>,
    containedBy: Map<string, ContainedExecutor>,
  ) {
    this.#connections = connections;
    this.#executors = executors;
    this.#containedBy = containedBy;
    const tools: HostTool<never>[] = [];
    const skipped: McpSkippedTool[] = [];
    for (const connection of connections) {
      const server = connection.spec.name;
      for (const listed of connection.listed) {
        const name = `${server}__${listed.name}`;
        if (!TOOL_NAME.test(name)) {
          skipped.push({
            server,
            tool: listed.name,
            reason: `${JSON.stringify(name)} is not 1 to 64 letters, digits, _ or -`,
          });
          continue;
        }
        try {
          tools.push(
            tool({
              name,
              description: listed.description?.trim() || `${listed.name}, a tool of the MCP server ${server}.`,
              parameters: withoutDialect(listed.inputSchema ?? { type: 'object' }),
              // Whatever the server's hints say: a call is an effect, journaled before it is sent.
              effect: 'acts',
              family: 'mcp',
              execute: (args, context) => connection.call(listed.name, args as Record<string, unknown>, context.signal),
            }) as unknown as HostTool<never>,
          );
        } catch (error) {
          skipped.push({ server, tool: listed.name, reason: (error as Error).message });
        }
      }
    }
    for (const connection of connections) tools.push(...readingTools(connection));
    // Sorted, so the tool definitions a tree sends are the same bytes whatever order the servers listed them in.
    tools.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    this.#tools = tools;
    this.skipped = Object.freeze(skipped);
  }

  /** Starts or dials every server and lists its tools; one that cannot be reached is an {@link McpServerError}, and none is left running. */
  static async connect(specs: McpServerSpec[], options: McpConnectOptions = {}): Promise<McpServers> {
    const checked = checkSpecs(specs);
    const { policy, root, approver, contain, ...timeouts } = options;
    const settings = { ...DEFAULTS, ...timeouts };
    const workspace = resolve(root ?? '.');
    // The hosts an approver let through when the servers were decided: their connections through the proxy are not asked again.
    const approved = new Set<string>();
    // The executor factory's, one for each workspace the servers are contained to, ended with them.
    const sandbox = contain === 'full-access' ? { ...DEFAULT_SANDBOX, access: 'full' as const } : contain?.sandbox;
    const executors = new Map<string, ContainedExecutor>();
    const containedBy = new Map<string, ContainedExecutor>();
    const executorAt = (at: string): ContainedExecutor => {
      let executor = executors.get(at);
      if (!executor) {
        executor = executorFor({
          purpose: 'mcp-server',
          root: at,
          ...(sandbox ? { sandbox } : {}),
          policy: policy ?? null,
          egress: policyGate(policy ?? null, workspace, approved),
        });
        executors.set(at, executor);
      }
      return executor;
    };
    const closeAll = () => Promise.all([...executors.values()].map((executor) => executor.close()));
    let connections: Connection[];
    try {
      connections = checked.map((spec) => {
        if ('url' in spec) {
          // Through the containment's egress proxy where the caller named the containment (a tree's run's).
          const dial =
            contain && contain !== 'full-access'
              ? executorAt(workspace).dialer({ callId: '', tool: `mcp:${spec.name}` })
              : null;
          return new Connection(spec, settings, null, dial);
        }
        const executor = executorAt(root !== undefined ? workspace : resolve(spec.cwd ?? '.'));
        containedBy.set(spec.name, executor);
        return new Connection(spec, settings, (argv, cwd, env) => executor.wrapCommand(argv, cwd, env), null);
      });
      // Every server decided before any is started: a refusal starts none.
      if (policy)
        for (const connection of connections) await connection.authorize(policy, workspace, approver, approved);
    } catch (error) {
      await closeAll();
      throw error;
    }
    const opened = await Promise.allSettled(connections.map((connection) => connection.open()));
    const failed = opened.find((outcome) => outcome.status === 'rejected');
    if (failed) {
      await Promise.all(connections.map((connection) => connection.close()));
      await closeAll();
      throw (failed as PromiseRejectedResult).reason;
    }
    return new McpServers(connections, executors, containedBy);
  }

  /**
   * What a stdio server's process gets (its rung, what it enforces), as a run's
   * `contained` event says it; null for an HTTP server, or a name that is not a server here.
   */
  contained(server: string): ContainedReport | null {
    return this.#containedBy.get(server)?.contained() ?? null;
  }

  /** The servers' tools, named `<server>__<tool>`, sorted by name: hand them to a run as `tools`. */
  tools(): HostTool<never>[] {
    return [...this.#tools];
  }

  /** Stops the stdio servers and hangs up on the HTTP ones. */
  async close(): Promise<void> {
    await Promise.all(this.#connections.map((connection) => connection.close()));
    await Promise.all([...this.#executors.values()].map((executor) => executor.close()));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
