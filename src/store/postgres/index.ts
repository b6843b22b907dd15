/**
 * The PostgreSQL backend of the store port (`io-harness/postgres`): the same tables, the
 * same rules and the same transaction boundaries as the SQLite file, on a server several
 * hosts share. Every write is one transaction that locks the rows it decides on (the run
 * and its accounts, `FOR UPDATE`), so a lease taken by another host fences this one
 * inside the transaction that would have written. The typed reads of {@link TraceQueries}
 * are all here too, each returning a promise.
 *
 * Only a program that imports this subpath loads `pg`; a SQLite-only one loads none of it.
 */
import { randomUUID } from 'node:crypto';
import { ErrorCode, InvalidArgumentError, StoreError } from '../../errors.js';
import { connectionSecrets, holdSecrets } from '../../runtime/secrets.js';
import type { StoreOperation, StoreOperations, StoreRequestBody } from '../port.js';
import { TraceQueries } from '../queries.js';
import type { Notifications } from '../records.js';
import * as retention from '../retention.js';
import { isStoreOperation, RuleContext, ruleFor } from '../rules/index.js';
import * as sql from '../sql.js';
import { type Async, defineReads, type Q } from '../sql.js';
import { IDLE_IN_TRANSACTION_MS, type PostgresStoreTarget, type PostgresTarget } from '../target.js';
import { PostgresConnection, quoteIdentifier, redacted } from './connection.js';
import { scopeOf } from './locks.js';
import { type WorkHint, WorkListener } from './notify.js';
import { META_TABLE, postgresMigration, SCHEMA_VERSION, STORE_MARK } from './schema.js';
import { installStepFunction } from './step-function.js';

export type { PostgresTarget } from '../target.js';
export { postgresMigration } from './schema.js';

export interface PostgresStoreOptions {
  /** The PostgreSQL schema the tables live in (default `public`); made when missing. */
  schema?: string;
  /** Connections this handle pools (default 10). */
  max?: number;
  /** Milliseconds to wait for a connection before giving up (default 10 000). */
  connectTimeoutMs?: number;
  /**
   * Milliseconds a connection may idle inside a transaction before the server ends it
   * (default 5 000): how long a host frozen mid-write can hold up every other host's commits.
   */
  idleInTransactionTimeoutMs?: number;
  /** What each committed write announced (events, mail, spawns, ends). */
  onNotify?: (notifications: Notifications) => void;
  /**
   * False: the database must hold a store of this release already, for a reader that must
   * not change a shared database: an empty one is refused (STORE_NOT_FOUND) instead of given
   * the store's tables, and an older store (STORE_SCHEMA_OLD) instead of migrated. Default true.
   */
  create?: boolean;
}

/** A fixed key for the advisory lock that orders two hosts migrating the same database. */
const MIGRATION_LOCK = 7_310_442_019;

const QUERIES = new TraceQueries();

/** Every read of {@link TraceQueries}, answered from the database (assigned below). */
export interface PostgresStore extends Async<TraceQueries> {}

/**
 * A store on PostgreSQL: the store port's writes (`call`) and every typed read, each a
 * promise. Open it with {@link PostgresStore.open}; close it to end its connections.
 *
 * @example
 * const store = await PostgresStore.open('postgres://harness@db.internal/harness');
 * console.log(await store.runs());
 * await store.close();
 */
// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: the reads are TraceQueries' own, assigned to the prototype below.
export class PostgresStore {
  /** Which backend this is (a SQLite `Store` says `sqlite`). */
  readonly kind = 'postgres' as const;
  /** The connection string, its password hidden. */
  readonly url: string;
  readonly schema: string;
  readonly #connection: PostgresConnection;
  readonly #onNotify: ((notifications: Notifications) => void) | undefined;
  #closed = false;
  /** What close() tells, and waits for (the supervisor runWith shares on this store closes with it). */
  readonly #onClose = new Set<() => unknown>();
  /** Who hears the store's hints (see {@link hear}), and the one connection listening for them. */
  readonly #hearers = new Set<(hint: WorkHint) => void>();
  #listening: Promise<WorkListener> | null = null;

  private constructor(connection: PostgresConnection, options: PostgresStoreOptions) {
    this.#connection = connection;
    this.url = redacted(connection.target.connectionString);
    this.schema = options.schema ?? 'public';
    this.#onNotify = options.onNotify;
  }

