/**
 * The two stores the store's acceptance suites run on: a SQLite file in a temp directory,
 * and a database of its own on the tests' PostgreSQL server. Each gives a fresh store's
 * location (a path, or a postgres:// URL, as the driver process takes them) and reads a
 * tree's rows back with plain SQL for the invariants.
 */
import { postgresRows, sqliteRows, type TreeRows } from './invariants.js';
import { freshDatabase } from './postgres.js';
import { tempStorePath } from './processes.js';
import { later } from './workspace.js';

export interface TestBackend {
  name: 'SQLite' | 'PostgreSQL';
  /** Where a fresh, empty store is, and how to remove it sooner than the test's end, which does. */
  fresh(): Promise<{ store: string; drop(): Promise<void> }>;
  rows(store: string, rootId: string): Promise<TreeRows>;
}

export const SQLITE: TestBackend = {
  name: 'SQLite',
  fresh: async () => ({ store: tempStorePath(), drop: async () => undefined }),
  rows: async (path, rootId) => sqliteRows(path, rootId),
};

export const POSTGRES: TestBackend = {
  name: 'PostgreSQL',
  async fresh() {
    const db = await freshDatabase();
    later(() => db.drop());
    return { store: db.url, drop: () => db.drop() };
  },
  rows: postgresRows,
};

export const BACKENDS: readonly TestBackend[] = [SQLITE, POSTGRES];
