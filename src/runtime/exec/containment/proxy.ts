/**
 * The egress proxy: a run's commands' only route out on the namespace rungs. It listens
 * on a UNIX socket of the run's own, one per command, which the helper's relay reaches
 * from 127.0.0.1 inside the command's network namespace (HTTP_PROXY points there). It
 * takes CONNECT and absolute-URI HTTP requests and, for each, in this order:
 *
 * 1. reads the target strictly (a host of letters, digits, dots and hyphens, or an
 *    address literal; a port from 1 to 65535), so the host checked is the host dialled;
 * 2. checks the host against the address floor (./address-floor.ts): an address literal
 *    in any spelling, the metadata names, localhost — before any person is asked;
 * 3. asks the run's gate: the policy's `net` rules, an `ask` put to the approver there
 *    and then, every decision recorded;
 * 4. resolves the name once, checks every address it resolved to against the floor, and
 *    dials the first of them, the address it checked — never the name again.
 *
 * It follows no redirect (a 3xx goes back to the client as it came, and the client's next
 * request is decided afresh) and refuses a target that is itself. A refusal is a 403
 * whose body says what was refused, by which rule of which layer.
 */
import { lookup as dnsLookup } from 'node:dns';
import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { connect, isIP, type Socket } from 'node:net';
import type { EventData } from '../../events.js';
import type { Act, Decision, Policy } from '../../policy/policy.js';
import {
  addressOf,
  canonicalAddress,
  checkAddress,
  checkHost,
  type FloorVerdict,
  floorLifted,
  normalHost,
} from './address-floor.js';

/** A host and port a command asked the proxy for. */
export interface NetTarget {
  host: string;
  port: number;
}

/** The tool call a command belongs to, for the trace. */
export interface CommandOrigin {
  callId: string;
  tool: string;
}

export type EgressVerdict = { ok: true } | { ok: false; rule: string; layer: string; reason: string };

/** What decides a run's connections, and records what the proxy refused on its own. */
export interface EgressGate {
  /** The policy's decision (an ask settled by the approver), recorded. */
  decide(target: NetTarget, origin: CommandOrigin | null): Promise<EgressVerdict>;
  /** A refusal the proxy made itself (the floor, a malformed target), to record. */
  refused(target: NetTarget, verdict: Extract<EgressVerdict, { ok: false }>, origin: CommandOrigin | null): void;
}

/** The origin the containment probe's canary runs under (see ./probe.ts). */
export const PROBE_TOOL = 'containment-probe';

/** Resolves a name to every address it has. */
export type LookupAll = (host: string) => Promise<{ address: string; family: number }[]>;

const systemLookup: LookupAll = (host) =>
  new Promise((resolve, reject) =>
    dnsLookup(host, { all: true, verbatim: true }, (error, addresses) => (error ? reject(error) : resolve(addresses))),
  );

/** The most a target's host may be: a DNS name's limit. */
const MAX_HOST = 253;

/** A host the proxy will look at: a DNS name's characters only, or an IPv6 literal in brackets. */
function readHost(text: string): string | null {
  let host = text;
  if (host.startsWith('[') && host.endsWith(']')) {
    host = host.slice(1, -1);
    return isIP(host) === 6 ? host.toLowerCase() : null;
  }
  host = normalHost(host);
  if (host.length === 0 || host.length > MAX_HOST || !/^[a-z0-9.-]+$/.test(host) || host.includes('..')) return null;
  return host;
}

function readPort(text: string): number | null {
  if (!/^[0-9]{1,5}$/.test(text)) return null;
  const port = Number(text);
  return port >= 1 && port <= 65535 ? port : null;
}

/**
 * A host and port in the one spelling the proxy decides, remembers and dials them in:
 * an address literal canonical (`0x7f000002`, `127.2` and `[::ffff:7f00:2%lo]` are all
 * 127.0.0.2), a name as {@link normalHost} gives it.
 */
export function targetKey(target: NetTarget): string {
  return `${spelledHost(target.host)}:${target.port}`;
}

function spelledHost(host: string): string {
  const literal = addressOf(host);
  return literal ? canonicalAddress(literal) : normalHost(host);
}

/** A CONNECT's authority-form target, `host:port` or `[v6]:port`; no user part, nothing else. */
export function readAuthority(authority: string): NetTarget | null {
  const colon = authority.lastIndexOf(':');
  if (colon <= 0 || authority.includes('@')) return null;
  const host = readHost(authority.slice(0, colon));
  const port = readPort(authority.slice(colon + 1));
  return host && port ? { host, port } : null;
}

