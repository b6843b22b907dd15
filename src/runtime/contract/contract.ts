/**
 * The task contract: what a run is to do, the workspace it may touch, how its work is
 * checked, what shape its answer must take, what it may spend. A contract is data
 * (see {@link TaskContract.toJSON}) so it crosses into the agent's thread as is and is
 * stored with the run, which is how a resumed run keeps the contract it started with.
 *
 * Every builder checks its input at once and returns a new contract; bad input is an
 * {@link InvalidArgumentError} (or {@link OutputSchemaError}) before anything runs.
 */
import { existsSync, realpathSync, statSync } from 'node:fs';
import { basename, resolve } from 'node:path';
import { ErrorCode, HarnessError, InvalidArgumentError } from '../../errors.js';
import { type BrowserData, type BrowserOptions, checkBrowserOptions } from '../browser/browser.js';
import type { PriceTable } from '../budget.js';
import { type CodeActData, type CodeActOptions, checkCodeActOptions } from '../codeact/codeact.js';
import type { ContextData } from '../context/assembler.js';
import { checkDocumentsOptions, type DocumentsData, type DocumentsOptions } from '../documents/documents.js';
import { DEFAULT_SANDBOX, type SandboxCaps, type SandboxData } from '../exec/containment/boundary.js';
import type { RungName } from '../exec/containment/rungs.js';
import { VARIABLE_NAME } from '../exec/run-command.js';
import { checkLspServers, type LspServerData, type LspServerOptions } from '../lsp/servers.js';
import { type HttpProviderSpec, type ProviderSpec, redactSpec } from '../provider.js';
import { checkProviderSpec } from '../providers/builders.js';
import { WORKSPACE_TOOL_NAMES } from '../tools/names.js';
import { checkWebOptions, type WebData, type WebOptions } from '../web/web.js';
import { checkToolchainOverrides, type ToolchainOverrides } from '../workspace/toolchain.js';
import type { WorktreeData } from '../workspace/worktree.js';
import { checkContext, checkMemory } from './options.js';
import { OutputSchema, type ZodOutput, type ZodOutputLike } from './output-schema.js';
import { DEFAULT_RETRIES } from './retries.js';
import { checkSandboxOptions, checkWritableRoots } from './sandbox-options.js';
import type { VerificationData } from './verification.js';

export type { VerificationData } from './verification.js';
export { Verification } from './verification.js';

export { WORKSPACE_TOOL_NAMES };

/** Tools a run may not call: the definitions sent stay byte-identical; a call is refused. */
export const ToolMask = {
  of(names: readonly string[]): string[] {
    if (!Array.isArray(names)) throw new InvalidArgumentError('ToolMask.of needs an array of tool names.');
    for (const name of names) {
      if (!(WORKSPACE_TOOL_NAMES as readonly string[]).includes(name)) {
        throw new InvalidArgumentError(
          `ToolMask: there is no tool named ${JSON.stringify(name)}; the tools are ${WORKSPACE_TOOL_NAMES.join(', ')}.`,
        );
      }
    }
    return [...new Set(names)].sort();
  },
};

/** One file of a repository's guidance: where it was read from, and its text. */
export interface InstructionFile {
  source: string;
  text: string;
}

/** The most characters of guidance a system block takes, every file together. */
export const MAX_INSTRUCTION_CHARS = 64 * 1024;

export interface ContractBudget {
  /** Model steps of the whole tree. */
  steps?: number;
  /** Wall clock, seconds from the run's start. */
  wallSecs?: number;
  /** Input plus output tokens of the whole tree. */
  tokens?: number;
  /** Spend in the price table's currency, derived from the accounting rows before each step. */
  cost?: { limit: number; prices: PriceTable };
}

