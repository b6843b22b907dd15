/**
 * The git tools (`withGit()`), on a real repository with the real git under the run's real
 * containment: a run that ends as a commit on a branch of its own, its message the model's;
 * what the model cannot reach (push, a `-c` override, a flag for a branch name, a path
 * outside, hooks, a repository of its own inside the workspace, a git planted on PATH);
 * `.git` writable for the tools' own argv and never for `exec`; and a run that does not
 * ask for them offered none.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Policy, runWith, TaskContract } from '../dist/index.js';
import { type Answer, openStore, serve, setEnv, tempWorkspace, turns } from './support/workspace.js';

// The run's commands may run anything (the containment holds them); the git tools are checked as `git ...`.
const POLICY = Policy.default().layer('test').allowExec('<arbitrary code>*').allowExec('*');

/** A repository with one commit on main, and a pre-commit hook that leaves a mark if it ever runs. */
function fixtureRepository(): { root: string; mark: string } {
  const root = tempWorkspace({ 'src.txt': 'broken\n', 'README.md': '# fixture\n' });
  // Inside the workspace, where a hook run by the git tools could write it.
  const mark = join(root, 'hook-ran');
  const git = (...args: string[]) => execFileSync('git', args, { cwd: root, stdio: 'pipe' });
  git('init', '-q', '-b', 'main');
  git('-c', 'user.name=t', '-c', 'user.email=t@t', 'add', '.');
  git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'initial');
  mkdirSync(join(root, '.git', 'hooks'), { recursive: true });
  // post-commit too: a commit's --no-verify skips pre-commit, not it.
  for (const name of ['pre-commit', 'post-commit'])
    writeFileSync(join(root, '.git', 'hooks', name), `#!/bin/sh\ntouch ${mark}\n`, { mode: 0o755 });
  return { root, mark };
}

/** A call that runs a script written into the workspace: the policy sees `sh NAME`, not what the script does. */
function script(root: string, name: string, body: string): Answer {
  writeFileSync(join(root, name), `${body}\n`);
  return { toolCalls: [{ name: 'exec', args: { argv: ['sh', name] } }] };
}

function gitOut(root: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd: root, encoding: 'utf8' }).trim();
}

async function run(
  root: string,
  answers: Answer[],
  contract = TaskContract.workspace('commit the fix', root).withGit(),
  options: Parameters<typeof runWith>[5] = {},
) {
  const store = await openStore();
  const { server, provider } = await serve(turns([...answers, { text: 'done' }]));
  const result = await runWith(contract, provider, store, POLICY, undefined, options);
  const observations = store.steps(result.runId).flatMap((step) => step.observations.map((o) => o.content));
  const first = server.calls[0]?.body as { tools?: { function: { name: string } }[] } | undefined;
  const tools = first?.tools ?? [];
  return { result, observations, tools: tools.map((tool) => tool.function.name), server };
}

