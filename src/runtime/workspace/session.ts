/**
 * A workspace run's session: its workspace (the files under the root, reached through
 * ./files.ts), the policy its reads are shown by, the project's toolchain, the executor
 * and environment its commands run with, the commands it started in the background, and
 * what a step interrupted by a crash had written, put back. The tools that act on it are
 * declared in runtime/tools/families/ (files.ts, commands.ts); this is what they share
 * for the length of a run.
 */

import type { RunBrowser } from '../browser/run-browser.js';
import type { RunPrograms } from '../codeact/run-programs.js';
import type { ContractData } from '../contract/contract.js';
import type { EventData } from '../events.js';
import type { Executor } from '../exec/executor.js';
import type { Job } from '../exec/jobs.js';
import { commandEnvironment } from '../exec/run-command.js';
import type { RunLanguageServers } from '../lsp/run-servers.js';
import type { Policy } from '../policy/policy.js';
import type { ToolResult } from '../tools/tool.js';
import { Workspace } from './files.js';
import { detectToolchain, type Toolchain } from './toolchain.js';
import { worktreeLine } from './worktree.js';

export class WorkspaceSession {
  readonly workspace: Workspace;
  /** The run's contract: its root, its mode, its tool mask. */
  readonly contract: ContractData;
  /** What decides the run's acts (the file tools' and the commands'). */
  readonly policy: Policy;
  /** What starts the run's commands (and its checker), contained as the run's contract says. */
  readonly executor: Executor;
  #toolchain: Toolchain | null | undefined;
  /** The commands started with shell_start, by handle. */
  readonly #jobs = new Map<string, Job>();
  #nextHandle = 0;

  readonly #env: NodeJS.ProcessEnv;
  #containmentNoted = false;
  readonly #makeGitExecutor: (() => Executor) | null;
  #gitExecutor: Executor | null = null;
  /** The run's language servers (`withLsp`), ended with the session; null when the contract names none. */
  lsp: RunLanguageServers | null = null;
  /** The run's browser (`withBrowser`), ended with the session; null when the contract asks for none. */
  browser: RunBrowser | null = null;
  /** The run's programs (`withCodeAct`), ended with the session; null when the contract asks for none. */
  programs: RunPrograms | null = null;

