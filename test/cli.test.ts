/**
 * `npx io-harness` on a real store: each command run as a child process (the package's
 * bin, as npx runs it) against a SQLite file that real runs wrote, over a model on
 * loopback. A paused run is answered by `answer` and carried on by `resume` in another
 * process, with its provider's key from the environment; a live run is tailed by
 * `follow` while this process drives it. `--json` is parsed, exit statuses are checked.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { CallbackApprover, OpenAI, Policy, runWith, Session, TaskContract } from '../dist/index.js';
import { assistantTurns, ScriptedModelServer } from '../dist/testing/index.js';
import { BIN, cli, json } from './support/cli.js';
import { later, setEnv, supervisorOnStore, tempWorkspace } from './support/workspace.js';

describe('the io-harness CLI', () => {
  it('lists, shows, prices, answers, resumes and rewinds real runs, with --json and exit statuses', {
    timeout: 120_000,
  }, async () => {
    setEnv({ CLI_TEST_MODEL_KEY: 'unused' });
    const repo = tempWorkspace({ 'notes.txt': 'ship on friday\n' });
    const server = await ScriptedModelServer.start((call) => {
      const task = String(call.body.messages.find((message) => message.role === 'user')?.content ?? '');
      const turn = assistantTurns(call);
      if (task.startsWith('edit'))
        return [
          { toolCalls: [{ name: 'write_file', args: { path: 'notes.txt', content: 'ship today\n' } }] },
          { toolCalls: [{ name: 'write_file', args: { path: 'secret.txt', content: 'x\n' } }] },
          { text: 'notes.txt says ship today' },
        ][Math.min(turn, 2)] as { text: string };
      if (task.startsWith('version'))
        return turn === 0
          ? { toolCalls: [{ name: 'exec', args: { argv: ['node', '--version'] } }] }
          : { text: 'ran it' };
      return { text: 'hello' };
    });
    later(() => server.close());
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKeyEnv: 'CLI_TEST_MODEL_KEY' });
    const { store } = await supervisorOnStore();
    const policy = Policy.default().layer('app').allowWrite('notes.txt').denyWrite('secret.txt');
    const edited = await runWith(TaskContract.workspace('edit the notes', repo), provider, store, policy);
    expect(edited.outcome.kind).toBe('finished');
    const paused = await runWith(
      TaskContract.workspace('version of node', repo),
      provider,
      store,
      Policy.default(),
      new CallbackApprover(() => 'defer'),
    );
    expect(paused.outcome.kind).toBe('paused');
    const session = await Session.open(store, repo);
    await session.turn('say hello', { provider, policy });
    const at = ['--store', store.path];

    // runs: every tree, and those of one status.
    const all = json<{ runId: string; status: string; steps: number }[]>(await cli(['runs', ...at, '--json']));
    expect(all.map((run) => run.runId)).toEqual(expect.arrayContaining([edited.runId, paused.runId]));
    const parked = json<{ runId: string }[]>(await cli(['runs', ...at, '--status', 'paused', '--json']));
    expect(parked.map((run) => run.runId)).toEqual([paused.runId]);
    const listed = await cli(['runs', ...at]);
    expect(listed.status).toBe(0);
    expect(listed.stdout).toContain(`${edited.runId}  finished`);
    const sessions = json<{ sessionId: string; turns: { text: string }[] }[]>(await cli(['sessions', ...at, '--json']));
    expect(sessions).toMatchObject([{ sessionId: session.id, turns: [{ text: 'say hello' }] }]);

    // show: steps, tool calls, the refusal with its rule and layer, draws, the diff; by a prefix too.
    const shown = await cli(['show', edited.runId.slice(0, 12), ...at]);
    expect(shown.status).toBe(0);
    expect(shown.stdout).toContain(`run ${edited.runId}  finished`);
    expect(shown.stdout).toContain('→ write_file {"path":"notes.txt"');
    expect(shown.stdout).toMatch(/REFUSED write_file: rule deny-write secret\.txt, layer app/);
    expect(shown.stdout).toMatch(/draw 1 step, \d+ tokens/);
    expect(shown.stdout).toContain('diff:');
    expect(shown.stdout).toContain('+ship today');
    const record = json<{ steps: unknown[]; run: { status: string }; patch: string }>(
      await cli(['show', edited.runId, ...at, '--json']),
    );
    expect(record.steps).toHaveLength(3);
    expect(record.patch).toContain('-ship on friday');
    const question = await cli(['show', paused.runId, ...at]);
    expect(question.stdout).toMatch(/open questions[^\n]*\n {2}approval:\S+ {2}approval/);

    // cost, from a JSON table and from TOML.
    const prices = join(tempWorkspace(), 'prices.json');
    writeFileSync(prices, JSON.stringify({ scripted: { input: 3, output: 15 } }));
    const cost = json<{ total: number; text: string; unpriced: string[] }>(
      await cli(['cost', edited.runId, ...at, '--prices', prices, '--json']),
    );
    expect(cost.total).toBeGreaterThan(0);
    expect(cost.text).toMatch(/^\$0\.\d+/);
    expect(cost.unpriced).toEqual([]);
    const tomlPrices = join(tempWorkspace(), 'prices.toml');
    writeFileSync(tomlPrices, '[prices.scripted]\ninput = 3\noutput = 15\ncache_read = 0.3\n');
    const priced = await cli(['cost', edited.runId, ...at, '--prices', tomlPrices]);
    expect(priced.status).toBe(0);
    expect(priced.stdout).toMatch(new RegExp(`^${edited.runId}: \\$0\\.\\d+`));

    // answer the parked approval, then resume the run in another process: its key from the environment.
    const [open] = store.questions({ runId: paused.runId, status: 'open' });
    const answered = json<{ kind: string; answer: string }>(
      await cli(['answer', open?.questionId as string, 'approve', ...at, '--by', 'ada', '--json']),
    );
    expect(answered).toMatchObject({ kind: 'approval', answer: 'approve' });
    const again = await cli(['answer', open?.questionId as string, 'deny', ...at]);
    expect(again.status).toBe(4);
    expect(again.stderr).toContain('already answered by ada');
    const resumed = await cli(['resume', paused.runId, ...at, '--json'], { CLI_TEST_MODEL_KEY: 'unused' });
    expect(resumed.status, resumed.stderr).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ status: 'finished', reply: 'ran it' });
    expect(resumed.stderr).toMatch(/\d+ runs?: 1 finished/);
    expect(store.steps(paused.runId)[0]?.observations[0]?.content).toContain(process.version);
    // resume on a tree that has ended says so, and starts nothing.
    const over = await cli(['resume', paused.runId.slice(0, 8), ...at]);
    expect(over.status, over.stderr).toBe(0);
    expect(over.stdout).toContain(`tree ${paused.runId} has finished`);
    expect(over.stdout).toContain('nothing to resume');
    expect(over.stderr).toBe('');

    // rewind: the file back as it was, run where the run worked; a file it never wrote is not found.
    const elsewhere = await cli(['rewind', edited.runId, ...at]);
    expect(elsewhere.status).toBe(2);
    expect(elsewhere.stderr).toContain(`pass --root ${repo}`);
    expect(readFileSync(join(repo, 'notes.txt'), 'utf8')).toBe('ship today\n');
    const rewound = json<{ files: { path: string; action: string }[] }>(
      await cli(['rewind', edited.runId, ...at, '--json'], {}, repo),
    );
    expect(rewound.files).toEqual([{ path: 'notes.txt', action: 'restored' }]);
    expect(readFileSync(join(repo, 'notes.txt'), 'utf8')).toBe('ship on friday\n');
    const never = await cli(['rewind', edited.runId, 'never.txt', ...at, '--root', repo]);
    expect(never.status).toBe(3);
    // A store that says a run wrote a protected path (no run can) gets nothing written there.
    const crafted = new Database(store.path);
    crafted
      .prepare("UPDATE restore_points SET path = '.git/hooks/pre-commit', content = ? WHERE run_id = ?")
      .run(Buffer.from('#!/bin/sh\necho planted\n'), edited.runId);
    crafted.close();
    const planted = await cli(['rewind', edited.runId, ...at, '--root', repo]);
    expect(planted.status).toBe(4);
    expect(planted.stderr).toContain('.git/hooks/pre-commit is a protected path');
    expect(existsSync(join(repo, '.git'))).toBe(false);
  });

  it('tails a live run from another process to its end, with a progress line', { timeout: 60_000 }, async () => {
    const server = await ScriptedModelServer.start((call) =>
      assistantTurns(call) < 4
        ? { toolCalls: [{ name: 'find', args: { pattern: '*' } }], latencyMs: 500 }
        : { text: 'looked four times' },
    );
    later(() => server.close());
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const { supervisor, store } = await supervisorOnStore();
    const repo = tempWorkspace({ 'a.txt': 'a\n' });
    const handle = supervisor.run({ contract: TaskContract.workspace('look around', repo), provider });
    // Once the run is in the store, another process follows it.
    for await (const event of supervisor.events({ rootId: handle.rootId })) if (event.type === 'run-start') break;
    const following = cli(['follow', handle.rootId, '--store', store.path]);
    const result = await handle.result;
    const followed = await following;
    expect(result.status).toBe('finished');
    expect(followed.status, followed.stderr).toBe(0);
    // Every step as it was committed (four calls and the answer), the end last, each line by the agent's address.
    expect(followed.stdout.match(/step \d committed/g)).toHaveLength(5);
    expect(followed.stdout.match(/^\d\d:\d\d:\d\d\.\d{3} {2}root {2}step \d committed/gm)).toHaveLength(5);
    // Not on a terminal, a progress line is written when the runs or the spend change, not when the clock does.
    const changes = followed.stderr
      .trimEnd()
      .split('\n')
      .map((line) => line.replace(/^\[[^\]]*\] /, ''));
    expect(changes.filter((line, index) => index > 0 && line === changes[index - 1])).toEqual([]);
    expect(followed.stdout.trimEnd().split('\n').at(-1)).toMatch(/ {2}ended finished/);
    // It saw the run going, then done.
    expect(followed.stderr).toMatch(/1 run: 1 running; \d steps/);
    expect(followed.stderr.trimEnd().split('\n').at(-1)).toMatch(/1 run: 1 finished; 5 steps/);
  });

  it('serves the viewer from view until interrupted, then exits 0', { timeout: 60_000 }, async () => {
    const { store } = await supervisorOnStore();
    const child = spawn(process.execPath, [BIN, 'view', store.path, '--json'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const line = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (chunk) => {
        out += chunk;
        if (out.includes('\n')) resolve(out);
      });
      child.on('exit', (status) => reject(new Error(`view exited ${status} first`)));
    });
    const { url, store: viewed } = JSON.parse(line) as { url: string; store: string };
    expect(viewed).toBe(store.path);
    const trees = (await (await fetch(new URL('api/trees', url))).json()) as { total: number };
    expect(trees.total).toBe(0);
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    child.kill('SIGINT');
    expect(await exited).toBe(0);
  });

  it('says what was wrong and exits by the contract, making no store and changing none', {
    timeout: 60_000,
  }, async () => {
    const dir = tempWorkspace();
    const missing = join(dir, 'nothere.db');
    const gone = await cli(['runs', '--store', missing]);
    expect(gone.status).toBe(3);
    expect(gone.stderr).toContain(`there is no store at ${missing}`);
    expect(existsSync(missing)).toBe(false);

    const text = join(dir, 'notes.txt');
    writeFileSync(text, 'not a database');
    expect((await cli(['runs', '--store', text])).status).toBe(4);
    const foreign = join(dir, 'other.db');
    const db = new Database(foreign);
    db.exec('CREATE TABLE things (id INTEGER)');
    db.close();
    const notOurs = await cli(['show', 'abc', '--store', foreign]);
    expect(notOurs.status).toBe(4);
    expect(notOurs.stderr).toContain('not an io-harness store');
    const after = new Database(foreign, { readonly: true });
    expect(after.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all()).toEqual([{ name: 'things' }]);
    after.close();

    const { store } = await supervisorOnStore();
    expect((await cli(['show', 'no-such-run', '--store', store.path])).status).toBe(3);
    expect((await cli(['answer', 'no-such-question', 'approve', '--store', store.path])).status).toBe(3);
    const unknown = await cli(['runs', '--store', store.path, '--colour']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain("Unknown option '--colour'");
    expect((await cli(['show', '--store', store.path])).status).toBe(2);
    expect((await cli(['nonsense'])).status).toBe(2);
    // A command misspelt is named; a run-id prefix too short says how long it must be.
    const misspelt = await cli(['folow', 'abc']);
    expect(misspelt.status).toBe(2);
    expect(misspelt.stderr).toContain('did you mean `io-harness follow`?');
    expect((await cli(['sesions'])).stderr).toContain('did you mean `io-harness sessions`?');
    const short = await cli(['show', 'ab', '--store', store.path]);
    expect(short.status).toBe(2);
    expect(short.stderr).toContain('a prefix of at least 4 characters');
    const costless = await cli(['cost', 'abc', '--store', store.path, '--prices', text]);
    expect(costless.status).toBe(2);
    expect(costless.stderr).toContain('is not valid JSON');

    // Every command has its --help, and the list names them all.
    const help = await cli(['--help']);
    expect(help.status).toBe(0);
    for (const command of ['runs', 'sessions', 'show', 'follow', 'answer', 'resume', 'rewind', 'cost', 'view']) {
      expect(help.stdout).toContain(`  ${command} `);
      const own = await cli([command, '--help']);
      expect(own.status).toBe(0);
      expect(own.stdout).toContain(`usage: io-harness ${command}`);
    }
  });
});
