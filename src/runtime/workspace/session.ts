/**
 * What a workspace run's tools do, between the model's call and the file system:
 * the policy decides each act first; a write stores its restore point (committed)
 * before the file changes, records its whole-file diff for the step's commit, and
 * runs the project's cheap checker when the policy allows that command outright.
 *
 * Each tool is one entry of {@link WORKSPACE_TOOLS}. It runs inside the agent's thread;
 * the policy's settling, the approver, the intent journal, restore points and the step's
 * trace are reached through the step context each call is given ({@link WorkspaceCall}).
 */
import { relative, resolve, sep } from 'node:path';
import type { ArgumentSchema } from '../arguments.js';
import type { ContractData } from '../contract/contract.js';
import type { EventData } from '../events.js';
import type { Executor } from '../exec/executor.js';
import type { Job } from '../exec/jobs.js';
import { commandEnvironment, describeCommand } from '../exec/run-command.js';
import { type CommandCheck, checkArgv } from '../policy/commands.js';
import type { Act, Decision, Policy } from '../policy/policy.js';
import { checkShell, lineShell } from '../policy/shell.js';
import { type Halt, halted, type StepContext, type Tool, type ToolResult } from '../tools.js';
import {
  describeChange,
  diffStat,
  type EditArgs,
  FILE_TOOL_DESCRIPTIONS,
  FILE_TOOL_PARAMETERS,
  type FileChange,
  type FindArgs,
  type GrepArgs,
  type PatchArgs,
  type Planned,
  Workspace,
  type WriteArgs,
} from './files.js';
import { boundedSearch } from './search-pool.js';
import { detectToolchain, type Toolchain } from './toolchain.js';

/**
 * The step context a workspace tool is called with: the step's own (policy, approver,
 * intents, restore points, trace) and the run's workspace session, which is null outside
 * a workspace run.
 */
export interface WorkspaceCall extends StepContext {
  readonly workspace: WorkspaceSession | null;
}

export interface ExecArgs {
  argv: string[];
  timeout_secs?: number;
}

/** The most items an exec argv may have; a real command line has far fewer. */
export const MAX_ARGV_ITEMS = 4096;
/** The most characters a shell command line, or one exec argument, may have. */
export const MAX_COMMAND_CHARS = 65536;

