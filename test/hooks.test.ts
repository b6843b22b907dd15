/**
 * [[hook]] tables, carried out by the one observer config.hooks() returns: a program run
 * for each chosen event (contained, the scrubbed variables withheld), a check whose
 * failure ends the tree with the hook named in the trace, and an audit log that holds
 * every chosen event once, in commit order, across a SIGKILL and a resume. Hooks live in
 * the user file: both workspace files are refused them.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Config, ConfigError, type HarnessEvent, Store } from '../dist/index.js';
import { Driver, tempStorePath } from './support/processes.js';
import { later, runScript, serve, setEnv, supervisorOnStore, tempWorkspace } from './support/workspace.js';

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

function fixture(user: string, files: Record<string, string> = { 'a.txt': 'a\n' }) {
  const root = tempWorkspace(files);
  const home = tempWorkspace();
  const userFile = join(home, 'io.toml');
  writeFileSync(userFile, user);
  return { root, home, userFile };
}

/** A model that reads a.txt every step, until its budget or a cancel ends it. */
const reader = () => ({ text: 'reading', toolCalls: [{ name: 'read_file', args: { path: 'a.txt' } }] });

describe('hooks', () => {
  it('ends a tree when a cancel hook’s check fails, the hook named in the trace; a notification gets the event, contained', async () => {
    setEnv({ LC_IO_HARNESS_TEST_HOOKVAR: 'hook-secret-11' });
    const outside = join(tempWorkspace(), 'escaped.txt');
    const { root, userFile } = fixture(
      [
        '[app]',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a TOML file's substitution, as written
        'token = "${env:LC_IO_HARNESS_TEST_HOOKVAR}"',
        '[[hook]]',
        'name = "lint"',
        'events = ["tool-call"]',
        `run = ["sh", "-c", "echo 'lint: 3 problems' >&2; exit 1"]`,
        'on_failure = "cancel"',
        '[[hook]]',
        'name = "notify"',
        'events = ["run-start", "run-end"]',
        `run = ["sh", "-c", "printf '%s %s %s\\\\n' \\"$IO_HARNESS_HOOK\\" \\"$IO_HARNESS_EVENT_TYPE\\" \\"\${LC_IO_HARNESS_TEST_HOOKVAR:-withheld}\\" >> notified.txt"]`,
        // Contained as the run's commands are: a write outside the workspace is refused.
        '[[hook]]',
        'name = "escape"',
        'events = ["run-start"]',
        `run = ["sh", "-c", "echo out > ${outside}"]`,
      ].join('\n'),
    );
    const out = join(root, 'notified.txt');
    const config = Config.discover(root, { userFile });
    const { store, supervisor } = await supervisorOnStore();
    const hooks = config.hooks();
    supervisor.observe(hooks);
    const { provider } = await serve(reader);
    const handle = supervisor.run({
      contract: config.contract('read a.txt until told to stop').withBudget({ steps: 200 }),
      provider,
      policy: config.policy(),
    });
    const result = await handle.result;
    await hooks.idle();
    expect(result.status).toBe('cancelled');
    const end = store.events(handle.rootId).find((event) => event.type === 'run-end') as Extract<
      HarnessEvent,
      { type: 'run-end' }
    >;
    expect(end.status).toBe('cancelled');
    expect(end.reason).toContain(`cancelled by the hook "lint" (${userFile}:3)`);
    expect(end.reason).toContain('lint: 3 problems');
    expect(store.run(handle.rootId)?.status).toBe('cancelled');
    expect(hooks.failures.find((failure) => failure.hook === 'lint')).toMatchObject({ rootId: handle.rootId });
    expect(hooks.failures.find((failure) => failure.hook === 'escape')?.message).toMatch(/exited with status/);
    expect(existsSync(outside)).toBe(false);
    await hooks.close();
    // The notification ran for each chosen event, in order, with the event and without the scrubbed variable.
    expect(readFileSync(out, 'utf8')).toBe('notify run-start withheld\nnotify run-end withheld\n');
  });

  it('notes a failing notification and lets the run go on', async () => {
    const { root, userFile } = fixture('[[hook]]\nevents = ["run-start"]\nrun = ["io-harness-no-such-notifier"]\n');
    const config = Config.discover(root, { userFile });
    const { supervisor } = await supervisorOnStore();
    const hooks = config.hooks();
    supervisor.observe(hooks);
    const { provider } = await serve(() => ({ text: 'done' }));
    const handle = supervisor.run({ contract: config.contract('answer'), provider, policy: config.policy() });
    expect((await handle.result).status).toBe('finished');
    await hooks.idle();
    expect(hooks.failures).toHaveLength(1);
    expect(hooks.failures[0]?.hook).toBe('hook-1');
    expect(hooks.failures[0]?.message).toMatch(/io-harness-no-such-notifier/);
  });

  it('keeps an audit log of the chosen events, each once and in commit order, across a SIGKILL and a resume', {
    timeout: 60_000,
  }, async () => {
    const logDir = tempWorkspace();
    const audit = join(logDir, 'audit.jsonl');
    const { root, userFile } = fixture(
      `[[hook]]\nname = "audit"\nevents = ["run-start", "step-end", "tool-call", "run-end"]\nappend = ${JSON.stringify(audit)}\n`,
    );
    const storePath = tempStorePath();
    const base = { store: storePath, script: 'loop', options: { steps: 8 }, hooks: { root, userFile } };
    const first = new Driver({ ...base, mode: 'run', killAt: 'commitStep:4:after' });
    later(() => {
      first.child.kill('SIGKILL');
    });
    expect((await first.exited).signal).toBe('SIGKILL');
    const before = readFileSync(audit, 'utf8').trim().split('\n').length;
    const second = new Driver({ ...base, mode: 'resume', rootId: first.rootId as string });
    await second.exited;
    expect(second.result?.status, second.stderr).toBe('finished');

    const store = await Store.open(storePath);
    cleanup.push(async () => store.close());
    const chosen = new Set(['run-start', 'step-end', 'tool-call', 'run-end']);
    const expected = store
      .treeEvents(first.rootId as string)
      .filter((event) => chosen.has(event.type))
      .map((event) => event.eventId);
    const lines = readFileSync(audit, 'utf8').trim().split('\n');
    const logged = lines.map((line) => (JSON.parse(line) as HarnessEvent).eventId);
    expect(logged).toEqual(expected);
    expect(new Set(logged).size).toBe(logged.length);
    // The killed process had not logged all of the first four steps: the resumed one caught up from the store.
    expect(before).toBeLessThan(lines.length);
    const seqs = lines
      .map((line) => JSON.parse(line) as HarnessEvent)
      .filter((event) => event.type === 'step-end')
      .map((event) => event.seq);
    expect(seqs).toEqual(seqs.map((_, index) => index + 1));

    // A log cut short mid-line by a crash is mended before anything more is appended.
    writeFileSync(audit, `${lines.join('\n')}\n{"eventId": 99`);
    const { supervisor } = await supervisorOnStore();
    supervisor.observe(Config.discover(root, { userFile }).hooks());
    expect(readFileSync(audit, 'utf8')).toBe(`${lines.join('\n')}\n`);
  });

  it('runs a relative program from the user file’s directory, never the workspace’s copy', async () => {
    const { root, home, userFile } = fixture(
      '[[hook]]\nevents = ["run-start"]\nrun = ["scripts/notify.sh"]\non_failure = "cancel"\n',
      { 'scripts/notify.sh': '#!/bin/sh\necho repo >> notified.txt\n' },
    );
    mkdirSync(join(home, 'scripts'));
    writeFileSync(join(home, 'scripts', 'notify.sh'), '#!/bin/sh\necho user >> notified.txt\n');
    chmodSync(join(home, 'scripts', 'notify.sh'), 0o755);
    chmodSync(join(root, 'scripts', 'notify.sh'), 0o755);
    const config = Config.discover(root, { userFile });
    expect(config.hookSpecs()[0]?.run).toEqual([join(home, 'scripts', 'notify.sh')]);
    const { supervisor } = await supervisorOnStore();
    const hooks = config.hooks();
    supervisor.observe(hooks);
    const { provider } = await serve(() => ({ text: 'done' }));
    expect((await supervisor.run({ ...config.runOptions('answer'), provider }).result).status).toBe('finished');
    await hooks.close();
    expect(readFileSync(join(root, 'notified.txt'), 'utf8')).toBe('user\n');
  });

  it('writes each event once whatever observes the file: two observers, and a line longer than the tail read', {
    timeout: 60_000,
  }, async () => {
    const audit = join(tempWorkspace(), 'audit.jsonl');
    const { root, userFile } = fixture(`[[hook]]\nevents = ["run-start"]\nappend = ${JSON.stringify(audit)}\n`);
    const { store, supervisor } = await supervisorOnStore();
    supervisor.observe(Config.discover(root, { userFile }).hooks());
    supervisor.observe(Config.discover(root, { userFile }).hooks());
    const { provider } = await serve(() => ({ text: 'done' }));
    // A task of 100 KB: its run-start line, the log's last, is longer than the tail a log is read back by.
    const config = Config.discover(root, { userFile });
    const handle = supervisor.run({ ...config.runOptions(`answer ${'x'.repeat(100_000)}`), provider });
    expect((await handle.result).status).toBe('finished');
    const ids = () =>
      readFileSync(audit, 'utf8')
        .trim()
        .split('\n')
        .map((line) => (JSON.parse(line) as HarnessEvent).eventId);
    const expected = store
      .treeEvents(handle.rootId)
      .filter((event) => event.type === 'run-start')
      .map((event) => event.eventId);
    expect(ids()).toEqual(expected);
    // Another process installs the hook on the same store: it reads the log back and appends nothing twice.
    const out = await runScript(`
      import { Config, Store, Supervisor } from ${JSON.stringify(new URL('../dist/index.js', import.meta.url).href)};
      const store = await Store.open(${JSON.stringify(store.path)});
      const supervisor = await Supervisor.start(store);
      supervisor.observe(Config.discover(${JSON.stringify(root)}, { userFile: ${JSON.stringify(userFile)} }).hooks());
      await supervisor.close();
      store.close();
      console.log('observed');
    `);
    expect(out).toContain('observed');
    expect(ids()).toEqual(expected);
  });

  it('refuses hooks in both workspace files, an audit log inside the workspace, and a hook that does two things', () => {
    const thrownBy = (body: () => unknown) => {
      try {
        body();
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return error as ConfigError;
      }
      throw new Error('expected a ConfigError');
    };
    for (const name of ['io.toml', 'io.local.toml']) {
      const { root, userFile } = fixture('');
      writeFileSync(join(root, name), '[[hook]]\nevents = ["run-end"]\nappend = "/tmp/x.jsonl"\n');
      const error = thrownBy(() => Config.discover(root, { userFile }));
      expect(error.code).toBe('CONFIG_REFUSED');
      expect(error.message).toContain(`${join(root, name)}:1: hook names a program to run or a file to write`);
      expect(error.message).toContain(`put it in your user file, ${userFile}`);
    }
    const { root, userFile } = fixture('');
    writeFileSync(
      userFile,
      `[[hook]]\nevents = ["run-end"]\nappend = ${JSON.stringify(join(root, 'logs', 'a.jsonl'))}\n`,
    );
    expect(thrownBy(() => Config.discover(root, { userFile })).message).toContain(
      `${userFile}:1: hook[0].append names ${join(root, 'logs', 'a.jsonl')}, inside the workspace`,
    );
    writeFileSync(userFile, '[[hook]]\nevents = ["run-end"]\nappend = "a.jsonl"\nrun = ["true"]\n');
    expect(thrownBy(() => Config.discover(root, { userFile })).message).toMatch(/a hook does one thing/);
    writeFileSync(userFile, '[[hook]]\nevents = ["run-ended"]\nappend = "a.jsonl"\n');
    expect(thrownBy(() => Config.discover(root, { userFile })).message).toMatch(/hook\[0\]\.events\[0\]:.*run-end/);
    expect(existsSync(join(root, 'logs'))).toBe(false);
  });
});
