// The install path as a user walks it: pack the package, install the tarball (and zod) into
// an empty project, and run the README's quick start there, against a scripted model on
// loopback in place of a vendor. Run by .ci/run after the test suite (the package's dist/
// is built by then; it is built here when it is not). Exits non-zero, saying why, when any
// part fails; removes what it made.
import { execFileSync, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = fileURLToPath(new URL('..', import.meta.url));
/** Runs node with `args`; its output and exit status once it exits (killed after two minutes). */
function runNode(args, options) {
  const child = spawn(process.execPath, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
  return new Promise((resolve) =>
    child.once('exit', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    }),
  );
}

const npm = (args, cwd) => execFileSync('npm', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });

if (!existsSync(join(HERE, 'dist', 'index.js'))) npm(['run', 'build'], HERE);
const { ScriptedModelServer, wireToolResults } = await import(join(HERE, 'dist', 'testing', 'index.js'));

const dir = mkdtempSync(join(tmpdir(), 'io-harness-pack-'));
const model = await ScriptedModelServer.start((call) => {
  const [result] = wireToolResults(call);
  return result
    ? { text: `Take a coat: ${result.content} in Oslo.` }
    : { toolCalls: [{ name: 'weather', args: { city: 'Oslo' } }] };
});
try {
  const [packed] = JSON.parse(npm(['pack', '--ignore-scripts', '--json', '--pack-destination', dir], HERE));
  console.log(`packed ${packed.filename}: ${packed.entryCount} files, ${packed.size} bytes`);
  const project = join(dir, 'project');
  execFileSync('mkdir', [project]);
  // npm 11 runs a dependency's install script only where the project allows it: better-sqlite3's builds its binary.
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name: 'my-project', type: 'module', private: true, allowScripts: { 'better-sqlite3': true } }),
  );
  const zod = JSON.parse(readFileSync(join(HERE, 'package.json'), 'utf8')).dependencies.zod;
  npm(['install', '--no-audit', '--no-fund', '--prefer-offline', join(dir, packed.filename), `zod@${zod}`], project);
  copyFileSync(join(HERE, 'examples', 'hello', 'main.mjs'), join(project, 'hello.mjs'));
  // Run apart, not synchronously: the scripted model answers from this process.
  const run = await runNode(['hello.mjs'], {
    cwd: project,
    env: { ...process.env, OPENAI_API_KEY: 'scripted', OPENAI_MODEL: 'scripted', OPENAI_BASE_URL: `${model.url}/v1` },
  });
  process.stdout.write(run.stdout);
  process.stderr.write(run.stderr);
  const wanted = ['Take a coat: snow, -3 °C in Oslo.', 'finished in 2 steps', 'weather -> snow, -3 °C'];
  const missing = wanted.filter((text) => !run.stdout.includes(text));
  if (run.status !== 0 || missing.length > 0) {
    console.error(
      `the quick start did not run as the README says (exit ${run.status}); missing: ${missing.join(' | ')}`,
    );
    process.exitCode = 1;
  } else console.log('the quick start ran from the installed tarball');
} finally {
  await model.close();
  if (process.env.IO_HARNESS_KEEP_PACK) console.log(`kept ${dir}`);
  else rmSync(dir, { recursive: true, force: true });
}