/** The serialisable form of a contract, as stored with the run. */
export interface ContractData {
  goal: string;
  mode: 'workspace' | 'file';
  /** The workspace root's real path. */
  root: string;
  /** Single-file mode: the one path (relative to root) the run may touch. */
  file: string | null;
  verification: VerificationData;
  outputSchema: { name: string; schema: Record<string, unknown> } | null;
  toolMask: string[];
  budget: ContractBudget;
  /** Re-prompts allowed after an invalid answer, and re-tries after a failing gate (each counted on its own). */
  retries: number;
  leaseTtlMs: number | null;
  toolchain: ToolchainOverrides | null;
  /** Variables of the harness's environment the run's commands inherit beyond the allow-list (names only). */
  inheritedEnv?: string[];
  /**
   * Variables no command is handed even where the allow-list would pass them: the ones a
   * configuration's `${env:}` substitutions read (see Config). A name in `inheritedEnv`
   * still reaches the run's commands.
   */
  scrubbedEnv?: string[];
  /** The repository's own guidance (its AGENTS.md and the files a configuration names), put in the system block. */
  instructions?: InstructionFile[];
  /** What the configuration dropped or refused of its bundles: recorded as `bundle-problem` events when the run starts. */
  bundleProblems?: { plugin: string; file: string; message: string; dropped: boolean }[];
  system: string | null;
  /** The run starts in a planning phase it leaves only through an approved plan. */
  planGate: boolean;
  /** The core tools are offered from the first step; the other families after `expand_tools` (see {@link TaskContract.withToolTiers}). */
  toolTiers?: boolean;
  /** The git tools are offered (see {@link TaskContract.withGit}). */
  git?: boolean;
  /** A child's worktree of its own, its root (set by a spawn only; see workspace/worktree.ts). */
  worktree?: WorktreeData;
  /** Language servers whose questions are offered as tools (see {@link TaskContract.withLsp}). */
  lsp?: LspServerData[];
  /** The vendor's own web search and fetch (see {@link TaskContract.withWeb}). */
  web?: WebData;
  /** A browser the model drives (see {@link TaskContract.withBrowser}). */
  browser?: BrowserData;
  /** Programs instead of call chains (see {@link TaskContract.withCodeAct}). */
  codeact?: CodeActData;
  /** Tools for documents, by format (see {@link TaskContract.withDocuments}). */
  documents?: DocumentsData;
  /** A stronger model the run moves to once its gate has failed this many times. */
  escalation?: { provider: ProviderSpec; afterGateFailures: number } | null;
  /** What the run's commands are granted and how they are contained (absent: the defaults, {@link DEFAULT_SANDBOX}). */
  sandbox?: SandboxData;
  /** How each request is fitted to the model's window (absent: the defaults; see {@link TaskContract.withContext}). */
  context?: ContextData;
  /** Durable memory between runs (absent: none; see {@link TaskContract.withMemory}). */
  memory?: MemoryData;
}

/** What a contract says of durable memory (`TaskContract.withMemory`). */
export interface MemoryData {
  /** The share of a request's limit the memory block may take, in (0, 1). Default 0.1. */
  share?: number;
  /** Notes the workspace keeps before the one the fewest runs drew on goes. Default 64. */
  cap?: number;
}

/** A contract's data with only its goal and root required: the rest as the builders default it. */
export type ContractInput = Pick<ContractData, 'goal' | 'root'> & Partial<Omit<ContractData, 'goal' | 'root'>>;

function checkGoal(goal: unknown, where: string): string {
  if (typeof goal !== 'string' || goal.trim() === '') {
    throw new InvalidArgumentError(
      `${where} needs a goal: a non-empty sentence saying what the run is to achieve, such as "the tests fail; fix them".`,
    );
  }
  return goal;
}

function checkDirectory(root: unknown, where: string): string {
  if (typeof root !== 'string' || root === '') {
    throw new InvalidArgumentError(`${where} needs the workspace root: the path of an existing directory.`);
  }
  const absolute = resolve(root);
  if (!existsSync(absolute)) {
    throw new HarnessError(
      ErrorCode.WorkspaceNotFound,
      `${where}: the workspace root ${absolute} does not exist. Pass the path of an existing directory (create it first for a new project).`,
      { details: { root: absolute } },
    );
  }
  if (!statSync(absolute).isDirectory()) {
    throw new HarnessError(
      ErrorCode.WorkspaceNotFound,
      `${where}: the workspace root ${absolute} is a file, not a directory. Pass its directory, or use TaskContract.file for single-file mode.`,
      { details: { root: absolute } },
    );
  }
  return realpathSync(absolute);
}

/**
 * What a run is to do and under what terms.
 *
 * @example
 * const contract = TaskContract.workspace('the tests fail; fix them', repoDir)
 *   .withVerification(Verification.command(['npm', 'test']))
 *   .withBudget({ steps: 40 });
 * const result = await runWith(contract, provider, store);
 */
export class TaskContract<Output = unknown> {
  readonly #data: ContractData;
  /**
   * The type of the final answer a run of this contract gives (`result.output`): the type
   * of its {@link OutputSchema}, `unknown` without one. Types only: nothing is stored here.
   */
  declare readonly '~output'?: Output;

  private constructor(data: ContractData) {
    this.#data = data;
  }

