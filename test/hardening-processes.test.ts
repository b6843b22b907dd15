/**
 * A command's children do not outlive it: processes that leave the command's process
 * group (setsid, setsid -f, setpgid, timeout, a double fork) are gone once the command
 * ends, is timed out, or (shell_start) is killed with the run.
 *
 * Each survivor is `survivor.sh`: it writes its own pid as the host sees it (read from
 * /proc/self/stat, which is the host's /proc, so not the pid inside a PID namespace), then
 * execs `sleep 300` under that same pid. The command that starts it waits until that pid
 * is written, so a pid file proves the survivor ran; after the run, the test checks by
 * that pid that the process is gone.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Policy, runWith, TaskContract } from '../dist/index.js';
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
  later(() => {
    for (const file of readdirSync(root).filter((name) => name.endsWith('.pid'))) {
      const pid = Number(readFileSync(join(root, file), 'utf8').trim());
      if (Number.isInteger(pid) && pid > 1 && isOurSleep(pid)) process.kill(pid, 'SIGKILL');
    }
  });
  return root;
}

function hostPid(root: string, name: string): number {
  const path = join(root, `${name}.pid`);
  expect(existsSync(path), `${name}: the survivor never wrote its pid`).toBe(true);
  const pid = Number(readFileSync(path, 'utf8').trim());
  expect(Number.isInteger(pid) && pid > 1).toBe(true);
  return pid;
}

/** Whether `pid` is a live (not zombie) `sleep 300`: a reused pid is not the survivor. */
function isOurSleep(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    if (state === 'Z' || state === 'X') return false;
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8') === 'sleep\u0000300\u0000';
  } catch {
    return false;
  }
}

/** Waits a bounded while for SIGKILL to be delivered, then says whether the survivor is gone. */
async function gone(pid: number): Promise<boolean> {
  for (let i = 0; i < 100 && isOurSleep(pid); i++) await new Promise((resolve) => setTimeout(resolve, 50));
  return !isOurSleep(pid);
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
    expect(await gone(hostPid(root, name))).toBe(true);
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
    expect(await gone(hostPid(root, 'setsid-f'))).toBe(true);
  });

  it('are gone when the command that started them is timed out', async () => {
    const root = workspace({ 'hang.sh': `${script('hang', 'setsid -f sh ./survivor.sh hang\n')}sleep 300\n` });
    const store = await openStore();
    const { provider } = await serve(turns([exec(['sh', 'hang.sh'], { timeout_secs: 3 }), { text: 'done' }]));
    const result = await runWith(TaskContract.workspace('start it', root), provider, store, Policy.permissive());
    expect(store.steps(result.runId)[0]?.observations[0]?.content).toContain('sh hang.sh timed out and was killed');
    expect(await gone(hostPid(root, 'hang'))).toBe(true);
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
    expect(await gone(hostPid(root, 'serve'))).toBe(true);
  });

  it('records once per run how its commands are contained', async () => {
    const root = workspace();
    writeFileSync(join(root, 'a.txt'), 'a\n');
    const store = await openStore();
    const { provider } = await serve(
      turns([exec(['cat', 'a.txt']), exec(['sh', 'setsid-f.sh']), exec(['nosuch-program-xyz']), { text: 'done' }]),
    );
    const result = await runWith(TaskContract.workspace('start it', root), provider, store, Policy.permissive());
    hostPid(root, 'setsid-f');
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
