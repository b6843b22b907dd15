/**
 * What a workspace run's tools do, between the model's call and the file system:
 * the policy decides each act first; a write stores its restore point (committed)
 * before the file changes, records its whole-file diff for the step's commit, and
 * runs the project's cheap checker when the policy allows that command outright.
 *
 * It runs inside the agent's thread; the store and the approver are reached through
 * the {@link WorkspaceHost} the actor supplies.
 */
import { readFileSync } from 'node:fs';
import type { ArgumentSchema } from '../arguments.js';
import type { ContractData } from '../contract/contract.js';
import type { EventData } from '../events.js';
import { describeCommand, runCommand } from '../exec/run-command.js';
import type { Act, Decision, Policy } from '../policy/policy.js';
import type { Tool, ToolResult } from '../tools.js';
import {
  describeChange,
  diffStat,
  FILE_TOOL_DESCRIPTIONS,
  FILE_TOOL_PARAMETERS,
  type FileChange,
  type Planned,
  Workspace,
} from './files.js';
import { detectToolchain, type Toolchain } from './toolchain.js';

/** What the session needs from the actor that runs it. */
export interface WorkspaceHost {
  /** Stores (and commits) what `path` held before the run first touched it. */
  restorePoint(path: string, content: Uint8Array | null): Promise<void>;
  /** Asks the tree's approver about an act the policy marked `ask`. */
  ask(act: Act, decision: Extract<Decision, { effect: 'ask' }>): Promise<'approve' | 'deny' | 'defer'>;
  /** Adds an event to the step in progress. */
  event(event: EventData): void;
  /** Adds a file change to the step in progress. */
  change(change: { path: string; diff: string }): void;
  /** The id of the call at `callIndex` of the completion being dispatched. */
  callId(callIndex: number): string;
  readonly signal: AbortSignal;
}

export interface ExecArgs {
  argv: string[];
  timeout_secs?: number;
}

/** The tool effects an actor implements for a workspace run. */
export interface WorkspaceEffects {
  workspaceTool(name: WorkspaceToolName, args: Record<string, unknown>, callIndex: number): Promise<ToolResult>;
}

export type WorkspaceToolName = 'read_file' | 'write_file' | 'edit_file' | 'patch_file' | 'grep' | 'find' | 'exec';

/** The tools a read may start before its completion ends (they change nothing). */
export const READ_ONLY_TOOLS: ReadonlySet<string> = new Set(['read_file', 'grep', 'find']);

const EXEC_PARAMETERS: ArgumentSchema = {
  type: 'object',
  properties: {
    argv: {
      type: 'array',
      minItems: 1,
      items: { type: 'string', minLength: 1 },
      description: 'The program and its arguments, e.g. ["npm", "test"]. Not a shell line: no pipes, no redirects.',
    },
    timeout_secs: {
      type: 'number',
      exclusiveMinimum: 0,
      description: 'Kill the command after this many seconds (default 120).',
    },
  },
  required: ['argv'],
  additionalProperties: false,
};

/** The tool definitions of a workspace run; single-file mode offers no grep or find. */
export function workspaceTools(mode: 'workspace' | 'file'): Tool<WorkspaceEffects>[] {
  const names: WorkspaceToolName[] =
    mode === 'file'
      ? ['read_file', 'write_file', 'edit_file', 'patch_file', 'exec']
      : ['read_file', 'write_file', 'edit_file', 'patch_file', 'grep', 'find', 'exec'];
  return names.map((name) => ({
    name,
    description:
      name === 'exec'
        ? 'Run a command in the workspace root from a fixed argv (the project\u2019s build, tests, linter). Returns its exit status and both output streams, bounded.'
        : FILE_TOOL_DESCRIPTIONS[name],
    parameters: name === 'exec' ? EXEC_PARAMETERS : FILE_TOOL_PARAMETERS[name],
    handler: (args, effects, callIndex) => effects.workspaceTool(name, args, callIndex),
  }));
}

const EXEC_OUTPUT_LIMIT = 32 * 1024;
const CHECK_OUTPUT_LIMIT = 8 * 1024;

