import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { Memory } from '../dist/index.js';
import { PostgresStore } from '../dist/store/postgres/index.js';
import { cli, workspaceRuns } from './support/cli.js';
import { type Harness, harness, script } from './support/harness.js';
import { freshDatabase } from './support/postgres.js';
import { later, tempWorkspace } from './support/workspace.js';
import { rootInput } from './support/writer.js';

async function counts(url: string): Promise<Record<string, number>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const tables = (
      await client.query<{ name: string }>(
        `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' AND table_name <> 'io_harness_meta' ORDER BY 1`,
      )
    ).rows.map((row) => row.name);
    const out: Record<string, number> = {};
    for (const table of tables)
      out[table] = Number((await client.query(`SELECT count(*) AS n FROM ${table}`)).rows[0]?.n);
    return out;
  } finally {
    await client.end();
  }
}

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('store copy', () => {
  it('copies a store real runs wrote into PostgreSQL: every count, ledger and read equal', {
    timeout: 120_000,
  }, async () => {
    h = await harness();
    const { store, supervisor } = h;
    // A tree whose children mailed each other.
    const mailed = await supervisor.run({ task: 'mail', provider: await script('mailbox', { scenario: 'ordered' }) })
      .result;
    expect(mailed.status).toBe('finished');
    // A workspace run that changed a file, and one paused on an approval.
    const repo = tempWorkspace({ 'notes.txt': 'ship on friday\n' });
    const { edited, session } = await workspaceRuns(store, repo);
    Memory.of(store, { workspace: repo }).remember('test-command', 'npm test runs the suite.', { pin: true });

    const db = await freshDatabase();
    later(() => db.drop());
    const copied = await cli(['store', 'copy', store.path, db.url, '--json']);
    expect(copied.status, copied.stderr).toBe(0);
    const report = JSON.parse(copied.stdout) as { tables: Record<string, number>; trees: number };
    const roots = store.runs();
    expect(report.trees).toBe(roots.length);

    const target = await PostgresStore.open(db.url);
    later(() => target.close());
    // Every table's count, from both sides.
    const here = await counts(db.url);
    const file = new Database(store.path, { readonly: true });
    const there = Object.fromEntries(
      (
        file
          .prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
          .all() as { name: string }[]
      ).map(({ name }) => [name, (file.prepare(`SELECT count(*) AS n FROM "${name}"`).get() as { n: number }).n]),
    );
    file.close();
    expect(here).toEqual(there);
    expect(report.tables).toEqual(there);
    expect(here.runs).toBe(store.runs(mailed.rootId).length + roots.length - 1);
    expect(here.restore_points).toBeGreaterThan(0);
    expect(here.memory_notes).toBe(1);
    // Every tree's ledger, and the reads themselves.
    for (const root of roots) {
      expect(await target.ledger(root.runId)).toEqual(store.ledger(root.runId));
      expect(await target.runs(root.runId)).toEqual(store.runs(root.runId));
      expect(await target.treeEvents(root.runId)).toEqual(store.treeEvents(root.runId));
      expect(await target.modelCalls({ rootId: root.runId })).toEqual(store.modelCalls({ rootId: root.runId }));
      expect(await target.messages(root.runId)).toEqual(store.messages(root.runId));
    }
    expect(await target.runs()).toEqual(store.runs());
    expect(await target.restorePoints(edited.runId)).toEqual(store.restorePoints(edited.runId));
    expect(await target.patch(edited.runId)).toEqual(store.patch(edited.runId));
    expect(await target.questions({ status: 'open' })).toEqual(store.questions({ status: 'open' }));
    expect(await target.sessions()).toEqual(store.sessions());
    expect(await target.turns(session.id)).toEqual(store.turns(session.id));
    const memory = Memory.of(store, { workspace: repo });
    expect(await target.notes([memory.scope])).toEqual(store.notes([memory.scope]));
    // The ids go on from the file's: the next event is numbered after the last one copied.
    const last = store.lastEventId();
    await target.call('createRoot', rootInput('after-copy', { owner: 'o' }));
    expect(await target.lastEventId()).toBe(last + 1);

    // Again into the same store: refused, nothing copied.
    const before = await counts(db.url);
    const twice = await cli(['store', 'copy', store.path, db.url]);
    expect(twice.status).toBe(4);
    expect(twice.stderr).toMatch(/already holds rows \(.*runs \(\d+\)/);
    expect(await counts(db.url)).toEqual(before);
  });

  it('refuses a file that is not a store, a server it cannot reach and a target that is not a URL', async () => {
    const dir = tempWorkspace();
    const notAStore = join(dir, 'notes.db');
    writeFileSync(notAStore, 'not sqlite');
    const db = await freshDatabase();
    later(() => db.drop());
    const notSqlite = await cli(['store', 'copy', notAStore, db.url]);
    expect(notSqlite.status).toBe(4);
    expect(notSqlite.stderr).toMatch(/not a SQLite database/);
    const missing = await cli(['store', 'copy', join(dir, 'none.db'), db.url]);
    expect(missing.status).toBe(3);
    expect(await counts(db.url)).toEqual({});
    h = await harness();
    const unreachable = await cli(['store', 'copy', h.store.path, 'postgres://someone:pw@127.0.0.1:1/x']);
    expect(unreachable.status).toBe(3);
    expect(unreachable.stderr).toMatch(
      /cannot reach the PostgreSQL store at postgres:\/\/someone:\*\*\*@127\.0\.0\.1:1/,
    );
    const notUrl = await cli(['store', 'copy', h.store.path, 'other.db']);
    expect(notUrl.status).toBe(2);
    expect(notUrl.stderr).toMatch(/a PostgreSQL URL/);
    const wrongAction = await cli(['store', 'move', h.store.path, db.url]);
    expect(wrongAction.status).toBe(2);
  });
});
