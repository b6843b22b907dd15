/**
 * Moves a SQLite store into an empty PostgreSQL one (`npx io-harness store copy runs.db
 * postgres://...`), so a user who outgrows the file keeps their history. Every table is
 * copied in one PostgreSQL transaction from one read snapshot of the file, ids and
 * insertion order kept; before it commits, every table's count and every tree's ledger
 * are read back from both and compared. Any difference rolls the whole copy back.
 */
import Database from 'better-sqlite3';
import type pg from 'pg';
import { ErrorCode, HarnessError, StoreError } from '../../errors.js';
import { TraceQueries } from '../queries.js';
import { runSync, statementsOf } from '../sqlite/run.js';
import { storeFileState } from '../sqlite/schema.js';
import { Store } from '../sqlite/store.js';
import { SCHEMA_VERSION } from '../version.js';
import { PostgresConnection, quoteIdentifier, redacted } from './connection.js';
import { PostgresStore, type PostgresStoreOptions } from './index.js';

export interface CopyReport {
  /** Rows copied, by table. */
  tables: Record<string, number>;
  /** Trees whose ledgers were compared. */
  trees: number;
  /** The target, its password hidden. */
  target: string;
}

/** Rows per INSERT: well under PostgreSQL's 65 535 parameters for the widest table. */
const CHUNK = 500;

/**
 * Copies the store file at `from` into the PostgreSQL store at `to`, which must hold no
 * rows yet (an empty database gets the tables first). Refuses, writing no row: a source
 * that is not a store of ours, a target that is not ours, is newer, or already holds
 * rows. `from` is read, never written, except that an older store is brought forward
 * first, as opening it does.
 */
export async function copyStore(
  from: string,
  to: string,
  options: Pick<PostgresStoreOptions, 'schema'> = {},
): Promise<CopyReport> {
  const state = storeFileState(from);
  if (state.kind === 'missing')
    throw new HarnessError(
      ErrorCode.InvalidArgument,
      `there is no store at ${from}; pass the file your runs were kept in.`,
    );
  if (state.kind === 'foreign')
    throw new StoreError(
      ErrorCode.StoreNotOurs,
      `${from} is a SQLite file but not an io-harness store (it has no runs table); nothing was copied.`,
    );
  if (state.version < SCHEMA_VERSION) (await Store.open(from)).close();
  const target = await PostgresStore.open(to, options);
  await target.close();
  const connection = new PostgresConnection({
    connectionString: to,
    ...(options.schema ? { schema: options.schema } : {}),
    max: 1,
  });
  const source = new Database(from, { readonly: true, fileMustExist: true });
  try {
    // One snapshot of the file, however long the copy takes.
    source.exec('BEGIN');
    const client = await connection.connect();
    try {
      await client.query('BEGIN');
      const report = await copyTables(source, client, redacted(to));
      await client.query('COMMIT');
      return report;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw connection.errorOf(error);
    } finally {
      client.release();
    }
  } finally {
    if (source.inTransaction) source.exec('ROLLBACK');
    source.close();
    await connection.close();
  }
}