export class WorkspaceSession {
  readonly workspace: Workspace;
  readonly #contract: ContractData;
  readonly #policy: Policy;
  readonly #host: WorkspaceHost;
  /** Paths whose restore point this process has already stored (the store keeps the first either way). */
  readonly #saved = new Set<string>();
  #toolchain: Toolchain | null | undefined;

  constructor(contract: ContractData, policy: Policy, host: WorkspaceHost) {
    this.#contract = contract;
    this.#policy = policy;
    this.#host = host;
    this.workspace = new Workspace({ root: contract.root, file: contract.file ?? undefined });
  }

  get toolchain(): Toolchain | null {
    if (this.#toolchain === undefined)
      this.#toolchain = detectToolchain(this.#contract.root, this.#contract.toolchain ?? undefined);
    return this.#toolchain;
  }

  /** What the model is told about the workspace, after the goal. */
  briefing(): string {
    const lines = [`Workspace root: ${this.#contract.root}`];
    if (this.#contract.file)
      lines.push(`Single-file mode: you may read and change ${this.#contract.file} and nothing else.`);
    const toolchain = this.toolchain;
    if (toolchain) {
      const test = toolchain.commands.test ? ` Tests: ${toolchain.commands.test.join(' ')}.` : '';
      lines.push(`Toolchain: ${toolchain.ecosystem} (${toolchain.driver}, from ${toolchain.marker}).${test}`);
    }
    return lines.join('\n');
  }

  /**
   * Decides an act; every decision is an event. Resolves null when allowed, or the
   * refusal to return to the model.
   */
  async authorize(act: Act): Promise<ToolResult | null> {
    const decision = this.#policy.decide(act, this.#contract.root);
    let answer: 'approve' | 'deny' | 'defer' | undefined;
    if (decision.effect === 'ask') answer = await this.#host.ask(act, decision);
    this.#host.event({
      type: 'policy-decision',
      act: act.kind,
      subject: decision.subject,
      effect: decision.effect,
      rule: decision.rule,
      layer: decision.layer,
      ...(answer === undefined ? {} : { answer }),
    });
    if (decision.effect === 'allow' || answer === 'approve') return null;
    const rule = decision.rule ?? 'policy.no-rule';
    const reason =
      decision.effect === 'deny'
        ? `${act.kind} ${decision.subject} is denied: ${decision.reason}${decision.layer ? ` (layer ${decision.layer})` : ''}.`
        : answer === 'defer'
          ? `${act.kind} ${decision.subject} needs approval (${decision.rule}, layer ${decision.layer}); the approver deferred, and deferred answers are not waited for in this release.`
          : `${act.kind} ${decision.subject} needs approval (${decision.rule}, layer ${decision.layer}) and the approver denied it.`;
    return { content: reason, isError: true, refusal: { rule, reason } };
  }

