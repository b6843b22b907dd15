/**
 * The store's schema, versioned in code. `PRAGMA user_version` records the version a
 * file is at; {@link migrate} applies the forward migrations it lacks, each in its
 * own transaction. A file at a newer version than this code knows is refused, never
 * rewritten.
 */
import { closeSync, existsSync, openSync, readSync, statSync } from 'node:fs';
import Database from 'better-sqlite3';
import { ErrorCode, StoreError } from '../../errors.js';

import { MIGRATIONS } from '../migrations.js';
import { SCHEMA_VERSION } from '../version.js';

export { MIGRATIONS, SCHEMA_VERSION };

const SQLITE_MAGIC = 'SQLite format 3\u0000';

/**
 * Checks, without writing a byte, that `path` is either absent, empty, or a SQLite
 * database whose schema this code can read. Throws a {@link StoreError} naming the
 * file and what to do otherwise.
 */
export function checkStoreFile(path: string): void {
  if (!existsSync(path)) return;
  const stat = statSync(path);
  if (stat.isDirectory()) {
    throw new StoreError(
      ErrorCode.StoreOpenFailed,
      `store path ${path} is a directory; pass the path of a SQLite file (it is created if missing).`,
      { details: { path } },
    );
  }
  if (stat.size === 0) return;
  const header = Buffer.alloc(16);
  const fd = openSync(path, 'r');
  try {
    readSync(fd, header, 0, 16, 0);
  } finally {
    closeSync(fd);
  }
  if (header.toString('latin1') !== SQLITE_MAGIC) {
    throw new StoreError(
      ErrorCode.StoreNotSqlite,
      `store file ${path} is not a SQLite database (its first bytes are not the SQLite header). ` +
        'Nothing was written to it. Pass a new path, or move that file aside if it was meant to be a store.',
      { details: { path } },
    );
  }
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version > SCHEMA_VERSION) {
      throw new StoreError(
        ErrorCode.StoreSchemaTooNew,
        `store file ${path} is at schema version ${version}, newer than this io-harness understands (${SCHEMA_VERSION}). ` +
          'Nothing was changed. Upgrade io-harness to a release that knows that schema, or open another file.',
        { details: { path, fileVersion: version, codeVersion: SCHEMA_VERSION } },
      );
    }
  } finally {
    db.close();
  }
}

export interface OpenWriterOptions {
  /** `FULL` adds power-loss durability at about a third of the commit rate. */
  synchronous?: 'NORMAL' | 'FULL';
}

/** Opens the read-write connection and brings the schema up to date. */
export function openWriter(path: string, options: OpenWriterOptions = {}): Database.Database {
  checkStoreFile(path);
  let db: Database.Database;
  try {
    db = new Database(path);
  } catch (cause) {
    throw new StoreError(ErrorCode.StoreOpenFailed, `cannot open store file ${path}: ${(cause as Error).message}`, {
      cause,
      details: { path },
    });
  }
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${options.synchronous ?? 'NORMAL'}`);
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = OFF');
  migrate(db);
  return db;
}

export function migrate(db: Database.Database): void {
  const current = db.pragma('user_version', { simple: true }) as number;
  for (let version = current; version < SCHEMA_VERSION; version++) {
    const apply = db.transaction(() => {
      db.exec(MIGRATIONS[version] as string);
      db.pragma(`user_version = ${version + 1}`);
    });
    apply.immediate();
  }
}

/** Opens a read-only connection for traces, attach and CLIs; safe in any thread. */
/**
 * What is at `path`, read without writing to it: nothing, or a store of ours (its schema
 * version), or a SQLite file of someone else's (no `runs` table). A file that is not
 * SQLite, or a store newer than this code, throws as {@link checkStoreFile} does. For
 * the commands that must never make or change a file they were not given a store in.
 */
export function storeFileState(
  path: string,
): { kind: 'missing' } | { kind: 'foreign' } | { kind: 'store'; version: number } {
  if (!existsSync(path)) return { kind: 'missing' };
  checkStoreFile(path);
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    const ours = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'").get() !== undefined;
    return ours
      ? { kind: 'store', version: db.pragma('user_version', { simple: true }) as number }
      : { kind: 'foreign' };
  } finally {
    db.close();
  }
}

export function openReader(path: string, options: { cacheKiB?: number } = {}): Database.Database {
  checkStoreFile(path);
  const db = new Database(path, { readonly: true, fileMustExist: true });
  db.pragma('busy_timeout = 5000');
  if (options.cacheKiB !== undefined) db.pragma(`cache_size = -${Math.max(64, Math.floor(options.cacheKiB))}`);
  return db;
}