  /** A run over a repository: grep, find, read_file, write_file, edit_file, patch_file and exec under `root`. */
  static workspace(goal: string, root: string): TaskContract {
    const checkedGoal = checkGoal(goal, 'TaskContract.workspace');
    return new TaskContract(TaskContract.#base(checkedGoal, checkDirectory(root, 'TaskContract.workspace'), null));
  }

  /** A run that edits one file: the file tools reach that path and nothing else; grep and find are not offered. */
  static file(goal: string, path: string): TaskContract {
    const checkedGoal = checkGoal(goal, 'TaskContract.file');
    if (typeof path !== 'string' || path === '') {
      throw new InvalidArgumentError('TaskContract.file needs the path of the file the run is to edit.');
    }
    const absolute = resolve(path);
    const root = checkDirectory(resolve(absolute, '..'), 'TaskContract.file');
    if (existsSync(absolute) && statSync(absolute).isDirectory()) {
      throw new InvalidArgumentError(
        `TaskContract.file: ${absolute} is a directory; use TaskContract.workspace for a directory.`,
      );
    }
    return new TaskContract(TaskContract.#base(checkedGoal, root, basename(absolute)));
  }

  static #base(goal: string, root: string, file: string | null): ContractData {
    return {
      goal,
      mode: file === null ? 'workspace' : 'file',
      root,
      file,
      verification: { kind: 'none' },
      outputSchema: null,
      toolMask: [],
      budget: {},
      retries: DEFAULT_RETRIES,
      leaseTtlMs: null,
      toolchain: null,
      system: null,
      planGate: false,
      escalation: null,
    };
  }

  /**
   * Rebuilds a contract from its data (as stored with a run), checking it again. What the
   * data leaves out is what the builders default to.
   */
  static from(data: ContractInput): TaskContract {
    let contract =
      data.mode !== 'workspace' && data.file
        ? TaskContract.file(data.goal, resolve(data.root, data.file))
        : TaskContract.workspace(data.goal, data.root);
    if (data.verification && data.verification.kind !== 'none')
      contract = contract.#with({ verification: data.verification });
    if (data.outputSchema)
      contract = contract.withOutputSchema(OutputSchema.of(data.outputSchema.schema, data.outputSchema.name));
    if (data.toolMask && data.toolMask.length > 0) contract = contract.withToolMask(data.toolMask);
    if (data.budget) contract = contract.withBudget(data.budget);
    if (data.retries !== undefined) contract = contract.withRetries(data.retries);
    if (data.leaseTtlMs !== undefined && data.leaseTtlMs !== null) contract = contract.withLeaseTtl(data.leaseTtlMs);
    if (data.toolchain) contract = contract.withToolchain(data.toolchain);
    if (data.inheritedEnv && data.inheritedEnv.length > 0) contract = contract.withInheritedEnv(data.inheritedEnv);
    if (data.scrubbedEnv && data.scrubbedEnv.length > 0) contract = contract.withScrubbedEnv(data.scrubbedEnv);
    if (data.instructions && data.instructions.length > 0) contract = contract.withInstructions(data.instructions);
    if (data.bundleProblems && data.bundleProblems.length > 0)
      contract = contract.withBundleProblems(data.bundleProblems);
    if (data.system !== undefined && data.system !== null) contract = contract.withSystem(data.system);
    if (data.planGate) contract = contract.withPlanGate();
    if (data.toolTiers) contract = contract.withToolTiers();
    if (data.git) contract = contract.withGit();
    if (data.lsp && data.lsp.length > 0) contract = contract.withLsp(data.lsp);
    if (data.web) contract = contract.withWeb(data.web);
    if (data.browser) contract = contract.withBrowser(data.browser);
    if (data.codeact) contract = contract.withCodeAct(data.codeact);
    if (data.documents) contract = contract.withDocuments(data.documents);
    if (data.context) contract = contract.withContext(data.context);
    if (data.memory) contract = contract.withMemory(data.memory);
    if (data.escalation) {
      contract = contract.withEscalation(data.escalation.provider, {
        afterGateFailures: data.escalation.afterGateFailures,
      });
    }
    if (data.sandbox) {
      const sandbox = data.sandbox;
      if (sandbox.access === 'full') contract = contract.withFullAccess();
      else if (sandbox.access === 'read-only') contract = contract.withReadOnlyAccess();
      else if (sandbox.access !== undefined && sandbox.access !== 'workspace-write') {
        throw new InvalidArgumentError(
          `sandbox.access must be 'read-only', 'workspace-write' or 'full', got ${JSON.stringify(sandbox.access)}.`,
        );
      }
      if (sandbox.writableRoots && sandbox.writableRoots.length > 0)
        contract = contract.withWritableRoots(sandbox.writableRoots);
      if (
        (sandbox.rung ?? null) !== null ||
        (sandbox.caps && Object.keys(sandbox.caps).length > 0) ||
        sandbox.sharedCaches === true
      )
        contract = contract.withSandbox({
          rung: sandbox.rung ?? undefined,
          caps: sandbox.caps,
          sharedCaches: sandbox.sharedCaches === true,
        });
    }
    return contract;
  }

  #with(patch: Partial<ContractData>): TaskContract<Output> {
    return new TaskContract<Output>({ ...this.#data, ...patch });
  }

  get goal(): string {
    return this.#data.goal;
  }

  get root(): string {
    return this.#data.root;
  }

  /** The criterion: {@link Verification.command}, {@link Verification.review} or {@link Verification.none}. */
  withVerification(verification: VerificationData): TaskContract<Output> {
    const kind = (verification as { kind?: unknown })?.kind;
    if (kind !== 'none' && kind !== 'command' && kind !== 'review') {
      throw new InvalidArgumentError(
        'withVerification takes Verification.command([...]), Verification.review(provider, rubric) or Verification.none().',
      );
    }
    return this.#with({ verification });
  }

  /**
   * Demands the shape of the final answer. Accepts an {@link OutputSchema}, a zod schema or
   * a plain JSON Schema (walked now). Declared from zod (here or through `OutputSchema.of`),
   * the run's `result.output` is typed by it; from JSON Schema, `output` is `unknown`.
   */
  withOutputSchema<Shape>(schema: OutputSchema<Shape>): TaskContract<Shape>;
  withOutputSchema<Schema extends ZodOutputLike>(schema: Schema): TaskContract<ZodOutput<Schema>>;
  withOutputSchema(schema: Record<string, unknown>): TaskContract<unknown>;
  withOutputSchema(schema: OutputSchema<unknown> | ZodOutputLike | Record<string, unknown>): TaskContract<unknown> {
    const declared = schema instanceof OutputSchema ? schema : OutputSchema.of(schema);
    const { name, schema: body } = declared.toJSON();
    return new TaskContract<unknown>({
      ...this.#data,
      outputSchema: { name, schema: body as Record<string, unknown> },
    });
  }

  /** Tools this run may not call. The definitions sent do not change; a call is refused. */
  withToolMask(names: readonly string[]): TaskContract<Output> {
    return this.#with({ toolMask: ToolMask.of(names) });
  }

  /** Ceilings on steps, wall clock, tokens and cost. Each must be above zero when given. */
  withBudget(budget: ContractBudget): TaskContract<Output> {
    if (typeof budget !== 'object' || budget === null) {
      throw new InvalidArgumentError('withBudget takes { steps?, wallSecs?, tokens?, cost? }.');
    }
    const out: ContractBudget = {};
    for (const field of ['steps', 'tokens'] as const) {
      const value = budget[field];
      if (value === undefined) continue;
      if (!Number.isInteger(value) || value < 1) {
        throw new InvalidArgumentError(
          `withBudget: ${field} must be a whole number of at least 1, got ${JSON.stringify(value)}; a budget of zero would end the run before its first step. Leave it out for no ceiling.`,
        );
      }
      out[field] = value;
    }
    if (budget.wallSecs !== undefined) {
      if (typeof budget.wallSecs !== 'number' || !(budget.wallSecs > 0)) {
        throw new InvalidArgumentError(
          `withBudget: wallSecs must be a number of seconds above 0, got ${JSON.stringify(budget.wallSecs)}; leave it out for no ceiling.`,
        );
      }
      out.wallSecs = budget.wallSecs;
    }
    if (budget.cost !== undefined) {
      const cost = budget.cost;
      if (typeof cost?.limit !== 'number' || !(cost.limit > 0)) {
        throw new InvalidArgumentError(
          `withBudget: cost.limit must be an amount above 0, got ${JSON.stringify(cost?.limit)}.`,
        );
      }
      if (typeof cost.prices !== 'object' || cost.prices === null || Object.keys(cost.prices).length === 0) {
        throw new InvalidArgumentError(
          'withBudget: cost needs prices, a table of model id -> { input, output } per million tokens, to derive spend from.',
        );
      }
      out.cost = { limit: cost.limit, prices: cost.prices };
    }
    return this.#with({ budget: out });
  }

  /** How many times an invalid answer is re-prompted, and a failing gate re-tried, before the run ends on it. */
  withRetries(retries: number): TaskContract<Output> {
    if (!Number.isInteger(retries) || retries < 0) {
      throw new InvalidArgumentError(`withRetries takes a whole number of at least 0, got ${JSON.stringify(retries)}.`);
    }
    return this.#with({ retries });
  }

  /** How long the run's lease lasts without renewal; governs only what process liveness cannot answer. */
  withLeaseTtl(ms: number): TaskContract<Output> {
    if (!Number.isInteger(ms) || ms < 1) {
      throw new InvalidArgumentError(`withLeaseTtl takes milliseconds, a whole number of at least 1, got ${ms}.`);
    }
    return this.#with({ leaseTtlMs: ms });
  }

  /** Overrides commands of the detected toolchain (see docs/guides/toolchains.md). */
  withToolchain(overrides: ToolchainOverrides): TaskContract<Output> {
    return this.#with({ toolchain: checkToolchainOverrides(overrides, 'withToolchain') });
  }

  /**
   * Names variables of the harness's environment the run's commands (exec, shell,
   * shell_start, the checker and the command gate) inherit, beyond the allow-list they
   * always get (PATH, HOME, the locale, the toolchains' locations). Names only: the values
   * are read from the harness's environment when each command starts, and are never
   * stored. The variables the run's models read their keys from are withheld even when
   * named here. Stored with the contract, so a resumed run keeps them.
   *
   * @example
   * contract.withInheritedEnv(['DATABASE_URL', 'NPM_CONFIG_REGISTRY'])
   */
  withInheritedEnv(names: readonly string[]): TaskContract<Output> {
    if (!Array.isArray(names)) {
      throw new InvalidArgumentError(
        `withInheritedEnv takes an array of variable names, like ['DATABASE_URL']; got ${JSON.stringify(names)}.`,
      );
    }
    for (const name of names) {
      if (typeof name !== 'string' || !VARIABLE_NAME.test(name)) {
        throw new InvalidArgumentError(
          `withInheritedEnv: ${JSON.stringify(name)} is not a variable name; pass names only (letters, digits and _, not starting with a digit), like 'DATABASE_URL', never NAME=value or a pattern.`,
        );
      }
    }
    return this.#with({ inheritedEnv: [...new Set(names)].sort() });
  }

  /**
   * Names variables no command of the run is handed, even one the allow-list would pass:
   * `Config.contract()` names every variable its `${env:}` substitutions read, so a
   * credential the configuration resolved does not reach a child. A name the run also
   * inherits (withInheritedEnv) is still handed on: that is the run saying it needs it.
   */
  withScrubbedEnv(names: readonly string[]): TaskContract<Output> {
    if (!Array.isArray(names) || names.some((name) => typeof name !== 'string' || !VARIABLE_NAME.test(name)))
      throw new InvalidArgumentError(
        `withScrubbedEnv takes an array of variable names, like ['GITHUB_TOKEN']; got ${JSON.stringify(names)}.`,
      );
    return this.#with({ scrubbedEnv: [...new Set([...(this.#data.scrubbedEnv ?? []), ...names])].sort() });
  }

  /**
   * Records, when the run starts, what a configuration dropped or refused of its bundles
   * (`Config.contract()` hands `config.problems()` here): one `bundle-problem` event each.
   */
  withBundleProblems(
    problems: readonly { plugin: string; file: string; message: string; dropped: boolean }[],
  ): TaskContract<Output> {
    const valid = (item: unknown) => {
      const p = item as Record<string, unknown>;
      return (
        typeof item === 'object' &&
        item !== null &&
        typeof p.plugin === 'string' &&
        typeof p.file === 'string' &&
        typeof p.message === 'string' &&
        typeof p.dropped === 'boolean'
      );
    };
    if (!Array.isArray(problems) || !problems.every(valid))
      throw new InvalidArgumentError(
        'withBundleProblems takes config.problems(): { plugin, file, message, dropped } each.',
      );
    return this.#with({
      bundleProblems: problems.map(({ plugin, file, message, dropped }) => ({ plugin, file, message, dropped })),
    });
  }

