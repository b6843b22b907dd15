/**
 * The command tools of a workspace run: `exec` (a fixed argv), `shell` (a command line,
 * checked stage by stage and redirect by redirect before anything starts), and the jobs
 * family (`shell_start`, `shell_poll`, `shell_kill`) for commands that outlive a step.
 * Every command is checked as the programs it really runs, settled through the step
 * context (one question covers every stage that asks), journaled as an intent, and
 * started by the run's executor in the workspace root with the run's environment.
 */
import type { ArgumentSchema } from '../../arguments.js';
import { describeCommand } from '../../exec/run-command.js';
import { checkArgv, checkShell } from '../../policy/commands/index.js';
import type { Act } from '../../policy/policy.js';
import { lineShell } from '../../policy/shell.js';
import type { WorkspaceSession } from '../../workspace/session.js';
import type { StepContext, ToolResult } from '../tool.js';
import type { WorkspaceToolDeclaration } from './workspace.js';

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

const EXEC_OUTPUT_LIMIT = 32 * 1024;

/** The command tools, declared: what the model sees of each, and what a call does. */
export const COMMAND_TOOLS = {
  exec: {
    description:
      'Run a command in the workspace root from a fixed argv (the project\u2019s build, tests, linter). Returns its exit status and both output streams, bounded.',
    parameters: EXEC_PARAMETERS,
    kind: 'acts',
    run: (session, args, call) => exec(session, args as unknown as ExecArgs, call),
  },
  shell: {
    description:
      'Run a command line in the workspace root. Every stage and every redirect is checked before anything starts. Returns the exit status and both streams, bounded.',
    parameters: SHELL_PARAMETERS,
    kind: 'acts',
    run: (session, args, call) => shell(session, args as { command: string; timeout_secs?: number }, call),
  },
  shell_start: {
    description:
      'Start a long-lived command line in the background (checked like shell); returns a handle for shell_poll and shell_kill. It is killed when the run ends.',
    parameters: SHELL_START_PARAMETERS,
    family: 'jobs',
    kind: 'acts',
    run: (session, args, call) => shellStart(session, args as { command: string }, call),
  },
  shell_poll: {
    description: 'New output of a command started with shell_start, and whether it is still running.',
    parameters: HANDLE_PARAMETERS,
    family: 'jobs',
    kind: 'reads',
    run: (session, args) => shellPoll(session, args as { handle: string; wait_secs?: number }),
  },
  shell_kill: {
    description: 'Stop a command started with shell_start, with everything it started.',
    parameters: HANDLE_PARAMETERS,
    family: 'jobs',
    kind: 'controls',
    run: (session, args) => shellKill(session, args as { handle: string }),
  },
} satisfies Record<string, WorkspaceToolDeclaration>;

async function exec(session: WorkspaceSession, args: ExecArgs, call: StepContext): Promise<ToolResult> {
  const root = session.contract.root;
  const act: Act = { kind: 'exec', argv: args.argv };
  const refused = await call.authorizeCommand(act, checkArgv(args.argv, session.policy, root));
  if (refused) return refused;
  // How the run's commands are contained is recorded (and probed) before the intent: the probe is no effect of the call.
  await session.noteContainment((event) => call.record(event));
  return call.intent('exec', args.argv.join(' '), async () => {
    const result = await session.executor.run({
      argv: args.argv,
      purpose: 'exec',
      origin: { callId: call.callId, tool: 'exec' },
      cwd: root,
      timeoutMs: Math.round((args.timeout_secs ?? 120) * 1000),
      outputLimit: EXEC_OUTPUT_LIMIT,
      signal: call.signal,
      env: session.commandEnv,
    });
    if (result.capReached) call.record({ type: 'cap-reached', callId: call.callId, ...result.capReached });
    return { content: describeCommand(args.argv, result), isError: !result.started || result.exitStatus !== 0 };
  });
}

/** A shell line checked stage by stage (and redirect by redirect): a refusal, or null to go on. */
function authorizeLine(session: WorkspaceSession, command: string, call: StepContext): Promise<ToolResult | null> {
  const act: Act = { kind: 'exec', argv: ['sh', '-c', command] };
  return call.authorizeCommand(act, checkShell(command, session.policy, session.contract.root));
}

/** A command line, parsed here and checked stage by stage (and redirect by redirect) before anything starts. */
async function shell(
  session: WorkspaceSession,
  args: { command: string; timeout_secs?: number },
  call: StepContext,
): Promise<ToolResult> {
  const refused = await authorizeLine(session, args.command, call);
  if (refused) return refused;
  // How the run's commands are contained is recorded (and probed) before the intent: the probe is no effect of the call.
  await session.noteContainment((event) => call.record(event));
  return call.intent('shell', args.command, async () => {
    // What runs is exactly what was checked: the parser refuses every construct whose
    // meaning it does not fully know, and the line runs under the shell it models.
    const argv = [lineShell(), '-c', args.command];
    const result = await session.executor.run({
      argv,
      purpose: 'shell',
      origin: { callId: call.callId, tool: 'shell' },
      cwd: session.contract.root,
      timeoutMs: Math.round((args.timeout_secs ?? 120) * 1000),
      outputLimit: EXEC_OUTPUT_LIMIT,
      signal: call.signal,
      env: session.commandEnv,
    });
    if (result.capReached) call.record({ type: 'cap-reached', callId: call.callId, ...result.capReached });
    return {
      content: describeCommand([args.command], result),
      isError: !result.started || result.exitStatus !== 0,
    };
  });
}

async function shellStart(
  session: WorkspaceSession,
  args: { command: string },
  call: StepContext,
): Promise<ToolResult> {
  const refused = await authorizeLine(session, args.command, call);
  if (refused) return refused;
  // How the run's commands are contained is recorded (and probed) before the intent: the probe is no effect of the call.
  await session.noteContainment((event) => call.record(event));
  return call.intent('shell_start', args.command, async () => {
    const handle = session.nextJobHandle();
    const job = session.executor.start({
      argv: [lineShell(), '-c', args.command],
      purpose: 'shell_start',
      origin: { callId: call.callId, tool: 'shell_start' },
      cwd: session.contract.root,
      outputLimit: EXEC_OUTPUT_LIMIT,
      env: session.commandEnv,
    });
    session.keepJob(handle, job);
    return { content: `started ${handle}: ${args.command}`, isError: false };
  });
}

async function shellPoll(session: WorkspaceSession, args: { handle: string; wait_secs?: number }): Promise<ToolResult> {
  const job = session.job(args.handle);
  if (!job) return unknownHandle(args.handle, session.jobHandles());
  await job.settle(Math.min(args.wait_secs ?? 0, 30) * 1000);
  return { content: job.poll(), isError: false };
}

async function shellKill(session: WorkspaceSession, args: { handle: string }): Promise<ToolResult> {
  const job = session.job(args.handle);
  if (!job) return unknownHandle(args.handle, session.jobHandles());
  job.kill();
  await job.settle(5_000);
  session.dropJob(args.handle);
  return { content: `killed ${args.handle}. ${job.poll()}`, isError: false };
}

function unknownHandle(handle: string, known: string[]): ToolResult {
  return {
    content: `no command ${JSON.stringify(handle)} is running in this run${known.length ? `; the handles are ${known.join(', ')}` : ''}. Commands started before a resume do not survive it.`,
    isError: true,
  };
}
