/**
 * A git worktree of a child agent's own, for a roster agent whose definition asks for one
 * (`worktree: true`): its place, the branch named for its run, how it is made, and how the
 * git tools find its repository.
 *
 * It lives in the repository's own git directory, `<git dir>/io-harness/worktrees/<run id>`:
 * no run's commands can write there (a workspace's `.git` is kept read-only from them, the
 * parent's and the child's), and the parent's checkout does not list it. The child's
 * workspace root is that directory, so its file tools and commands change its checkout and
 * nothing of the parent's. Its git tools (their argv fixed) write the repository's git
 * directory too, and find it from the stored spec (GIT_DIR, GIT_WORK_TREE), never from the
 * worktree's `.git` file.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import type { CommandResult } from '../exec/run-command.js';

/** What a child's contract says of the worktree it works in (its root is the worktree). */
export interface WorktreeData {
  /** The repository's common git directory (a real path): the child's git tools write there, its commands never. */
  gitDir: string;
  /** The workspace the worktree was made from (the parent's root): where git runs to make it again. */
  repository: string;
  /** The checkout of the tree's root: what the policy hides there is hidden from this run's processes too. */
  checkout: string;
  /** The branch it is on, named for the run: `io-harness/<agent>-<run id>`. */
  branch: string;
  /** The commit it started from: the parent's HEAD when it was spawned. */
  base: string;
}

/**
 * Where the harness keeps the checkouts it makes of a repository, inside its git
 * directory: a child's worktree under `worktrees/<run id>`, a `git_worktree` checkout under
 * `trees/<branch>` (one directory a branch: `/` is `+`, which no branch name holds, so no
 * link inside one checkout leads to another).
 */
const CHECKOUTS = 'io-harness';
const KINDS = ['worktrees', 'trees'] as const;

/** Where the worktree of run `runId` is: inside the repository's git directory. */
export function worktreePath(gitDir: string, runId: string): string {
  return join(gitDir, CHECKOUTS, 'worktrees', runId);
}

/** Where `git_worktree` keeps the checkout of `branch`. */
export function treePath(gitDir: string, branch: string): string {
  return join(gitDir, CHECKOUTS, 'trees', branch.replaceAll('/', '+'));
}

/** Every checkout the harness made of the repository whose git directory is `gitDir`. */
export function harnessCheckouts(gitDir: string): string[] {
  return KINDS.flatMap((kind) => {
    const dir = join(gitDir, CHECKOUTS, kind);
    try {
      return readdirSync(dir, { withFileTypes: true })
        .filter((entry) => entry.isDirectory())
        .map((entry) => join(dir, entry.name));
    } catch {
      return [];
    }
  });
}

/**
 * Where `subject` (a path as the policy sees it) is inside a checkout the harness made
 * under a workspace's `.git`: the path within that checkout; else null.
 */
export function checkoutPath(subject: string): string | null {
  const found = /(?:^|\/)\.git\/io-harness\/(?:worktrees|trees)\/[^/]+\/(.+)$/.exec(subject);
  return found ? (found[1] as string) : null;
}

/** The branch a roster agent's worktree is on: named for the agent and its run (the whole id: never another run's). */
export function worktreeBranch(agent: string, runId: string): string {
  return `io-harness/${agent.replace(/_/g, '-')}-${runId}`;
}

/**
 * Git's own record of the worktree at `root`: the directory under `<git dir>/worktrees`
 * whose `gitdir` names it (git names it for the worktree's directory, numbered when that
 * name is taken, so it is looked for, never assumed). Null where git has none.
 */
function adminDir(gitDir: string, root: string): string | null {
  const records = join(gitDir, 'worktrees');
  let names: string[];
  try {
    names = readdirSync(records);
  } catch {
    return null;
  }
  const mine = join(root, '.git');
  // The likeliest first: the one named for the directory.
  for (const name of [basename(root), ...names.filter((name) => name !== basename(root))]) {
    try {
      // Absolute as git writes it here (worktree.useRelativePaths off), relative to the record if not.
      const named = resolve(join(records, name), readFileSync(join(records, name, 'gitdir'), 'utf8').trim());
      if (named === mine) return join(records, name);
    } catch {
      // not a record, or not this one's
    }
  }
  return null;
}

/**
 * The common git directory of the repository whose work tree is `root`: its `.git`
 * directory, or where a `.git` file (`gitdir: …`) and that directory's `commondir` lead; a
 * run in a worktree of its own, the one its contract names. Null where `root` is no
 * repository's top.
 */
export function commonGitDir(root: string, worktree: WorktreeData | undefined): string | null {
  if (worktree) return worktree.gitDir;
  const dotGit = join(root, '.git');
  try {
    if (statSync(dotGit).isDirectory()) return realpathSync(dotGit);
    const named = /^gitdir:\s*(.+?)\s*$/m.exec(readFileSync(dotGit, 'utf8'))?.[1];
    if (!named) return null;
    const dir = resolve(root, named);
    const common = existsSync(join(dir, 'commondir')) ? readFileSync(join(dir, 'commondir'), 'utf8').trim() : '';
    return realpathSync(common === '' ? dir : resolve(dir, common));
  } catch {
    return null;
  }
}