  /**
   * Connects to the database at `target` (a `postgres://` URL) and brings its schema up
   * to date: an empty schema gets the store's tables; a store of ours at an older version
   * is migrated forward; a schema holding other tables, or a store newer than this
   * release, is refused with nothing written.
   */
  static async open(target: string | PostgresTarget, options: PostgresStoreOptions = {}): Promise<PostgresStore> {
    const given = typeof target === 'string' ? { connectionString: target } : target;
    const connectionString = given?.connectionString;
    // Held before anything is said about it: a string in key/value form is refused without its password.
    if (typeof connectionString === 'string') holdSecrets(connectionSecrets(connectionString));
    if (typeof connectionString !== 'string' || !/^postgres(ql)?:\/\/./i.test(connectionString)) {
      throw new InvalidArgumentError(
        `PostgresStore.open needs a postgres:// URL, for example postgres://user:password@localhost:5432/harness; got ${JSON.stringify(typeof connectionString === 'string' ? redacted(connectionString) : connectionString)}.`,
      );
    }
    const schema = options.schema ?? given.schema;
    if (schema !== undefined && (typeof schema !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(schema))) {
      throw new InvalidArgumentError(
        `PostgresStore.open: schema is a PostgreSQL identifier (letters, digits and _, not starting with a digit), got ${JSON.stringify(schema)}.`,
      );
    }
    const idle = options.idleInTransactionTimeoutMs ?? given.idleInTransactionTimeoutMs ?? IDLE_IN_TRANSACTION_MS;
    if (!Number.isSafeInteger(idle) || idle < 0) {
      throw new InvalidArgumentError(
        `PostgresStore.open: idleInTransactionTimeoutMs is a whole number of milliseconds (0 turns it off), got ${JSON.stringify(idle)}.`,
      );
    }
    const connection = new PostgresConnection({
      connectionString,
      ...(schema ? { schema } : {}),
      max: options.max ?? given.max ?? 10,
      connectTimeoutMs: options.connectTimeoutMs ?? 10_000,
      idleInTransactionTimeoutMs: idle,
    });
    try {
      await prepareSchema(connection, schema ?? 'public', options.create ?? true);
    } catch (error) {
      await connection.close().catch(() => undefined);
      throw error;
    }
    return new PostgresStore(connection, { ...options, ...(schema ? { schema } : {}) });
  }

  /**
   * @internal A handle on a store already opened (and checked) by another: an agent thread's
   * reads, the store actor's writes. No schema check, no migration.
   */
  static attach(target: PostgresTarget, options: PostgresStoreOptions = {}): PostgresStore {
    return new PostgresStore(
      new PostgresConnection({ ...target, max: options.max ?? target.max ?? 4 }),
      target.schema ? { ...options, schema: target.schema } : options,
    );
  }

