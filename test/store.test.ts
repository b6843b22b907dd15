import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { HarnessError, SCHEMA_VERSION, Store, Supervisor } from '../dist/index.js';
import { MIGRATIONS } from '../dist/store/sqlite/schema.js';
import { tempStorePath } from './support/processes.js';

const digest = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

async function openError(path: string): Promise<HarnessError> {
  try {
    await Store.open(path);
  } catch (error) {
    if (HarnessError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('Store.open succeeded');
}

describe('the store file', () => {
  it('creates a new file at the current schema version, with WAL, and reopens it unchanged', async () => {
    const path = tempStorePath();
    const store = await Store.open(path);
    store.close();
    const db = new Database(path, { readonly: true });
    expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    const tables = (
      db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as { name: string }[]
    )
      .map((row) => row.name)
      .filter((name) => !name.startsWith('sqlite_'));
    expect(tables).toEqual([
      'checkpoints',
      'drafts',
      'draws',
      'events',
      'file_changes',
      'intents',
      'ledger',
      'mailbox',
      'memory_draws',
      'memory_notes',
      'model_calls',
      'questions',
      'restore_points',
      'runs',
      'sessions',
      'spawn_queue',
      'steers',
      'step_images',
      'steps',
      'turns',
      'web_sources',
    ]);
    db.close();
    (await Store.open(path)).close();
  });

  it('migrates a file from an older schema forward, keeping what it holds', async () => {
    const path = tempStorePath();
    const db = new Database(path);
    db.exec(MIGRATIONS[0] as string);
    db.pragma('user_version = 1');
    db.prepare(
      `INSERT INTO runs (run_id, root_id, address, depth, ancestry, status, task, spec, created_at)
       VALUES ('old', 'old', 'root', 0, '[]', 'finished', 'from version 1', '{}', 1)`,
    ).run();
    db.close();
    const store = await Store.open(path);
    expect(store.run('old')?.task).toBe('from version 1');
    expect(store.modelCalls({ rootId: 'old' })).toEqual([]);
    store.close();
    const after = new Database(path, { readonly: true });
    expect(after.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    after.close();
  });

  it('refuses a file that is not SQLite, naming it and what to do, and writes nothing', async () => {
    const path = tempStorePath();
    writeFileSync(path, 'these are my notes, not a database\n'.repeat(20));
    const before = digest(path);
    const error = await openError(path);
    expect(error.code).toBe('STORE_NOT_SQLITE');
    expect(error.message).toContain(path);
    expect(error.message).toContain('Nothing was written');
    expect(digest(path)).toBe(before);
  });

  it('refuses a schema newer than the code, naming both versions, and changes nothing', async () => {
    const path = tempStorePath();
    const db = new Database(path);
    db.exec("CREATE TABLE runs (run_id TEXT); INSERT INTO runs VALUES ('from-the-future')");
    db.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    db.close();
    const before = digest(path);
    const error = await openError(path);
    expect(error.code).toBe('STORE_SCHEMA_TOO_NEW');
    expect(error.message).toContain(path);
    expect(error.message).toContain(`schema version ${SCHEMA_VERSION + 1}`);
    expect(error.message).toContain('Upgrade io-harness');
    expect(digest(path)).toBe(before);
  });

  it('refuses a directory and an empty path with a clear error', async () => {
    const dir = join(dirname(tempStorePath()), 'a-directory');
    mkdirSync(dir);
    expect((await openError(dir)).code).toBe('STORE_OPEN_FAILED');
    expect((await openError('')).code).toBe('INVALID_ARGUMENT');
  });

  it('rejects bad supervisor and run options with what to pass instead', async () => {
    const store = await Store.open(tempStorePath());
    await expect(Supervisor.start(store, { maxConcurrentAgents: 0 })).rejects.toThrow(
      /maxConcurrentAgents must be a whole number of at least 1, got 0/,
    );
    const supervisor = await Supervisor.start(store);
    expect(() => supervisor.run({ task: '', provider: { kind: 'module', module: '/x.js' } })).toThrow(/needs a task/);
    expect(() =>
      supervisor.run({ task: 'x', provider: { kind: 'module', module: '/x.js' }, budget: { steps: -1 } }),
    ).toThrow(/budget.steps must be a whole number/);
    await supervisor.close();
    store.close();
  });
});
