/**
 * The language servers of one run: one client per server the contract names, each started
 * at most once: in the background as the run opens, where the policy allows its start
 * outright (recorded in the run's trace as the run starts; never while the run plans), so
 * its index is paid for before the first question and not inside it; else at the first
 * question for it, once that question's call has decided the start as the command it is
 * (see ../tools/families/lsp.ts), asking the approver where the policy says ask. The servers run on an
 * executor of their own, which hides from them everything the policy does not let the
 * model read outright ({@link keepsReadsBack}): what a server can see, an answer can tell.
 * Closed with the run's session: every server ended, then that executor.
 */

import type { EventData } from '../events.js';
import { PROBE_NAME } from '../exec/containment/masks.js';
import type { Executor } from '../exec/executor.js';
import type { CommandCheck } from '../policy/commands/tally.js';
import { FLOOR, type Policy } from '../policy/policy.js';
import { decisionEvent } from '../tools/decisions.js';
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

/** What starts a run's servers: their executor and the wrapping of an argv for it; or why none can start. */
export type ServersOpened = { executor: Executor; launch: LspLaunch } | string;

export class RunLanguageServers {
  readonly #servers: readonly LspServerData[];
  readonly #clients: (LspClient | null)[];
  readonly #root: string;
  readonly #open: () => ServersOpened;
  #opened: ServersOpened | undefined;
  #closed = false;

  /** `open` makes the servers' executor, at the first question that needs it (once). */
  constructor(servers: readonly LspServerData[], root: string, open: () => ServersOpened) {
    this.#servers = servers;
    this.#clients = servers.map(() => null);
    this.#root = root;
    this.#open = open;
  }

  #opening(): ServersOpened {
    this.#opened ??= this.#open();
    return this.#opened;
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
    if (this.#closed) return 'the run has ended: its language servers were stopped.';
    const opened = this.#opening();
    return typeof opened === 'string' ? opened : null;
  }

  /** The client of server `index`, made (not started) at the first asking; only once {@link whyNot} is null. */
  client(index: number): LspClient {
    let client = this.#clients[index];
    if (!client) {
      const opened = this.#opening();
      if (typeof opened === 'string') throw new Error(opened);
      client = new LspClient(this.server(index), this.#root, opened.launch);
      if (this.#closed) void client.close();
      this.#clients[index] = client;
    }
    return client;
  }

  /**
   * Decides, as the run opens, the start of each server whose start `check` allows
   * outright (no rule asks, none refuses): marked authorized, its decisions returned for
   * the run's trace, started by {@link startAuthorized}. The rest wait for their first
   * question. None where no server can start here ({@link whyNot}).
   */
  authorizeAtOpen(check: (argv: readonly string[]) => CommandCheck): EventData[] {
    // The commands first: where none may start outright, nothing is made (no executor, no walk of the workspace).
    const allowed = this.#servers.map((server) => {
      const decided = check(server.command);
      return decided.ok && decided.effect === 'allow' ? decided.decisions : null;
    });
    if (allowed.every((decisions) => decisions === null)) return [];
    try {
      if (this.whyNot) return [];
    } catch {
      // What cannot be made now is the first question's to report.
      return [];
    }
    const events: EventData[] = [];
    allowed.forEach((decisions, index) => {
      if (decisions === null) return;
      this.client(index).authorized = true;
      for (const decision of decisions) events.push(decisionEvent(decision.subject, 'exec', decision));
    });
    return events;
  }

  /** Starts, in the background, each server whose start is decided; a failure is the first question's to report. */
  startAuthorized(): void {
    if (this.#closed) return;
    for (const client of this.#clients) if (client?.authorized) void client.start().catch(() => undefined);
  }

  /** Ends every server started, and what each started, then the servers' executor (if it was made). */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all(this.#clients.map((client) => client?.close()));
    if (typeof this.#opened === 'object') await this.#opened.executor.close?.();
  }
}
