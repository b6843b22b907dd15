/**
 * The git tools (`withGit()`), on a real repository with the real git under the run's real
 * containment: a run that ends as a commit on a branch of its own, its message the model's;
 * what the model cannot reach (push, a `-c` override, a flag for a branch name, a path
 * outside, hooks, a repository of its own inside the workspace, a git planted on PATH);
 * `.git` writable for the tools' own argv and never for `exec`; and a run that does not
 * ask for them offered none.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Policy, runWith, TaskContract } from '../dist/index.js';
import { hostRungs } from '../dist/runtime/exec/containment/rungs.js';
import { ensureWorktree, worktreePath } from '../dist/runtime/workspace/worktree.js';
import { assistantTurns, type ModelScript } from '../dist/testing/index.js';
import {
  type Answer,
  openStore,
  serve,
  setEnv,
  supervisorOnStore,
  taskOf,
  tempWorkspace,
  turns,
} from './support/workspace.js';

// The run's commands may run anything (the containment holds them); the git tools are checked as `git ...`.
const POLICY = Policy.default().layer('test').allowExec('<arbitrary code>*').allowExec('*');

const rungs = hostRungs();
/** The rungs that confine the file system: a worktree child is run on each. */
const CONFINING = ['bubblewrap', 'landlock', 'namespaces'] as const;

