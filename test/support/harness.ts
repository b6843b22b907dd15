/** In-process helpers: a real store file, a real supervisor, the scripted models under support/scripts. */
import { fileURLToPath } from 'node:url';
import { type ModuleProviderSpec, Store, Supervisor, type SupervisorOptions } from '../../dist/index.js';
import { tempStorePath } from './processes.js';

export function script(name: string, options: Record<string, unknown> = {}): ModuleProviderSpec {
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
