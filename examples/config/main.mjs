import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Config, OpenAI, Store, Supervisor } from 'io-harness';
import { assistantTurns, ScriptedModelServer, systemText } from 'io-harness/testing';

// A repository with its AGENTS.md, and a user directory holding io.toml and a bundle.
const repo = mkdtempSync(join(tmpdir(), 'config-example-repo-'));
writeFileSync(join(repo, 'AGENTS.md'), 'Keep every change small.\n');
writeFileSync(join(repo, 'notes.txt'), 'ship on friday\n');
const home = mkdtempSync(join(tmpdir(), 'config-example-home-'));
mkdirSync(join(home, 'kit'));
writeFileSync(
  join(home, 'kit', 'plugin.toml'),
  `name = "kit"
[[agent]]
name = "reviewer"
description = "Reads and reports, changes nothing"
system = "You review. You never change a file."
deny = { write = ["**"] }
[deny]
read = ["secrets/**"]
`,
);
writeFileSync(
  join(home, 'io.toml'),
  `[[plugin]]
path = "kit"
[[hook]]
name = "audit"
events = ["run-start", "refusal", "run-end"]
append = "audit.jsonl"
`,
);

// A model on loopback: the root hands the review to the bundle's agent, which tries a write.
const model = await ScriptedModelServer.start((call) => {
  const system = systemText(call);
  const turn = assistantTurns(call);
  if (system.startsWith('You review.'))
    return turn === 0
      ? { toolCalls: [{ name: 'write_file', args: { path: 'notes.txt', content: 'ship today\n' } }] }
      : { text: 'notes.txt says: ship on friday' };
  return turn === 0
    ? { toolCalls: [{ name: 'spawn_agent', args: { agent: 'kit__reviewer', task: 'review notes.txt' } }] }
    : { text: 'reviewed' };
});

const config = Config.discover(repo, { userFile: join(home, 'io.toml') });
const store = await Store.open(process.argv[2] ?? 'runs.db');
const supervisor = await Supervisor.start(store);
const hooks = config.hooks();
supervisor.observe(hooks);
const provider = OpenAI.create({ model: 'scripted', baseUrl: `${model.url}/v1`, apiKey: 'unused' });
const handle = supervisor.run({ ...config.runOptions('review the notes'), provider });
const result = await handle.result;

console.log(`outcome: ${result.status}`);
console.log(`guidance: ${config.instructions().map((file) => file.source)}`);
for (const run of store.runs(handle.rootId)) console.log(`agent: ${run.address} ${run.status}`);
for (const event of store.treeEvents(handle.rootId))
  if (event.type === 'refusal') console.log(`refused by ${event.layer}: ${event.reason}`);
const audit = readFileSync(join(home, 'audit.jsonl'), 'utf8').trim().split('\n');
console.log(`audit: ${audit.map((line) => JSON.parse(line).type).join(', ')}`);
await supervisor.close();
await model.close();
store.close();
for (const dir of [repo, home]) rmSync(dir, { recursive: true, force: true });
