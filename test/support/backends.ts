/**
 * The two stores the store's acceptance suites run on: a SQLite file in a temp directory,
 * and a database of its own on the tests' PostgreSQL server. Each gives a fresh store's
 * location (a path, or a postgres:// URL, as the driver process takes them) and reads a
 * tree's rows back with plain SQL for the invariants.
 */
import Database from 'better-sqlite3';
import { Store } from '../../dist/index.js';
import { PostgresStore } from '../../dist/store/postgres/index.js';
import { numericClient, postgresRoots, postgresRows, sqliteRoots, sqliteRows, type TreeRows } from './invariants.js';
import { freshDatabase } from './postgres.js';
import { tempStorePath } from './processes.js';
import { later } from './workspace.js';

export interface TestBackend {
  name: 'SQLite' | 'PostgreSQL';
  /** Where a fresh, empty store is, and how to remove it sooner than the test's end, which does. */
  fresh(): Promise<{ store: string; drop(): Promise<void> }>;
  rows(store: string, rootId: string): Promise<TreeRows>;
  /** The roots of the trees the store holds. */
  roots(store: string): Promise<string[]>;
}

export const SQLITE: TestBackend = {
  name: 'SQLite',
  fresh: async () => ({ store: tempStorePath(), drop: async () => undefined }),
  rows: async (path, rootId) => sqliteRows(path, rootId),
  roots: async (path) => sqliteRoots(path),
};

export const POSTGRES: TestBackend = {
  name: 'PostgreSQL',
  async fresh() {
    const db = await freshDatabase();
    later(() => db.drop());
    return { store: db.url, drop: () => db.drop() };
  },
  rows: postgresRows,
  roots: postgresRoots,
};

export const BACKENDS: readonly TestBackend[] = [SQLITE, POSTGRES];

/**
 * The backend the suites about the store run on in this project of vitest.config.ts:
 * PostgreSQL when IO_HARNESS_TEST_STORE is `postgres`, SQLite otherwise.
 */
export const SUITE_BACKEND: TestBackend = process.env.IO_HARNESS_TEST_STORE === 'postgres' ? POSTGRES : SQLITE;

/** A store of either backend, as the runtime takes it. */
export type EitherStore = Store | PostgresStore;

/** Where a fresh store is on the suite's backend (a file's path, or a database's URL), removed after the test. */
export async function freshStore(): Promise<string> {
  return (await SUITE_BACKEND.fresh()).store;
}

/** Opens the store at `location` (a path, or a postgres:// URL) on its backend; closed after the test. */
export async function openAt(location: string): Promise<EitherStore> {
  const store = POSTGRES_URL.test(location) ? await PostgresStore.open(location) : await Store.open(location);
  later(() => store.close());
  return store;
}

/** A fresh store on the suite's backend, opened; closed and removed after the test. */
export async function openFresh(): Promise<EitherStore> {
  return openAt(await freshStore());
}

/**
 * What a script run in a process of its own starts with to open the store at `location`
 * as `store` (either backend), for code that awaits every read.
 */
export function openInScript(location: string): string {
  const dist = new URL('../../dist/index.js', import.meta.url).href;
  const postgres = new URL('../../dist/store/postgres/index.js', import.meta.url).href;
  return `
    const { Store } = await import(${JSON.stringify(dist)});
    const store = ${JSON.stringify(POSTGRES_URL.test(location))}
      ? await (await import(${JSON.stringify(postgres)})).PostgresStore.open(${JSON.stringify(location)})
      : await Store.open(${JSON.stringify(location)});`;
}

const POSTGRES_URL = /^postgres(ql)?:\/\//;

/**
 * The rows of `sql` (with `?` placeholders) in the store at `location`, read with plain
 * SQL on its own backend: SQLite's rows, or PostgreSQL's with its integers as numbers.
 */
export async function sqlRows(location: string, sql: string, ...args: unknown[]): Promise<Record<string, unknown>[]> {
  if (!POSTGRES_URL.test(location)) {
    const db = new Database(location, { readonly: true });
    try {
      return db.prepare(sql).all(...args) as Record<string, unknown>[];
    } finally {
      db.close();
    }
  }
  const client = await numericClient(location);
  try {
    let n = 0;
    return (
      await client.query(
        sql.replace(/\?/g, () => `$${++n}`),
        args,
      )
    ).rows;
  } finally {
    await client.end();
  }
}