  /** @internal Where the store is, password included: what the supervisor hands its threads. */
  get target(): PostgresStoreTarget {
    return { ...this.#connection.target, kind: 'postgres' };
  }

  /** One of the store's writes, in a transaction of its own; resolves once committed. */
  call<K extends StoreOperation>(op: K, input: StoreOperations[K][0]): Promise<StoreOperations[K][1]> {
    if (this.#closed) return Promise.reject(this.#closedError());
    if (!isStoreOperation(op))
      return Promise.reject(new StoreError(ErrorCode.Internal, `unknown store operation ${String(op)}`));
    let rules = new RuleContext({ lockRows: true });
    return this.#connection.transaction(
      () => {
        // A retried transaction starts from nothing, its announcements too.
        rules = new RuleContext({ lockRows: true });
        return ruleFor(rules, { op, input });
      },
      () => this.#onNotify?.(rules.takeNotifications()),
      scopeOf([{ op, input } as StoreRequestBody]),
    );
  }

  /** @internal Runs a read on a pooled connection. */
  query<T>(body: Q<T>): Promise<T> {
    if (this.#closed) return Promise.reject(this.#closedError());
    return this.#connection.read(body);
  }

  #closedError(): StoreError {
    return new StoreError(ErrorCode.StoreActorExited, `the PostgreSQL store ${this.url} is closed; open it again.`);
  }

  /** @internal Throws what a closed handle's reads and writes reject with; nothing when it is open. */
  assertOpen(): void {
    if (this.#closed) throw this.#closedError();
  }

  /** @internal Calls `listener` once, when this handle is closed, and waits for what it returns; returns what stops that. */
  onClose(listener: () => unknown): () => void {
    this.#onClose.add(listener);
    return () => this.#onClose.delete(listener);
  }

  /** The bytes the store's tables take in the database (their indexes and TOAST included). */
  async size(): Promise<{ bytes: number }> {
    const row = await this.query(
      sql.get<{ bytes: number }>(
        `SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) AS bytes FROM pg_class c
         JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'`,
      ),
    );
    return { bytes: Number(row?.bytes ?? 0) };
  }

  /** How many rows of each table a session has (its turns' runs and every run they spawned), and the bytes of their words and data. */
  sessionSize(sessionId: string): Promise<{ rows: Record<string, number>; bytes: number }> {
    // In one transaction, so every count is of the same moment.
    return this.#retain(() => retention.sessionSize(sessionId, this.url));
  }

  /**
   * Deletes a session whole: its turns, the runs they drove and every run those spawned,
   * with every row of theirs in every table, in one transaction. Returns the rows removed
   * by table. The space is reused by the database, and handed back by {@link compact}.
   */
  deleteSession(sessionId: string): Promise<{ removed: Record<string, number> }> {
    return this.#retain(() => retention.deleteSession(sessionId, this.url));
  }

  /**
   * Deletes, in one transaction, every session created before `before`. Refuses the whole
   * sweep, deleting nothing and naming them, if any of those sessions holds a run that can
   * still be resumed (end or cancel it first, or sweep with an earlier date).
   */
  sweepSessions(options: { before: Date | number }): Promise<{ deleted: string[]; removed: Record<string, number> }> {
    try {
      const before = retention.sweepBefore(options);
      return this.#retain(() => retention.sweepSessions(before));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Keeps every row and every number of a session and empties every column that holds
   * words, in one transaction (see the SQLite `Store.archiveSession`).
   */
  archiveSession(sessionId: string): Promise<void> {
    return this.#retain(() => retention.archiveSession(sessionId, this.url));
  }

  /**
   * Gives the space deleted rows took back to the filesystem: `VACUUM FULL` of each of the
   * store's tables, which rewrites the table and locks it while it does, so every host's
   * writes to it wait meanwhile (as SQLite's VACUUM holds its file). Run it when the hosts
   * are quiet; PostgreSQL's autovacuum reuses the space in the meantime. Returns the size after.
   */
  async compact(): Promise<{ bytes: number }> {
    const tables = await this.query(
      sql.all<{ name: string }>(
        `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = current_schema() AND c.relkind = 'r' ORDER BY c.relname`,
      ),
    );
    if (tables.length > 0)
      await this.query(sql.run(`VACUUM FULL ${tables.map((t) => quoteIdentifier(t.name)).join(', ')}`));
    return this.size();
  }

  /** One of retention's operations, in a writing transaction of its own. */
  #retain<T>(make: () => Q<T>): Promise<T> {
    if (this.#closed) return Promise.reject(this.#closedError());
    return this.#connection.transaction(make);
  }

  /**
   * @internal Hands `listener` every hint the store's writers send (every host's commits
   * that record events name their trees; see notify.ts), over one LISTEN connection this
   * handle opens at the first call. Resolves once listening; what it resolves to stops it.
   */
  async hear(listener: (hint: WorkHint) => void): Promise<() => void> {
    if (this.#closed) throw this.#closedError();
    this.#hearers.add(listener);
    this.#listening ??= (async () => {
      const listening = new WorkListener(this.#connection.target, randomUUID(), (hint) => {
        for (const hearer of this.#hearers) hearer(hint);
      });
      await listening.start();
      return listening;
    })();
    await this.#listening;
    return () => {
      this.#hearers.delete(listener);
    };
  }

  /** Ends this handle's connections; the database keeps everything. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const listeners = [...this.#onClose];
    this.#onClose.clear();
    await Promise.allSettled(listeners.map((listener) => listener()));
    this.#hearers.clear();
    await (await this.#listening)?.close();
    await this.#connection.close();
  }
}

defineReads(PostgresStore, QUERIES);

/** Checks (and brings up to date) the schema at `target` on a connection of its own, then lets it go. */
export async function openPostgresSchema(target: PostgresTarget): Promise<{ stepFunction: boolean }> {
  const connection = new PostgresConnection({ ...target, max: 1 });
  try {
    return { stepFunction: await prepareSchema(connection, target.schema ?? 'public') };
  } finally {
    await connection.close();
  }
}

/**
 * Checks what the schema holds and brings it to this release's version, in one
 * transaction under an advisory lock (two hosts opening an empty database at once make
 * the tables once). Refuses, writing nothing, a schema that is not a store of ours or a
 * store newer than this code.
 */
async function prepareSchema(connection: PostgresConnection, schema: string, create = true): Promise<boolean> {
  const client = await connection.connect();
  const where = `${redacted(connection.target.connectionString)}${schema === 'public' ? '' : ` (schema ${schema})`}`;
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    // Every relation in the schema, whatever this user may read of it.
    const tables = (
      await client.query<{ name: string }>(
        `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY c.relname`,
        [schema],
      )
    ).rows.map((row) => row.name);
    const schemaExists =
      (await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema])).rows.length > 0;
    let version = 0;
    if (tables.includes(META_TABLE)) {
      const meta = new Map(
        (
          await client.query<{ key: string; value: string }>(`SELECT key, value FROM ${quoteIdentifier(META_TABLE)}`)
        ).rows.map((row) => [row.key, row.value]),
      );
      if (meta.get('store') !== STORE_MARK) throw notOurs(where, tables);
      version = Number(meta.get('schema_version'));
      if (!Number.isInteger(version) || version < 0) throw notOurs(where, tables);
      if (version > SCHEMA_VERSION) {
        throw new StoreError(
          ErrorCode.StoreSchemaTooNew,
          `the PostgreSQL store at ${where} is at schema version ${version}, newer than this io-harness understands (${SCHEMA_VERSION}). ` +
            'Nothing was changed. Upgrade io-harness on this host to the release the other hosts run, or point it at another database.',
          {
            details: {
              url: redacted(connection.target.connectionString),
              fileVersion: version,
              codeVersion: SCHEMA_VERSION,
            },
          },
        );
      }
    } else if (tables.length > 0) {
      throw notOurs(where, tables);
    } else if (!create) {
      throw new StoreError(
        ErrorCode.StoreNotFound,
        `there is no io-harness store at ${where}: ${schemaExists ? 'the schema holds no tables' : 'there is no such schema'}. Nothing was written. ` +
          'Point at the database (and schema) your runs were kept in; a supervisor started on it makes the store.',
        { details: { url: redacted(connection.target.connectionString), schema } },
      );
    }
    if (version < SCHEMA_VERSION && version > 0 && !create)
      throw new StoreError(
        ErrorCode.StoreSchemaOld,
        `the PostgreSQL store at ${where} is at schema version ${version}, older than this io-harness's (${SCHEMA_VERSION}); nothing was changed. ` +
          'Migrating a shared store is not done in passing: stop the hosts of the older release, then open it once with this one (PostgresStore.open, or a supervisor started on it).',
        {
          details: {
            url: redacted(connection.target.connectionString),
            fileVersion: version,
            codeVersion: SCHEMA_VERSION,
          },
        },
      );
    if (version < SCHEMA_VERSION) {
      if (version === 0) {
        // Made only when missing: making one needs a right on the database that owning one does not.
        if (!schemaExists) await client.query(`CREATE SCHEMA ${quoteIdentifier(schema)}`);
        await client.query(
          `CREATE TABLE ${quoteIdentifier(META_TABLE)} (key TEXT COLLATE "C" PRIMARY KEY, value TEXT COLLATE "C" NOT NULL)`,
        );
        await client.query(`INSERT INTO ${quoteIdentifier(META_TABLE)} (key, value) VALUES ('store', $1)`, [
          STORE_MARK,
        ]);
      }
      for (let next = version; next < SCHEMA_VERSION; next++) await client.query(postgresMigration(next));
      await client.query(
        `INSERT INTO ${quoteIdentifier(META_TABLE)} (key, value) VALUES ('schema_version', $1)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
        [String(SCHEMA_VERSION)],
      );
    }
    const stepFunction = create && (await installStepFunction(client, schema));
    await client.query('COMMIT');
    return stepFunction;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    if (error instanceof StoreError || error instanceof InvalidArgumentError) throw error;
    const code = (error as { code?: unknown }).code;
    throw new StoreError(
      ErrorCode.StoreOpenFailed,
      `cannot prepare the PostgreSQL store at ${where}: ${(error as Error).message}${typeof code === 'string' ? ` (SQLSTATE ${code})` : ''}. ` +
        'The user needs the right to create tables in that schema the first time; nothing was written.',
      { cause: error, details: { sqlState: code } },
    );
  } finally {
    client.release();
  }
}

function notOurs(where: string, tables: string[]): StoreError {
  const shown = tables.slice(0, 5).join(', ') + (tables.length > 5 ? `, and ${tables.length - 5} more` : '');
  return new StoreError(
    ErrorCode.StoreNotOurs,
    `the PostgreSQL database at ${where} holds tables that are not an io-harness store (${shown}). Nothing was written. ` +
      'Give the store an empty database, or a schema of its own: PostgresStore.open(url, { schema: "io_harness" }).',
    { details: { tables: tables.slice(0, 20) } },
  );
}