const EXEC_PARAMETERS: ArgumentSchema = {
  type: 'object',
  properties: {
    argv: {
      type: 'array',
      minItems: 1,
      maxItems: MAX_ARGV_ITEMS,
      items: { type: 'string', minLength: 1, maxLength: MAX_COMMAND_CHARS },
      description: `The program and its arguments, e.g. ["npm", "test"]. Not a shell line: no pipes, no redirects. At most ${MAX_ARGV_ITEMS} items of at most ${MAX_COMMAND_CHARS} characters each.`,
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

const SHELL_PARAMETERS: ArgumentSchema = {
  type: 'object',
  properties: {
    command: {
      type: 'string',
      minLength: 1,
      maxLength: MAX_COMMAND_CHARS,
      description: `A command line: pipelines, &&, ||, ;, redirects, quotes and here-docs. Substitutions ($(...), backticks), subshells, functions and background jobs are refused. At most ${MAX_COMMAND_CHARS} characters.`,
    },
    timeout_secs: {
      type: 'number',
      exclusiveMinimum: 0,
      description: 'Kill it after this many seconds (default 120).',
    },
  },
  required: ['command'],
  additionalProperties: false,
};

const SHELL_START_PARAMETERS: ArgumentSchema = {
  type: 'object',
  properties: {
    command: {
      type: 'string',
      minLength: 1,
      maxLength: MAX_COMMAND_CHARS,
      description: `A command line that outlives the step (a dev server, a log tail); checked like shell. At most ${MAX_COMMAND_CHARS} characters.`,
    },
  },
  required: ['command'],
  additionalProperties: false,
};

const HANDLE_PARAMETERS: ArgumentSchema = {
  type: 'object',
  properties: {
    handle: { type: 'string', minLength: 1, maxLength: 64, description: 'The handle shell_start returned.' },
    wait_secs: {
      type: 'number',
      minimum: 0,
      description: 'shell_poll: wait up to this many seconds for new output or the end (default 0).',
    },
  },
  required: ['handle'],
  additionalProperties: false,
};

/**
 * How a workspace tool is declared: one entry of {@link WORKSPACE_TOOLS} is the whole of
 * a tool (its definition for the model, what kind of act it is, where it is offered, and
 * what it does with the session's step context).
 */
interface WorkspaceToolDeclaration {
  description: string;
  parameters: ArgumentSchema;
  /**
   * `reads` changes nothing; `acts` changes the workspace or runs something, and is refused
   * while a plan gate is still planning; `controls` acts only on what the run itself
   * started (its background commands).
   */
  kind: 'reads' | 'acts' | 'controls';
  /**
   * Starts while its completion still streams (see {@link Tool.early}). Not grep or find:
   * their matching runs on the bounded search pool, where a search started for a turn that
   * is then abandoned would hold the pool's one thread.
   */
  early?(session: WorkspaceSession, args: Record<string, unknown>, call: StepContext): ToolResult | null;
  /** The tier it is offered in under tool tiers (see {@link Tool.family}); absent, the core. */
  family?: 'jobs';
  /** Offered in single-file mode, which reaches one file and nothing else: no search, and no command. */
  singleFile?: true;
  run(session: WorkspaceSession, args: Record<string, unknown>, call: WorkspaceCall): Promise<ToolResult>;
}

/** A file tool that writes: the change planned from the arguments, then authorized, kept and made. */
function fileWrite(
  name: 'write_file' | 'edit_file' | 'patch_file',
  plan: (workspace: Workspace, args: Record<string, unknown>) => Planned,
): WorkspaceToolDeclaration {
  return {
    description: FILE_TOOL_DESCRIPTIONS[name],
    parameters: FILE_TOOL_PARAMETERS[name],
    kind: 'acts',
    singleFile: true,
    run: (session, args, call) => session.write(name, args, call, () => plan(session.workspace, args)),
  };
}

const WORKSPACE_TOOLS = {
  read_file: {
    description: FILE_TOOL_DESCRIPTIONS.read_file,
    parameters: FILE_TOOL_PARAMETERS.read_file,
    kind: 'reads',
    early: (session, args, call) => {
      const located = session.locate(args);
      return located.ok && call.decide({ kind: 'read', path: located.path }) === 'allow'
        ? session.readNow(args, located.path)
        : null;
    },
    singleFile: true,
    run: (session, args, call) => session.read('read_file', args, call),
  },
  write_file: fileWrite('write_file', (workspace, args) => workspace.planWrite(args as unknown as WriteArgs)),
  edit_file: fileWrite('edit_file', (workspace, args) => workspace.planEdit(args as unknown as EditArgs)),
  patch_file: fileWrite('patch_file', (workspace, args) => workspace.planPatch(args as unknown as PatchArgs)),
  grep: {
    description: FILE_TOOL_DESCRIPTIONS.grep,
    parameters: FILE_TOOL_PARAMETERS.grep,
    kind: 'reads',
    run: (session, args, call) => session.read('grep', args, call),
  },
  find: {
    description: FILE_TOOL_DESCRIPTIONS.find,
    parameters: FILE_TOOL_PARAMETERS.find,
    kind: 'reads',
    run: (session, args, call) => session.read('find', args, call),
  },
  exec: {
    description:
      'Run a command in the workspace root from a fixed argv (the project\u2019s build, tests, linter). Returns its exit status and both output streams, bounded.',
    parameters: EXEC_PARAMETERS,
    kind: 'acts',
    run: (session, args, call) => session.exec(args as unknown as ExecArgs, call),
  },
  shell: {
    description:
      'Run a command line in the workspace root. Every stage and every redirect is checked before anything starts. Returns the exit status and both streams, bounded.',
    parameters: SHELL_PARAMETERS,
    kind: 'acts',
    run: (session, args, call) => session.shell(args as { command: string; timeout_secs?: number }, call),
  },
  shell_start: {
    description:
      'Start a long-lived command line in the background (checked like shell); returns a handle for shell_poll and shell_kill. It is killed when the run ends.',
    parameters: SHELL_START_PARAMETERS,
    family: 'jobs',
    kind: 'acts',
    run: (session, args, call) => session.shellStart(args as { command: string }, call),
  },
  shell_poll: {
    description: 'New output of a command started with shell_start, and whether it is still running.',
    parameters: HANDLE_PARAMETERS,
    family: 'jobs',
    kind: 'reads',
    run: (session, args) => session.shellPoll(args as { handle: string; wait_secs?: number }),
  },
  shell_kill: {
    description: 'Stop a command started with shell_start, with everything it started.',
    parameters: HANDLE_PARAMETERS,
    family: 'jobs',
    kind: 'controls',
    run: (session, args) => session.shellKill(args as { handle: string }),
  },
} satisfies Record<string, WorkspaceToolDeclaration>;

export type WorkspaceToolName = keyof typeof WORKSPACE_TOOLS;

/**
 * The workspace tools, as the registry takes them; single-file mode offers only the file
 * tools. A tool that acts waits while the run is planning; an early read starts only where
 * the policy allows it outright.
 */
export function workspaceTools(mode: 'workspace' | 'file'): Tool<WorkspaceCall>[] {
  return Object.entries(WORKSPACE_TOOLS as Record<string, WorkspaceToolDeclaration>)
    .filter(([, tool]) => mode === 'workspace' || tool.singleFile === true)
    .map(([name, tool]) => {
      const early = tool.early;
      return {
        name,
        description: tool.description,
        parameters: tool.parameters,
        // Stopping what the run itself started acts on the world too.
        kind: tool.kind === 'reads' ? ('reads' as const) : ('acts' as const),
        ...(tool.family ? { family: tool.family } : {}),
        ...(early
          ? {
              early: (args: Record<string, unknown>, call: WorkspaceCall) =>
                call.workspace ? early(call.workspace, args, call) : null,
            }
          : {}),
        execute: async (args: Record<string, unknown>, call: WorkspaceCall) => {
          const session = call.workspace;
          if (!session) return { content: `${name} is not available outside a workspace run.`, isError: true };
          if (tool.kind === 'acts' && call.planning) {
            const reason = `${name} waits for an approved plan: this run is in its planning phase, so read what you need and call submit_plan.`;
            return { content: reason, isError: true, refusal: { rule: 'plan-gate', reason } };
          }
          return tool.run(session, args, call);
        },
      };
    });
}

const EXEC_OUTPUT_LIMIT = 32 * 1024;
const CHECK_OUTPUT_LIMIT = 8 * 1024;

/** Who refused an ask: the approver that was asked, or nobody, since none was given. */
function whoRefused(answer: string | undefined): string {
  return answer === 'no-approver'
    ? 'no approver was given to ask, so it was refused; pass one to run() ({ approver }), or allow it in the policy'
    : 'the approver denied it';
}

/** What settling a decision needs of the run: a person to ask, and the step's events to record in. */
export interface DecisionHost {
  /**
   * Asks the tree's approver about an act the policy marked `ask` (or reads the answer a
   * person stored while the run was paused). A deferral, or a cancel while waiting, is a
   * {@link Halt}: the step stops at this call.
   */
  ask(
    act: Act,
    decision: Extract<Decision, { effect: 'ask' }>,
    callIndex: number,
  ): Promise<'approve' | 'deny' | 'no-approver' | Halt>;
  event(event: EventData): void;
}

/** Records a policy decision (with the person's answer, when one was asked) in the step. */
export function recordDecision(
  host: DecisionHost,
  subject: string,
  act: Act['kind'],
  decision: Decision,
  answer?: 'approve' | 'deny',
): void {
  host.event({
    type: 'policy-decision',
    act,
    subject,
    effect: decision.effect,
    rule: decision.rule,
    layer: decision.layer,
    ...(answer === undefined ? {} : { answer }),
  });
}

/**
 * Settles a decision on one act: asks when it says ask, records it (and the `others` the
 * act also needed), and returns the refusal to give the model, or null when the act may go on.
 */
export async function settleDecision(
  host: DecisionHost,
  act: Act,
  decision: Decision,
  others: Decision[],
  callIndex: number,
): Promise<ToolResult | null> {
  let answer: 'approve' | 'deny' | 'no-approver' | undefined;
  if (decision.effect === 'ask') {
    const asked = await host.ask(act, decision, callIndex);
    if (typeof asked !== 'string') return halted(asked);
    answer = asked;
  }
  for (const other of others) recordDecision(host, other.subject, act.kind, other);
  recordDecision(host, decision.subject, act.kind, decision, answer === 'no-approver' ? 'deny' : answer);
  if (decision.effect === 'allow' || answer === 'approve') return null;
  const rule = decision.rule ?? 'policy.no-rule';
  const reason =
    decision.effect === 'deny'
      ? `${act.kind} ${decision.subject} is denied: ${decision.reason}${decision.layer ? ` (layer ${decision.layer})` : ''}.`
      : `${act.kind} ${decision.subject} needs approval (${decision.rule}, layer ${decision.layer}) and ${whoRefused(answer)}.`;
  return { content: reason, isError: true, refusal: { rule, reason, layer: decision.layer ?? 'policy' } };
}

/**
 * Settles a command checked as the programs it really runs (wrappers unwrapped, every
 * stage of a line): a stage the checker refused refuses the whole; the stages that ask
 * are one question, naming them all, whose answer is for the whole command. Every
 * decision is recorded. Returns the refusal, or null when the command may run.
 */
export async function settleCommand(
  host: DecisionHost,
  act: Act,
  check: CommandCheck,
  callIndex: number,
): Promise<ToolResult | null> {
  if (!check.ok) {
    for (const decision of check.decisions) recordDecision(host, decision.subject, act.kind, decision);
    const rule = check.rule;
    const reason = `${act.kind === 'exec' ? 'the command' : act.kind} is refused: ${check.reason}${check.layer ? ` (layer ${check.layer})` : ''}.`;
    return { content: reason, isError: true, refusal: { rule, reason, layer: check.layer ?? 'boundary' } };
  }
  const asking = check.decisions.filter((decision) => decision.effect === 'ask') as Extract<
    Decision,
    { effect: 'ask' }
  >[];
  if (asking.length === 0) {
    for (const decision of check.decisions) recordDecision(host, decision.subject, act.kind, decision);
    return null;
  }
  const question: Extract<Decision, { effect: 'ask' }> =
    asking.length === 1
      ? (asking[0] as Extract<Decision, { effect: 'ask' }>)
      : {
          effect: 'ask',
          rule: [...new Set(asking.map((decision) => decision.rule))].join(' + '),
          layer: [...new Set(asking.map((decision) => decision.layer))].join(' + '),
          subject: asking.map((decision) => decision.subject).join(' | '),
        };
  const answer = await host.ask(act, question, callIndex);
  if (typeof answer !== 'string') return halted(answer);
  for (const decision of check.decisions) {
    const recorded = answer === 'no-approver' ? 'deny' : answer;
    recordDecision(host, decision.subject, act.kind, decision, decision.effect === 'ask' ? recorded : undefined);
  }
  if (answer === 'approve') return null;
  const reason = `${act.kind} ${question.subject} needs approval (${question.rule}, layer ${question.layer}) and ${whoRefused(answer)}.`;
  return { content: reason, isError: true, refusal: { rule: question.rule, reason, layer: question.layer } };
}

export class WorkspaceSession {
  readonly workspace: Workspace;
  readonly #contract: ContractData;
  readonly #policy: Policy;
  #toolchain: Toolchain | null | undefined;
  readonly #jobs = new Map<string, Job>();
  #nextHandle = 0;

  readonly #env: NodeJS.ProcessEnv;
  readonly #executor: Executor;
  #containmentNoted = false;

  /** The environment the run's commands (and its command gate) get: the allow-list, never a key variable. */
  get commandEnv(): NodeJS.ProcessEnv {
    return this.#env;
  }

  /**
   * `secrets`: environment variables commands must not inherit (the provider specs' key
   * variables). `executor`: what starts the run's commands, the executor factory's for the
   * run (src/runtime/exec/factory.ts); there is no default.
   */
  constructor(contract: ContractData, policy: Policy, secrets: readonly string[], executor: Executor) {
    this.#executor = executor;
    this.#env = commandEnvironment(process.env, secrets, contract.inheritedEnv ?? []);
    this.#contract = contract;
    this.#policy = policy;
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
    const containment = this.#executor.containment();
    record({
      type: 'process-containment',
      mechanism: containment.mechanism,
      reason: containment.mechanism === 'process-group' ? containment.reason : null,
    });
    const contained = this.#executor.contained?.();
    if (contained) {
      const probe = await this.#executor.probe?.();
      record({ type: 'contained', ...contained, ...(probe ? { probe } : {}) });
    }
  }

  get toolchain(): Toolchain | null {
    if (this.#toolchain === undefined)
      this.#toolchain = detectToolchain(this.#contract.root, this.#contract.toolchain ?? undefined);
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

  /** A read-only tool: safe to start early, and to run twice. */
  async read(
    name: 'read_file' | 'grep' | 'find',
    args: Record<string, unknown>,
    call: StepContext,
  ): Promise<ToolResult> {
    const located = this.locate(args);
    if (!located.ok) return located.result;
    const refused = await call.authorize({ kind: 'read', path: located.path });
    if (refused) return refused;
    if (name === 'read_file') return call.started ?? this.readNow(args, located.path);
    // The model's pattern runs on the search pool, bounded in time and stopped with the run.
    return this.workspace.search(name, args as unknown as GrepArgs | FindArgs, (task) =>
      boundedSearch(task, call.signal),
    );
  }

  /**
   * The read itself, with no policy decision: for a read the policy already allowed, of
   * `decided`, the path it resolved to then (one that resolves elsewhere now is refused).
   */
  readNow(args: Record<string, unknown>, decided: string): ToolResult {
    return this.workspace.read(args as { path: string; start_line?: number; end_line?: number }, decided);
  }

  /**
   * The path a file tool names, resolved the way the tool will resolve it (links
   * followed), so the policy decides on the file that is really read or written.
   */
  locate(args: Record<string, unknown>): { ok: true; path: string } | { ok: false; result: ToolResult } {
    const path = typeof args.path === 'string' && args.path !== '' ? args.path : '.';
    if (path === '.') return { ok: true, path };
    const resolved = this.workspace.resolve(path);
    return resolved.ok ? { ok: true, path: resolved.relative } : resolved;
  }

  async write(
    tool: string,
    args: Record<string, unknown>,
    call: StepContext,
    plan: () => Planned,
  ): Promise<ToolResult> {
    const path = String(args.path ?? '');
    const refused = await call.authorize({ kind: 'write', path });
    if (refused) return refused;
    const planned = plan();
    if (!planned.ok) return planned.result;
    const change = planned.change;
    // The policy decided on where the path led when it looked; the plan resolved it again.
    // Through a link, the file the change acts on is decided on too, by its own name.
    if (change.path !== this.#asWritten(path)) {
      const target = await call.authorize({ kind: 'write', path: change.path });
      if (target) return target;
    }
    const saved = await this.#saveRestorePoint(change, call);
    if (saved) return saved;
    let applied: ToolResult | null;
    try {
      applied = this.workspace.applyOrRefuse(change);
    } catch (error) {
      return { content: `could not write ${change.path}: ${(error as Error).message}`, isError: true };
    }
    if (applied) return applied;
    call.change({ path: change.path, diff: change.diff });
    const { added, removed } = diffStat(change.diff);
    call.record({
      type: 'file-changed',
      callId: call.callId,
      tool,
      path: change.path,
      added,
      removed,
    });
    const checked = await this.#check(call);
    return { content: checked ? `${describeChange(change)}\n${checked}` : describeChange(change), isError: false };
  }

  /** `path` relative to the root by name alone, as the model wrote it. */
  #asWritten(path: string): string {
    const root = this.workspace.root;
    return relative(root, resolve(root, path)).split(sep).join('/');
  }

  /**
   * Before every write, a fenced store call: the run's restore point on first touch, the
   * step's own image, and a lease check, so a driver that lost its lease writes nothing.
   * The bytes are read by the change's path with no link followed; a link swapped in
   * since the plan refuses the write (the answer), before anything is stored.
   */
  async #saveRestorePoint(change: FileChange, call: StepContext): Promise<ToolResult | null> {
    // The bytes as they are on disk, not as decoded text: a binary file is put back exactly.
    const current = this.workspace.current(change.path);
    if (!current.ok) return current.result;
    await call.restorePoint(change.path, current.content);
    return null;
  }

  /** After a write: the project's cheap checker, when there is one and the policy allows it outright. */
  async #check(call: StepContext): Promise<string | null> {
    const toolchain = this.toolchain;
    // A run that may not run commands (exec masked) does not run the checker either.
    if (!toolchain?.check || this.#contract.toolMask.includes('exec')) return null;
    const argv = [...toolchain.check];
    const callId = call.callId;
    if (this.#policy.decide({ kind: 'exec', argv }, this.#contract.root).effect !== 'allow') {
      // There is no approver on the path after a write: an ask is a silent skip.
      call.record({
        type: 'toolchain-checked',
        callId,
        ecosystem: toolchain.ecosystem,
        argv,
        exitStatus: null,
        ran: false,
      });
      return null;
    }
    await this.noteContainment((event) => call.record(event));
    const result = await this.#executor.run({
      argv,
      purpose: 'checker',
      cwd: this.#contract.root,
      timeoutMs: 120_000,
      outputLimit: CHECK_OUTPUT_LIMIT,
      signal: call.signal,
      env: this.#env,
    });
    call.record({
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

  async exec(args: ExecArgs, call: StepContext): Promise<ToolResult> {
    const act: Act = { kind: 'exec', argv: args.argv };
    const refused = await call.authorizeCommand(act, checkArgv(args.argv, this.#policy, this.#contract.root));
    if (refused) return refused;
    // How the run's commands are contained is recorded (and probed) before the intent: the probe is no effect of the call.
    await this.noteContainment((event) => call.record(event));
    return call.intent('exec', args.argv.join(' '), async () => {
      const result = await this.#executor.run({
        argv: args.argv,
        purpose: 'exec',
        origin: { callId: call.callId, tool: 'exec' },
        cwd: this.#contract.root,
        timeoutMs: Math.round((args.timeout_secs ?? 120) * 1000),
        outputLimit: EXEC_OUTPUT_LIMIT,
        signal: call.signal,
        env: this.#env,
      });
      if (result.capReached) call.record({ type: 'cap-reached', callId: call.callId, ...result.capReached });
      return { content: describeCommand(args.argv, result), isError: !result.started || result.exitStatus !== 0 };
    });
  }

  /** A shell line checked stage by stage (and redirect by redirect): a refusal, or null to go on. */
  #authorizeLine(command: string, call: StepContext): Promise<ToolResult | null> {
    const act: Act = { kind: 'exec', argv: ['sh', '-c', command] };
    return call.authorizeCommand(act, checkShell(command, this.#policy, this.#contract.root));
  }

  /** A command line, parsed here and checked stage by stage (and redirect by redirect) before anything starts. */
  async shell(args: { command: string; timeout_secs?: number }, call: StepContext): Promise<ToolResult> {
    const refused = await this.#authorizeLine(args.command, call);
    if (refused) return refused;
    // How the run's commands are contained is recorded (and probed) before the intent: the probe is no effect of the call.
    await this.noteContainment((event) => call.record(event));
    return call.intent('shell', args.command, async () => {
      // What runs is exactly what was checked: the parser refuses every construct whose
      // meaning it does not fully know, and the line runs under the shell it models.
      const argv = [lineShell(), '-c', args.command];
      const result = await this.#executor.run({
        argv,
        purpose: 'shell',
        origin: { callId: call.callId, tool: 'shell' },
        cwd: this.#contract.root,
        timeoutMs: Math.round((args.timeout_secs ?? 120) * 1000),
        outputLimit: EXEC_OUTPUT_LIMIT,
        signal: call.signal,
        env: this.#env,
      });
      if (result.capReached) call.record({ type: 'cap-reached', callId: call.callId, ...result.capReached });
      return {
        content: describeCommand([args.command], result),
        isError: !result.started || result.exitStatus !== 0,
      };
    });
  }

  async shellStart(args: { command: string }, call: StepContext): Promise<ToolResult> {
    const refused = await this.#authorizeLine(args.command, call);
    if (refused) return refused;
    // How the run's commands are contained is recorded (and probed) before the intent: the probe is no effect of the call.
    await this.noteContainment((event) => call.record(event));
    return call.intent('shell_start', args.command, async () => {
      const handle = `sh-${++this.#nextHandle}`;
      const job = this.#executor.start({
        argv: [lineShell(), '-c', args.command],
        purpose: 'shell_start',
        origin: { callId: call.callId, tool: 'shell_start' },
        cwd: this.#contract.root,
        outputLimit: EXEC_OUTPUT_LIMIT,
        env: this.#env,
      });
      this.#jobs.set(handle, job);
      return { content: `started ${handle}: ${args.command}`, isError: false };
    });
  }

  async shellPoll(args: { handle: string; wait_secs?: number }): Promise<ToolResult> {
    const job = this.#jobs.get(args.handle);
    if (!job) return unknownHandle(args.handle, [...this.#jobs.keys()]);
    await job.settle(Math.min(args.wait_secs ?? 0, 30) * 1000);
    return { content: job.poll(), isError: false };
  }

  async shellKill(args: { handle: string }): Promise<ToolResult> {
    const job = this.#jobs.get(args.handle);
    if (!job) return unknownHandle(args.handle, [...this.#jobs.keys()]);
    job.kill();
    await job.settle(5_000);
    this.#jobs.delete(args.handle);
    return { content: `killed ${args.handle}. ${job.poll()}`, isError: false };
  }

  /** Stops everything the run started with shell_start, with all they started: a run that ends leaves nothing behind. */
  async close(): Promise<void> {
    for (const job of this.#jobs.values()) job.kill();
    await Promise.all([...this.#jobs.values()].map((job) => job.settle(5_000)));
    this.#jobs.clear();
    await this.#executor.close?.();
  }
}

function unknownHandle(handle: string, known: string[]): ToolResult {
  return {
    content: `no command ${JSON.stringify(handle)} is running in this run${known.length ? `; the handles are ${known.join(', ')}` : ''}. Commands started before a resume do not survive it.`,
    isError: true,
  };
}

/**
 * What the model is told about the workspace after the goal. Computed once when the run
 * is created and stored with it, so a resumed run's first turn is the same bytes even if
 * the run has since created a marker file.
 */
export function briefingFor(contract: ContractData): string {
  const lines = [`Workspace root: ${contract.root}`];
  if (contract.file) lines.push(`Single-file mode: you may read and change ${contract.file} and nothing else.`);
  const toolchain = detectToolchain(contract.root, contract.toolchain ?? undefined);
  if (toolchain) {
    const test = toolchain.commands.test ? ` Tests: ${toolchain.commands.test.join(' ')}.` : '';
    lines.push(`Toolchain: ${toolchain.ecosystem} (${toolchain.driver}, from ${toolchain.marker}).${test}`);
  }
  return lines.join('\n');
}
