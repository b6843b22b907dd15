/**
 * The store a command names with `--store`: a SQLite file, checked to be a store of ours
 * at a version this release reads and never made, or a PostgreSQL store that must exist
 * already; opened read-only for the read commands, and closed when the command is done.
 */
import { existsSync, statSync } from 'node:fs';
import { HarnessError } from '../errors.js';
import { whereIs } from '../store/either.js';
import type { PostgresStore } from '../store/postgres/index.js';
import type { RunRecord } from '../store/records.js';
import { TraceReader } from '../store/sqlite/reader.js';
import { storeFileState } from '../store/sqlite/schema.js';
import { Store } from '../store/sqlite/store.js';
import { SCHEMA_VERSION } from '../store/version.js';
import { CliError, type Context, EXIT } from './command.js';

/**
 * Checks the file is a store of ours at a version this release reads, without writing to
 * it; an older store is brought forward once by opening it as a store.
 */
export async function checkStore(path: string): Promise<void> {
  let state: ReturnType<typeof storeFileState>;
  try {
    if (existsSync(path) && statSync(path).isDirectory())
      throw new CliError(`${path} is a directory; pass --store <file>, the store's own file.`, EXIT.notFound);
    state = storeFileState(path);
  } catch (error) {
    if (error instanceof CliError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EACCES' || code === 'EPERM')
      throw new CliError(`${path} cannot be read (${code}); give this user read access to it.`, EXIT.failed);
    if (HarnessError.isInstance(error)) throw new CliError(error.message, EXIT.refused);
    throw new CliError(
      `${path} is not a store io-harness can read (${(error as Error).message}); nothing was changed. Pass the file your runs were kept in.`,
      EXIT.refused,
    );
  }
  if (state.kind === 'missing')
    throw new CliError(
      `there is no store at ${path}; pass --store <file> (or set IO_HARNESS_STORE) to the file your runs were kept in.`,
      EXIT.notFound,
    );
  if (state.kind === 'foreign')
    throw new CliError(
      `${path} is a SQLite file but not an io-harness store (it has no runs table); nothing was changed. Pass the file your runs were kept in.`,
      EXIT.refused,
    );
  // An older store is brought forward once, as opening it as a store does.
  if (state.version < SCHEMA_VERSION) (await Store.open(path)).close();
}

/** What the read commands read: a SQLite file's read-only reader, or a PostgreSQL store (every read awaited). */
export type Reader = TraceReader | PostgresStore;

export function isPostgresUrl(location: string): boolean {
  return /^postgres(ql)?:\/\//i.test(location);
}

/** The PostgreSQL store at `url`, which must be one already: an empty database is refused, never given tables. */
export async function openPostgres(url: string, schema: string | undefined): Promise<PostgresStore> {
  const { PostgresStore } = await import('../store/postgres/index.js');
  return PostgresStore.open(url, { create: false, max: 2, ...(schema === undefined ? {} : { schema }) });
}

export async function withReader<T>(context: Context, use: (reader: Reader) => T | Promise<T>): Promise<T> {
  const location = context.storePath;
  if (isPostgresUrl(location)) return withPostgres(context, use);
  await checkStore(location);
  const reader = new TraceReader(location);
  try {
    return await use(reader);
  } finally {
    reader.close();
  }
}

export async function withStore<T>(
  context: Context,
  use: (store: Store | PostgresStore) => T | Promise<T>,
): Promise<T> {
  const location = context.storePath;
  if (isPostgresUrl(location)) return withPostgres(context, use);
  await checkStore(location);
  const store = await Store.open(location);
  try {
    return await use(store);
  } finally {
    store.close();
  }
}

export async function withPostgres<T>(context: Context, use: (store: PostgresStore) => T | Promise<T>): Promise<T> {
  const store = await openPostgres(context.storePath, context.values.schema as string | undefined);
  try {
    return await use(store);
  } finally {
    await store.close();
  }
}

/** The fewest characters a run-id prefix must have: fewer would name too many runs to be useful. */
export const MIN_PREFIX = 4;

/** A run by its id, or by a prefix of one that names one run alone. */
export async function findRun(reader: Reader, given: string): Promise<RunRecord> {
  const exact = await reader.run(given);
  if (exact) return exact;
  if (given.length < MIN_PREFIX)
    throw new CliError(
      `${JSON.stringify(given)} is too short to name a run: give the id, or a prefix of at least ${MIN_PREFIX} characters (\`io-harness runs\` lists the ids).`,
      EXIT.usage,
    );
  const matches = (await allRuns(reader)).filter((run) => run.runId.startsWith(given));
  if (matches.length === 1) return matches[0] as RunRecord;
  if (matches.length > 1)
    throw new CliError(
      `${given} names ${matches.length} runs (${matches
        .slice(0, 3)
        .map((run) => run.runId)
        .join(', ')}, ...); give more of the id.`,
      EXIT.usage,
    );
  throw new CliError(`there is no run ${given} in ${whereIs(reader)}; \`io-harness runs\` lists them.`, EXIT.notFound);
}

export async function allRuns(reader: Reader): Promise<RunRecord[]> {
  const runs: RunRecord[] = [];
  for (const root of await reader.runs()) runs.push(...(await reader.runs(root.runId)));
  return runs;
}