  async run(name: WorkspaceToolName, args: Record<string, unknown>, callIndex: number): Promise<ToolResult> {
    switch (name) {
      case 'read_file':
      case 'grep':
      case 'find':
        return this.read(name, args);
      case 'write_file':
        return this.#write(name, args, callIndex, () =>
          this.workspace.planWrite(args as { path: string; content: string }),
        );
      case 'edit_file':
        return this.#write(name, args, callIndex, () =>
          this.workspace.planEdit(args as { path: string; old_string: string; new_string: string }),
        );
      case 'patch_file':
        return this.#write(name, args, callIndex, () =>
          this.workspace.planPatch(args as { path: string; patch: string }),
        );
      case 'exec':
        return this.#exec(args as unknown as ExecArgs);
    }
  }

  /** A read-only tool: safe to start early, and to run twice. */
  async read(name: 'read_file' | 'grep' | 'find', args: Record<string, unknown>): Promise<ToolResult> {
    const path = typeof args.path === 'string' ? args.path : '.';
    const refused = await this.authorize({ kind: 'read', path });
    if (refused) return refused;
    return this.readNow(name, args);
  }

  /** The read itself, with no policy decision: for a read the policy already allows outright. */
  readNow(name: 'read_file' | 'grep' | 'find', args: Record<string, unknown>): ToolResult {
    if (name === 'read_file')
      return this.workspace.read(args as { path: string; start_line?: number; end_line?: number });
    if (name === 'grep') return this.workspace.grep(args as { pattern: string; path?: string; glob?: string });
    return this.workspace.find(args as { pattern: string; path?: string });
  }

  /** Whether a read could start early: the policy allows it outright (no approver is asked about a turn that may be abandoned). */
  readAllowedOutright(args: Record<string, unknown>): boolean {
    const path = typeof args.path === 'string' ? args.path : '.';
    return this.#policy.decide({ kind: 'read', path }, this.#contract.root).effect === 'allow';
  }

  async #write(
    tool: string,
    args: Record<string, unknown>,
    callIndex: number,
    plan: () => Planned,
  ): Promise<ToolResult> {
    const path = String(args.path ?? '');
    const refused = await this.authorize({ kind: 'write', path });
    if (refused) return refused;
    const planned = plan();
    if (!planned.ok) return planned.result;
    const change = planned.change;
    await this.#saveRestorePoint(change);
    this.workspace.apply(change);
    this.#host.change({ path: change.path, diff: change.diff });
    const { added, removed } = diffStat(change.diff);
    this.#host.event({
      type: 'file-changed',
      callId: this.#host.callId(callIndex),
      tool,
      path: change.path,
      added,
      removed,
    });
    const checked = await this.#check(callIndex);
    return { content: checked ? `${describeChange(change)}\n${checked}` : describeChange(change), isError: false };
  }

  async #saveRestorePoint(change: FileChange): Promise<void> {
    if (this.#saved.has(change.path)) return;
    // The bytes as they are on disk, not as decoded text: a binary file is put back exactly.
    const resolved = this.workspace.resolve(change.path);
    if (!resolved.ok) throw new Error(`a planned change names a path outside the workspace: ${change.path}`);
    let content: Uint8Array | null;
    try {
      content = readFileSync(resolved.absolute);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      content = null;
    }
    await this.#host.restorePoint(change.path, content);
    this.#saved.add(change.path);
  }

  /** After a write: the project's cheap checker, when there is one and the policy allows it outright. */
  async #check(callIndex: number): Promise<string | null> {
    const toolchain = this.toolchain;
    if (!toolchain?.check) return null;
    const argv = [...toolchain.check];
    const callId = this.#host.callId(callIndex);
    if (this.#policy.decide({ kind: 'exec', argv }, this.#contract.root).effect !== 'allow') {
      // There is no approver on the path after a write: an ask is a silent skip.
      this.#host.event({
        type: 'toolchain-checked',
        callId,
        ecosystem: toolchain.ecosystem,
        argv,
        exitStatus: null,
        ran: false,
      });
      return null;
    }
    const result = await runCommand(argv, {
      cwd: this.#contract.root,
      timeoutMs: 120_000,
      outputLimit: CHECK_OUTPUT_LIMIT,
      signal: this.#host.signal,
    });
    this.#host.event({
      type: 'toolchain-checked',
      callId,
      ecosystem: toolchain.ecosystem,
      argv,
      exitStatus: result.exitStatus,
      ran: result.started,
    });
    if (result.started && result.exitStatus === 0) return `check (${argv.join(' ')}): no problems found.`;
    return `check: ${describeCommand(argv, result)}`;
  }

  async #exec(args: ExecArgs): Promise<ToolResult> {
    const refused = await this.authorize({ kind: 'exec', argv: args.argv });
    if (refused) return refused;
    const result = await runCommand(args.argv, {
      cwd: this.#contract.root,
      timeoutMs: Math.round((args.timeout_secs ?? 120) * 1000),
      outputLimit: EXEC_OUTPUT_LIMIT,
      signal: this.#host.signal,
    });
    return {
      content: describeCommand(args.argv, result),
      isError: !result.started || result.exitStatus !== 0,
    };
  }
}
