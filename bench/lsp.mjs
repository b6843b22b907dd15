// node bench/lsp.mjs — what a language server question costs through the harness, beside a
// bare vscode-jsonrpc client asking the same server the same question, in the same run.
// The server is typescript-language-server (a development dependency) on a small project
// of its own, one tsserver (useSyntaxServer: never). Through the harness: LspClient, the
// server wrapped by the run's executor (contained on the host's strongest rung), the file
// checked for changes before each question. Bare: the same argv spawned directly, the file
// opened once. Each side starts its server, is asked BENCH_WARMUP (5) questions, then
// BENCH_QUESTIONS (50) `textDocument/definition` questions one after the other; medians and
// the start (spawn to an answered first question).
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Policy, TaskContract } from 'io-harness';
import { executorFor } from '../dist/runtime/exec/factory.js';
import { LspClient } from '../dist/runtime/lsp/client.js';
import { checkLspServers } from '../dist/runtime/lsp/servers.js';
import { tempDir } from './support/temp.mjs';

const QUESTIONS = Number(process.env.BENCH_QUESTIONS ?? 50);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 5);
const REPO = fileURLToPath(new URL('..', import.meta.url));
const TSLS = join(REPO, 'node_modules', 'typescript-language-server', 'lib', 'cli.mjs');
const TSSERVER = join(REPO, 'node_modules', 'typescript', 'lib', 'tsserver.js');
const rpc = createRequire(import.meta.url)('vscode-jsonrpc/node');

const root = tempDir('io-harness-bench-lsp-');
mkdirSync(join(root, 'src'));
writeFileSync(
  join(root, 'tsconfig.json'),
  JSON.stringify({ compilerOptions: { strict: true, noEmit: true, types: [] }, include: ['src'] }),
);
writeFileSync(
  join(root, 'src', 'math.ts'),
  'export function addOne(value: number): number {\n  return value + 1;\n}\n',
);
writeFileSync(join(root, 'src', 'main.ts'), "import { addOne } from './math';\n\nexport const two = addOne(1);\n");
const file = join(root, 'src', 'main.ts');
const text = readFileSync(file, 'utf8');
const initializationOptions = { tsserver: { path: TSSERVER, useSyntaxServer: 'never' } };
const question = { position: { line: 2, character: 19 } };
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

async function timedQuestions(ask) {
  for (let i = 0; i < WARMUP; i++) await ask();
  const times = [];
  for (let i = 0; i < QUESTIONS; i++) {
    const start = performance.now();
    await ask();
    times.push(performance.now() - start);
  }
  return median(times);
}

async function harness() {
  const [server] = checkLspServers([
    { command: [process.execPath, TSLS, '--stdio'], extensions: ['.ts'], initializationOptions },
  ]);
  const contract = TaskContract.workspace('bench', root).toJSON();
  const executor = executorFor({ purpose: 'run', contract, policy: Policy.default() });
  const client = new LspClient(server, root, (argv) => executor.wrapCommand(argv, root, { PATH: process.env.PATH }));
  const began = performance.now();
  await client.ask('textDocument/definition', file, text, question);
  const startMs = performance.now() - began;
  const askMs = await timedQuestions(() => client.ask('textDocument/definition', file, text, question));
  await client.close();
  await executor.close();
  return { startMs, askMs, rung: executor.contained?.()?.rung ?? null };
}

async function bare() {
  const began = performance.now();
  const child = spawn(process.execPath, [TSLS, '--stdio'], { cwd: root, stdio: ['pipe', 'pipe', 'ignore'] });
  const connection = rpc.createMessageConnection(
    new rpc.StreamMessageReader(child.stdout),
    new rpc.StreamMessageWriter(child.stdin),
  );
  connection.onRequest(() => null);
  connection.listen();
  const rootUri = pathToFileURL(root).href;
  await connection.sendRequest('initialize', { processId: null, rootUri, capabilities: {}, initializationOptions });
  await connection.sendNotification('initialized', {});
  const uri = pathToFileURL(file).href;
  await connection.sendNotification('textDocument/didOpen', {
    textDocument: { uri, languageId: 'typescript', version: 1, text },
  });
  const ask = () => connection.sendRequest('textDocument/definition', { textDocument: { uri }, ...question });
  await ask();
  const startMs = performance.now() - began;
  const askMs = await timedQuestions(ask);
  await connection.sendRequest('shutdown');
  await connection.sendNotification('exit');
  connection.dispose();
  child.kill();
  return { startMs, askMs };
}

const through = await harness();
const direct = await bare();
console.log(
  JSON.stringify({
    bench: 'lsp',
    questions: QUESTIONS,
    rung: through.rung,
    harness: { startMs: +through.startMs.toFixed(1), definitionMs: +through.askMs.toFixed(3) },
    bare: { startMs: +direct.startMs.toFixed(1), definitionMs: +direct.askMs.toFixed(3) },
    definitionRatio: +(through.askMs / direct.askMs).toFixed(2),
  }),
);