  /**
   * Puts a repository's own guidance in the system block, after the runtime's prompt and
   * marked as the repository's: each file by its name, in order. `Config.contract()` reads
   * them (the workspace's AGENTS.md unless `[instructions] files` says otherwise); the text
   * is stored with the contract, so a resume sends the same bytes.
   */
  withInstructions(files: readonly InstructionFile[]): TaskContract<Output> {
    if (
      !Array.isArray(files) ||
      files.some(
        (file) =>
          typeof file !== 'object' ||
          file === null ||
          typeof file.source !== 'string' ||
          file.source === '' ||
          typeof file.text !== 'string',
      )
    )
      throw new InvalidArgumentError(
        'withInstructions takes an array of { source, text }: the file each text was read from, and its text.',
      );
    const total = files.reduce((sum, file) => sum + file.text.length, 0);
    if (total > MAX_INSTRUCTION_CHARS)
      throw new InvalidArgumentError(
        `withInstructions: the guidance is ${total} characters, above the ${MAX_INSTRUCTION_CHARS} the system block takes; name fewer or shorter files.`,
      );
    return this.#with({ instructions: files.map((file) => ({ source: file.source, text: file.text })) });
  }

  /**
   * Opens the run in a planning phase: it reads, writes nothing, runs nothing, and leaves
   * the phase only through an ordered plan (`submit_plan`) that the plan gate approves,
   * corrects or cancels. With no gate answering in the process, the plan is stored and
   * the run pauses until someone answers it.
   */
  withPlanGate(): TaskContract<Output> {
    return this.#with({ planGate: true });
  }

