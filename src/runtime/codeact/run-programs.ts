/**
 * The programs of one run (`withCodeAct`): the interpreters this host has for the
 * languages the contract asks for (found as the run opens; a language without one is
 * recorded as a fallback, and a run without any is offered no `run_program`), and the
 * executor programs run on, made at the first program.
 *
 * Every program's start is a policy decision: the act `tool run_program`, its source shown
 * to an approver (`Policy.default()` allows the embedder's tools, and `withCodeAct()` is the
 * embedder's own word; a policy may deny or ask). The program then runs with less than the
 * run's commands: the workspace read-only (it changes the world only through its acts, each
 * decided), no network of its own, no writable roots or shared caches, and what the model
 * may not read outright hidden. On the bubblewrap rung it sees only the system's directories
 * and the workspace, so it reads nothing the model's own tools could not; elsewhere (the
 * Landlock or namespaces rung, the floor, full access) it could read the host's files, so
 * its start is also decided as the command it is, code an interpreter runs. Where the
 * policy keeps reads back and the rung cannot hide them, no program starts.
 */

import type { EventData } from '../events.js';
import { DEFAULT_SANDBOX, type SandboxData } from '../exec/containment/boundary.js';
import type { ContainedExecutor } from '../exec/containment/contained.js';
import { SYSTEM_DIRS } from '../exec/containment/rungs.js';
import { isWithin } from '../exec/find-program.js';
import { keepsReadsBack } from '../lsp/run-servers.js';
import { checkArgv } from '../policy/commands/index.js';
import { Policy } from '../policy/policy.js';
import type { ProgramActs } from '../tools/context.js';
import { RUN_PROGRAM } from '../tools/families/codeact.js';
import { toolAct } from '../tools/families/host.js';
import type { StepContext, ToolResult } from '../tools/tool.js';
import type { CodeActData, CodeActLanguage } from './codeact.js';
import { findInterpreter, type Interpreter } from './interpreters.js';
import { NODE_PRELUDE, PYTHON_PRELUDE } from './preludes.js';
import { type ProgramOutcome, runProgram } from './program.js';

/** How an interpreter is started with the prelude (see ./preludes.ts). */
function preludeArgv(interpreter: Extract<Interpreter, { usable: true }>): string[] {
  return interpreter.language === 'python'
    ? [interpreter.path, '-I', '-c', PYTHON_PRELUDE]
    : [interpreter.path, '--disable-proto=throw', '-e', NODE_PRELUDE];
}

/** What the program's executor gives, or why no program may start. */
type Opened = { executor: ContainedExecutor; confined: boolean } | string;

/** The sandbox a program runs in: the run's, with the workspace read-only, no writable roots, no shared caches (full access stays full). */
export function programSandbox(sandbox: SandboxData | undefined): SandboxData {
  const base = sandbox ?? DEFAULT_SANDBOX;
  return base.access === 'full' ? base : { ...base, access: 'read-only', writableRoots: [], sharedCaches: false };
}

/** The policy a program's containment is drawn by: the run's without its `net` rules, so the program has no network. */
export function programPolicy(policy: Policy | null): Policy | null {
  if (policy === null) return null;
  return Policy.from({
    layers: policy.layers.map((layer) => ({ ...layer, rules: layer.rules.filter((rule) => rule.act !== 'net') })),
  });
}

export class RunPrograms {
  readonly data: CodeActData;
  readonly #interpreters: Interpreter[];
  readonly #root: string;
  readonly #policy: Policy | null;
  readonly #env: NodeJS.ProcessEnv;
  readonly #open: () => ContainedExecutor | string;
  readonly #wallSecs: number | null;
  #opened: Opened | undefined;

  /**
   * `untrusted`: where the run can write (no interpreter there is run); `wallSecs`: the
   * sandbox's wall clock for a command, which holds a program too; `open` makes the
   * programs' executor, at the first program (once).
   */
  constructor(options: {
    data: CodeActData;
    root: string;
    policy: Policy | null;
    env: NodeJS.ProcessEnv;
    untrusted: readonly string[];
    wallSecs: number | undefined;
    open: () => ContainedExecutor | string;
  }) {
    const { data } = options;
    this.data = data;
    this.#root = options.root;
    this.#policy = options.policy;
    this.#env = options.env;
    this.#open = options.open;
    this.#wallSecs = options.wallSecs ?? null;
    this.#interpreters = data.languages.map((language) => findInterpreter(language, data, options.untrusted));
  }

  /** The languages this host can run programs in, sorted. */
  get languages(): CodeActLanguage[] {
    return this.#interpreters.filter((found) => found.usable).map((found) => found.language);
  }

