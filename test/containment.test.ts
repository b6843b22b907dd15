/**
 * Containment on the real rungs: commands a scripted model asks for run through bubblewrap
 * and the Landlock helper (and, asked for by name, the helper under unshare alone), and
 * the test looks at what they could and could not do on the host itself: files written
 * outside, protected paths made, the network dialled, the environment read.
 */
import { existsSync, linkSync, mkdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { answerQuestion, Policy, runWith, TaskContract } from '../dist/index.js';
import { hostRungs } from '../dist/runtime/exec/containment/rungs.js';
import { Driver, noneLeftUnder, tempStorePath } from './support/processes.js';
import { type Answer, drive, later, openStore, serve, tempWorkspace, turns } from './support/workspace.js';

const rungs = hostRungs();

/** A call that runs a script the model wrote: the policy sees `sh NAME`, not what the script does. */
function script(name: string): Answer {
  return { text: 'running', toolCalls: [{ name: 'exec', args: { argv: ['sh', name] } }] };
}

/** Every command allowed, and no host: a policy that denies egress. */
const COMMANDS_ONLY = Policy.default().layer('test').allowExec('<arbitrary code>*').allowExec('*');

/** Runs each script (written into the workspace as sN.sh) in a step of its own; the observations, in order. */
async function observe(
  root: string,
  scripts: string[],
  contract = TaskContract.workspace('try it', root),
  policy = COMMANDS_ONLY,
) {
  const names = scripts.map((body, index) => {
    writeFileSync(join(root, `s${index}.sh`), `${body}\n`);
    return `s${index}.sh`;
  });
  const store = await openStore();
  const { provider } = await serve(turns([...names.map(script), { text: 'done' }]));
  const result = await runWith(contract, provider, store, policy);
  const observations = store.steps(result.runId).flatMap((step) => step.observations.map((o) => o.content));
  const contained = store.events(result.runId).filter((event) => event.type === 'contained');
  return { result, observations, contained, store };
}

describe('containment', () => {
  it('names the rungs this host offers, and why any is missing', () => {
    // Each line says whether a rung can be tested here; a rung the host lacks is named, never passed over in silence.
    for (const rung of ['bubblewrap', 'landlock', 'namespaces'] as const) {
      const probe = rungs[rung];
      console.log(`containment rung ${rung}: ${probe.ok ? 'available' : `not available here: ${probe.reason}`}`);
    }
    expect(rungs.bubblewrap.ok || rungs.landlock.ok || rungs.namespaces.ok || process.platform !== 'linux').toBe(true);
  });

  it('keeps writes inside the workspace on bubblewrap', async () => {
    const outside = tempWorkspace({ 'target.txt': 'outside\n' });
    const root = tempWorkspace({ 'a.txt': 'a\n' });
    mkdirSync(join(root, '.git', 'hooks'), { recursive: true });
    writeFileSync(join(root, '.git', 'config'), '[core]\n');
    symlinkSync(outside, join(root, 'early-link'));
    linkSync(join(outside, 'target.txt'), join(root, 'hard.txt'));
    const { observations, contained } = await observe(root, [
      'echo in > inside.txt && cat inside.txt',
      `echo x > ${outside}/abs.txt; echo x > ../$(basename ${outside})/rel.txt; echo x > early-link/via-early.txt; echo status=$?`,
      `ln -s ${outside} late-link && echo x > late-link/via-late.txt; echo x > /proc/self/root${outside}/via-proc.txt; echo status=$?`,
      `mv a.txt ${outside}/moved.txt; echo x >> hard.txt; echo status=$?`,
      'echo x > .git/hooks/pre-commit; echo y >> .git/config; echo status=$?',
      // Moved aside with its parent and made again: the parent is a mount point, which cannot be moved or removed.
      'mv .git .git-old; rm -rf .git; mkdir -p .git/hooks; echo x > .git/hooks/pre-commit; mv .git/hooks .git/h; echo status=$?',
      'mount -o remount,rw / ; umount /proc; echo status=$?',
    ]);
    expect(contained[0]).toMatchObject({ rung: 'bubblewrap', filesystem: 'enforced', network: 'none' });
    // The canary found what the commands below find.
    expect(contained[0]?.probe).toEqual({
      filesystem: 'enforced',
      network: 'enforced',
      signals: 'enforced',
      environment: 'enforced',
      proxy: 'no proxy',
      note: null,
    });
    expect(observations[0]).toContain('in');
    for (const name of ['abs.txt', 'rel.txt', 'via-early.txt', 'via-late.txt', 'via-proc.txt', 'moved.txt']) {
      expect(existsSync(join(outside, name)), name).toBe(false);
    }
    expect(readFileSync(join(outside, 'target.txt'), 'utf8')).toBe('outside\n');
    expect(existsSync(join(root, '.git', 'hooks', 'pre-commit'))).toBe(false);
    expect(readFileSync(join(root, '.git', 'config'), 'utf8')).toBe('[core]\n');
    expect(existsSync(join(root, '.git-old'))).toBe(false);
    expect(existsSync(join(root, '.git', 'h'))).toBe(false);
    expect(existsSync(join(root, 'a.txt'))).toBe(true);
  });

  it('keeps writes inside the workspace with the Landlock helper alone, asked for by name', async () => {
    const outside = tempWorkspace({ 'target.txt': 'outside\n' });
    const root = tempWorkspace();
    mkdirSync(join(root, '.git', 'hooks'), { recursive: true });
    symlinkSync(outside, join(root, 'early-link'));
    linkSync(join(outside, 'target.txt'), join(root, 'hard.txt'));
    const contract = TaskContract.workspace('try it', root).withSandbox({ rung: 'landlock' });
    const { observations, contained } = await observe(
      root,
      [
        'echo in > inside.txt && cat inside.txt',
        `echo x > ${outside}/abs.txt; echo x > early-link/via-early.txt; echo x > /proc/self/root${outside}/via-proc.txt`,
        `echo x >> hard.txt; echo x > .git/hooks/pre-commit; umount .git/hooks; echo x > .git/hooks/pre-commit`,
        'mv .git .git-old; mkdir -p .git/hooks; echo x > .git/hooks/pre-commit',
      ],
      contract,
    );
    expect(contained[0]).toMatchObject({
      rung: 'landlock',
      requested: 'landlock',
      filesystem: 'enforced',
      probe: {
        filesystem: 'enforced',
        network: 'enforced',
        signals: 'enforced',
        environment: 'enforced',
        proxy: 'no proxy',
      },
    });
    expect(observations[0]).toContain('--- stdout:\nin\n');
    for (const name of ['abs.txt', 'via-early.txt', 'via-proc.txt'])
      expect(existsSync(join(outside, name)), name).toBe(false);
    expect(readFileSync(join(outside, 'target.txt'), 'utf8')).toBe('outside\n');
    expect(existsSync(join(root, '.git', 'hooks', 'pre-commit'))).toBe(false);
    expect(existsSync(join(root, '.git-old'))).toBe(false);
  });

  it('protects .git/hooks, .git/config and .io-harness that do not exist yet, leaving nothing behind', async () => {
    const root = tempWorkspace();
    mkdirSync(join(root, '.git'));
    const { observations } = await observe(root, [
      'mkdir -p .git/hooks; echo x > .git/hooks/pre-commit; echo x > .git/config; mkdir .io-harness; echo x > .io-harness/state; echo done',
    ]);
    expect(observations[0]).toContain('done');
    expect(existsSync(join(root, '.git', 'hooks'))).toBe(false);
    expect(existsSync(join(root, '.git', 'config'))).toBe(false);
    expect(existsSync(join(root, '.io-harness'))).toBe(false);
  });

  it('gives a run whose policy names no host no network at all, and a run that allows one only the egress proxy', async () => {
    const listener = createServer((socket) => socket.end('reached\n'));
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    later(() => new Promise<void>((resolve) => listener.close(() => resolve())));
    const port = (listener.address() as { port: number }).port;
    let dialled = 0;
    listener.on('connection', () => dialled++);
    const dial = `node -e "require('net').connect(${port}, '127.0.0.1').on('data', (d) => process.stdout.write(String(d))).on('error', (e) => console.log('refused', e.code))"`;
    const udp = `node -e "const s = require('dgram').createSocket('udp4'); s.send('x', 53, '10.0.0.1', (e) => { console.log('udp', e ? e.code : 'sent'); s.close(); })"`;
    const denied = await observe(tempWorkspace(), [dial, udp]);
    expect(denied.contained[0]).toMatchObject({ network: 'none', egress: 'denied' });
    expect(denied.observations[0]).toContain('refused');
    expect(denied.observations[1]).toMatch(/udp E[A-Z]+/);
    expect(dialled).toBe(0);
    const allowed = await observe(tempWorkspace(), [dial], undefined, COMMANDS_ONLY.allowNet('127.0.0.1'));
    // A direct dial, the host allowed or not, reaches nothing: the proxy is the only way out (see egress.test.ts).
    expect(allowed.contained[0]).toMatchObject({
      network: 'proxy',
      egress: 'proxy',
      probe: { network: 'enforced', proxy: 'enforced' },
    });
    expect(allowed.observations[0]).toContain('refused');
    expect(dialled).toBe(0);
  });

  it("gives commands a HOME and a TMPDIR of the run's own, and none of the harness's secrets", async () => {
    process.env.IO_HARNESS_TEST_SECRET = 'canary-value-1';
    later(() => {
      delete process.env.IO_HARNESS_TEST_SECRET;
    });
    const { observations } = await observe(tempWorkspace(), [
      'echo "home=$HOME tmp=$TMPDIR"; printenv | grep -c canary-value-1; cat /proc/1/environ | tr "\\0" "\\n" | grep -c canary-value-1; echo x > "$TMPDIR/t" && echo tmp-writable; echo x > /tmp/shared-$$ || echo shared-tmp-refused',
    ]);
    expect(observations[0]).toMatch(/home=\S*io-harness-run-\S*\/home tmp=\S*io-harness-run-\S*\/tmp/);
    expect(observations[0]).toContain('tmp-writable');
    expect(observations[0]).toContain('shared-tmp-refused');
    expect(observations[0]).not.toContain('canary-value-1\n');
    expect(observations[0]).toMatch(/\n0\n0\n/);
  });

  it('refuses, before its first step, a run that asks for a rung this host cannot give, naming it', async () => {
    // A cache the helper cannot be built into (a file, not a directory): this process's agent threads
    // have no helper, so no rung that needs it.
    const saved = process.env.XDG_CACHE_HOME;
    process.env.XDG_CACHE_HOME = '/dev/null';
    later(() => {
      if (saved === undefined) delete process.env.XDG_CACHE_HOME;
      else process.env.XDG_CACHE_HOME = saved;
    });
    const root = tempWorkspace();
    const marker = join(root, 'ran.txt');
    const { result, store } = await observe(
      root,
      [`echo x > ${marker}`],
      TaskContract.workspace('try it', root).withSandbox({ rung: 'bubblewrap' }),
    );
    expect(result.outcome).toMatchObject({ kind: 'failed' });
    expect(JSON.stringify(result.outcome)).toMatch(
      /asks for the bubblewrap rung of containment, which this host cannot give/,
    );
    expect(store.steps(result.runId)).toEqual([]);
    expect(existsSync(marker)).toBe(false);
  });

  it('stops a busy loop, a huge file, a memory balloon and a fork bomb at their caps; the run goes on', async () => {
    const root = tempWorkspace();
    const contract = TaskContract.workspace('try it', root).withSandbox({
      caps: { cpuSecs: 1, fileBytes: 1_000_000, memoryBytes: 512 * 1024 * 1024, processes: 20 },
    });
    const { result, observations, contained, store } = await observe(
      root,
      [
        'while :; do :; done',
        'head -c 5000000 /dev/zero > big.bin',
        `node -e "const keep = []; for (;;) keep.push(Buffer.alloc(64 * 1024 * 1024, 1))"`,
        // A fork bomb that is not allowed to take the host down: each child waits, so they pile up.
        'for i in $(seq 1 200); do sleep 30 & done; wait',
        'echo still-here',
      ],
      contract,
    );
    expect(result.outcome.kind).toBe('finished');
    expect(contained[0]?.caps).toMatchObject({ cpuSecs: expect.stringContaining('RLIMIT_CPU') });
    expect(observations[0]).toContain('was stopped by its cpuSecs cap (1): SIGXCPU');
    expect(observations[1]).toContain('was stopped by its fileBytes cap (1000000): SIGXFSZ');
    expect(statSync(join(root, 'big.bin')).size).toBeLessThanOrEqual(1_000_000);
    // The balloon never ends by itself: ended, and not by the timeout, it was the cap (Node aborts when an allocation fails).
    expect(observations[2]).toMatch(/^sh s2\.sh exited with status [1-9]/);
    expect(observations[2]).not.toContain('timed out');
    expect(contained[0]?.caps).toMatchObject({ memoryBytes: expect.stringContaining('RLIMIT_AS') });
    if (String(contained[0]?.caps?.processes).startsWith('a pids cgroup')) {
      expect(observations[3]).toContain('was stopped by its processes cap (20)');
    } else {
      console.log(`containment: the processes cap is ${contained[0]?.caps?.processes} on this host`);
    }
    expect(observations[4]).toContain('still-here');
    const reached = store.events(result.runId).filter((event) => event.type === 'cap-reached');
    expect(reached.map((event) => (event as { cap: string }).cap)).toEqual(
      expect.arrayContaining(['cpuSecs', 'fileBytes']),
    );
  });

  it('chooses and records the rung again when a run killed mid-command is resumed in a new process', async () => {
    const outside = tempWorkspace();
    const root = tempWorkspace();
    const path = tempStorePath();
    // Says it started, tries to write outside, then waits: the driver is killed while it waits.
    const argv = [
      'node',
      '-e',
      `const fs = require('fs'); fs.appendFileSync('starts.txt', 'x'); try { fs.writeFileSync(${JSON.stringify(join(outside, 'escaped.txt'))}, 'x'); } catch {} setTimeout(() => {}, 4000)`,
    ];
    const base = {
      store: path,
      wireScript: 'workspace-command#commandScript',
      options: { argv },
      workspace: { goal: 'run it', root },
    };
    const store = await openStore(path);
    const starts = () =>
      existsSync(join(root, 'starts.txt')) ? readFileSync(join(root, 'starts.txt'), 'utf8').length : 0;
    const killOnStart = async (config: ConstructorParameters<typeof Driver>[0], count: number) => {
      const driver = new Driver(config);
      later(() => {
        driver.child.kill('SIGKILL');
      });
      for (let i = 0; i < 500 && starts() < count; i++) await new Promise((r) => setTimeout(r, 20));
      driver.child.kill('SIGKILL');
      await driver.exited;
      return driver;
    };
    const first = await killOnStart({ ...base, mode: 'run' }, 1);
    const rootId = first.rootId as string;
    expect((await drive({ ...base, mode: 'resume', rootId })).result?.status).toBe('paused');
    const [asked] = store.questions({ status: 'open' });
    answerQuestion(store, asked?.questionId as string, 'retry');
    expect((await drive({ ...base, mode: 'resume', rootId })).result?.status).toBe('finished');
    expect(starts()).toBe(2);
    // The killed process's step never committed, so its record went with it; the process that
    // retried the command chose the rung again and recorded it in the step it committed.
    const contained = store.events(rootId).filter((event) => event.type === 'contained');
    expect(contained).toHaveLength(1);
    for (const event of contained) expect(event).toMatchObject({ rung: 'bubblewrap', filesystem: 'enforced' });
    expect(existsSync(join(outside, 'escaped.txt'))).toBe(false);
    expect(await noneLeftUnder(root)).toBe(true);
  }, 60_000);

  it('runs commands with full access only when the contract says so', async () => {
    const outside = tempWorkspace();
    const root = tempWorkspace();
    const { observations, contained } = await observe(
      root,
      [`echo x > ${outside}/full.txt && echo wrote`],
      TaskContract.workspace('try it', root).withFullAccess(),
    );
    expect(contained[0]).toMatchObject({
      rung: 'full-access',
      // The floor's PID namespace still keeps the harness out of reach of its signals, but the
      // host's /proc shows the harness's environment, and the canary says so.
      probe: { filesystem: 'not established', signals: 'enforced', environment: 'partial' },
    });
    expect(observations[0]).toContain('wrote');
    expect(existsSync(join(outside, 'full.txt'))).toBe(true);
  });
});

describe('run directories', () => {
  it("removes the run directories a killed process left, and keeps a live one's", async () => {
    const { spawnSync } = await import('node:child_process');
    const { tmpdir } = await import('node:os');
    // A pid that is no longer anyone's: a child that has exited.
    const dead = spawnSync(process.execPath, ['-e', 'console.log(process.pid)'], { encoding: 'utf8' });
    const deadPid = Number(dead.stdout.trim());
    const stale = join(tmpdir(), `io-harness-run-${deadPid}-stale`);
    const live = join(tmpdir(), `io-harness-run-${process.pid}-live`);
    for (const dir of [stale, live]) mkdirSync(join(dir, 'home'), { recursive: true });
    later(() => rmSync(live, { recursive: true, force: true }));
    later(() => rmSync(stale, { recursive: true, force: true }));
    const script = `
      const { ContainedExecutor } = await import(${JSON.stringify(new URL('../dist/runtime/exec/containment/contained.js', import.meta.url).href)});
      const { directExecutor } = await import(${JSON.stringify(new URL('../dist/runtime/exec/executor.js', import.meta.url).href)});
      const executor = new ContainedExecutor(directExecutor, { root: process.cwd(), policy: null });
      executor.boundary();
      await executor.close();`;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      cwd: tmpdir(),
    });
    expect(child.status, child.stderr).toBe(0);
    expect(existsSync(stale)).toBe(false);
    expect(existsSync(live)).toBe(true);
  });
});
