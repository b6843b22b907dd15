/**
 * A command's children do not outlive it: processes that leave the command's process
 * group (setsid, setsid -f, setpgid, timeout, a double fork) are gone once the command
 * ends, is timed out, or (shell_start) is killed with the run.
 *
 * Each survivor is `survivor.sh`: it writes its own pid (as its PID namespace numbers it),
 * then execs `sleep 300`. The command that starts it waits until that pid is written, so
 * a pid file proves the survivor ran. After the run, the test looks through the host's
 * /proc for any process still working in the test's workspace: a contained command's
 * /proc is its own, so the pid it wrote is not the host's, but where it works is the same
 * directory from either side.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Policy, runWith, TaskContract } from '../dist/index.js';
import { killUnder, noneLeftUnder } from './support/processes.js';
import { type Answer, later, openStore, serve, tempWorkspace, turns } from './support/workspace.js';

const SURVIVOR = [
  'read -r pid _ < /proc/self/stat',
  'echo "$pid" > "$1.pid.tmp"',
  'mv "$1.pid.tmp" "$1.pid"',
  // Its streams let go of the command's pipes, so the command's end is not held up by it.
  'exec sleep 300 >/dev/null 2>&1',
  '',
].join('\n');

/** Waits (bounded) until the survivor named $1 has written its pid. */
const WAIT_FOR = 'i=0; while [ ! -s "$1.pid" ] && [ "$i" -lt 400 ]; do sleep 0.05; i=$((i + 1)); done\n';

/** Ways a command can start a process outside its process group, each as a script run with `sh`. */
const ESCAPES: Record<string, string> = {
  // setsid -f forks and returns at once: the survivor is in a new session and group.
  'setsid-f': 'setsid -f sh ./survivor.sh setsid-f\n',
  // setsid backgrounded by the script: a new session.
  'setsid-bg': 'setsid sh ./survivor.sh setsid-bg &\n',
  // A process that moves itself to a new group.
  setpgrp: `perl -e 'setpgrp(0, 0); exec "sh", "./survivor.sh", "setpgrp"' &\n`,
  // timeout puts its child in a group of its own.
  timeout: 'timeout 300 sh ./survivor.sh timeout &\n',
  // A double fork: the survivor's parent exits, so it is no child of the command.
  'double-fork': '( sh ./survivor.sh double-fork & )\n',
};

function script(name: string, body: string): string {
  return `${body}${WAIT_FOR.replaceAll('$1', name)}`;
}

function workspace(extra: Record<string, string> = {}): string {
  const files: Record<string, string> = { 'survivor.sh': SURVIVOR, ...extra };
  for (const [name, body] of Object.entries(ESCAPES)) files[`${name}.sh`] = script(name, body);
  const root = tempWorkspace(files, 'io-harness-procs-');
  // Whatever the outcome, no survivor this test started is left behind (before the directory goes).
  later(() => killUnder(root));
  return root;
}

/** That the survivor `name` ran: it wrote its pid. */
function ran(root: string, name: string): void {
  const path = join(root, `${name}.pid`);
  expect(existsSync(path), `${name}: the survivor never wrote its pid`).toBe(true);
  const pid = Number(readFileSync(path, 'utf8').trim());
  expect(Number.isInteger(pid) && pid > 1).toBe(true);
}

/** That the survivor `name` ran, and nothing is left working in the workspace (bounded wait for SIGKILL to land). */
async function gone(root: string, name: string): Promise<boolean> {
  ran(root, name);
  return noneLeftUnder(root);
}

const exec = (argv: string[], extra: Record<string, unknown> = {}): Answer => ({
  text: 'running',
  toolCalls: [{ name: 'exec', args: { argv, ...extra } }],
});

