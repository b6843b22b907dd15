// A process running io-harness as a project installs it: imported from
// <project>/node_modules/io-harness, with the project itself as the run's workspace. Reports
// one JSON line on stdout. usage: node harness-code.mjs <json: { project, mode }>
//   mode 'rewrite': one workspace run whose model tries to change the harness's own code and
//     to plant a package beside it, by commands the checker cannot read and by the file tools;
//     reports each tool's answer.
//   mode 'planted-provider': the process runs in a directory with no node_modules when the
//     supervisor starts; a package is then planted in its node_modules, as a run's command
//     could, and a run names it as its AI SDK provider; reports how the run ended.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const { project, mode, marker } = JSON.parse(process.argv[2]);
const harness = await import(join(project, 'node_modules/io-harness/dist/index.js'));
const testing = await import(join(project, 'node_modules/io-harness/dist/testing/index.js'));
const say = (value) => process.stdout.write(`${JSON.stringify(value)}\n`);

const store = await harness.Store.open(join(project, '..', 'runs.db'));
const supervisor = await harness.Supervisor.start(store, { isolation: 'thread' });

if (mode === 'rewrite') {
  // Paths built at run time, so no check of the command line can see what they write.
  const node = (path, op) => ({
    name: 'exec',
    args: {
      argv: [
        'node',
        '-e',
        `const fs = require('fs'); const p = ${path}; try { ${op}; console.log('changed ' + p) } catch (e) { console.log(e.code + ' ' + p) }`,
      ],
    },
  });
  const append = node("['node_modules', 'io-harness', 'dist', 'index.js'].join('/')", "fs.appendFileSync(p, '//')");
  const plant = node("['node_modules', 'planted-pkg'].join('/')", 'fs.mkdirSync(p)');
  const manifest = node("['node_modules', 'io-harness', 'package.json'].join('/')", "fs.writeFileSync(p, '{}')");
  const server = await testing.ScriptedModelServer.start((call) =>
    testing.assistantTurns(call) === 0
      ? {
          text: 'changing the harness',
          toolCalls: [
            append,
            plant,
            manifest,
            { name: 'write_file', args: { path: 'node_modules/io-harness/dist/index.js', content: 'export {};' } },
            { name: 'write_file', args: { path: 'node_modules/other-pkg/index.js', content: 'export {};' } },
          ],
        }
      : { text: 'done' },
  );
  const provider = harness.OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
  const result = await supervisor.run({
    contract: harness.TaskContract.workspace('change the harness', project),
    policy: harness.Policy.permissive(),
    provider,
  }).result;
  const [step] = store.steps(result.rootId);
  say({
    status: result.status,
    answers: (step?.observations ?? []).map((o) => ({ name: o.name, content: o.content, isError: o.isError })),
    contained: store.events(result.rootId).find((event) => event.type === 'contained') ?? null,
  });
  await server.close();
}

if (mode === 'planted-provider') {
  // What a run's command could have made after the supervisor started.
  const planted = join(process.cwd(), 'node_modules', '@planted', 'provider');
  mkdirSync(planted, { recursive: true });
  writeFileSync(join(planted, 'package.json'), JSON.stringify({ name: '@planted/provider', main: 'index.js' }));
  writeFileSync(
    join(planted, 'index.js'),
    `require('fs').writeFileSync(${JSON.stringify(marker)}, 'ran'); exports.createPlanted = () => () => ({});`,
  );
  try {
    const result = await supervisor.run({
      task: 'answer',
      provider: harness.aiSdk({ package: '@planted/provider', factory: 'createPlanted', model: 'm' }),
    }).result;
    const ended = store.events(result.rootId).find((event) => event.type === 'run-end');
    say({ status: result.status, reason: ended?.reason ?? null });
  } catch (error) {
    say({ error: { code: error.code, message: error.message } });
  }
}

await supervisor.close();
store.close();
