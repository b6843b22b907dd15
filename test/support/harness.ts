/**
 * In-process helpers: a real store file, a real supervisor, and the scripted models under
 * support/scripts served over HTTP by the scripted model server (agents call it from their
 * worker threads on the OpenAI wire, exactly as they would a vendor).
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
import { type ScriptedModelServer, type ScriptedProvider, serveScript } from '../../dist/testing/index.js';
import { tempStorePath } from './processes.js';

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

export async function harness(options: SupervisorOptions = {}): Promise<Harness> {
  const store = await Store.open(tempStorePath());
  const supervisor = await Supervisor.start(store, options);
  return {
    store,
    supervisor,
    async close() {
      await supervisor.close();
      store.close();
      for (const server of servers) await server.close();
      servers.clear();
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
