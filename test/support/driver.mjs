// A child process that drives a tree and reports on stdout, one JSON object a line:
//   {"rootId"} once the tree exists, {"ack":[runId, seq]} for every committed step (and with the first,
//   {"workers": n}, the worker threads the process runs then),
//   then {"result"} or {"error"}. Killed with SIGKILL by the crash tests.
// usage: node driver.mjs <json: { store (a file, or a postgres:// URL), storeOptions? (PostgresStore.open's), mode: 'run'|'resume'|'join', rootId?, script?, wireScript?, options?, killAt?, supervisor?, run? }>
// Mode 'join' takes part in a tree another process drives (PostgreSQL); {"lost": runId} says another host took a run.
// With `wireScript`, the process hosts the scripted model server and its agents call it over
// HTTP (the OpenAI wire); the server dies with the process and a resume starts a new one.
// With `workspace: { goal, root, policy?, context?, memory?, budget?, codeact? }` the tree is a workspace run (policy 'permissive',
// the default, or 'default'; context, memory, budget and codeact as withContext, withMemory, withBudget and withCodeAct take them); `approver: 'defer' | 'approve'` answers the policy's asks.
// With `tools: 'file#export'` the tree gets the tools that export of scripts/<file>.mjs makes (or resolves to)
// (called with `toolOptions`), on run and on resume alike. With `hooks: { root, userFile }` the hooks of that
// configuration observe the tree.
import { fileURLToPath } from 'node:url';
import { CallbackApprover, Config, OpenAI, Policy, Store, Supervisor, TaskContract } from '../../dist/index.js';
import { PostgresStore } from '../../dist/store/postgres/index.js';
import { ScriptedModelServer } from '../../dist/testing/index.js';

const config = JSON.parse(process.argv[2]);
const say = (value) => process.stdout.write(`${JSON.stringify(value)}\n`);
// A postgres:// store is a PostgreSQL one; anything else is the path of a file.
const store = /^postgres(ql)?:\/\//.test(config.store)
  ? await PostgresStore.open(config.store, config.storeOptions ?? {})
  : await Store.open(config.store);
const supervisor = await Supervisor.start(store, { ...(config.supervisor ?? {}), killAt: config.killAt ?? null });
let workersSaid = false;
supervisor.observe((event) => {
  // With its first step, how many worker threads the process runs (its diagnostic report lists them).
  if (event.type === 'step-end' && !workersSaid) {
    workersSaid = true;
    say({ workers: process.report.getReport().workers.length });
  }
  if (event.type === 'step-end') say({ ack: [event.runId, event.seq] });
  if (event.type === 'lease-lost') say({ lost: event.runId });
});
// With `hooks: { root, userFile }` the configuration's hooks are installed, as an embedder would.
if (config.hooks) supervisor.observe(Config.discover(config.hooks.root, { userFile: config.hooks.userFile }).hooks());
let server = null;
let provider;
if (config.wireScript) {
  const [file, name] = config.wireScript.split('#');
  const mod = await import(new URL(`./scripts/${file}.mjs`, import.meta.url).href);
  server = await ScriptedModelServer.start(mod[name](config.options ?? {}));
  provider = OpenAI.create({
    model: 'scripted',
    baseUrl: `${server.url}/v1`,
    apiKey: 'no-key',
    retry: { baseDelayMs: 5 },
  });
} else if (config.script) {
  provider = {
    kind: 'module',
    module: fileURLToPath(new URL(`./scripts/${config.script}.mjs`, import.meta.url)),
    options: config.options ?? {},
  };
}
const people = config.approver ? { approver: new CallbackApprover(() => config.approver) } : {};
let toolsModule = null;
if (config.tools) {
  const [file, name] = config.tools.split('#');
  toolsModule = await import(new URL(`./scripts/${file}.mjs`, import.meta.url).href);
  people.tools = await toolsModule[name](config.toolOptions ?? {});
}
try {
  let handle;
  if (config.mode === 'run') {
    let contract = config.workspace ? TaskContract.workspace(config.workspace.goal, config.workspace.root) : null;
    if (contract && config.workspace.context) contract = contract.withContext(config.workspace.context);
    if (contract && config.workspace.memory) contract = contract.withMemory(config.workspace.memory);
    if (contract && config.workspace.budget) contract = contract.withBudget(config.workspace.budget);
    if (contract && config.workspace.codeact) contract = contract.withCodeAct(config.workspace.codeact);
    const work = contract
      ? {
          contract,
          policy: config.workspace.policy === 'default' ? Policy.default() : Policy.permissive(),
        }
      : { task: config.task ?? 'run the seeded tree' };
    handle = supervisor.run({ ...work, provider, ...people, ...(config.run ?? {}) });
  } else {
    // The key was never stored: hand the provider back (its server is new, at a new port).
    const again = { ...(provider ? { provider } : {}), ...people };
    handle =
      config.mode === 'join'
        ? await supervisor.join(config.rootId, again)
        : await supervisor.resume(config.rootId, again);
  }
  say({ rootId: handle.rootId, pid: process.pid, owner: supervisor.owner });
  const result = await handle.result;
  say({ result });
} catch (error) {
  say({ error: { code: error.code, message: error.message, details: error.details ?? null } });
}
await supervisor.close();
await server?.close();
// What the tools' module holds open ends with the process.
await toolsModule?.close?.();
await store.close();
