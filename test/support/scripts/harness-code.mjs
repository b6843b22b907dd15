// A process running io-harness as a project installs it: imported from
// <project>/node_modules/io-harness, with the project itself as the run's workspace. Reports
// one JSON line on stdout. usage: node harness-code.mjs <json: { project, mode, inWorker? }>
//   mode 'rewrite': one workspace run whose model tries to change the harness's own code and
//     to plant packages beside it, by commands the checker cannot read (`commands`: each a
//     workspace path and `append` or `mkdir`) and by write_file (`fileWrites`: paths);
//     reports each tool's answer.
//   `inWorker`: all of it on a worker thread of the process, not its main thread.
//   `providerModule`: the model is a module provider written into <project>/providers, named
//     by a relative path, importing its calls from a file beside it.
//   mode 'planted-provider': the process runs in a directory with no node_modules when the
//     supervisor starts; a package is then planted in its node_modules, as a run's command
//     could, and a run names it as its AI SDK provider; reports how the run ended.
import { once } from 'node:events';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

const config = isMainThread ? JSON.parse(process.argv[2]) : workerData;
// `inWorker`: the whole program runs on a worker thread of this process, as an embedder's worker would.
if (isMainThread && config.inWorker) {
  const worker = new Worker(fileURLToPath(import.meta.url), { workerData: config });
  worker.on('message', (value) => process.stdout.write(`${JSON.stringify(value)}\n`));
  const [code] = await once(worker, 'exit');
  process.exit(code);
}
const { project, mode, marker } = config;
const harness = await import(join(project, 'node_modules/io-harness/dist/index.js'));
const testing = await import(join(project, 'node_modules/io-harness/dist/testing/index.js'));
const say = (value) =>
  isMainThread ? process.stdout.write(`${JSON.stringify(value)}\n`) : parentPort.postMessage(value);

const store = await harness.Store.open(join(project, '..', 'runs.db'));
const supervisor = await harness.Supervisor.start(store, { isolation: 'thread' });

if (mode === 'rewrite') {
  // Paths built at run time, so no check of the command line can see what they write.
  const command = ({ path, op }) => {
    const at = JSON.stringify(path.split('/'));
    const act = { append: "fs.appendFileSync(p, '//')", mkdir: 'fs.mkdirSync(p, { recursive: true })' }[op];
    return {
      name: 'exec',
      args: {
        argv: [
          'node',
          '-e',
          `const fs = require('fs'); const p = ${at}.join('/'); try { ${act}; console.log('changed ' + p) } catch (e) { console.log(e.code + ' ' + p) }`,
        ],
      },
    };
  };
  const calls = [
    ...config.commands.map(command),
    ...config.fileWrites.map((path) => ({ name: 'write_file', args: { path, content: 'export {};' } })),
  ];
  let server = null;
  let provider;
  if (config.providerModule) {
    // The model is a module provider in the project, named by a relative path, that takes
    // its calls from a file beside it: what each new agent thread imports.
    // `providerModule: 'root'`: the module in the workspace's root itself, whose directory cannot be kept.
    const home = config.providerModule === 'root' ? project : join(project, 'providers');
    mkdirSync(home, { recursive: true });
    writeFileSync(join(home, 'calls.mjs'), `export const calls = ${JSON.stringify(calls)};\n`);
    writeFileSync(
      join(home, 'model.mjs'),
      [
        "import { calls } from './calls.mjs';",
        'export default () => ({',
        "  name: 'local',",
        '  async complete(request) {',
        "    const turn = request.transcript.filter((entry) => entry.role === 'assistant').length;",
        "    const toolCalls = turn === 0 ? calls.map((call, index) => ({ id: 'call_' + index, ...call })) : [];",
        "    return { text: turn === 0 ? 'changing' : 'done', toolCalls, usage: { inputTokens: 1, outputTokens: 1 }, model: 'local' };",
        '  },',
        '});',
        '',
      ].join('\n'),
    );
    provider = { kind: 'module', module: config.providerModule === 'root' ? './model.mjs' : './providers/model.mjs' };
  } else {
    server = await testing.ScriptedModelServer.start((call) =>
      testing.assistantTurns(call) === 0 ? { text: 'changing the harness', toolCalls: calls } : { text: 'done' },
    );
    provider = harness.OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
  }
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
  await server?.close();
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