/**
 * How git finds the repository of a run in a worktree of its own: the git directory git
 * made for it and the work tree, given outright. Nothing for any other run (git finds
 * `.git` at the root, which no command of the run can change).
 */
export function worktreeEnvironment(root: string, worktree: WorktreeData | undefined): NodeJS.ProcessEnv {
  if (!worktree) return {};
  // None on record: a directory that is not one, so git says so rather than looking elsewhere.
  const admin = adminDir(worktree.gitDir, root) ?? join(worktree.gitDir, 'worktrees', `${basename(root)}.missing`);
  return { GIT_DIR: admin, GIT_WORK_TREE: root };
}

/**
 * Whether the worktree at `root` is whole: git has it on record, its `.git` is there, and
 * its checkout finished (git writes the worktree's index last; one killed while it checked
 * out has none).
 */
function inPlace(admin: string | null, root: string): boolean {
  return admin !== null && existsSync(join(root, '.git')) && existsSync(join(admin, 'index'));
}

/**
 * Makes the worktree at `root` where it is not there yet: on a new branch at its base, or
 * (a resume after it was removed) on its branch again, which keeps every commit made in
 * it. `git` runs an argv (its program first) in the workspace it was made from, with the
 * repository's git directory writable. Null when the worktree is in place; else why not.
 */
export async function ensureWorktree(
  worktree: WorktreeData,
  root: string,
  program: string,
  git: (argv: string[]) => Promise<CommandResult>,
  fresh: boolean,
): Promise<string | null> {
  let admin = adminDir(worktree.gitDir, root);
  if (inPlace(admin, root)) return null;
  const repository = `--git-dir=${worktree.gitDir}`;
  if (admin !== null && existsSync(root)) {
    // Its .git file lost (a start killed between git's two writes): git writes it again, and a
    // checkout that had finished is kept as it is, with whatever the run left in it.
    await git([program, repository, 'worktree', 'repair', '--', root]);
    admin = adminDir(worktree.gitDir, root);
    if (inPlace(admin, root)) return null;
  }
  const failed = (what: string, result: CommandResult) =>
    `the worktree of this run could not be ${what} at ${root} (branch ${worktree.branch} from ${worktree.base}): ${
      (result.error ?? `${result.stderr}${result.stdout}`).trim().slice(0, 2000) ||
      `git exited with ${result.exitStatus}`
    }`;
  if (admin !== null) {
    // On record but gone or half made (a start killed while git checked it out): git's record
    // goes with what was checked out; the branch keeps every commit.
    const removed = await git([program, repository, 'worktree', 'remove', '--force', '--force', '--', root]);
    if (removed.exitStatus !== 0 || adminDir(worktree.gitDir, root) !== null) return failed('cleared', removed);
  } else if (existsSync(root))
    return `the worktree of this run, ${root}, is there but git has no record of it; move it aside (its branch ${worktree.branch} keeps what was committed) and resume the run.`;
  mkdirSync(dirname(root), { recursive: true });
  const known = await git([program, repository, 'show-ref', '--verify', '--quiet', `refs/heads/${worktree.branch}`]);
  if (known.exitStatus === 0) {
    // Before the run's first step its branch is at its base if it is there at all (an earlier
    // start made it); after, it grew from there. Any other is someone else's.
    const check = fresh
      ? ['rev-parse', '--verify', '--quiet', `refs/heads/${worktree.branch}^{commit}`]
      : ['merge-base', '--is-ancestor', worktree.base, worktree.branch];
    const ours = await git([program, repository, ...check]);
    const mine = fresh ? ours.stdout.trim() === worktree.base : ours.exitStatus === 0;
    if (!mine)
      return `the branch ${worktree.branch} is there and is not where this run's worktree started (${worktree.base}${fresh ? '' : ', or grew from it'}): it is not this run's. Rename it and resume the run.`;
  }
  // Locked: git's own worktree commands (a model's git_worktree remove among them) leave it be.
  const lock = ['--lock', '--reason', `io-harness run ${basename(root)}`];
  const add =
    known.exitStatus === 0
      ? [...lock, '--', root, worktree.branch]
      : [...lock, '-b', worktree.branch, '--', root, worktree.base];
  const made = await git([program, repository, 'worktree', 'add', ...add]);
  if (made.exitStatus === 0 && inPlace(adminDir(worktree.gitDir, root), root)) return null;
  return failed('made', made);
}

/** The line of a worktree run's briefing: where it works, and how its parent sees its work. */
export function worktreeLine(worktree: WorktreeData | undefined): string | null {
  if (!worktree) return null;
  return `This is a git worktree of your own, on branch ${worktree.branch} (from ${worktree.base.slice(0, 12)}); the agent that started you sees your work as that branch's commits: stage and commit it (git_add, git_commit) before you finish.`;
}
