/**
 * In-process helpers: a real store, a real supervisor, and the scripted models under
 * support/scripts served over HTTP by the scripted model server (agents call it from their
 * worker threads on the OpenAI wire, exactly as they would a vendor).
 *
 * The store is a SQLite file, or, when IO_HARNESS_TEST_STORE is `postgres` (the
 * `postgres` project of vitest.config.ts runs the store's acceptance suites so), a
 * database of its own on the tests' PostgreSQL server. Its reads are typed as promises,
 * as PostgreSQL's are: a suite that awaits each runs unchanged on both.
 */
import { fileURLToPath } from 'node:url';
import {
  type HttpProviderSpec,
  type ModuleProviderSpec,
  OpenAI,
  Store,
  Supervisor,
  type SupervisorOptions,
} from '../../dist/index.js';
import { PostgresStore } from '../../dist/store/postgres/index.js';
import { type ScriptedModelServer, type ScriptedProvider, serveScript } from '../../dist/testing/index.js';
import { freshDatabase } from './postgres.js';
import { tempStorePath } from './processes.js';

/** Which store the harness opens: `postgres`, or (by default) a SQLite file. */
export const TEST_STORE = process.env.IO_HARNESS_TEST_STORE === 'postgres' ? 'postgres' : 'sqlite';

const servers = new Set<ScriptedModelServer>();

/** Serves the script in support/scripts/<name>.mjs over HTTP and returns a provider spec for it. */
export async function script(name: string, options: Record<string, unknown> = {}): Promise<HttpProviderSpec> {
  const module = (await import(`./scripts/${name}.mjs`)) as { default: (options: unknown) => ScriptedProvider };
  const provider = module.default(options);
  const server = await serveScript(provider.script, provider.options);
  servers.add(server);
  return OpenAI.create({
    model: 'scripted',
    baseUrl: `${server.url}/v1`,
    apiKey: 'test-key',
    retry: { baseDelayMs: 5 },
  });
}

/**
 * The script run inside each agent's own thread instead (a module provider): for tests
 * whose script must act in that thread, such as making it exit.
 */
export function moduleScript(name: string, options: Record<string, unknown> = {}): ModuleProviderSpec {
  return {
    kind: 'module',
    module: fileURLToPath(new URL(`./scripts/${name}.mjs`, import.meta.url)),
    options: options as ModuleProviderSpec['options'],
  };
}

export interface Harness {
  store: Store;
  supervisor: Supervisor;
  close(): Promise<void>;
}

/** A SQLite file and a supervisor on it. */
export async function harness(options: SupervisorOptions = {}): Promise<Harness> {
  const store = await Store.open(tempStorePath());
  const supervisor = await Supervisor.start(store, options);
  return {
    store,
    supervisor,
    async close() {
      await supervisor.close();
      store.close();
      await closeServers();
    },
  };
}

async function closeServers(): Promise<void> {
  for (const server of servers) await server.close();
  servers.clear();
}

/** A store's typed reads, each awaited: a SQLite store's answer at once, PostgreSQL's a promise. */
export type AnyStore = Pick<PostgresStore, Exclude<keyof PostgresStore, 'kind' | 'url' | 'schema' | 'target'>>;

export interface StoreHarness {
  store: AnyStore;
  supervisor: Supervisor<Store | PostgresStore>;
  close(): Promise<void>;
}

/**
 * The store the suites about the store run on: a SQLite file, or a PostgreSQL database of
 * its own when IO_HARNESS_TEST_STORE is `postgres`; a supervisor on it, hosting its actors
 * in-process unless `options.isolation` says otherwise.
 */
export async function storeHarness(options: SupervisorOptions = {}): Promise<StoreHarness> {
  let store: Store | PostgresStore;
  let drop: () => Promise<void> = async () => undefined;
  if (TEST_STORE === 'postgres') {
    const db = await freshDatabase();
    drop = () => db.drop();
    store = await PostgresStore.open(db.url);
  } else {
    store = await Store.open(tempStorePath());
  }
  // Tree logic (admission, mailbox, caps, settling) runs on the in-process host: no thread to start.
  const supervisor = await Supervisor.start(store, { isolation: 'in-process', ...options });
  return {
    store: store as unknown as AnyStore,
    supervisor: supervisor as Supervisor<Store | PostgresStore>,
    async close() {
      await supervisor.close();
      await store.close();
      await drop();
      await closeServers();
    },
  };
}

/** The observations of every step of a run, flattened. */
export function observations(store: Store, runId: string) {
  return store.steps(runId).flatMap((step) => step.observations);
}

export function runByAddress(store: Store, rootId: string, address: string) {
  const run = store.runs(rootId).find((candidate) => candidate.address === address);
  if (!run) throw new Error(`no run at ${address}`);
  return run;
}

/** {@link observations}, on either backend. */
export async function observationsOf(store: AnyStore, runId: string) {
  return (await store.steps(runId)).flatMap((step) => step.observations);
}

/** {@link runByAddress}, on either backend. */
export async function runAt(store: AnyStore, rootId: string, address: string) {
  const run = (await store.runs(rootId)).find((candidate) => candidate.address === address);
  if (!run) throw new Error(`no run at ${address}`);
  return run;
}