async function copyTables(source: Database.Database, client: pg.PoolClient, target: string): Promise<CopyReport> {
  const tables = (
    source
      .prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
      .all() as { name: string }[]
  ).map((row) => row.name);
  // PostgreSQL's columns of each table, and which of them are identities to move on after.
  const columns = new Map<string, { name: string; identity: boolean }[]>();
  for (const row of (
    await client.query<{ table_name: string; column_name: string; is_identity: string }>(
      `SELECT table_name, column_name, is_identity FROM information_schema.columns
       WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position`,
    )
  ).rows) {
    const list = columns.get(row.table_name) ?? [];
    list.push({ name: row.column_name, identity: row.is_identity === 'YES' });
    columns.set(row.table_name, list);
  }
  const held: string[] = [];
  for (const table of tables) {
    if (!columns.has(table)) continue;
    const { rows } = await client.query<{ n: number }>(`SELECT count(*) AS n FROM ${quoteIdentifier(table)}`);
    if (Number(rows[0]?.n) > 0) held.push(`${table} (${rows[0]?.n})`);
  }
  if (held.length > 0)
    throw new StoreError(
      ErrorCode.StoreNotEmpty,
      `the PostgreSQL store at ${target} already holds rows (${held.join(', ')}); store copy copies into an empty store only, and copied nothing. Give it a new database or schema.`,
      { details: { held } },
    );
  const counts: Record<string, number> = {};
  for (const table of tables) {
    const into = columns.get(table);
    if (!into) {
      throw new StoreError(
        ErrorCode.StoreNotOurs,
        `the store file has a table ${table} that this release's PostgreSQL schema has not; nothing was copied.`,
      );
    }
    const sqliteColumns = new Set(
      (source.prepare(`SELECT name FROM pragma_table_info(?)`).all(table) as { name: string }[]).map((c) => c.name),
    );
    const lacking = [...sqliteColumns].filter((name) => !into.some((column) => column.name === name));
    if (lacking.length > 0)
      throw new StoreError(
        ErrorCode.StoreNotOurs,
        `the store file's table ${table} has columns this release's PostgreSQL schema has not (${lacking.join(', ')}); nothing was copied.`,
      );
    // rowid is SQLite's hidden key where PostgreSQL keeps it as a column: insertion order carries over.
    const copied = into.filter((column) => sqliteColumns.has(column.name) || column.name === 'rowid');
    const list = copied.map((column) => quoteIdentifier(column.name)).join(', ');
    const withoutRowid = /WITHOUT ROWID/i.test(
      (source.prepare(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`).get(table) as { sql: string })
        .sql,
    );
    const statement = source
      .prepare(
        `SELECT ${copied.map((column) => (column.name === 'rowid' ? 'rowid AS rowid' : `"${column.name}"`)).join(', ')} FROM "${table}"${withoutRowid ? '' : ' ORDER BY rowid'}`,
      )
      .raw(true);
    let chunk: unknown[][] = [];
    let total = 0;
    const flush = async () => {
      if (chunk.length === 0) return;
      const values: unknown[] = [];
      const tuples = chunk.map((row) => {
        const start = values.length;
        values.push(...row);
        return `(${row.map((_, i) => `$${start + i + 1}`).join(', ')})`;
      });
      await client.query(
        `INSERT INTO ${quoteIdentifier(table)} (${list}) OVERRIDING SYSTEM VALUE VALUES ${tuples.join(', ')}`,
        values,
      );
      total += chunk.length;
      chunk = [];
    };
    for (const row of statement.iterate() as Iterable<unknown[]>) {
      chunk.push(row);
      if (chunk.length === CHUNK) await flush();
    }
    await flush();
    counts[table] = total;
    for (const column of into.filter((c) => c.identity)) {
      await client.query(
        `SELECT setval(pg_get_serial_sequence($1, $2), COALESCE((SELECT MAX(${quoteIdentifier(column.name)}) FROM ${quoteIdentifier(table)}), 0) + 1, false)`,
        [table, column.name],
      );
    }
  }
  // Read back from both, inside the transaction that would commit: counts, then every tree's ledger.
  for (const table of tables) {
    const sqliteCount = (source.prepare(`SELECT count(*) AS n FROM "${table}"`).get() as { n: number }).n;
    const { rows } = await client.query<{ n: number }>(`SELECT count(*) AS n FROM ${quoteIdentifier(table)}`);
    if (Number(rows[0]?.n) !== sqliteCount || counts[table] !== sqliteCount)
      throw mismatch(target, `table ${table} has ${sqliteCount} rows in the file and ${rows[0]?.n} copied`);
  }
  const queries = new TraceQueries();
  const roots = runSync(statementsOf(source), queries.runs()).map((run) => run.runId);
  for (const rootId of roots) {
    const there = JSON.stringify(runSync(statementsOf(source), queries.ledger(rootId)));
    const here = JSON.stringify(await PostgresConnection.drive(client, queries.ledger(rootId)));
    if (there !== here) throw mismatch(target, `the ledger of tree ${rootId} differs`);
  }
  return { tables: counts, trees: roots.length, target };
}

function mismatch(target: string, what: string): StoreError {
  return new StoreError(
    ErrorCode.StoreFailed,
    `the copy into ${target} did not read back the same: ${what}. No row of it was kept.`,
  );
}
