// Another host of bench/fanout-hosts.mjs: a process of its own on the same PostgreSQL
// store, its supervisor under its own host name (host-b by default), its pool warmed, with
// a cap of its own when given one. It says {"ready"} on stdout, reads the root's id from
// stdin, joins that tree and says {"done"} when it ends.
// usage: node fanout-host.mjs <url> <concurrency> <json provider options> [host name] [maxHostAgents]
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Supervisor } from 'io-harness';
import { PostgresStore } from 'io-harness/postgres';

const [url, concurrency, options, name, cap] = process.argv.slice(2);
const store = await PostgresStore.open(url);
const supervisor = await Supervisor.start(store, {
  host: name || 'host-b',
  maxConcurrentAgents: Number(concurrency),
  ...(cap ? { maxHostAgents: Number(cap) } : {}),
});
await supervisor.warm(Number(concurrency));
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
const lines = createInterface({ input: process.stdin });
for await (const rootId of lines) {
  const handle = await supervisor.join(rootId.trim(), {
    provider: {
      kind: 'module',
      module: fileURLToPath(new URL('./fanout-model.mjs', import.meta.url)),
      options: JSON.parse(options),
    },
  });
  const result = await handle.result;
  process.stdout.write(`${JSON.stringify({ done: result.status })}\n`);
  break;
}
await supervisor.close();
await store.close();
