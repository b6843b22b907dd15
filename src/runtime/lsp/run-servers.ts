/**
 * The language servers of one run: one client per server the contract names, each started
 * at most once, at the first question for it, once that question's call has decided the
 * start as the command it is (see ../tools/families/lsp.ts). The servers run on an
 * executor of their own, which hides from them everything the policy does not let the
 * model read outright ({@link keepsReadsBack}): what a server can see, an answer can tell.
 * Closed with the run's session: every server ended, then that executor.
 */

import { PROBE_NAME } from '../exec/containment/masks.js';
import type { Executor } from '../exec/executor.js';
import { FLOOR, type Policy } from '../policy/policy.js';
import { LspClient, type LspLaunch } from './client.js';
import { type LspServerData, serverIndexFor } from './servers.js';

/**
 * Whether `policy` keeps any path from being read outright: a read rule that denies or
 * asks, in any layer, or reads that no rule allows. Then a server may start only where its
 * sandbox can hide those paths (its executor is made with `hideReads: 'unreadable'`): an
 * answer can carry what a server read (a hover shows a constant's value), and nobody is
 * asked about a server's reads.
 */
export function keepsReadsBack(policy: Policy, root: string): boolean {
  const rules = [FLOOR, ...policy.layers].flatMap((layer) => layer.rules);
  return (
    rules.some((rule) => rule.act === 'read' && rule.effect !== 'allow') ||
    policy.decide({ kind: 'read', path: PROBE_NAME }, root).effect !== 'allow'
  );
}

export class RunLanguageServers {
  readonly #servers: readonly LspServerData[];
  readonly #clients: (LspClient | null)[];
  readonly #root: string;
  readonly #launch: LspLaunch | null;
  readonly #whyNot: string | null;
  readonly #executor: Executor | null;
  #closed = false;

  /**
   * `launch` wraps a server's argv for the servers' containment (`executor`'s, closed with
   * them); null when no server of this run can start, and then `whyNot` says why.
   */
  constructor(
    servers: readonly LspServerData[],
    root: string,
    launch: LspLaunch | null,
    whyNot: string | null = null,
    executor: Executor | null = null,
  ) {
    this.#servers = servers;
    this.#clients = servers.map(() => null);
    this.#root = root;
    this.#launch = launch;
    this.#whyNot = whyNot;
    this.#executor = executor;
  }

  /** The index of the server that answers for `path`, or -1. */
  indexFor(path: string): number {
    return serverIndexFor(this.#servers, path);
  }

  /** The extensions some server answers for, for the model to be told. */
  get extensions(): string[] {
    return this.#servers.flatMap((server) => server.extensions);
  }

  server(index: number): LspServerData {
    return this.#servers[index] as LspServerData;
  }

  /** Why no server of this run can be started (or any more), or null when they can. */
  get whyNot(): string | null {
    return this.#closed ? 'the run has ended: its language servers were stopped.' : this.#whyNot;
  }

  /** The client of server `index`, made (not started) at the first asking. */
  client(index: number): LspClient {
    let client = this.#clients[index];
    if (!client) {
      client = new LspClient(this.server(index), this.#root, this.#launch as LspLaunch);
      if (this.#closed) void client.close();
      this.#clients[index] = client;
    }
    return client;
  }

  /** Ends every server started, and what each started, then the servers' executor. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all(this.#clients.map((client) => client?.close()));
    await this.#executor?.close?.();
  }
}
