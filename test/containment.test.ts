/**
 * Containment on the real rungs: commands a scripted model asks for run through bubblewrap
 * and the Landlock helper (and, asked for by name, the helper under unshare alone), and
 * the test looks at what they could and could not do on the host itself: files written
 * outside, protected paths made, the network dialled, the environment read.
 */
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  linkSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  answerQuestion,
  CallbackApprover,
  contractFromJSON,
  Policy,
  runWith,
  selectBackend,
  TaskContract,
} from '../dist/index.js';
import { ContainedExecutor } from '../dist/runtime/exec/containment/contained.js';
import { keepFromCommands } from '../dist/runtime/exec/containment/kept.js';
import { hostRungs } from '../dist/runtime/exec/containment/rungs.js';
import { directExecutor } from '../dist/runtime/exec/executor.js';
import { commandEnvironment } from '../dist/runtime/exec/run-command.js';
import { Driver, noneLeftUnder, tempStorePath } from './support/processes.js';
import { type Answer, drive, later, openStore, serve, setEnv, tempWorkspace, turns } from './support/workspace.js';

const rungs = hostRungs();

/** The rungs that confine the file system, each asked for by name in the cases run on every one. */
const CONFINING = ['bubblewrap', 'landlock', 'namespaces'] as const;

/** The escape probe (test/fixtures/escape-probe.c), built with the system C compiler into a directory the test removes. */
function probeBinary(): string {
  const binary = join(tempWorkspace(), 'escape-probe');
  const source = fileURLToPath(new URL('./fixtures/escape-probe.c', import.meta.url));
  const built = spawnSync('cc', ['-O0', '-o', binary, source], { encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`the escape probe did not compile: ${built.stderr}`);
  return binary;
}

/** Whether `rung` can be tried here; a rung the host lacks is named in the output, never passed over in silence. */
function available(rung: (typeof CONFINING)[number]): boolean {
  const probe = rungs[rung];
  if (probe.ok && (rung !== 'namespaces' || rungs.mounts)) return true;
  console.log(
    `containment rung ${rung}: not available here (${probe.ok ? 'the helper cannot make its grants with mounts' : probe.reason}); this case is not run`,
  );
  return false;
}

/** A call that runs a script the model wrote: the policy sees `sh NAME`, not what the script does. */
function script(name: string): Answer {
  return { text: 'running', toolCalls: [{ name: 'exec', args: { argv: ['sh', name] } }] };
}

/** Every command allowed, and no host: a policy that denies egress. */
const COMMANDS_ONLY = Policy.default().layer('test').allowExec('<arbitrary code>*').allowExec('*');

/**
 * A contained executor for `root` on `rung` running `sh -c` commands; `beforeFirst` runs
 * just before its first spawn (the other side of a race with the wrap), and `started`
 * counts the spawns.
 */
function shellOn(rung: (typeof CONFINING)[number], root: string, beforeFirst?: () => void) {
  let started = 0;
  const base = {
    ...directExecutor,
    run: (request: Parameters<typeof directExecutor.run>[0]) => {
      if (started++ === 0) beforeFirst?.();
      return directExecutor.run(request);
    },
  };
  const executor = new ContainedExecutor(base, {
    root,
    policy: COMMANDS_ONLY,
    sandbox: { access: 'workspace-write', writableRoots: [], rung, caps: {} },
  });
  later(() => executor.close());
  return {
    run: (command: string) =>
      executor.run({
        argv: ['sh', '-c', command],
        purpose: 'exec',
        cwd: root,
        timeoutMs: 20_000,
        outputLimit: 64 * 1024,
        env: commandEnvironment(),
      }),
    started: () => started,
  };
}

/** Runs each script (written into the workspace as sN.sh), or answer, in a step of its own; the observations, in order. */
async function observe(
  root: string,
  scripts: (string | Answer)[],
  contract = TaskContract.workspace('try it', root),
  policy = COMMANDS_ONLY,
  approver?: CallbackApprover,
) {
  const answers = scripts.map((body, index) => {
    if (typeof body !== 'string') return body;
    writeFileSync(join(root, `s${index}.sh`), `${body}\n`);
    return script(`s${index}.sh`);
  });
  const store = await openStore();
  const { provider } = await serve(turns([...answers, { text: 'done' }]));
  const result = await runWith(contract, provider, store, policy, approver);
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

  for (const rung of CONFINING) {
    it(`keeps writes inside the workspace on the ${rung} rung`, async () => {
      if (!available(rung)) return;
      const outside = tempWorkspace({ 'target.txt': 'outside\n' });
      const root = tempWorkspace({ 'a.txt': 'a\n' });
      mkdirSync(join(root, '.git', 'hooks'), { recursive: true });
      writeFileSync(join(root, '.git', 'config'), '[core]\n');
      mkdirSync(join(root, 'vendor', 'lib', '.git'), { recursive: true });
      writeFileSync(join(root, 'vendor', 'lib', '.git', 'config'), '[core]\n');
      symlinkSync(outside, join(root, 'early-link'));
      linkSync(join(outside, 'target.txt'), join(root, 'hard.txt'));
      // A UNIX socket of the host's (a daemon's, another run's proxy): read-only mounts do not stop a connect.
      const socketPath = join(outside, 'host.sock');
      let reached = 0;
      const host = createServer(() => reached++);
      await new Promise<void>((resolve) => host.listen(socketPath, resolve));
      later(() => new Promise<void>((resolve) => host.close(() => resolve())));
      const { observations, contained } = await observe(
        root,
        [
          'echo in > inside.txt && cat inside.txt',
          `echo x > ${outside}/abs.txt; echo x > ../$(basename ${outside})/rel.txt; echo x > early-link/via-early.txt; echo status=$?`,
          `ln -s ${outside} late-link && echo x > late-link/via-late.txt; echo x > /proc/self/root${outside}/via-proc.txt; echo status=$?`,
          `mv a.txt ${outside}/moved.txt; echo x >> hard.txt; echo status=$?`,
          'echo x > .git/hooks/pre-commit; echo y >> .git/config; echo status=$?',
          // Moved aside with its parent and made again: the parent is a mount point, which cannot be moved or removed.
          'mv .git .git-old; rm -rf .git; mkdir -p .git/hooks; echo x > .git/hooks/pre-commit; mv .git/hooks .git/h; echo status=$?',
          'mount -o remount,rw / ; umount /proc; umount .git/hooks; echo x > .git/hooks/pre-commit; echo status=$?',
          // A user namespace of the command's own gets it no capability over the mounts it was given.
          'unshare -Urm sh -c "umount .git/hooks; mount -o remount,rw /; echo x > .git/hooks/pre-commit"; echo status=$?',
          // git runs what a repository points it to from anywhere in .git, and in a nested repository too.
          'echo ../evil > .git/commondir; mkdir .git/worktrees; echo "[core] fsmonitor = x" >> vendor/lib/.git/config; echo status=$?',
          // No capability of the host's (a file handle, the host name), and no UNIX socket to connect with.
          `grep CapEff /proc/self/status; hostname contained-test || echo hostname-refused; node -e "require('net').connect('${socketPath}').on('connect', () => console.log('unix connected')).on('error', (e) => console.log('unix', e.code))"`,
        ],
        TaskContract.workspace('try it', root).withSandbox({ rung }),
      );
      expect(contained[0]).toMatchObject({ rung, filesystem: 'enforced', protectedPaths: 'enforced', network: 'none' });
      // The canary found what the commands below find.
      expect(contained[0]?.probe).toEqual({
        filesystem: 'enforced',
        network: 'enforced',
        signals: 'enforced',
        environment: 'enforced',
        proxy: 'no proxy',
        note: null,
      });
      expect(observations[0]).toContain('--- stdout:\nin\n');
      for (const name of ['abs.txt', 'rel.txt', 'via-early.txt', 'via-late.txt', 'via-proc.txt', 'moved.txt']) {
        expect(existsSync(join(outside, name)), name).toBe(false);
      }
      expect(readFileSync(join(outside, 'target.txt'), 'utf8')).toBe('outside\n');
      expect(existsSync(join(root, '.git', 'hooks', 'pre-commit'))).toBe(false);
      expect(readFileSync(join(root, '.git', 'config'), 'utf8')).toBe('[core]\n');
      expect(existsSync(join(root, '.git-old'))).toBe(false);
      expect(existsSync(join(root, '.git', 'h'))).toBe(false);
      expect(existsSync(join(root, 'a.txt'))).toBe(true);
      expect(existsSync(join(root, '.git', 'commondir'))).toBe(false);
      expect(existsSync(join(root, '.git', 'worktrees'))).toBe(false);
      expect(readFileSync(join(root, 'vendor', 'lib', '.git', 'config'), 'utf8')).toBe('[core]\n');
      expect(observations[9]).toContain('CapEff:\t0000000000000000');
      expect(observations[9]).toContain('hostname-refused');
      expect(observations[9]).toContain('unix EACCES');
      expect(reached).toBe(0);
    });

    it(`protects .git, .io-harness and io.toml that do not exist yet on the ${rung} rung, leaving nothing behind`, async () => {
      if (!available(rung)) return;
      const root = tempWorkspace();
      const { observations } = await observe(
        root,
        [
          'mkdir -p .git/hooks; echo x > .git/hooks/pre-commit; echo x > .git/config; mkdir .io-harness; echo x > .io-harness/state; echo x > io.toml; echo done',
          // The mount points the first command left are still read-only to the next: no repository can be made there.
          'git init -q . || echo init-refused; rmdir .git .io-harness; mv .io-harness elsewhere; rm -f io.toml; mkdir -p .io-harness/x .git/hooks && echo made; echo done',
        ],
        TaskContract.workspace('try it', root).withSandbox({ rung }),
      );
      expect(observations[0]).toContain('done');
      expect(observations[1]).toContain('init-refused');
      expect(observations[1]).not.toContain('made');
      expect(existsSync(join(root, 'elsewhere'))).toBe(false);
      // The mount points were made empty and read-only for the run, and went with it.
      for (const path of ['.git', '.io-harness', 'io.toml']) expect(existsSync(join(root, path)), path).toBe(false);
    });
  }

  for (const rung of CONFINING) {
    it(`refuses on the ${rung} rung what a read-only mount alone does not: devices, modes and times outside, socket families, datagram pairs, tracing its init`, async () => {
      if (!available(rung)) return;
      const outside = tempWorkspace({ 'victim.txt': 'victim\n' });
      const victim = join(outside, 'victim.txt');
      chmodSync(victim, 0o644);
      const before = statSync(victim);
      // A pair's sendto would name a datagram socket of the host's (a log daemon's): the pair is not made.
      const { observations } = await observe(tempWorkspace(), [
        `${probeBinary()} ${victim} ${join(outside, 'log.sock')}`,
      ]);
      const out = observations[0] ?? '';
      for (const line of [
        'unix-socket EACCES',
        'vsock EACCES',
        'unix-stream-pair ok',
        'unix-dgram-pair EACCES',
        'dev-null ok',
        'chmod-outside EROFS',
        'utimes-outside EROFS',
      ])
        expect(out, line).toContain(line);
      // No /dev/kmsg at all on bubblewrap (its /dev is its own); elsewhere no device opens past the few bound back.
      expect(out).toMatch(/dev-kmsg (EACCES|ENOENT|EPERM)/);
      expect(out).toMatch(/ptrace-init (EPERM|EACCES)/);
      const after = statSync(victim);
      expect(after.mode).toBe(before.mode);
      expect(after.mtimeMs).toBe(before.mtimeMs);
    });
  }

  for (const rung of CONFINING) {
    it(`protects what a protected name leads to on the ${rung} rung: a linked .git or io.toml, a gitfile's gitdir, an uninitialised submodule`, async () => {
      if (!available(rung)) return;
      const root = tempWorkspace({
        '.store/root.git/config': '[core]\n',
        '.store/sep.git/config': '[core]\n',
        'conf/io.toml': '[policy]\n',
        'vendor/.git': 'gitdir: ../.store/sep.git\n',
        '.gitmodules': '[submodule "sub"]\n\tpath = sub\n\turl = ../sub.git\n',
        'sub/.keep': '',
      });
      symlinkSync('.store/root.git', join(root, '.git'));
      symlinkSync('conf/io.toml', join(root, 'io.toml'));
      const { observations } = await observe(
        root,
        [
          'echo "[core] fsmonitor = x" >> .git/config; echo "[core] fsmonitor = x" >> vendor/.git/config; echo "[evil]" >> io.toml; echo status=$?',
          'mkdir sub/.git 2>/dev/null || echo sub-refused; git init -q sub 2>/dev/null || echo init-refused',
        ],
        TaskContract.workspace('try it', root).withSandbox({ rung }),
      );
      expect(readFileSync(join(root, '.store', 'root.git', 'config'), 'utf8')).toBe('[core]\n');
      expect(readFileSync(join(root, '.store', 'sep.git', 'config'), 'utf8')).toBe('[core]\n');
      expect(readFileSync(join(root, 'conf', 'io.toml'), 'utf8')).toBe('[policy]\n');
      expect(observations[1]).toContain('sub-refused');
      expect(observations[1]).toContain('init-refused');
      expect(existsSync(join(root, 'sub', '.git'))).toBe(false);
    });
  }

  it("keeps a run's protected paths read-only while another run on the same workspace closes", async () => {
    const root = tempWorkspace();
    const make = () =>
      new ContainedExecutor(directExecutor, {
        root,
        policy: COMMANDS_ONLY,
        sandbox: { access: 'workspace-write', writableRoots: [], rung: null, caps: {} },
      });
    const first = make();
    const second = make();
    const run = (executor: ContainedExecutor, line: string) =>
      executor.run({
        argv: ['sh', '-c', line],
        purpose: 'exec',
        cwd: root,
        timeoutMs: 20_000,
        outputLimit: 64 * 1024,
        env: commandEnvironment(),
      });
    // The first run's command makes the mount points for .io-harness and io.toml, which do not exist.
    await run(first, 'true');
    // The second's command is running when the first run closes, then tries again.
    const late = run(second, 'sleep 2; mkdir -p .io-harness/x; echo "[policy]" > io.toml; echo done');
    await new Promise((resolve) => setTimeout(resolve, 500));
    await first.close();
    const result = await late;
    // Everything the command said, should it not get as far as 'done'.
    expect(result.stdout, JSON.stringify(result)).toContain('done');
    await second.close();
    expect(existsSync(join(root, '.io-harness', 'x'))).toBe(false);
    expect(existsSync(join(root, 'io.toml'))).toBe(false);
  });

  for (const rung of CONFINING) {
    it(`starts a command on the ${rung} rung when a file it masks goes between the wrapping and the mount`, async () => {
      if (!available(rung)) return;
      // A store's journal outside the workspace, kept from commands; SQLite removes it when the
      // store's last handle closes, which may fall between the look at it and the sandbox's mount.
      const outside = tempWorkspace({ 'runs.db-wal': 'journal of another store\n' });
      const journal = join(outside, 'runs.db-wal');
      keepFromCommands(journal, 'mask');
      const shell = shellOn(rung, tempWorkspace(), () => rmSync(journal));
      const result = await shell.run(`cat ${journal} 2>/dev/null || echo no-journal; echo ran`);
      expect(result.stdout, JSON.stringify(result)).toBe('no-journal\nran\n');
      // Bubblewrap mounts every mask itself, so it failed once and the command was wrapped again;
      // the helper finds the file gone when it looks and has nothing to hide.
      expect(shell.started()).toBe(rung === 'bubblewrap' ? 2 : 1);
    });

    it(`starts commands on the ${rung} rung after a file with another name is removed mid-run`, async () => {
      if (!available(rung)) return;
      // A file of the workspace with a second name outside (pnpm's store does this): kept
      // read-only as the run opens; removed later by someone else, it has nothing left to keep.
      const outside = tempWorkspace({ 'target.txt': 'shared\n' });
      const root = tempWorkspace();
      linkSync(join(outside, 'target.txt'), join(root, 'hard.txt'));
      const shell = shellOn(rung, root);
      const first = await shell.run('echo changed >> hard.txt 2>/dev/null || echo refused');
      expect(first.stdout, JSON.stringify(first)).toBe('refused\n');
      rmSync(join(root, 'hard.txt'));
      const second = await shell.run('echo ran');
      expect(second.stdout, JSON.stringify(second)).toBe('ran\n');
      expect(readFileSync(join(outside, 'target.txt'), 'utf8')).toBe('shared\n');
    });

    it(`keeps a protected path on the ${rung} rung when its mount point goes between the wrapping and the mount`, async () => {
      if (!available(rung)) return;
      // Kept though it does not exist: a read-only mount point is made in its place for each
      // command, and another run's end on the same workspace may remove it just before the mount.
      const root = tempWorkspace();
      const place = join(root, 'node_modules');
      keepFromCommands(place, 'protect');
      const shell = shellOn(rung, root, () => rmSync(place, { recursive: true, force: true }));
      const result = await shell.run('mkdir -p node_modules/planted 2>/dev/null && echo made || echo refused');
      expect(result.stdout, JSON.stringify(result)).toBe('refused\n');
      expect(existsSync(join(place, 'planted'))).toBe(false);
      // The sandbox failed to start the command (bubblewrap cannot bind a source that went, the helper
      // will not leave a path unprotected), and the command was wrapped again, its mount point made anew.
      expect(shell.started()).toBe(2);
    });
  }

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

  for (const rung of CONFINING) {
    it(`gives commands on the ${rung} rung a HOME and a TMPDIR of their own, none of the harness's secrets, and none of the loader's variables the model hands them`, async () => {
      if (!available(rung)) return;
      setEnv({ IO_HARNESS_TEST_SECRET: 'canary-value-1', IO_HARNESS_TEST_KEPT: 'kept-value-2' });
      const handed = [
        'LD_PRELOAD=/nonexistent/preload.so',
        'NODE_OPTIONS=--require /nonexistent/hook.js',
        'BASH_FUNC_x%%=() { echo injected; }',
        'npm_config_script_shell=/nonexistent/shell',
        'MODEL_SET=visible-3',
      ];
      const root = tempWorkspace();
      const contract = TaskContract.workspace('try it', root)
        .withSandbox({ rung })
        .withInheritedEnv(['IO_HARNESS_TEST_KEPT']);
      const { observations } = await observe(
        root,
        [
          `echo "home=$HOME tmp=$TMPDIR"; printenv | grep -c canary-value-1; cat /proc/1/environ | tr "\\0" "\\n" | grep -c canary-value-1; cat /proc/${process.pid}/environ | grep -c canary-value-1; echo x > "$TMPDIR/t" && echo tmp-writable; echo x > /tmp/shared-$$ || echo shared-tmp-refused`,
          { text: 'env', toolCalls: [{ name: 'exec', args: { argv: ['env', ...handed, 'printenv'] } }] },
          // Inside a wrapper, and a shell that would import the function: it is not there to call.
          {
            text: 'env',
            toolCalls: [
              { name: 'exec', args: { argv: ['timeout', '5', 'env', ...handed, 'bash', '-c', 'x; printenv'] } },
            ],
          },
          // Inside the programs that run a command of their own: xargs, find -exec.
          { text: 'env', toolCalls: [{ name: 'exec', args: { argv: ['xargs', '-r', 'env', ...handed, 'printenv'] } }] },
          {
            text: 'env',
            toolCalls: [
              {
                name: 'exec',
                args: { argv: ['find', '.', '-maxdepth', '0', '-exec', 'env', ...handed, 'printenv', ';'] },
              },
            ],
          },
        ],
        contract,
        COMMANDS_ONLY,
        // A person approves the variables (the policy asks about each): they are dropped all the same.
        new CallbackApprover(() => 'approve'),
      );
      expect(observations[0]).toMatch(/home=\S*io-harness-run-\S*\/home tmp=\S*io-harness-run-\S*\/tmp/);
      expect(observations[0]).toContain('tmp-writable');
      expect(observations[0]).toContain('shared-tmp-refused');
      expect(observations[0]).not.toContain('canary-value-1\n');
      // No line of /proc/1's environment holds it, and the harness's own /proc entry is not there to read.
      expect(observations[0]).toMatch(/--- stdout:\nhome=\S+ tmp=\S+\n0\n0\n0\n/);
      // What the commands printed (the observation's first line repeats the argv the model wrote).
      for (const printed of [1, 2, 4].map((index) =>
        (observations[index] ?? '').slice((observations[index] ?? '').indexOf('--- stdout:')),
      )) {
        expect(printed).toContain('MODEL_SET=visible-3');
        expect(printed).toContain('IO_HARNESS_TEST_KEPT=kept-value-2');
        for (const name of [
          'LD_PRELOAD',
          'NODE_OPTIONS',
          'BASH_FUNC_x',
          'npm_config_script_shell',
          'IO_HARNESS_TEST_SECRET',
        ])
          expect(printed, name).not.toContain(name);
        expect(printed).not.toContain('preload.so');
      }
      expect(observations[2]).toContain('x: command not found');
      expect(observations[2]).not.toContain('\ninjected');
    });
  }

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

  for (const rung of CONFINING) {
    it(`stops a busy loop, a huge file, a memory balloon and a fork bomb at their caps on the ${rung} rung; the run goes on`, async () => {
      if (!available(rung)) return;
      const root = tempWorkspace();
      const contract = TaskContract.workspace('try it', root).withSandbox({
        rung,
        caps: { cpuSecs: 3, fileBytes: 1_000_000, memoryBytes: 256 * 1024 * 1024, processes: 20 },
      });
      const { result, observations, contained, store } = await observe(
        root,
        [
          'while :; do :; done',
          'head -c 5000000 /dev/zero > big.bin',
          `node -e "const keep = []; for (;;) keep.push(Buffer.alloc(32 * 1024 * 1024, 1))"`,
          // A fork bomb that is not allowed to take the host down: each child waits, so they pile up.
          'for i in $(seq 1 200); do sleep 30 & done; wait',
          'echo still-here',
        ],
        contract,
      );
      expect(result.outcome.kind).toBe('finished');
      const caps = contained[0]?.caps ?? {};
      expect(caps).toMatchObject({ cpuSecs: expect.stringContaining('RLIMIT_CPU') });
      expect(observations[0]).toContain('was stopped by its cpuSecs cap (3): SIGXCPU');
      expect(observations[1]).toContain('was stopped by its fileBytes cap (1000000): SIGXFSZ');
      expect(statSync(join(root, 'big.bin')).size).toBeLessThanOrEqual(1_000_000);
      // The balloon never ends by itself: ended, and not by the timeout, it was the cap.
      expect(observations[2]).toMatch(/^sh s2\.sh (exited with status [1-9]|was stopped)/);
      expect(observations[2]).not.toContain('timed out');
      const reached = store.events(result.runId).filter((event) => event.type === 'cap-reached');
      const named = reached.map((event) => (event as { cap: string }).cap);
      expect(named).toEqual(expect.arrayContaining(['cpuSecs', 'fileBytes']));
      console.log(`containment on ${rung}: memoryBytes by ${caps.memoryBytes}; processes by ${caps.processes}`);
      if (String(caps.memoryBytes).startsWith('a memory cgroup')) {
        // Killed by the kernel at the cgroup's limit, and the event says it was the memory cap.
        expect(observations[2]).toContain('was stopped by its memoryBytes cap (268435456)');
        expect(named).toContain('memoryBytes');
      } else {
        // Node aborts when an allocation past RLIMIT_AS fails.
        expect(caps.memoryBytes).toContain('RLIMIT_AS');
      }
      if (String(caps.processes).startsWith('a pids cgroup')) {
        expect(observations[3]).toContain('was stopped by its processes cap (20)');
        expect(named).toContain('processes');
      }
      expect(observations[4]).toContain('still-here');
    });
  }

  for (const rung of [...CONFINING, 'floor'] as const) {
    it(`stops unbounded output and a command past its wall clock at their caps on the ${rung} rung`, async () => {
      if (rung !== 'floor' && !available(rung)) return;
      const root = tempWorkspace();
      const contract = TaskContract.workspace('try it', root).withSandbox({
        rung,
        caps: { outputBytes: 1_000_000, wallSecs: 2 },
      });
      const { result, observations, store } = await observe(
        root,
        ['yes', 'sleep 30 & sleep 30; echo never', 'echo fine'],
        contract,
      );
      expect(result.outcome.kind).toBe('finished');
      expect(observations[0]).toContain('was stopped by its outputBytes cap (1000000)');
      expect(observations[1]).toContain('was stopped by its wallSecs cap (2)');
      expect(observations[1]).not.toContain('never');
      expect(observations[2]).toContain('fine');
      const reached = store.events(result.runId).filter((event) => event.type === 'cap-reached');
      expect(reached.map((event) => (event as { cap: string }).cap)).toEqual(['outputBytes', 'wallSecs']);
      expect(await noneLeftUnder(root)).toBe(true);
    });
  }

  it('chooses and records the rung again when a run killed mid-command is resumed in a new process', async () => {
    const outside = tempWorkspace();
    const root = tempWorkspace();
    const path = tempStorePath();
    mkdirSync(join(root, '.git'));
    // The drivers are processes of their own: they take this environment when they start.
    setEnv({ IO_HARNESS_TEST_SECRET: 'canary-value-4' });
    const socketPath = join(outside, 'host.sock');
    let reached = 0;
    const host = createServer(() => reached++);
    await new Promise<void>((resolve) => host.listen(socketPath, resolve));
    later(() => new Promise<void>((resolve) => host.close(() => resolve())));
    // Tries to write outside and into .git, to reach a host socket, and notes whether it
    // sees the secret; leaves a detached process behind; then waits: the driver is killed while it waits.
    // It notes that it started last, once everything else is done, so the kill never cuts an attempt short.
    const attempts = [
      "const fs = require('fs');",
      `try { fs.writeFileSync(${JSON.stringify(join(outside, 'escaped.txt'))}, 'x'); } catch {}`,
      "try { fs.writeFileSync('.git/hooks-planted', 'x'); } catch {}",
      `require('net').connect(${JSON.stringify(socketPath)}).on('error', () => {});`,
      "fs.appendFileSync('seen.txt', String(process.env.IO_HARNESS_TEST_SECRET) + '\\n');",
      "require('child_process').spawn('setsid', ['sleep', '100000'], { detached: true, stdio: 'ignore' }).unref();",
      "fs.appendFileSync('starts.txt', 'x');",
      'setTimeout(() => {}, 4000);',
    ];
    const argv = ['node', '-e', attempts.join(' ')];
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
    // The strongest rung this host offers (bubblewrap where it is installed, as in CI).
    const strongest = selectBackend(TaskContract.workspace('run it', root)).rung;
    for (const event of contained) expect(event).toMatchObject({ rung: strongest, filesystem: 'enforced' });
    expect(existsSync(join(outside, 'escaped.txt'))).toBe(false);
    expect(existsSync(join(root, '.git', 'hooks-planted'))).toBe(false);
    expect(reached).toBe(0);
    // Both attempts, the killed one and the retried one, saw no secret.
    expect(readFileSync(join(root, 'seen.txt'), 'utf8')).toBe('undefined\nundefined\n');
    // Nothing either of them started is left: not the killed driver's detached sleep, not the finished one's.
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
  it("links the toolchains into a run's home, and the host's caches only when the contract shares them", async () => {
    const { furnishHome } = await import('../dist/runtime/exec/containment/boundary.js');
    const realHome = tempWorkspace();
    for (const dir of ['.rustup', '.npm/_cacache', '.m2/repository', '.gradle/init.d'])
      mkdirSync(join(realHome, dir), { recursive: true });
    const own = join(tempWorkspace(), 'home');
    // A cache a command could leave a settings.xml or an init script in, for the next build on the host to run.
    expect(furnishHome(own, false, realHome)).toEqual([]);
    expect(existsSync(join(own, '.rustup'))).toBe(true);
    for (const cache of ['.npm', '.m2', '.gradle']) expect(existsSync(join(own, cache)), cache).toBe(false);
    const shared = join(tempWorkspace(), 'home');
    expect(furnishHome(shared, true, realHome).sort()).toEqual(
      ['.gradle', '.m2', '.npm'].map((cache) => join(realpathSync(realHome), cache)),
    );
    expect(() => TaskContract.workspace('x', realHome).withSandbox({ sharedCaches: 'yes' as never })).toThrow(
      /sharedCaches must be true or false/,
    );
    // Kept with the contract as stored, so a resumed run shares them too (or not).
    const sharing = TaskContract.workspace('x', realHome).withSandbox({ sharedCaches: true, caps: { wallSecs: 5 } });
    expect(contractFromJSON(JSON.parse(JSON.stringify(sharing.toJSON()))).toJSON().sandbox).toMatchObject({
      sharedCaches: true,
      caps: { wallSecs: 5 },
    });
    expect(() => contractFromJSON({ ...sharing.toJSON(), sandbox: { sharedCaches: 'yes' } })).toThrow(
      /sandbox\.sharedCaches must be true or false, got "yes"/,
    );
  });

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

describe("finding the host's rungs", () => {
  /** What a fresh process's probe found, run by `call` (`hostRungs()` or `await probeHostRungs()`), and how often its event loop turned meanwhile. */
  function probedIn(call: string): { host: unknown; turns: number } {
    const rungsModule = fileURLToPath(new URL('../dist/runtime/exec/containment/rungs.js', import.meta.url));
    const body = `
      const { hostRungs, probeHostRungs } = await import(${JSON.stringify(rungsModule)});
      let turns = 0;
      let done = false;
      const tick = () => { if (done) return; turns++; setImmediate(tick); };
      setImmediate(tick);
      const host = ${call};
      done = true;
      console.log(JSON.stringify({ host, turns }));`;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', body], { encoding: 'utf8' });
    expect(child.status, child.stderr).toBe(0);
    return JSON.parse(child.stdout.trim().split('\n').at(-1) as string);
  }

  it('answers a probe whose pipes a grandchild holds open at its deadline, and one that cannot start', async () => {
    const { spawnProbe } = await import('../dist/runtime/exec/containment/rungs.js');
    // The shell's child keeps its stderr open past the shell's own end; it says its pid first.
    const held = await spawnProbe(
      { file: '/bin/sh', args: ['-c', 'sleep 20 & echo $! >&2; exec sleep 20'], stdout: true, stderr: true },
      300,
    );
    const grandchild = Number(held.stderr.trim());
    try {
      expect(held.status).toBeNull();
      expect(held.error?.message).toBe('the probe timed out');
    } finally {
      if (grandchild > 0) process.kill(grandchild, 'SIGKILL');
    }
    // Refused before any process is made (a NUL in an argument): not started, not thrown.
    const refused = await spawnProbe({ file: '/bin/true', args: ['a\0b'], stdout: false, stderr: false });
    expect(refused.status).toBeNull();
    expect(refused.error).toBeInstanceOf(Error);
    const missing = await spawnProbe({ file: '/nonexistent/probe', args: [], stdout: false, stderr: true });
    expect(missing).toMatchObject({ status: null, error: expect.objectContaining({ code: 'ENOENT' }) });
  });

  it('finds the same rungs without holding the thread still while its probes run', () => {
    const blocking = probedIn('hostRungs()');
    const awaited = probedIn('await probeHostRungs()');
    expect(awaited.host).toEqual(blocking.host);
    // The blocking probe runs to its end before the loop can turn; the awaited one lets it
    // turn while each probe's child runs (there is one wherever bwrap or unshare is installed).
    expect(blocking.turns).toBe(0);
    const host = blocking.host as { bubblewrap: { ok: boolean }; unshare: string[] | null };
    expect(host.bubblewrap.ok || host.unshare !== null, 'this host has neither bwrap nor unshare').toBe(true);
    expect(awaited.turns).toBeGreaterThan(0);
  });
});