  /**
   * What starts the git tools' commands (./tools/families/git.ts): contained as the run's
   * commands are, the repository's `.git` left writable; made at the first git call. Where
   * the session was given no such maker (an executor an embedder or a test supplied), the
   * run's own executor.
   */
  get gitExecutor(): Executor {
    if (!this.#makeGitExecutor) return this.executor;
    this.#gitExecutor ??= this.#makeGitExecutor();
    return this.#gitExecutor;
  }

  /** The environment the run's commands (and its command gate) get: the allow-list, never a key variable. */
  get commandEnv(): NodeJS.ProcessEnv {
    return this.#env;
  }

  /**
   * `secrets`: environment variables commands must not inherit (the provider specs' key
   * variables). `executor`: what starts the run's commands, the executor factory's for the
   * run (src/runtime/exec/factory.ts); there is no default.
   */
  constructor(
    contract: ContractData,
    policy: Policy,
    secrets: readonly string[],
    executor: Executor,
    gitExecutor?: () => Executor,
  ) {
    this.executor = executor;
    this.#makeGitExecutor = gitExecutor ?? null;
    this.#env = commandEnvironment(process.env, secrets, contract.inheritedEnv ?? []);
    this.contract = contract;
    this.policy = policy;
    this.workspace = new Workspace({
      root: contract.root,
      file: contract.file ?? undefined,
      // grep and find show only what the policy lets be read outright, entry by entry.
      visible: (relative) => policy.decide({ kind: 'read', path: relative }, contract.root).effect === 'allow',
    });
  }

  /** Records, once, how the run's commands are contained; called as a command is about to start. */
  async noteContainment(record: (event: EventData) => void): Promise<void> {
    if (this.#containmentNoted) return;
    this.#containmentNoted = true;
    const containment = this.executor.containment();
    record({
      type: 'process-containment',
      mechanism: containment.mechanism,
      reason: containment.mechanism === 'process-group' ? containment.reason : null,
    });
    const contained = this.executor.contained?.();
    if (contained) {
      const probe = await this.executor.probe?.();
      record({ type: 'contained', ...contained, ...(probe ? { probe } : {}) });
    }
  }

  get toolchain(): Toolchain | null {
    if (this.#toolchain === undefined)
      this.#toolchain = detectToolchain(this.contract.root, this.contract.toolchain ?? undefined);
    return this.#toolchain;
  }

  /**
   * Puts back what a step interrupted by a crash had written, so its re-run starts from
   * the committed state and records its own diffs. Returns the paths put back. A path a
   * link now leads through, or a protected one, is left as it is: it is put back by name
   * with no link followed, or not at all.
   */
  rollBack(images: { path: string; existed: boolean; content: Buffer | null }[]): string[] {
    for (const image of images) {
      // Replaced by name, not written through: a hard link planted since keeps its content.
      this.workspace.restore(image.path, image.existed && image.content ? image.content : null);
    }
    return images.map((image) => image.path);
  }

  /** What the model is told about the workspace, after the goal. */
  briefing(): string {
    return briefingLines(this.contract, this.toolchain);
  }

  /**
   * The read itself, with no policy decision: for a read the policy already allowed, of
   * `decided`, the path it resolved to then (one that resolves elsewhere now is refused).
   */
  readNow(args: Record<string, unknown>, decided: string): ToolResult {
    return this.workspace.read(args as { path: string; start_line?: number; end_line?: number }, decided);
  }

  /** The handle the next command started with shell_start gets. */
  nextJobHandle(): string {
    return `sh-${++this.#nextHandle}`;
  }

  /** Keeps a command started with shell_start under its handle, to be polled, killed, and stopped with the run. */
  keepJob(handle: string, job: Job): void {
    this.#jobs.set(handle, job);
  }

  /** The command started under `handle`, if it is still kept. */
  job(handle: string): Job | undefined {
    return this.#jobs.get(handle);
  }

  /** Forgets a command killed with shell_kill. */
  dropJob(handle: string): void {
    this.#jobs.delete(handle);
  }

  /** The handles of the commands kept. */
  jobHandles(): string[] {
    return [...this.#jobs.keys()];
  }

  /** Stops everything the run started with shell_start, with all they started: a run that ends leaves nothing behind. */
  async close(): Promise<void> {
    // The language servers' end never keeps the rest from ending.
    await this.lsp?.close().catch(() => undefined);
    await this.browser?.close().catch(() => undefined);
    await this.programs?.close().catch(() => undefined);
    for (const job of this.#jobs.values()) job.kill();
    await Promise.all([...this.#jobs.values()].map((job) => job.settle(5_000)));
    this.#jobs.clear();
    await this.executor.close?.();
    await this.#gitExecutor?.close?.();
  }
}

/**
 * What the model is told about the workspace after the goal. Computed once when the run
 * is created and stored with it, so a resumed run's first turn is the same bytes even if
 * the run has since created a marker file. `toolchainAt`: where its toolchain is found (a
 * child's worktree, not made yet, from the checkout it is made from).
 */
export function briefingFor(contract: ContractData, toolchainAt = contract.root): string {
  return briefingLines(contract, detectToolchain(toolchainAt, contract.toolchain ?? undefined));
}

/** The briefing's lines: the root, a single file, a worktree of the run's own, the toolchain. */
function briefingLines(contract: ContractData, toolchain: Toolchain | null): string {
  const lines = [`Workspace root: ${contract.root}`];
  if (contract.file) lines.push(`Single-file mode: you may read and change ${contract.file} and nothing else.`);
  const worktree = worktreeLine(contract.worktree);
  if (worktree) lines.push(worktree);
  if (toolchain) {
    const test = toolchain.commands.test ? ` Tests: ${toolchain.commands.test.join(' ')}.` : '';
    lines.push(`Toolchain: ${toolchain.ecosystem} (${toolchain.driver}, from ${toolchain.marker}).${test}`);
  }
  return lines.join('\n');
}