describe('children that leave their group', () => {
  it.each(Object.keys(ESCAPES))('are gone when an exec command that started them (%s) exits', async (name) => {
    const root = workspace();
    const store = await openStore();
    const { provider } = await serve(turns([exec(['sh', `${name}.sh`]), { text: 'done' }]));
    const result = await runWith(TaskContract.workspace('start it', root), provider, store, Policy.permissive());
    expect(result.outcome.kind).toBe('finished');
    const observation = store.steps(result.runId)[0]?.observations[0];
    expect(observation?.content).toContain(`sh ${name}.sh exited with status 0`);
    expect(await gone(root, name)).toBe(true);
  });

  it('are gone when a shell line that started them exits', async () => {
    const root = workspace();
    const store = await openStore();
    const { provider } = await serve(
      turns([
        { text: 'running', toolCalls: [{ name: 'shell', args: { command: 'sh setsid-f.sh' } }] },
        { text: 'done' },
      ]),
    );
    const result = await runWith(TaskContract.workspace('start it', root), provider, store, Policy.permissive());
    expect(store.steps(result.runId)[0]?.observations[0]?.content).toContain('sh setsid-f.sh exited with status 0');
    expect(await gone(root, 'setsid-f')).toBe(true);
  });

  it('are gone when the command that started them is timed out', async () => {
    const root = workspace({ 'hang.sh': `${script('hang', 'setsid -f sh ./survivor.sh hang\n')}sleep 300\n` });
    const store = await openStore();
    const { provider } = await serve(turns([exec(['sh', 'hang.sh'], { timeout_secs: 3 }), { text: 'done' }]));
    const result = await runWith(TaskContract.workspace('start it', root), provider, store, Policy.permissive());
    expect(store.steps(result.runId)[0]?.observations[0]?.content).toContain('sh hang.sh timed out and was killed');
    expect(await gone(root, 'hang')).toBe(true);
  });

  it('are gone when the run that started them with shell_start ends', async () => {
    const root = workspace({ 'serve.sh': `${script('serve', 'setsid -f sh ./survivor.sh serve\n')}exec sleep 300\n` });
    const store = await openStore();
    const { provider } = await serve(async (call) => {
      const answers: Answer[] = [
        { text: 'starting', toolCalls: [{ name: 'shell_start', args: { command: 'sh serve.sh' } }] },
        { text: 'done' },
      ];
      const answer = turns(answers)(call);
      // The run ends only once the survivor has written its pid (bounded).
      for (let i = 0; i < 200 && answer === answers[1] && !existsSync(join(root, 'serve.pid')); i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return answer;
    });
    const result = await runWith(TaskContract.workspace('start it', root), provider, store, Policy.permissive());
    expect(result.outcome.kind).toBe('finished');
    expect(await gone(root, 'serve')).toBe(true);
  });

  it('records once per run how its commands are contained', async () => {
    const root = workspace();
    writeFileSync(join(root, 'a.txt'), 'a\n');
    const store = await openStore();
    const { provider } = await serve(
      turns([exec(['cat', 'a.txt']), exec(['sh', 'setsid-f.sh']), exec(['nosuch-program-xyz']), { text: 'done' }]),
    );
    const result = await runWith(TaskContract.workspace('start it', root), provider, store, Policy.permissive());
    ran(root, 'setsid-f');
    const events = store.events(result.runId).filter((event) => event.type === 'process-containment');
    // This machine runs Linux with util-linux unshare: the stronger mechanism is the one used.
    expect(events).toMatchObject([{ type: 'process-containment', mechanism: 'pid-namespace', reason: null }]);
    const observations = store.steps(result.runId).flatMap((step) => step.observations.map((o) => o.content));
    // Output, status and a missing program read as they always did.
    expect(observations[0]).toBe('cat a.txt exited with status 0\n--- stdout:\na\n\n--- stderr: (empty)');
    expect(observations[2]).toBe(
      'could not run nosuch-program-xyz: the program "nosuch-program-xyz" was not found (is it installed and on PATH?)',
    );
  });
});