  /**
   * Offers the run its core tools (files, commands, the tree, people, the embedder's own
   * without a family) from the first step, and names every other family (`jobs` for
   * background commands, `skills`, `mcp` for MCP servers' tools, an embedder's family) in
   * one line of the system prompt: the model opens one with `expand_tools(family)` and is
   * offered its tools from the next step. A smaller tool array in every request until then;
   * the array is the same bytes within a tier. Masks and the policy decide an offered tool
   * as they decide any other. Off by default.
   */
  withToolTiers(): TaskContract<Output> {
    return this.#with({ toolTiers: true });
  }

  /**
   * Offers git as built-in tools: `git_status`, `git_diff`, `git_log`, `git_add`,
   * `git_commit`, `git_branch` (create and switch) and `git_worktree` (add, remove). The
   * model gives paths, a message and branch names; each tool writes its own argv, so push,
   * fetch, reset, rebase, config or a `-c` override cannot be asked for. They run under the
   * run's containment with the repository's `.git` writable, which it never is for `exec`.
   * Off by default: a run without it has the same tools and requests as before.
   *
   * @example
   * TaskContract.workspace('fix the parser and commit it on a branch', repo).withGit();
   */
  withGit(): TaskContract<Output> {
    if (this.#data.mode !== 'workspace')
      throw new InvalidArgumentError(
        'withGit() needs a workspace contract (TaskContract.workspace); a single-file run has no repository to commit to.',
      );
    return this.#with({ git: true });
  }

  /**
   * Offers what a language server answers as five tools: `lsp_definition`, `lsp_references`,
   * `lsp_symbols`, `lsp_hover`, `lsp_rename` (patches for `patch_file`; it changes nothing).
   * Each server is a program and the extensions it answers for, started once per run under
   * the run's containment after an exec check, with what the model may not read hidden from
   * it. Off by default: a run without it has the same tools and requests. See docs/guides/lsp.md.
   *
   * @example
   * TaskContract.workspace('rename the parser', repo).withLsp({
   *   command: 'typescript-language-server',
   *   args: ['--stdio'],
   *   extensions: ['.ts', '.tsx'],
   * });
   */
  withLsp(servers: LspServerOptions | readonly LspServerOptions[]): TaskContract<Output> {
    if (this.#data.mode !== 'workspace')
      throw new InvalidArgumentError(
        'withLsp() needs a workspace contract (TaskContract.workspace): a language server reads a project, not one file.',
      );
    return this.#with({ lsp: checkLspServers(Array.isArray(servers) ? servers : [servers]) });
  }

  /**
   * Lets the model search the web (and, with `fetch`, read a page it names) through its
   * vendor's own server-side tools: Anthropic's web search and fetch, OpenAI's search
   * models, OpenRouter's web search. The vendor dials, not the run; what it found and cited
   * is kept in the trace (`store.webSources(runId)`). A provider that cannot say what is
   * asked is refused before the run starts. See docs/guides/web.md.
   *
   * @example
   * TaskContract.workspace('update the changelog for the new release', repo).withWeb({ allowedHosts: ['nodejs.org'] });
   */
  withWeb(options: WebOptions = {}): TaskContract<Output> {
    return this.#with({ web: checkWebOptions(options) });
  }

  /**
   * Gives the model a browser: the host's Chromium (never downloaded), driven over a pipe,
   * with `browser_open`, `browser_click`, `browser_type`, `browser_scroll`, `browser_text` and
   * `browser_screenshot`. It runs contained (the bubblewrap rung, the run's egress proxy its
   * only way out) and every request a page makes is held to the policy's `net` rules and the
   * address floor. See docs/guides/browser.md.
   *
   * @example
   * TaskContract.workspace('check the docs site renders the new page', repo).withBrowser();
   */
  withBrowser(options: BrowserOptions = {}): TaskContract<Output> {
    if (this.#data.mode !== 'workspace')
      throw new InvalidArgumentError('withBrowser() needs a workspace contract (TaskContract.workspace).');
    return this.#with({ browser: checkBrowserOptions(options) });
  }

  /**
   * Offers `run_program`: the model hands over a whole program (Python or JavaScript, on the
   * host's `python3` and `node`, found and version-probed, never downloaded) and the run's
   * tools are functions inside it, so a loop over many files is one model call. Every call
   * the program makes is an act decided by the policy, journaled and traced like the model's
   * own; the program itself writes nothing and dials nothing. `maxActs` and
   * `maxOutputBytes` bound one program. A host without a usable interpreter runs the turn on
   * plain tool calls, recorded as a `codeact-fallback` event. See docs/guides/codeact.md.
   *
   * @example
   * TaskContract.workspace('summarise every module', repo).withCodeAct({ languages: ['python'] });
   */
  withCodeAct(options: CodeActOptions = {}): TaskContract<Output> {
    if (this.#data.mode !== 'workspace')
      throw new InvalidArgumentError('withCodeAct() needs a workspace contract (TaskContract.workspace).');
    return this.#with({ codeact: checkCodeActOptions(options) });
  }

  /**
   * Offers tools for documents, a family per format: `xlsx` (list sheets, read one, write a
   * workbook, set one cell keeping the rest), `docx` (read the text, write from paragraphs;
   * no edit in place), `pptx` (read slide by slide), `pdf` (read the text, write a page per
   * string, stamp a watermark, fill form fields by name) and `barcode` (decode from a PNG or
   * JPEG). Every path is a read or write the policy decides; the work runs on a pool of its
   * own with `timeoutSecs` (default 60). Each format needs its packages installed beside
   * io-harness (a run is refused, naming them, where they are not). See docs/guides/documents.md.
   *
   * @example
   * TaskContract.workspace('total the invoices', repo).withDocuments({ formats: ['xlsx', 'pdf'] });
   */
  withDocuments(options: DocumentsOptions = {}): TaskContract<Output> {
    if (this.#data.mode !== 'workspace')
      throw new InvalidArgumentError('withDocuments() needs a workspace contract (TaskContract.workspace).');
    return this.#with({ documents: checkDocumentsOptions(options) });
  }

  /**
   * How each request is fitted to the model's context window. Every request is built to
   * fill at most `share` of the window (default 0.8); the window is `window` when stated,
   * else read from the provider's catalogue (OpenRouter, a compatible endpoint), else from
   * a reference table of OpenAI's and Anthropic's models when `referenceCatalogue` is true,
   * else assumed (128,000 tokens for a remote endpoint, 8,192 for a local runtime), and the
   * run records which. Between folds each request extends the one before it; when the next
   * would not fit, the old steps are folded into notes the model writes, stored as a step.
   *
   * Gentler rungs run before a fold, each off unless turned on here: `collapse` sends a
   * result longer than its part of a request (`{ over }`, default 0.25) shortened, its tool
   * and target named; `reduce` cuts the memory block first; `snip` drops old `find` and
   * `grep` results, then old reads; `microcompact` replaces an old step's results with a
   * counted line. Each that runs is an `assembled` event.
   *
   * @example
   * TaskContract.workspace(goal, root).withContext({ share: 0.6, window: 32_000 })
   */
  withContext(options: ContextData): TaskContract<Output> {
    return this.#with({ context: checkContext(options) });
  }

  /**
   * Durable memory between runs. The run is offered `remember`, `recall` and `forget`
   * (family `memory`), and each request carries the notes kept for its workspace (and the
   * global ones it has none of its own for) as a block in the system prompt, within `share`
   * of a request (default 0.1): when they do not fit, those whose words the goal is about
   * are kept, then those the most runs have drawn on, printed in the store's order. A
   * workspace keeps `cap` notes (default 64); past it the note the fewest separate runs
   * have drawn on goes. Notes are kept in the run's store; the embedder reads and corrects
   * them with {@link Memory}.
   *
   * @example
   * TaskContract.workspace(goal, root).withMemory({ cap: 128 })
   */
  withMemory(options: MemoryData = {}): TaskContract<Output> {
    return this.#with({ memory: checkMemory(options) });
  }

  /**
   * Moves the run to a stronger model once its gate has failed `afterGateFailures` times
   * (default 2): every model call after that goes to `provider`, and the trace says when
   * (`model-escalated`). The gate's failures are counted from the trace, so a resumed run
   * stays escalated. The contract is stored with the run and keys never are, so the
   * stronger model's key comes from an environment variable (`apiKeyEnv`, as
   * `OpenAI.fromEnv()` gives). `withRetries` must leave room for the escalated model to
   * try: run() refuses a contract that would end gate-failed before it escalates.
   *
   * @example
   * contract.withRetries(4).withEscalation(Anthropic.fromEnv({ model: 'claude-opus-4-1' }), { afterGateFailures: 2 })
   */
  withEscalation(provider: ProviderSpec, options: { afterGateFailures?: number } = {}): TaskContract<Output> {
    const spec = checkProviderSpec(provider, 'withEscalation');
    if (carriesKey(spec)) {
      throw new InvalidArgumentError(
        'withEscalation: the stronger model is stored with the contract and keys never are; name the environment variable that holds its key (apiKeyEnv, as OpenAI.fromEnv() or Anthropic.fromEnv() gives) instead of passing the key.',
      );
    }
    const afterGateFailures = options.afterGateFailures ?? 2;
    if (!Number.isInteger(afterGateFailures) || afterGateFailures < 1) {
      throw new InvalidArgumentError(
        `withEscalation: afterGateFailures must be a whole number of at least 1, got ${JSON.stringify(afterGateFailures)}.`,
      );
    }
    return this.#with({ escalation: { provider: spec, afterGateFailures } });
  }

  get #sandbox(): SandboxData {
    return this.#data.sandbox ?? DEFAULT_SANDBOX;
  }

  /**
   * Lets the run's commands do everything the harness may: no containment but the floor
   * (each command in a PID namespace of its own, so nothing it starts outlives it). Say so
   * in your source: it is the one way past the boundary.
   */
  withFullAccess(): TaskContract<Output> {
    return this.#with({ sandbox: { ...this.#sandbox, access: 'full' } });
  }

  /** The run's commands may change nothing but their own temporary directory and home: the workspace is read-only to them. */
  withReadOnlyAccess(): TaskContract<Output> {
    return this.#with({ sandbox: { ...this.#sandbox, access: 'read-only' } });
  }

  /**
   * Directories outside the workspace the run's commands may also write (a build's
   * output, a shared cache). Absolute paths of directories that exist.
   */
  withWritableRoots(paths: readonly string[]): TaskContract<Output> {
    checkWritableRoots(paths);
    return this.#with({ sandbox: { ...this.#sandbox, writableRoots: [...new Set(paths)].sort() } });
  }

  /**
   * How the run's commands are contained: `rung` asks for one rung of the chain by name
   * (`bubblewrap`, `landlock`, `namespaces`, `floor`), and a run on a host that cannot
   * give it fails before its first step, naming it; without one, the strongest the host
   * offers is used. `caps` kill a command past them: `memoryBytes`, `cpuSecs`,
   * `processes`, `fileBytes`, `writtenBytes` (all the run's commands together), `outputBytes`,
   * `wallSecs`; `fileBytes` and `writtenBytes` are on by default (4 GiB and 16 GiB) and
   * lifted with null. `sharedCaches: true` lets the commands write the
   * toolchains' caches in the harness's home (`~/.npm`, `~/.cargo/registry`, `~/.m2`, …)
   * instead of caches of the run's own: faster installs, but what a command leaves there
   * is what the next build on this machine reads and may run.
   */
  withSandbox(options: { rung?: RungName; caps?: SandboxCaps; sharedCaches?: boolean }): TaskContract<Output> {
    const { rung, caps, sharedCaches } = checkSandboxOptions(options, this.#sandbox);
    return this.#with({ sandbox: { ...this.#sandbox, rung, caps, sharedCaches } });
  }

  /** Replaces the default system prompt. */
  withSystem(system: string): TaskContract<Output> {
    if (typeof system !== 'string' || system.trim() === '') {
      throw new InvalidArgumentError('withSystem needs a non-empty system prompt.');
    }
    return this.#with({ system });
  }

  toJSON(): ContractData {
    return structuredClone(this.#data);
  }
}

/**
 * Whether a spec holds a key or a credential header (which a stored contract may not), or
 * is a stored spec whose key was removed (which no later process could use).
 */
function carriesKey(spec: ProviderSpec): boolean {
  if (spec.kind === 'fallback') return spec.providers.some(carriesKey);
  if (spec.kind === 'module') return false;
  return (redactSpec(spec) as HttpProviderSpec).apiKeyRedacted === true;
}

export { contractSecrets, guidanceBlock } from './derived.js';