describe('the git tools', () => {
  it('end a run as a commit on a branch of its own, its message the model’s, with no hook run', async () => {
    const { root, mark } = fixtureRepository();
    const { result, observations, tools } = await run(root, [
      { toolCalls: [{ name: 'git_branch', args: { name: 'agent/fix-src' } }] },
      { toolCalls: [{ name: 'write_file', args: { path: 'src.txt', content: 'fixed\n' } }] },
      { toolCalls: [{ name: 'git_diff', args: { paths: ['src.txt'] } }] },
      { toolCalls: [{ name: 'git_add', args: { paths: ['src.txt'] } }] },
      { toolCalls: [{ name: 'git_commit', args: { message: 'Fix src.txt\n\nIt said broken.' } }] },
      { toolCalls: [{ name: 'git_status', args: {} }] },
      { toolCalls: [{ name: 'git_log', args: { max_count: 5 } }] },
    ]);
    expect(result.outcome.kind, JSON.stringify(observations)).toBe('finished');
    expect(tools.filter((name) => name.startsWith('git_')).sort()).toEqual([
      'git_add',
      'git_branch',
      'git_commit',
      'git_diff',
      'git_log',
      'git_status',
    ]);
    expect(gitOut(root, 'rev-parse', '--abbrev-ref', 'HEAD')).toBe('agent/fix-src');
    expect(gitOut(root, 'log', '-1', '--format=%B', 'agent/fix-src')).toBe('Fix src.txt\n\nIt said broken.');
    expect(gitOut(root, 'log', '-1', '--format=%an', 'agent/fix-src')).toBe('io-harness');
    expect(gitOut(root, 'show', 'agent/fix-src:src.txt')).toBe('fixed');
    // main is where it was.
    expect(gitOut(root, 'log', '--format=%s', 'main')).toBe('initial');
    expect(observations[2]).toContain('+fixed');
    expect(observations[5]).toContain('## agent/fix-src');
    expect(observations[6]).toMatch(/io-harness .* Fix src\.txt/);
    expect(existsSync(mark)).toBe(false);
  });

  it('cannot be made to push, override configuration, take a flag for a name or reach outside', async () => {
    const { root } = fixtureRepository();
    const outside = join(tempWorkspace({ 'x.txt': 'x\n' }), 'x.txt');
    const { observations, result } = await run(root, [
      { toolCalls: [{ name: 'git_push', args: {} }] },
      { toolCalls: [{ name: 'git_commit', args: { message: 'x', args: ['-c', 'core.hooksPath=/tmp/h'] } }] },
      { toolCalls: [{ name: 'git_branch', args: { name: '--force' } }] },
      { toolCalls: [{ name: 'git_branch', args: { name: 'a b' } }] },
      { toolCalls: [{ name: 'git_add', args: { paths: [outside] } }] },
      { toolCalls: [{ name: 'git_add', args: { paths: ['../x.txt'] } }] },
      { toolCalls: [{ name: 'git_worktree', args: { action: 'add', path: 'trees/x', branch: 'x' } }] },
    ]);
    expect(result.outcome.kind).toBe('finished');
    expect(observations[0]).toMatch(/git_push/);
    expect(observations[1]).toMatch(/args/);
    expect(observations[2]).toMatch(/not a branch name/);
    expect(observations[3]).toMatch(/not a branch name/);
    expect(observations[4]).toMatch(/outside|escape/i);
    expect(observations[5]).toMatch(/outside|escape/i);
    expect(observations[6]).toMatch(/git_worktree/);
    expect(gitOut(root, 'status', '--short')).toBe('');
    expect(gitOut(root, 'branch', '--list')).toBe('* main');
  });

  it('never look into a repository the run’s commands made inside the workspace, nor stage it', async () => {
    const { root } = fixtureRepository();
    // A repository of the model's own, whose clean filter would run wherever git compares its file.
    const { observations } = await run(root, [
      script(
        root,
        'nest.sh',
        [
          'set -e',
          'git init -q sub && cd sub',
          'echo data > f && git add f && git -c user.name=x -c user.email=x@x commit -q -m s',
          `git config filter.x.clean "sh -c 'touch ${root}/.git/filter-ran ${root}/filter-ran; cat'"`,
          'echo "* filter=x" > .git/info/attributes',
          'touch -d "2001-01-01" f',
          'echo nested',
        ].join('\n'),
      ),
      { toolCalls: [{ name: 'git_add', args: { paths: ['sub'] } }] },
      { toolCalls: [{ name: 'git_status', args: {} }] },
      { toolCalls: [{ name: 'git_diff', args: {} }] },
      { toolCalls: [{ name: 'git_add', args: { paths: ['.'] } }] },
      { toolCalls: [{ name: 'git_status', args: {} }] },
    ]);
    expect(observations[0]).toContain('nested');
    expect(observations[1]).toMatch(/sub is a repository of its own/);
    expect(existsSync(join(root, '.git', 'filter-ran'))).toBe(false);
    expect(existsSync(join(root, 'filter-ran'))).toBe(false);
  });

  it('run the system’s git, not one planted on the run’s PATH', async () => {
    const { root, mark } = fixtureRepository();
    // A directory of the workspace on PATH (as node_modules/.bin is under npx); the agents run on this thread, with its environment.
    setEnv({ PATH: `${join(root, 'bin')}:${process.env.PATH}` });
    const { observations } = await run(
      root,
      [
        script(
          root,
          'plant.sh',
          `mkdir -p bin && printf '#!/bin/sh\\ntouch ${mark}\\nexec /usr/bin/git "$@"\\n' > bin/git && chmod +x bin/git && echo planted`,
        ),
        { toolCalls: [{ name: 'git_status', args: {} }] },
      ],
      undefined,
      { supervisor: { isolation: 'in-process' } },
    );
    expect(observations[0]).toContain('planted');
    expect(observations[1]).toContain('## main');
    expect(existsSync(mark)).toBe(false);
  });

  it('leave .git writable to their own argv only: exec cannot commit, the git tools can', async () => {
    const { root } = fixtureRepository();
    const { observations } = await run(root, [
      { toolCalls: [{ name: 'write_file', args: { path: 'src.txt', content: 'by exec\n' } }] },
      script(
        root,
        'commit.sh',
        'git add src.txt && git -c user.name=x -c user.email=x@x commit -q -m by-exec; echo "exit=$?"',
      ),
      { toolCalls: [{ name: 'git_add', args: { paths: ['src.txt'] } }] },
      { toolCalls: [{ name: 'git_commit', args: { message: 'by the tool' } }] },
    ]);
    expect(observations[1]).toMatch(/exit=[1-9]/);
    expect(gitOut(root, 'log', '--format=%s')).toBe('by the tool\ninitial');
    expect(readFileSync(join(root, 'src.txt'), 'utf8')).toBe('by exec\n');
  });

  it('are not offered to a run that does not ask for them: its request holds no git tool', async () => {
    const { root } = fixtureRepository();
    const { tools, server } = await run(root, [], TaskContract.workspace('look around', root));
    expect(tools.length).toBeGreaterThan(0);
    expect(tools.filter((name) => name.startsWith('git_'))).toEqual([]);
    expect(JSON.stringify(server.calls[0]?.body)).not.toContain('git_');
    // A single-file run has no repository to commit to: asked for there, refused at once.
    expect(() => TaskContract.file('edit it', join(root, 'src.txt')).withGit()).toThrow(/needs a workspace contract/);
  });
});