  /** A `codeact-fallback` event for each language asked for that this host cannot run. */
  fallbacks(): EventData[] {
    const none = this.languages.length === 0;
    return this.#interpreters.flatMap((found) =>
      found.usable
        ? []
        : [
            {
              type: 'codeact-fallback' as const,
              language: found.language,
              reason: found.reason,
              offered: none ? 'plain tool calls' : `run_program in ${this.languages.join(', ')}`,
            },
          ],
    );
  }

  #opening(): Opened {
    if (this.#opened !== undefined) return this.#opened;
    const executor = this.#open();
    if (typeof executor === 'string') {
      this.#opened = executor;
      return executor;
    }
    const report = executor.contained();
    // Confined: in bubblewrap's view of the system's directories and the workspace, with no network.
    const confined = report.rung === 'bubblewrap' && report.filesystem === 'enforced' && report.network === 'none';
    if (
      report.rung !== 'full-access' &&
      this.#policy &&
      keepsReadsBack(this.#policy, this.#root) &&
      report.reads !== 'enforced'
    ) {
      void executor.close();
      this.#opened = `no program can start: the policy keeps some files from being read, and this run's containment cannot hide them from a program (reads ${report.reads} on the ${report.rung} rung), which could then print them. Run where bubblewrap or the Landlock helper is available, or call the tools one by one.`;
    } else this.#opened = { executor, confined };
    return this.#opened;
  }

  /** Runs `source` in `language`, its acts made through `acts`; the program's answer for the model. */
  async run(language: string, source: string, acts: ProgramActs, call: StepContext): Promise<ToolResult> {
    const interpreter = this.#interpreters.find((found) => found.language === language);
    if (!interpreter?.usable)
      return {
        content: `no program can run in ${language} here${interpreter ? `: ${interpreter.reason}` : ''}; the languages are ${this.languages.join(', ')}.`,
        isError: true,
      };
    const opened = this.#opening();
    if (typeof opened === 'string') return { content: opened, isError: true };
    // Every start is decided, its source shown to whoever is asked.
    const started = await call.authorize(toolAct(RUN_PROGRAM, { language, source }));
    if (started) return started;
    const argv = preludeArgv(interpreter);
    const inView = opened.confined && SYSTEM_DIRS.some((dir) => isWithin(interpreter.path, dir));
    if (!inView) {
      // Not confined to the view: starting it is also the command it is, code an interpreter runs.
      const shown = [interpreter.path, language === 'python' ? '-c' : '-e', '<program>'];
      const refused = await call.authorizeCommand(
        { kind: 'exec', argv: shown, cwd: this.#root },
        checkArgv(shown, this.#policy as Policy, this.#root),
      );
      if (refused) return refused;
    }
    const wrapped = opened.executor.wrapCommand(
      argv,
      this.#root,
      this.#env,
      inView ? { passFds: 2, systemView: true, readOnly: this.#root } : { passFds: 2 },
    );
    const outcome = await runProgram({
      argv: wrapped.argv,
      env: wrapped.env,
      cwd: this.#root,
      source,
      tools: acts.tools(),
      maxActs: this.data.maxActs,
      maxOutputBytes: this.data.maxOutputBytes,
      wallMs: Math.min(this.data.timeoutSecs, this.#wallSecs ?? Number.POSITIVE_INFINITY) * 1000,
      signal: call.signal,
      act: (index, name, args) => acts.call(index, name, args),
    });
    if (outcome.halt) return outcome.halt;
    return { content: describeProgram(interpreter, outcome), isError: !succeeded(outcome) };
  }

  async close(): Promise<void> {
    const opened = this.#opened;
    this.#opened = 'the run has ended.';
    if (opened !== undefined && typeof opened !== 'string') await opened.executor.close();
  }
}

function succeeded(outcome: ProgramOutcome): boolean {
  return outcome.started && outcome.ended === null && outcome.exitStatus === 0;
}

/** What the model is told of a program's run: how it ended, what it asked for, and what it printed. */
export function describeProgram(interpreter: Extract<Interpreter, { usable: true }>, outcome: ProgramOutcome): string {
  const name = `${interpreter.language} ${interpreter.version}`;
  if (!outcome.started) return `the ${name} program could not be started: ${outcome.error ?? 'unknown error'}.`;
  const total = [...outcome.acts.values()].reduce((sum, count) => sum + count, 0);
  const made = [...outcome.acts.entries()].map(([tool, count]) => `${tool} ×${count}`).join(', ');
  const end =
    outcome.ended !== null
      ? `was ended: ${outcome.ended}`
      : outcome.signal
        ? `was killed by ${outcome.signal}`
        : `exited with status ${outcome.exitStatus}`;
  const lines = [
    `the ${name} program ${end}; ${total} act${total === 1 ? '' : 's'}${made ? ` (${made})` : ''}${outcome.refused > 0 ? `, ${outcome.refused} refused` : ''}.`,
  ];
  if (outcome.output.length > 0) lines.push('output:', outcome.output);
  else lines.push('it printed nothing.');
  if (outcome.dropped > 0) lines.push(`[${outcome.dropped} more bytes of output were dropped]`);
  return lines.join('\n');
}
