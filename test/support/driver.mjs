// A child process that drives a tree and reports on stdout, one JSON object a line:
//   {"rootId"} once the tree exists, {"ack":[runId, seq]} for every committed step,
//   then {"result"} or {"error"}. Killed with SIGKILL by the crash tests.
// usage: node driver.mjs <json: { store, mode: 'run'|'resume', rootId?, script, options?, killAt?, supervisor?, run? }>
import { fileURLToPath } from 'node:url';
import { Store, Supervisor } from '../../dist/index.js';

const config = JSON.parse(process.argv[2]);
const say = (value) => process.stdout.write(`${JSON.stringify(value)}\n`);
const store = await Store.open(config.store);
const supervisor = await Supervisor.start(store, { ...(config.supervisor ?? {}), killAt: config.killAt ?? null });
supervisor.observe((event) => {
  if (event.type === 'step-end') say({ ack: [event.runId, event.seq] });
});
try {
  let handle;
  if (config.mode === 'run') {
    handle = supervisor.run({
      task: config.task ?? 'run the seeded tree',
      provider: {
        kind: 'module',
        module: fileURLToPath(new URL(`./scripts/${config.script}.mjs`, import.meta.url)),
        options: config.options ?? {},
      },
      ...(config.run ?? {}),
    });
  } else {
    handle = await supervisor.resume(config.rootId);
  }
  say({ rootId: handle.rootId, pid: process.pid, owner: supervisor.owner });
  const result = await handle.result;
  say({ result });
} catch (error) {
  say({ error: { code: error.code, message: error.message, details: error.details ?? null } });
}
await supervisor.close();
store.close();
