/**
 * `npx io-harness` on a PostgreSQL store (`--store postgres://...`): each command run as a
 * child process against a database real runs wrote, over a model on loopback. It lists,
 * shows, prices, answers, resumes, rewinds and follows as it does a file; an empty
 * database is refused with nothing written (no tables made), one of someone else's too,
 * an older store is not migrated, `--schema` reads a store in a schema of its own, and the
 * viewer serves a store there, the password in no line it prints. On the tests' real server.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { OpenAI, Supervisor, TaskContract } from '../dist/index.js';
import { PostgresStore, postgresMigration } from '../dist/store/postgres/index.js';
import { SCHEMA_VERSION } from '../dist/store/version.js';
import { assistantTurns, ScriptedModelServer } from '../dist/testing/index.js';
import { POSTGRES, sqlRows } from './support/backends.js';
import { BIN, cli, json, workspaceRuns } from './support/cli.js';
import { later, tempWorkspace } from './support/workspace.js';

async function relations(url: string): Promise<number> {
  const rows = await sqlRows(
    url,
    "SELECT count(*) AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'",
  );
  return Number(rows[0]?.n);
}

describe('the io-harness CLI on PostgreSQL', () => {
  it('lists, shows, prices, answers, resumes and rewinds runs a PostgreSQL store holds', {
    timeout: 120_000,
  }, async () => {
    const repo = tempWorkspace({ 'notes.txt': 'ship on friday\n' });
    const { store: url } = await POSTGRES.fresh();
    const store = await PostgresStore.open(url);
    later(() => store.close());
    const { edited, paused, session } = await workspaceRuns(store, repo);
    const at = ['--store', url];

    const all = json<{ runId: string; status: string }[]>(await cli(['runs', ...at, '--json']));
    expect(all.map((run) => run.runId)).toEqual(expect.arrayContaining([edited.runId, paused.runId]));
    const parked = json<{ runId: string }[]>(await cli(['runs', ...at, '--status', 'paused', '--json']));
    expect(parked.map((run) => run.runId)).toEqual([paused.runId]);
    expect((await cli(['runs', ...at])).stdout).toContain(`${edited.runId}  finished`);
    const sessions = json<{ sessionId: string; turns: { text: string }[] }[]>(await cli(['sessions', ...at, '--json']));
    expect(sessions).toMatchObject([{ sessionId: session.id, turns: [{ text: 'say hello' }] }]);

    const shown = await cli(['show', edited.runId.slice(0, 12), ...at]);
    expect(shown.status, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`run ${edited.runId}  finished`);
    expect(shown.stdout).toContain('+ship today');
    expect((await cli(['show', paused.runId, ...at])).stdout).toMatch(
      /open questions[^\n]*\n {2}approval:\S+ {2}approval/,
    );

    const prices = join(tempWorkspace(), 'prices.json');
    writeFileSync(prices, JSON.stringify({ scripted: { input: 3, output: 15 } }));
    const cost = json<{ total: number }>(await cli(['cost', edited.runId, ...at, '--prices', prices, '--json']));
    expect(cost.total).toBeGreaterThan(0);

    // Answered and resumed by other processes, on the same database.
    const [open] = await store.questions({ runId: paused.runId, status: 'open' });
    const answered = json<{ kind: string; answer: string }>(
      await cli(['answer', open?.questionId as string, 'approve', ...at, '--by', 'ada', '--json']),
    );
    expect(answered).toMatchObject({ kind: 'approval', answer: 'approve' });
    const again = await cli(['answer', open?.questionId as string, 'deny', ...at]);
    expect(again.status).toBe(4);
    expect(again.stderr).toContain('already answered by ada');
    const resumed = await cli(['resume', paused.runId, ...at, '--json']);
    expect(resumed.status, resumed.stderr).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ status: 'finished', reply: 'ran it' });
    expect((await store.steps(paused.runId))[0]?.observations[0]?.content).toContain(process.version);

    const rewound = json<{ files: { path: string; action: string }[] }>(
      await cli(['rewind', edited.runId, ...at, '--json'], {}, repo),
    );
    expect(rewound.files).toEqual([{ path: 'notes.txt', action: 'restored' }]);
    expect(readFileSync(join(repo, 'notes.txt'), 'utf8')).toBe('ship on friday\n');
    expect((await cli(['show', 'no-such-run', ...at])).status).toBe(3);
  });

  it('tails a live run on PostgreSQL from another process to its end', { timeout: 60_000 }, async () => {
    const server = await ScriptedModelServer.start((call) =>
      assistantTurns(call) < 3
        ? { toolCalls: [{ name: 'find', args: { pattern: '*' } }], latencyMs: 400 }
        : { text: 'looked three times' },
    );
    later(() => server.close());
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const { store: url } = await POSTGRES.fresh();
    const store = await PostgresStore.open(url);
    later(() => store.close());
    const supervisor = await Supervisor.start(store);
    later(() => supervisor.close());
    const handle = supervisor.run({ contract: TaskContract.workspace('look around', tempWorkspace()), provider });
    for await (const event of supervisor.events({ rootId: handle.rootId })) if (event.type === 'run-start') break;
    const following = cli(['follow', handle.rootId, '--store', url]);
    expect((await handle.result).status).toBe('finished');
    const followed = await following;
    expect(followed.status, followed.stderr).toBe(0);
    expect(followed.stdout.match(/step \d committed/g)).toHaveLength(4);
    expect(followed.stdout.trimEnd().split('\n').at(-1)).toMatch(/ {2}ended finished/);
  });

  it('refuses an empty database and one of someone else’s, writing nothing, the viewer too', async () => {
    const { store: empty } = await POSTGRES.fresh();
    const listed = await cli(['runs', '--store', empty]);
    expect(listed.status).toBe(3);
    expect(listed.stderr).toContain('there is no io-harness store at');
    expect(await relations(empty)).toBe(0);

    const { store: theirs } = await POSTGRES.fresh();
    const client = new pg.Client({ connectionString: theirs });
    await client.connect();
    await client.query('CREATE TABLE invoices (id INT)');
    await client.end();
    const refused = await cli(['show', 'abc', '--store', theirs]);
    expect(refused.status).toBe(4);
    expect(refused.stderr).toContain('not an io-harness store (invoices)');
    expect(await relations(theirs)).toBe(1);

    // A store of an older schema is shared by hosts of that release: a read does not migrate it.
    const { store: older } = await POSTGRES.fresh();
    const version = SCHEMA_VERSION - 1;
    const admin = new pg.Client({ connectionString: older });
    await admin.connect();
    await admin.query('CREATE TABLE io_harness_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)');
    await admin.query(
      `INSERT INTO io_harness_meta VALUES ('store', 'io-harness store'), ('schema_version', '${version}')`,
    );
    for (let step = 0; step < version; step++) await admin.query(postgresMigration(step));
    await admin.end();
    const stale = await cli(['runs', '--store', older]);
    expect(stale.status).toBe(4);
    expect(stale.stderr).toContain(`is at schema version ${version}, older than`);
    expect(await sqlRows(older, "SELECT value FROM io_harness_meta WHERE key = 'schema_version'")).toEqual([
      { value: String(version) },
    ]);

    // A store in a schema of its own is read with --schema; --schema with a file is a usage error.
    const { store: schemed } = await POSTGRES.fresh();
    await (await PostgresStore.open(schemed, { schema: 'harness' })).close();
    expect(json<unknown[]>(await cli(['runs', '--store', schemed, '--schema', 'harness', '--json']))).toEqual([]);
    expect((await cli(['runs', '--store', schemed])).status).toBe(3);
    expect((await cli(['runs', '--store', 'runs.db', '--schema', 'harness'])).status).toBe(2);

    const viewed = await cli(['view', '--store', empty]);
    expect(viewed.status).toBe(3);
    expect(viewed.stderr).toContain('there is no io-harness store at');
    expect(await relations(empty)).toBe(0);
  });

  it('serves the viewer over a PostgreSQL store until interrupted, its password in no line it prints', {
    timeout: 60_000,
  }, async () => {
    const { store: url } = await POSTGRES.fresh();
    const store = await PostgresStore.open(url);
    later(() => store.close());
    const { edited } = await workspaceRuns(store, tempWorkspace({ 'notes.txt': 'ship on friday\n' }));
    const password = new URL(url).password;
    const child = spawn(process.execPath, [BIN, 'view', '--store', url, '--json'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    later(() => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk;
    });
    const line = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk;
        if (out.includes('\n')) resolve(out);
      });
      child.on('exit', (status) => reject(new Error(`view exited ${status} first: ${stderr}`)));
    });
    if (password) expect(line).not.toContain(password);
    const { url: page } = JSON.parse(line) as { url: string };
    const trees = (await (await fetch(new URL('api/trees', page))).json()) as {
      total: number;
      trees: { runId: string }[];
    };
    expect(trees.total).toBeGreaterThanOrEqual(2);
    expect(trees.trees.map((tree) => tree.runId)).toContain(edited.runId);
    const shown = (await (await fetch(new URL(`api/run/${edited.runId}`, page))).json()) as {
      run: { status: string };
      patch: string;
    };
    expect(shown.run.status).toBe('finished');
    expect(shown.patch).toContain('+ship today');
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    child.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(stderr).toBe('');
  });
});
