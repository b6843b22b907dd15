/**
 * Git as built-in tools of a workspace run that asks for them (`withGit()`): `git_status`,
 * `git_diff`, `git_log`, `git_add`, `git_commit`, `git_branch` and `git_worktree`. The
 * model gives paths, a message, a branch name and a count; each tool writes its own argv
 * around them, so push, fetch, pull, reset, rebase, config, an alias, a hook or a `-c`
 * override cannot be asked for: there is no argument they could be spelled in. A path is
 * resolved inside the workspace and passed after `--` with pathspec magic off; a branch
 * name is held to git's own rules for one and may not start with `-`; the message is one
 * argument of `-m`.
 *
 * Each call is checked as the command it runs (an exec act of its argv, the policy's
 * command rules and the approver as for `exec`), each path as a read or a write first, and
 * it runs through the run's git executor: the same containment as the run's commands
 * (executor factory), but with the repository's `.git` writable, which it never is for
 * `exec`. The environment drops every `GIT_*` variable the run's commands would get, reads
 * no global configuration (the run's home is the run's to write), and turns hooks, the
 * file-system monitor and signing off.
 */
import { realpathSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { ArgumentSchema } from '../../arguments.js';
import { keepFromCommands } from '../../exec/containment/kept.js';
import { present } from '../../exec/containment/paths.js';
import { findSystemProgram, SYSTEM_PATH } from '../../exec/find-program.js';
import { describeCommand } from '../../exec/run-command.js';
import { checkArgv } from '../../policy/commands/index.js';
import type { WorkspaceSession } from '../../workspace/session.js';
import { commonGitDir, treePath, worktreeEnvironment } from '../../workspace/worktree.js';
import type { StepContext, ToolResult } from '../tool.js';
import type { WorkspaceToolDeclaration } from './workspace.js';

/** The most paths one call names. */
const MAX_PATHS = 256;
/** The most characters of a commit message. */
const MAX_MESSAGE_CHARS = 16_384;
const GIT_OUTPUT_LIMIT = 64 * 1024;
const GIT_TIMEOUT_MS = 60_000;

const PATHS: ArgumentSchema = {
  type: 'array',
  maxItems: MAX_PATHS,
  items: { type: 'string', minLength: 1, maxLength: 4096 },
  description: 'Paths inside the workspace, relative to its root (no wildcards: each is taken as written).',
};

const BRANCH: ArgumentSchema = {
  type: 'string',
  minLength: 1,
  maxLength: 200,
  description: 'A new branch name, e.g. "fix/parser-crash".',
};

/** The global options every call starts with, after the program: pathspecs taken as written, no pager. */
const GLOBAL_OPTIONS = ['--no-pager', '--literal-pathspecs'];

let located: string | null | undefined;

/**
 * The git the tools run: found in the system's directories ({@link SYSTEM_PATH}), never
 * on the run's PATH, where a directory the run writes (`node_modules/.bin`, a `bin` of the
 * workspace) could hold a `git` of the model's; and kept from the run's commands like every
 * program the harness runs itself. Null where the host has none.
 */
export function gitProgram(): string | null {
  if (located === undefined) {
    const found = findSystemProgram('git');
    located = found.kind === 'found' ? found.path : null;
    if (located) keepFromCommands(located, 'protect');
  }
  return located;
}

/**
 * Configuration every call runs with, given in the environment (GIT_CONFIG_COUNT), over
 * whatever the repository says: no hooks, no file-system monitor program, no pager, no
 * colour, no signing program.
 */
const GIT_CONFIG: readonly [string, string][] = [
  ['core.hooksPath', '/dev/null'],
  // A repository inside the workspace (one the run's commands made, with a configuration of
  // theirs) is never looked into: its filters would run here, where .git is writable.
  ['diff.ignoreSubmodules', 'all'],
  ['status.submoduleSummary', 'false'],
  ['submodule.recurse', 'false'],
  ['core.fsmonitor', 'false'],
  ['core.pager', 'cat'],
  ['color.ui', 'false'],
  ['commit.gpgSign', 'false'],
  // A worktree's records name it by its absolute path, as the harness looks for them (git 2.48 can write them relative).
  ['worktree.useRelativePaths', 'false'],
];

/** The name of a git tool. */
export type GitToolName =
  | 'git_status'
  | 'git_diff'
  | 'git_log'
  | 'git_add'
  | 'git_commit'
  | 'git_branch'
  | 'git_worktree';

/** The tools that change nothing: run at once, not journaled as an intent. */
const READS = new Set<GitToolName>(['git_status', 'git_diff', 'git_log']);

/** The git tools, declared: what the model sees of each, and the argv each writes. */
export const GIT_TOOLS: Record<GitToolName, WorkspaceToolDeclaration> = {
  git_status: {
    description:
      'The repository’s branch and the state of its files (staged, changed, untracked), as git status --short.',
    parameters: { type: 'object', properties: {}, additionalProperties: false },
    kind: 'reads',
    run: (session, _args, call) =>
      git(session, call, 'git_status', ['status', '--short', '--branch', '--ignore-submodules=all'], []),
  },
  git_diff: {
    description:
      'The changes not yet staged (or, with staged: true, the ones staged for the next commit; with branch, the commits of that branch since it left this one), as a unified diff; limited to paths when given.',
    parameters: {
      type: 'object',
      properties: {
        staged: { type: 'boolean', description: 'Show what is staged rather than what is not.' },
        branch: {
          ...BRANCH,
          description:
            'A branch whose work to show: what its commits changed since it left the current commit’s history.',
        },
        paths: PATHS,
      },
      additionalProperties: false,
    },
    kind: 'reads',
    run: (session, args, call) => {
      let which = args.staged === true ? ['--cached'] : [];
      if (args.branch !== undefined) {
        const name = branchName(args.branch);
        if (typeof name !== 'string') return Promise.resolve(name);
        if (args.staged === true)
          return Promise.resolve({ content: 'give staged or branch, not both.', isError: true });
        which = [`HEAD...${name}`];
      }
      return git(
        session,
        call,
        'git_diff',
        ['diff', '--no-ext-diff', '--no-textconv', '--ignore-submodules=all', ...which],
        args.paths,
        'read',
      );
    },
  },
  git_log: {
    description: 'The latest commits (hash, author, date, subject), newest first; limited to paths when given.',
    parameters: {
      type: 'object',
      properties: {
        max_count: { type: 'integer', minimum: 1, description: 'How many commits (default 20, at most 200).' },
        paths: PATHS,
      },
      additionalProperties: false,
    },
    kind: 'reads',
    run: (session, args, call) => {
      const count = typeof args.max_count === 'number' ? Math.min(Math.max(1, Math.floor(args.max_count)), 200) : 20;
      const format = ['--format=%h %an %ad %s', '--date=short', '--no-show-signature', `--max-count=${count}`];
      return git(session, call, 'git_log', ['log', ...format], args.paths, 'read');
    },
  },
  git_add: {
    description: 'Stage the named paths (their current content, or their removal) for the next commit.',
    parameters: {
      type: 'object',
      properties: { paths: { ...PATHS, minItems: 1 } },
      required: ['paths'],
      additionalProperties: false,
    },
    kind: 'acts',
    run: (session, args, call) => git(session, call, 'git_add', ['add', '--all'], args.paths, 'write'),
  },
  git_commit: {
    description: 'Commit what is staged, with this message. Hooks do not run.',
    parameters: {
      type: 'object',
      properties: {
        message: { type: 'string', minLength: 1, maxLength: MAX_MESSAGE_CHARS, description: 'The commit message.' },
      },
      required: ['message'],
      additionalProperties: false,
    },
    kind: 'acts',
    run: (session, args, call) =>
      git(session, call, 'git_commit', ['commit', '--no-verify', '--no-edit', '-m', String(args.message)], []),
  },
  git_branch: {
    description:
      'Create a branch at the current commit and switch to it (git switch --create); changes in the working tree come along. The only way these tools change branch.',
    parameters: {
      type: 'object',
      properties: { name: BRANCH },
      required: ['name'],
      additionalProperties: false,
    },
    kind: 'acts',
    run: (session, args, call) => {
      const name = branchName(args.name);
      if (typeof name !== 'string') return Promise.resolve(name);
      return git(session, call, 'git_branch', ['switch', '--create', name], []);
    },
  },
  git_worktree: {
    description:
      'Add a worktree: a second checkout of this repository, on a new branch made at the current commit (git worktree add -b), kept in the repository’s git directory where commands can read it and only these tools write. Or remove the one made for a branch, when nothing in it is uncommitted (git worktree remove, never forced); the branch stays.',
    parameters: {
      type: 'object',
      properties: {
        action: { type: 'string', enum: ['add', 'remove'] },
        branch: { ...BRANCH, description: 'With add, the new branch; with remove, the branch whose worktree goes.' },
      },
      required: ['action', 'branch'],
      additionalProperties: false,
    },
    kind: 'acts',
    run: (session, args, call) => {
      const name = branchName(args.branch);
      if (typeof name !== 'string') return Promise.resolve(name);
      const gitDir = commonGitDir(session.contract.root, session.contract.worktree);
      if (gitDir === null)
        return Promise.resolve({ content: 'the workspace root is not the top of a git repository.', isError: true });
      // One directory a branch: nothing below trees/ but a worktree's own checkout, so no link
      // in it leads a remove elsewhere; and one that is a link itself is refused.
      const path = treePath(gitDir, name);
      if (
        args.action === 'remove' &&
        present(path) &&
        realpathSync(path) !== join(realpathSync(dirname(path)), basename(path))
      )
        return Promise.resolve({ content: `${path} is not a worktree these tools made.`, isError: true });
      const program = gitProgram();
      if (program === null) return Promise.resolve({ content: GIT_MISSING, isError: true });
      const add = ['worktree', 'add', '-b', name, '--', path];
      const argv = [program, ...GLOBAL_OPTIONS, ...(args.action === 'add' ? add : ['worktree', 'remove', '--', path])];
      return runGit(session, call, 'git_worktree', argv, false);
    },
  },
};

/**
 * `value` as a branch name for a new branch, or why not: letters, digits, `-`, `_`, `.` and
 * `/` only (an allow-list, inside git's own rules), no leading `-` (it would read as an
 * option), no `..` or `//`, no component starting with `.` or ending in `.lock`, no
 * trailing `/` or `.`.
 */
export function branchName(value: unknown): string | ToolResult {
  const name = typeof value === 'string' ? value : '';
  const bad =
    name === '' ||
    name.startsWith('-') ||
    name.startsWith('/') ||
    name.endsWith('/') ||
    name.endsWith('.') ||
    name.includes('..') ||
    name.includes('//') ||
    !/^[A-Za-z0-9._/-]+$/.test(name) ||
    name.split('/').some((part) => part.startsWith('.') || part.endsWith('.lock'));
  if (!bad) return name;
  const reason = `${JSON.stringify(value)} is not a branch name these tools take: use letters, digits, "-", "_", "." and "/" (not starting with "-" or ".", no "..", "//" or trailing "/" or ".").`;
  return { content: reason, isError: true };
}

/** `paths` resolved inside the workspace (relative to its root), or the refusal to hand back. */
function workspacePaths(session: WorkspaceSession, paths: unknown): string[] | ToolResult {
  const list = Array.isArray(paths) ? paths : [];
  const out: string[] = [];
  for (const path of list) {
    if (typeof path !== 'string' || path === '')
      return { content: 'each path must be a non-empty string.', isError: true };
    const resolved = session.workspace.resolve(path);
    if (!resolved.ok) return resolved.result;
    out.push(resolved.relative === '' ? '.' : resolved.relative);
  }
  return out;
}

/**
 * Runs `git <args> -- <paths>` for `tool`: each path checked (`act`: read or write), the
 * whole argv checked as a command, then run through the run's git executor as an intent
 * (an act) or at once (a read).
 */
async function git(
  session: WorkspaceSession,
  call: StepContext,
  tool: GitToolName,
  args: string[],
  paths: unknown,
  act: 'read' | 'write' = 'read',
): Promise<ToolResult> {
  const named = workspacePaths(session, paths);
  if (!Array.isArray(named)) return named;
  for (const path of named) {
    const refused = await call.authorize({ kind: act, path });
    if (refused) return refused;
    // Staged, a repository of its own would be a submodule of this one: never looked into, never added.
    if (act === 'write' && path !== '.' && present(join(session.contract.root, path, '.git')))
      return {
        content: `${path} is a repository of its own; the git tools stage files of this repository only.`,
        isError: true,
      };
  }
  const program = gitProgram();
  if (program === null) return { content: GIT_MISSING, isError: true };
  const argv = [program, ...GLOBAL_OPTIONS, ...args, ...(named.length > 0 ? ['--', ...named] : [])];
  return runGit(session, call, tool, argv, READS.has(tool));
}

/** Why the tools cannot run where the host has no git. */
export const GIT_MISSING = `the git tools need git, and none is installed in the system's directories (${SYSTEM_PATH}); install it (apt-get install git), or set IO_HARNESS_SYSTEM_PATH to where it is.`;

/** A command of these tools' own argv: checked as a command, then run on the git executor. */
async function runGit(
  session: WorkspaceSession,
  call: StepContext,
  tool: GitToolName,
  argv: string[],
  reads: boolean,
): Promise<ToolResult> {
  const root = session.contract.root;
  const refused = await call.authorizeCommand({ kind: 'exec', argv }, checkArgv(argv, session.policy, root));
  if (refused) return refused;
  await session.noteContainment((event) => call.record(event));
  const execute = async (): Promise<ToolResult> => {
    const result = await session.gitExecutor.run({
      argv,
      purpose: 'exec',
      origin: { callId: call.callId, tool },
      cwd: root,
      timeoutMs: GIT_TIMEOUT_MS,
      outputLimit: GIT_OUTPUT_LIMIT,
      signal: call.signal,
      env: sessionGitEnvironment(session),
    });
    return {
      content: describeCommand(['git', ...argv.slice(1 + GLOBAL_OPTIONS.length)], result),
      isError: !result.started || result.exitStatus !== 0,
    };
  };
  return reads ? execute() : call.intent(tool, ['git', ...argv.slice(1 + GLOBAL_OPTIONS.length)].join(' '), execute);
}

/** What the run's git commands get: {@link gitEnvironment}, and a worktree run's repository named outright. */
function sessionGitEnvironment(session: WorkspaceSession): NodeJS.ProcessEnv {
  return {
    ...gitEnvironment(session.commandEnv),
    ...worktreeEnvironment(session.contract.root, session.contract.worktree),
  };
}

/**
 * The commit the run's HEAD is at (a full hash), read through the run's git executor; null
 * where git is missing or the repository has no commit yet.
 */
export async function headCommit(session: WorkspaceSession): Promise<string | null> {
  const program = gitProgram();
  if (program === null) return null;
  const root = session.contract.root;
  const result = await session.gitExecutor.run({
    argv: [program, ...GLOBAL_OPTIONS, 'rev-parse', '--verify', '--quiet', 'HEAD^{commit}'],
    purpose: 'exec',
    cwd: root,
    timeoutMs: GIT_TIMEOUT_MS,
    outputLimit: 1024,
    env: sessionGitEnvironment(session),
  });
  const hash = result.stdout.trim();
  return result.exitStatus === 0 && /^[0-9a-f]{40,64}$/.test(hash) ? hash : null;
}

/**
 * What git is run with: the run's command environment without any `GIT_*` variable (a
 * directory, an exec path, an ssh command or a config of the caller's choosing) and with
 * the system's directories for PATH (a helper git starts is found where git was), no
 * global or system-wide configuration file but the repository's own, {@link GIT_CONFIG}
 * over it, no prompt, and an identity of its own for commits (`io-harness`).
 */
export function gitEnvironment(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) if (!name.startsWith('GIT_')) out[name] = value;
  GIT_CONFIG.forEach(([key, value], index) => {
    out[`GIT_CONFIG_KEY_${index}`] = key;
    out[`GIT_CONFIG_VALUE_${index}`] = value;
  });
  return {
    ...out,
    PATH: process.env.IO_HARNESS_SYSTEM_PATH ?? SYSTEM_PATH,
    GIT_CONFIG_COUNT: String(GIT_CONFIG.length),
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    GIT_OPTIONAL_LOCKS: '0',
    GIT_AUTHOR_NAME: 'io-harness',
    GIT_AUTHOR_EMAIL: 'io-harness@localhost',
    GIT_COMMITTER_NAME: 'io-harness',
    GIT_COMMITTER_EMAIL: 'io-harness@localhost',
  };
}