/** An absolute-URI request's target: `http://host[:port]/...` only (HTTPS goes by CONNECT). */
function readAbsolute(url: string): { target: NetTarget; path: string } | null {
  if (!/^http:\/\//i.test(url)) return null;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return null;
  }
  // A user part in the URL is refused, not stripped: what is checked is exactly what is dialled.
  if (parsed.username || parsed.password) return null;
  const host = readHost(parsed.hostname);
  const port = parsed.port === '' ? 80 : readPort(parsed.port);
  if (!host || !port) return null;
  return { target: { host, port }, path: `${parsed.pathname}${parsed.search}` };
}

/** Headers only the hop between a client and its proxy means; never forwarded. */
const HOP_HEADERS = new Set([
  'connection',
  'keep-alive',
  'proxy-authorization',
  'proxy-authenticate',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** Who asks for connections, and what was decided for them: one decision per host and port, so the approver is asked once and the trace says it once. */
interface Asker {
  origin: CommandOrigin | null;
  decided: Map<string, Promise<EgressVerdict>>;
}

interface Listener extends Asker {
  server: Server;
  path: string;
  sockets: Set<Socket>;
}

/** A connection the proxy would not make, with the rule and layer that refused it. */
export class EgressRefusal extends Error {
  readonly rule: string;
  readonly layer: string;
  readonly reason: string;

  constructor(verdict: { rule: string; layer: string; reason: string }) {
    super(refusalMessage(verdict));
    this.name = 'EgressRefusal';
    this.rule = verdict.rule;
    this.layer = verdict.layer;
    this.reason = verdict.reason;
  }
}

export interface ProxyOptions {
  gate: EgressGate;
  /** How names are resolved (the system's resolver unless given). */
  lookup?: LookupAll;
  /** Loopback ports that are the proxy itself (the relay's), refused as targets whatever the floor says. */
  ownPorts?: readonly number[];
  /** How long a dial may take. */
  connectTimeoutMs?: number;
}

/** The proxy of one run (see the module's comment). */
export class EgressProxy {
  readonly #options: ProxyOptions;
  readonly #lookup: LookupAll;
  readonly #listeners = new Set<Listener>();

  constructor(options: ProxyOptions) {
    this.#options = options;
    this.#lookup = options.lookup ?? systemLookup;
  }

  /** Listens at `path` (a UNIX socket) for one command; `close` ends it and every connection it carries. */
  async listen(path: string, origin: CommandOrigin | null): Promise<{ close(): Promise<void> }> {
    const listener: Listener = {
      server: createServer(),
      path,
      origin,
      decided: new Map(),
      sockets: new Set(),
    };
    const { server } = listener;
    server.on('connection', (socket: Socket) => {
      listener.sockets.add(socket);
      socket.on('close', () => listener.sockets.delete(socket));
    });
    server.on('connect', (request: IncomingMessage, socket: Socket, head: Buffer) =>
      this.#connect(listener, request, socket, head),
    );
    server.on('request', (request: IncomingMessage, response: ServerResponse) =>
      this.#forward(listener, request, response),
    );
    server.on('clientError', (_error, socket: Socket) => socket.destroy());
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(path, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.#listeners.add(listener);
    return { close: () => this.#close(listener) };
  }

  async #close(listener: Listener): Promise<void> {
    if (!this.#listeners.delete(listener)) return;
    for (const socket of listener.sockets) socket.destroy();
    await new Promise<void>((resolve) => listener.server.close(() => resolve()));
  }

  /** Ends every listener and connection. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#listeners].map((listener) => this.#close(listener)));
    for (const socket of this.#dialled) socket.destroy();
    this.#dialled.clear();
  }

  #closed = false;
  /** Connections made by a {@link dialer}, ended with the proxy. */
  readonly #dialled = new Set<Socket>();

  /**
   * Connections of the harness's own (an HTTP MCP server's) for `origin`, taken the way a
   * command's are: the target read strictly, the floor on the host as written, the gate
   * (once per host and port), the name resolved once and every address it has checked, and
   * the socket to the address that was checked, never the name dialled again. `belowFloor`
   * lets a connection reach an address under the floor (a server the embedder said is on
   * this machine or network); nothing else is skipped. A refusal throws an {@link EgressRefusal}.
   */
  dialer(origin: CommandOrigin | null): (target: NetTarget, options?: { belowFloor?: boolean }) => Promise<Socket> {
    const asker: Asker = { origin, decided: new Map() };
    return async (written, options = {}) => {
      if (this.#closed) throw new Error('the egress proxy is closed');
      const host = readHost(written.host);
      const port = readPort(String(written.port));
      if (!host || !port)
        throw new EgressRefusal(
          this.#malformed(asker, written, `the target ${targetText(written)} is not a host and port`),
        );
      const admitted = await this.#admit(asker, { host, port }, options.belowFloor === true);
      if (!admitted.ok) throw new EgressRefusal(admitted);
      const socket = this.#upstream(admitted.address, port);
      this.#dialled.add(socket);
      socket.once('close', () => this.#dialled.delete(socket));
      await new Promise<void>((resolve, reject) => {
        socket.once('connect', () => {
          socket.off('error', reject);
          resolve();
        });
        socket.once('error', reject);
      });
      return socket;
    };
  }

  /**
   * Whether `target` may be dialled, and where: the floor on the host as written, the
   * gate, then the floor on every address the name resolves to. Returns the address to dial.
   */
  async #admit(
    listener: Asker,
    written: NetTarget,
    belowFloor = false,
  ): Promise<{ ok: true; address: string; host: string } | { ok: false; rule: string; layer: string; reason: string }> {
    let target = written;
    // The containment probe's canary: answered by the floor, or refused after it, never put to the gate nor recorded.
    const probing = listener.origin?.tool === PROBE_TOOL;
    const refuse = (verdict: { rule: string; layer: string; reason: string }) => {
      const refusal = { ok: false as const, ...verdict };
      if (!probing) this.#options.gate.refused(target, refusal, listener.origin);
      return refusal;
    };
    const lifted = belowFloor || floorLifted();
    const literal = addressOf(target.host);
    // An address is decided, remembered and dialled in one spelling, whichever the command wrote.
    target = { ...target, host: spelledHost(target.host) };
    if (!lifted) {
      const floor = checkHost(target.host);
      if (!floor.ok) return refuse({ rule: floor.rule, layer: 'address-floor', reason: floor.reason });
    }
    if (probing)
      return refuse({ rule: 'proxy.probe', layer: 'egress-proxy', reason: 'the probe is answered, never dialled' });
    const key = targetKey(target);
    let decided = listener.decided.get(key);
    if (!decided) {
      decided = this.#options.gate.decide(target, listener.origin);
      listener.decided.set(key, decided);
    }
    const verdict = await decided;
    if (!verdict.ok) return verdict;
    let addresses: { address: string; family: number }[];
    if (literal) addresses = [{ address: target.host, family: target.host.includes(':') ? 6 : 4 }];
    else {
      try {
        addresses = await this.#lookup(target.host);
      } catch (error) {
        return refuse({
          rule: 'proxy.unresolved',
          layer: 'egress-proxy',
          reason: `${target.host} does not resolve (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
        });
      }
    }
    if (addresses.length === 0)
      return refuse({ rule: 'proxy.unresolved', layer: 'egress-proxy', reason: `${target.host} resolves to nothing` });
    if (!lifted) {
      // Every address the name has is checked: a name that also resolves below the floor is refused whole.
      for (const { address } of addresses) {
        const parsed = addressOf(address);
        const floor: FloorVerdict = parsed
          ? checkAddress(parsed)
          : { ok: false, rule: 'floor.unreadable', reason: `${address} is no address` };
        if (!floor.ok)
          return refuse({
            rule: floor.rule,
            layer: 'address-floor',
            reason: `${target.host} resolves to ${address}: ${floor.reason}`,
          });
      }
    }
    const first = addresses[0] as { address: string };
    if ((this.#options.ownPorts ?? []).includes(target.port) && isLoopback(first.address))
      return refuse({ rule: 'proxy.self', layer: 'egress-proxy', reason: `${key} is the proxy itself` });
    return { ok: true, address: first.address, host: target.host };
  }

  /** A target the proxy cannot read, refused and recorded as such. */
  #malformed(asker: Asker, target: NetTarget, reason: string): Extract<EgressVerdict, { ok: false }> {
    const verdict = { ok: false as const, rule: 'proxy.malformed', layer: 'egress-proxy', reason };
    this.#options.gate.refused(target, verdict, asker.origin);
    return verdict;
  }

  /** A request whose target the proxy cannot read. */
  #malformedRequest(listener: Listener, request: IncomingMessage, why: string): Extract<EgressVerdict, { ok: false }> {
    const url = (request.url ?? '').slice(0, 200);
    const what = request.method === 'CONNECT' ? 'CONNECT' : 'request';
    return this.#malformed(listener, { host: url, port: 0 }, `the ${what} target ${JSON.stringify(url)} ${why}`);
  }

  /** A connection to an admitted address, given up on if it is not made in time. */
  #upstream(address: string, port: number): Socket {
    const upstream = connect({ host: address, port });
    upstream.setTimeout(this.#options.connectTimeoutMs ?? 30_000, () =>
      upstream.destroy(new Error('the connection timed out')),
    );
    upstream.once('connect', () => upstream.setTimeout(0));
    return upstream;
  }

  #connect(listener: Listener, request: IncomingMessage, socket: Socket, head: Buffer): void {
    const target = readAuthority(request.url ?? '');
    socket.on('error', () => socket.destroy());
    if (!target) {
      socket.end(refusalResponse(400, this.#malformedRequest(listener, request, 'is not host:port')));
      return;
    }
    void this.#admit(listener, target).then((admitted) => {
      if (!admitted.ok) {
        socket.end(refusalResponse(403, admitted));
        return;
      }
      const upstream = this.#upstream(admitted.address, target.port);
      upstream.once('connect', () => {
        socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        if (head.length > 0) upstream.write(head);
        upstream.pipe(socket);
        socket.pipe(upstream);
      });
      upstream.on('error', (error) => {
        if (!socket.writable) return socket.destroy();
        if (upstream.connecting || !upstream.readable) socket.end(gatewayError(target, error));
        else socket.destroy();
      });
      socket.on('close', () => upstream.destroy());
      upstream.on('close', () => socket.end());
    });
  }

  #forward(listener: Listener, request: IncomingMessage, response: ServerResponse): void {
    const read = readAbsolute(request.url ?? '');
    if (!read) {
      const why = 'is no http:// URL this proxy takes (HTTPS goes by CONNECT; a user part is refused)';
      writeRefusal(response, 400, this.#malformedRequest(listener, request, why));
      request.resume();
      return;
    }
    const { target, path } = read;
    void this.#admit(listener, target).then((admitted) => {
      if (!admitted.ok) {
        writeRefusal(response, 403, admitted);
        request.resume();
        return;
      }
      const headers: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(request.headers)) {
        if (value === undefined || HOP_HEADERS.has(name)) continue;
        headers[name] = value;
      }
      // The Host the server sees is the one that was checked (an IPv6 address in brackets).
      const host = admitted.host.includes(':') ? `[${admitted.host}]` : admitted.host;
      headers.host = target.port === 80 ? host : `${host}:${target.port}`;
      // A body is framed again for the server, whatever the method: Node's http client sends a
      // GET's body unframed, which the server would read as the next request.
      if (request.headers['transfer-encoding'] !== undefined) {
        delete headers['content-length'];
        headers['transfer-encoding'] = 'chunked';
      }
      const upstream = httpRequest({
        host: admitted.address,
        port: target.port,
        method: request.method,
        path,
        headers,
        agent: false,
        timeout: this.#options.connectTimeoutMs ?? 30_000,
      });
      upstream.on('response', (answer) => {
        const out: Record<string, string | string[]> = {};
        for (const [name, value] of Object.entries(answer.headers)) {
          if (value === undefined || HOP_HEADERS.has(name)) continue;
          out[name] = value;
        }
        // A redirect goes back as it came: the client's next request is decided afresh.
        response.writeHead(answer.statusCode ?? 502, out);
        answer.pipe(response);
      });
      upstream.on('timeout', () => upstream.destroy(new Error('the connection timed out')));
      upstream.on('error', (error) => {
        if (!response.headersSent) {
          response.writeHead(502, { 'content-type': 'text/plain' });
          response.end(`${gatewayMessage(target, error)}\n`);
        } else response.destroy();
      });
      request.pipe(upstream);
    });
  }
}

/** Whether an address, in any spelling or embedding, is loopback. */
function isLoopback(address: string): boolean {
  const parsed = addressOf(address);
  if (!parsed) return false;
  const verdict = checkAddress(parsed);
  return !verdict.ok && verdict.rule === 'floor.loopback';
}

/** A target as the refusal quotes it, cut short. */
function targetText(target: NetTarget): string {
  return JSON.stringify(`${target.host}:${target.port}`.slice(0, 200));
}

function refusalMessage(verdict: { rule: string; layer: string; reason: string }): string {
  return `io-harness egress proxy: refused: ${verdict.reason} (rule ${verdict.rule}, layer ${verdict.layer})`;
}

function refusalResponse(status: 400 | 403, verdict: { rule: string; layer: string; reason: string }): string {
  const body = `${refusalMessage(verdict)}\n`;
  return `HTTP/1.1 ${status} ${status === 400 ? 'Bad Request' : 'Forbidden'}\r\ncontent-type: text/plain\r\nx-io-harness-rule: ${verdict.rule}\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;
}

function writeRefusal(
  response: ServerResponse,
  status: 400 | 403,
  verdict: { rule: string; layer: string; reason: string },
): void {
  const body = `${refusalMessage(verdict)}\n`;
  response.writeHead(status, {
    'content-type': 'text/plain',
    'content-length': Buffer.byteLength(body),
    'x-io-harness-rule': verdict.rule,
    connection: 'close',
  });
  response.end(body);
}

function gatewayMessage(target: NetTarget, error: Error): string {
  return `io-harness egress proxy: ${target.host}:${target.port} could not be reached: ${(error as NodeJS.ErrnoException).code ?? error.message}`;
}

function gatewayError(target: NetTarget, error: Error): string {
  const body = `${gatewayMessage(target, error)}\n`;
  return `HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;
}

/**
 * What a policy's decision on a connection means for it: through, or refused with the
 * decision's rule and layer. `answer` is the approver's, for an ask; an ask with none (no
 * approver at hand) is refused.
 */
export function netVerdict(decision: Decision, answer?: 'approve' | 'deny' | 'defer'): EgressVerdict {
  if (decision.effect === 'allow' || answer === 'approve') return { ok: true };
  if (decision.effect === 'deny')
    return {
      ok: false,
      rule: decision.rule ?? 'policy.no-rule',
      layer: decision.layer ?? 'policy',
      reason: `net ${decision.subject} is denied: ${decision.reason}`,
    };
  const why =
    answer === undefined
      ? 'no approver is at hand for this command'
      : answer === 'defer'
        ? 'the approver deferred (a connection cannot wait for a person)'
        : 'the approver denied it';
  return {
    ok: false,
    rule: decision.rule,
    layer: decision.layer,
    reason: `net ${decision.subject} needs approval and ${why}`,
  };
}

/**
 * A gate from a policy alone, recording nothing: no policy lets everything through; an ask
 * is let through for a target in `approved` (by {@link targetKey}: approved by a person
 * beforehand) and refused otherwise, a connection cannot wait for one.
 */
export function policyGate(policy: Policy | null, root: string, approved: ReadonlySet<string> = new Set()): EgressGate {
  return {
    decide: async (target) => {
      if (!policy) return { ok: true };
      const decision = policy.decide({ kind: 'net', host: target.host, port: target.port }, root);
      return decision.effect === 'ask' && approved.has(targetKey(target)) ? { ok: true } : netVerdict(decision);
    },
    refused: () => undefined,
  };
}

/**
 * The policy deciding each connection, every decision and refusal handed to `record` as
 * a run's trace holds them (against the tool call whose command asked). An `ask` goes to
 * `ask` when given (a run's approver, asked once per host and port by the caller's own
 * bookkeeping), and is refused where nobody is there to answer.
 */
export function recordingGate(
  policy: Policy | null,
  root: string,
  record: (event: EventData) => void,
  ask?: (
    act: Extract<Act, { kind: 'net' }>,
    decision: Extract<Decision, { effect: 'ask' }>,
  ) => Promise<'approve' | 'deny' | 'defer'>,
): EgressGate {
  const refusal = (verdict: Extract<EgressVerdict, { ok: false }>, origin: CommandOrigin | null): void =>
    record({
      type: 'refusal',
      callId: origin?.callId ?? '',
      tool: origin?.tool ?? 'net',
      rule: verdict.rule,
      layer: verdict.layer,
      reason: verdict.reason,
    });
  return {
    async decide(target, origin) {
      if (!policy) return { ok: true };
      const act = { kind: 'net' as const, host: target.host, port: target.port };
      const decision = policy.decide(act, root);
      const answer = decision.effect === 'ask' && ask ? await ask(act, decision) : undefined;
      record({
        type: 'policy-decision',
        act: 'net',
        subject: decision.subject,
        effect: decision.effect,
        rule: decision.rule,
        layer: decision.layer,
        ...(answer === undefined ? {} : { answer }),
      });
      const verdict = netVerdict(decision, answer);
      if (!verdict.ok) refusal(verdict, origin);
      return verdict;
    },
    refused(target, verdict, origin) {
      record({
        type: 'policy-decision',
        act: 'net',
        subject: `${target.host}:${target.port}`,
        effect: 'deny',
        rule: verdict.rule,
        layer: verdict.layer,
      });
      refusal(verdict, origin);
    },
  };
}