/** Whether `rung` can be tried here; one the host lacks is named in the output, never passed over in silence. */
function available(rung: (typeof CONFINING)[number]): boolean {
  const probe = rungs[rung];
  if (probe.ok && (rung !== 'namespaces' || rungs.mounts)) return true;
  console.log(
    `containment rung ${rung}: not available here (${probe.ok ? 'no mounts' : probe.reason}); this case is not run`,
  );
  return false;
}

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
      'git_worktree',
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
    ]);
    expect(result.outcome.kind).toBe('finished');
    expect(observations[0]).toMatch(/git_push/);
    expect(observations[1]).toMatch(/args/);
    expect(observations[2]).toMatch(/not a branch name/);
    expect(observations[3]).toMatch(/not a branch name/);
    expect(observations[4]).toMatch(/outside|escape/i);
    expect(observations[5]).toMatch(/outside|escape/i);
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

  it('add a worktree on a new branch where only they write, and remove it when clean; a flag for a branch is refused', async () => {
    const { root } = fixtureRepository();
    const tree = join(root, '.git', 'io-harness', 'trees', 'try+other');
    // Another worktree of the repository's (unlocked), and a committed link that leads to it from a checkout.
    const victim = join(root, '.git', 'io-harness', 'worktrees', 'victim');
    execFileSync('git', ['worktree', 'add', '-q', '-b', 'victim', victim], { cwd: root, stdio: 'pipe' });
    symlinkSync('../../worktrees/victim', join(root, 'link'));
    execFileSync('git', ['add', 'link'], { cwd: root });
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'link'], { cwd: root });
    const { observations, result } = await run(root, [
      { toolCalls: [{ name: 'git_worktree', args: { action: 'add', branch: 'try/other' } }] },
      // The run's commands read it, and cannot write it.
      script(root, 'look.sh', `cat ${tree}/src.txt; echo x > ${tree}/src.txt; echo "write=$?"`),
      { toolCalls: [{ name: 'git_worktree', args: { action: 'add', branch: '-c' } }] },
      { toolCalls: [{ name: 'git_worktree', args: { action: 'add', branch: '../../hooks' } }] },
      { toolCalls: [{ name: 'git_worktree', args: { action: 'prune', branch: 'try/other' } }] },
      { toolCalls: [{ name: 'git_worktree', args: { action: 'add', path: 'trees/x', branch: 'x' } }] },
      { toolCalls: [{ name: 'git_worktree', args: { action: 'remove', branch: 'try/other' } }] },
      // Through the link its checkout holds, a remove would reach the other worktree: a branch is one directory, never a path.
      { toolCalls: [{ name: 'git_worktree', args: { action: 'add', branch: 'peek' } }] },
      { toolCalls: [{ name: 'git_worktree', args: { action: 'remove', branch: 'peek/link' } }] },
    ]);
    expect(result.outcome.kind, JSON.stringify(observations)).toBe('finished');
    expect(observations[0]).toContain(tree);
    expect(observations[1]).toContain('broken');
    expect(observations[1]).toMatch(/write=[1-9]/);
    expect(observations[2]).toMatch(/not a branch name/);
    expect(observations[3]).toMatch(/not a branch name/);
    expect(observations[4]).toMatch(/use one of "add", "remove"/);
    expect(observations[5]).toMatch(/path: is not an argument/);
    // Removed: the checkout is gone, its branch stays, and the repository knows one worktree again.
    expect(existsSync(tree)).toBe(false);
    expect(gitOut(root, 'branch', '--list', 'try/other')).toBe('try/other');
    expect(observations[8]).toMatch(/not a working tree/);
    expect(existsSync(join(victim, 'src.txt'))).toBe(true);
    // The main checkout, the other worktree and the one on peek.
    expect(gitOut(root, 'worktree', 'list', '--porcelain').match(/^worktree /gm)).toHaveLength(3);
  });

  for (const rung of CONFINING)
    it(`give a roster agent that asks for one a worktree of its own: it commits there, the parent’s checkout is untouched, and the parent sees its patch (the ${rung} rung)`, async () => {
      if (!available(rung)) return;
      const { root, mark } = fixtureRepository();
      const gitDir = join(root, '.git');
      // A file of the parent's checkout the policy keeps from being read: hidden from the child's commands too.
      writeFileSync(join(root, '.env'), 'TOKEN=parent-secret\n');
      writeFileSync(join(root, '.git', 'info', 'exclude'), '.env\n');
      const childAnswers: Answer[] = [
        { toolCalls: [{ name: 'write_file', args: { path: 'src.txt', content: 'fixed\n' } }] },
        // Its commands write its checkout only: not the repository's hooks, not a commit of their own.
        {
          toolCalls: [
            {
              name: 'write_file',
              args: {
                path: 'probe.sh',
                content: `pwd\ntouch ${gitDir}/hooks/planted; echo "hooks=$?"\ngit add src.txt; git -c user.name=x -c user.email=x@x commit -q -m by-exec; echo "commit=$?"\ncat ${root}/.env; echo "env=$?"\n`,
              },
            },
          ],
        },
        { toolCalls: [{ name: 'exec', args: { argv: ['sh', 'probe.sh'] } }] },
        { toolCalls: [{ name: 'git_add', args: { paths: ['src.txt'] } }] },
        { toolCalls: [{ name: 'git_commit', args: { message: 'Fix src.txt in a worktree' } }] },
        { toolCalls: [{ name: 'git_status', args: {} }] },
        { text: 'fixed and committed' },
      ];
      const script: ModelScript = (call) => {
        const turn = assistantTurns(call);
        if (taskOf(call).startsWith('fix src.txt'))
          return childAnswers[Math.min(turn, childAnswers.length - 1)] as Answer;
        if (turn === 0) return { toolCalls: [{ name: 'spawn_agent', args: { agent: 'fixer', task: 'fix src.txt' } }] };
        if (turn === 1) {
          // The spawn's result names the child's branch: the parent asks for its patch.
          const messages = (call.body as { messages: { role: string; content: unknown }[] }).messages;
          const reply = JSON.parse(String(messages.filter((m) => m.role === 'tool').at(-1)?.content)) as {
            branch: string;
          };
          return { toolCalls: [{ name: 'git_diff', args: { branch: reply.branch, paths: ['src.txt'] } }] };
        }
        // The child's checkout holds a copy of README.md, which the policy keeps from being read: no way around it.
        const copy = `${join('.git', 'io-harness', 'worktrees', childOf(call), 'README.md')}`;
        if (turn === 2) return { toolCalls: [{ name: 'read_file', args: { path: copy } }] };
        return { text: 'done' };
      };
      /** The child's run id, from the branch the spawn's answer named. */
      const childOf = (call: Parameters<ModelScript>[0]) => {
        const text = JSON.stringify(call.body);
        return /io-harness\/fixer-([0-9a-f-]{36})/.exec(text)?.[1] ?? 'none';
      };
      const { server, provider } = await serve(script);
      const { store, supervisor } = await supervisorOnStore();
      const handle = supervisor.run({
        contract: TaskContract.workspace('get src.txt fixed on a branch', root).withGit().withSandbox({ rung }),
        provider,
        policy: POLICY.denyRead('.env').denyRead('README.md'),
        agents: [{ name: 'fixer', description: 'Fixes a file on a branch.', system: 'You fix files.', worktree: true }],
      });
      const result = await handle.result;
      expect(result.status).toBe('finished');
      const child = store.runs(handle.rootId).find((item) => item.parentId !== null);
      expect(child?.status).toBe('finished');
      const childId = child?.runId as string;
      const branch = `io-harness/fixer-${childId}`;
      const childObservations = store.steps(childId).flatMap((step) => step.observations.map((o) => o.content));
      const worktree = join(gitDir, 'io-harness', 'worktrees', childId);
      // Its commands ran in its worktree, and could neither plant a hook nor commit.
      expect(childObservations[2]).toContain(worktree);
      expect(childObservations[2]).toMatch(/hooks=[1-9]/);
      expect(childObservations[2]).toMatch(/commit=[1-9]/);
      expect(existsSync(join(gitDir, 'hooks', 'planted'))).toBe(false);
      expect(childObservations[2]).toMatch(/env=[1-9]/);
      expect(childObservations[2]).not.toContain('parent-secret');
      expect(childObservations[5]).toContain(`## ${branch}`);
      // Its commit is on its branch, made from the parent's HEAD; the hooks did not run.
      expect(gitOut(root, 'log', '--format=%s', branch)).toBe('Fix src.txt in a worktree\ninitial');
      expect(gitOut(root, 'show', `${branch}:src.txt`)).toBe('fixed');
      expect(existsSync(mark)).toBe(false);
      // The parent's checkout is untouched: its branch, its file, its status.
      expect(gitOut(root, 'rev-parse', '--abbrev-ref', 'HEAD')).toBe('main');
      expect(gitOut(root, 'log', '--format=%s', 'main')).toBe('initial');
      expect(readFileSync(join(root, 'src.txt'), 'utf8')).toBe('broken\n');
      expect(gitOut(root, 'status', '--short')).toBe('');
      // Its worktree stays, locked: git's own worktree commands (a model's git_worktree among them) leave it be.
      expect(gitOut(root, 'worktree', 'list', '--porcelain')).toContain(`worktree ${worktree}\nHEAD`);
      expect(gitOut(root, 'worktree', 'list', '--porcelain')).toMatch(/locked io-harness run/);
      // The parent was told the branch and saw the patch.
      const parentObservations = store.steps(handle.rootId).flatMap((step) => step.observations.map((o) => o.content));
      expect(JSON.parse(parentObservations[0] as string)).toMatchObject({ status: 'finished', branch });
      expect(parentObservations[1]).toContain('-broken');
      expect(parentObservations[1]).toContain('+fixed');
      // The child's copy of a file the policy keeps from being read is decided as that file: refused to the file tools.
      expect(parentObservations[2]).toMatch(/deny-read README\.md/);
      // The roster line says so, and the child's first turn names its worktree and branch.
      const first = JSON.stringify(server.calls[0]?.body);
      expect(first).toContain('(works in a git worktree of its own)');
      const childCall = server.calls.find((call) => JSON.stringify(call.body).includes('fix src.txt\\n'));
      expect(JSON.stringify(childCall?.body)).toContain(`on branch ${branch}`);
    });

  it('decide making a child’s worktree as the git command it is: a policy that denies it refuses the spawn', async () => {
    const { root } = fixtureRepository();
    const { provider } = await serve((call) =>
      assistantTurns(call) === 0
        ? { toolCalls: [{ name: 'spawn_agent', args: { agent: 'fixer', task: 'fix src.txt' } }] }
        : { text: 'done' },
    );
    const { store, supervisor } = await supervisorOnStore();
    const handle = supervisor.run({
      contract: TaskContract.workspace('get src.txt fixed on a branch', root).withGit(),
      provider,
      policy: POLICY.denyExec('git worktree*'),
      agents: [{ name: 'fixer', description: 'Fixes a file on a branch.', system: 'You fix files.', worktree: true }],
    });
    expect((await handle.result).status).toBe('finished');
    const observations = store.steps(handle.rootId).flatMap((step) => step.observations.map((o) => o.content));
    expect(observations[0]).toMatch(/spawn refused \(deny-exec git worktree\*\).*making it was refused/);
    expect(store.runs(handle.rootId)).toHaveLength(1);
    expect(existsSync(join(root, '.git', 'io-harness'))).toBe(false);
  });

  it('refuse a roster agent that asks for a worktree in a tree without the git tools', async () => {
    const { root } = fixtureRepository();
    const { provider } = await serve(turns([{ text: 'done' }]));
    const { supervisor } = await supervisorOnStore();
    expect(() =>
      supervisor.run({
        contract: TaskContract.workspace('fix it', root),
        provider,
        agents: [{ name: 'fixer', description: 'Fixes.', system: 'You fix files.', worktree: true }],
      }),
    ).toThrow(/asks for a worktree of its own.*withGit\(\)/);
  });

  it('make a child’s worktree again on its branch when it was removed, keeping its commits, and refuse a stray directory in its place', async () => {
    const { root } = fixtureRepository();
    const gitDir = join(root, '.git');
    const worktree = {
      gitDir,
      repository: root,
      checkout: root,
      branch: 'io-harness/fixer-run-1',
      base: gitOut(root, 'rev-parse', 'HEAD'),
    };
    const path = worktreePath(gitDir, 'run-1');
    const git = async (argv: string[]) => {
      const ran = spawnSync(argv[0] as string, argv.slice(1), { cwd: root, encoding: 'utf8' });
      return {
        started: true,
        error: null,
        exitStatus: ran.status,
        signal: null,
        timedOut: false,
        stdout: ran.stdout,
        stderr: ran.stderr,
        droppedStdout: 0,
        droppedStderr: 0,
      };
    };
    expect(await ensureWorktree(worktree, path, 'git', git, true)).toBeNull();
    expect(gitOut(path, 'rev-parse', '--abbrev-ref', 'HEAD')).toBe(worktree.branch);
    // In place: nothing to do.
    expect(await ensureWorktree(worktree, path, 'git', git, true)).toBeNull();
    writeFileSync(join(path, 'src.txt'), 'fixed\n');
    gitOut(path, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-am', 'work');
    gitOut(root, 'worktree', 'remove', '--force', '--force', path);
    // A resume after it was removed: on its branch again, with its commit.
    expect(await ensureWorktree(worktree, path, 'git', git, false)).toBeNull();
    expect(readFileSync(join(path, 'src.txt'), 'utf8')).toBe('fixed\n');
    // Half made (a start killed while git checked it out: no index yet), or deleted under git's record: made again.
    rmSync(join(gitDir, 'worktrees', 'run-1', 'index'));
    expect(await ensureWorktree(worktree, path, 'git', git, false)).toBeNull();
    expect(readFileSync(join(path, 'src.txt'), 'utf8')).toBe('fixed\n');
    rmSync(path, { recursive: true, force: true });
    expect(await ensureWorktree(worktree, path, 'git', git, false)).toBeNull();
    expect(gitOut(path, 'log', '--format=%s')).toBe('work\ninitial');
    // A branch of that name that did not grow from the run's base is not the run's.
    gitOut(root, 'branch', 'io-harness/fixer-run-3', 'HEAD');
    gitOut(root, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '--allow-empty', '-m', 'later');
    const later = { ...worktree, branch: 'io-harness/fixer-run-3', base: gitOut(root, 'rev-parse', 'HEAD') };
    expect(await ensureWorktree(later, worktreePath(gitDir, 'run-3'), 'git', git, false)).toMatch(
      /is not where this run's worktree started/,
    );
    // Before the run's first step, a branch of its name with a commit of someone else's is not taken either.
    const extra = gitOut(root, 'commit-tree', 'HEAD^{tree}', '-p', 'HEAD', '-m', 'planted');
    gitOut(root, 'update-ref', 'refs/heads/io-harness/fixer-run-4', extra);
    const planted = { ...later, branch: 'io-harness/fixer-run-4' };
    expect(await ensureWorktree(planted, worktreePath(gitDir, 'run-4'), 'git', git, true)).toMatch(
      /is not where this run's worktree started/,
    );
    // Its .git file lost (a start killed between git's two writes): written again, the checkout and what is in it kept.
    writeFileSync(join(path, 'notes.txt'), 'uncommitted\n');
    rmSync(join(path, '.git'));
    expect(await ensureWorktree(worktree, path, 'git', git, false)).toBeNull();
    expect(readFileSync(join(path, 'notes.txt'), 'utf8')).toBe('uncommitted\n');
    // A directory git has no record of is not taken for it.
    const stray = worktreePath(gitDir, 'run-2');
    mkdirSync(stray, { recursive: true });
    expect(await ensureWorktree({ ...worktree, branch: 'io-harness/x-1' }, stray, 'git', git, true)).toMatch(
      /is there but git has no record of it/,
    );
  });
});
