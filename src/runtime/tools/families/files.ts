/**
 * The file tools of a workspace run: `read_file`, `grep` and `find` read; `write_file`,
 * `edit_file` and `patch_file` change a file. The policy decides each act first, on the
 * path as it really resolves (links followed); a write stores its restore point
 * (committed) before the file changes, records its whole-file diff for the step's commit,
 * and runs the project's cheap checker when the policy allows that command outright.
 * What a tool does to the files is in runtime/workspace/files.ts; this is the tool.
 */
import { relative, resolve, sep } from 'node:path';
import { describeCommand } from '../../exec/run-command.js';
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
  type Workspace,
  type WriteArgs,
} from '../../workspace/files.js';
import { boundedSearch } from '../../workspace/search-pool.js';
import type { WorkspaceSession } from '../../workspace/session.js';
import type { StepContext, ToolResult } from '../tool.js';
import type { WorkspaceToolDeclaration } from './workspace.js';

const CHECK_OUTPUT_LIMIT = 8 * 1024;

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
    run: (session, args, call) => write(session, name, args, call, () => plan(session.workspace, args)),
  };
}

/** The file tools, declared: what the model sees of each, and what a call does. */
export const FILE_TOOLS = {
  read_file: {
    description: FILE_TOOL_DESCRIPTIONS.read_file,
    parameters: FILE_TOOL_PARAMETERS.read_file,
    kind: 'reads',
    early: (session, args, call) => {
      const located = locate(session, args);
      return located.ok && call.decide({ kind: 'read', path: located.path }) === 'allow'
        ? session.readNow(args, located.path)
        : null;
    },
    singleFile: true,
    run: (session, args, call) => read(session, 'read_file', args, call),
  },
  write_file: fileWrite('write_file', (workspace, args) => workspace.planWrite(args as unknown as WriteArgs)),
  edit_file: fileWrite('edit_file', (workspace, args) => workspace.planEdit(args as unknown as EditArgs)),
  patch_file: fileWrite('patch_file', (workspace, args) => workspace.planPatch(args as unknown as PatchArgs)),
  grep: {
    description: FILE_TOOL_DESCRIPTIONS.grep,
    parameters: FILE_TOOL_PARAMETERS.grep,
    kind: 'reads',
    run: (session, args, call) => read(session, 'grep', args, call),
  },
  find: {
    description: FILE_TOOL_DESCRIPTIONS.find,
    parameters: FILE_TOOL_PARAMETERS.find,
    kind: 'reads',
    run: (session, args, call) => read(session, 'find', args, call),
  },
} satisfies Record<string, WorkspaceToolDeclaration>;

/** A read-only tool: safe to start early, and to run twice. */
async function read(
  session: WorkspaceSession,
  name: 'read_file' | 'grep' | 'find',
  args: Record<string, unknown>,
  call: StepContext,
): Promise<ToolResult> {
  const located = locate(session, args);
  if (!located.ok) return located.result;
  const refused = await call.authorize({ kind: 'read', path: located.path });
  if (refused) return refused;
  if (name === 'read_file') return call.started ?? session.readNow(args, located.path);
  // The model's pattern runs on the search pool, bounded in time and stopped with the run.
  return session.workspace.search(name, args as unknown as GrepArgs | FindArgs, (task) =>
    boundedSearch(task, call.signal),
  );
}

/**
 * The path a file tool names, resolved the way the tool will resolve it (links
 * followed), so the policy decides on the file that is really read or written.
 */
function locate(
  session: WorkspaceSession,
  args: Record<string, unknown>,
): { ok: true; path: string } | { ok: false; result: ToolResult } {
  const path = typeof args.path === 'string' && args.path !== '' ? args.path : '.';
  if (path === '.') return { ok: true, path };
  const resolved = session.workspace.resolve(path);
  return resolved.ok ? { ok: true, path: resolved.relative } : resolved;
}

async function write(
  session: WorkspaceSession,
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
  if (change.path !== asWritten(session.workspace, path)) {
    const target = await call.authorize({ kind: 'write', path: change.path });
    if (target) return target;
  }
  const saved = await saveRestorePoint(session.workspace, change, call);
  if (saved) return saved;
  let applied: ToolResult | null;
  try {
    applied = session.workspace.applyOrRefuse(change);
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
  const checked = await check(session, call);
  return { content: checked ? `${describeChange(change)}\n${checked}` : describeChange(change), isError: false };
}

/** `path` relative to the root by name alone, as the model wrote it. */
function asWritten(workspace: Workspace, path: string): string {
  const root = workspace.root;
  return relative(root, resolve(root, path)).split(sep).join('/');
}

/**
 * Before every write, a fenced store call: the run's restore point on first touch, the
 * step's own image, and a lease check, so a driver that lost its lease writes nothing.
 * The bytes are read by the change's path with no link followed; a link swapped in
 * since the plan refuses the write (the answer), before anything is stored.
 */
async function saveRestorePoint(
  workspace: Workspace,
  change: FileChange,
  call: StepContext,
): Promise<ToolResult | null> {
  // The bytes as they are on disk, not as decoded text: a binary file is put back exactly.
  const current = workspace.current(change.path);
  if (!current.ok) return current.result;
  await call.restorePoint(change.path, current.content);
  return null;
}

/** After a write: the project's cheap checker, when there is one and the policy allows it outright. */
async function check(session: WorkspaceSession, call: StepContext): Promise<string | null> {
  const { contract } = session;
  const toolchain = session.toolchain;
  // A run that may not run commands (exec masked) does not run the checker either.
  if (!toolchain?.check || contract.toolMask.includes('exec')) return null;
  const argv = [...toolchain.check];
  const callId = call.callId;
  if (session.policy.decide({ kind: 'exec', argv }, contract.root).effect !== 'allow') {
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
  await session.noteContainment((event) => call.record(event));
  const result = await session.executor.run({
    argv,
    purpose: 'checker',
    cwd: contract.root,
    timeoutMs: 120_000,
    outputLimit: CHECK_OUTPUT_LIMIT,
    signal: call.signal,
    env: session.commandEnv,
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
