// Policy decisions per second for a 50-rule, 3-layer policy on realistic paths and argvs
// (path decisions and argv decisions, which resolve their program, also timed apart),
// and the time to parse and check a 10-stage shell pipeline. Decisions resolve paths
// against a real workspace (the deepest existing ancestor's real path), as a run does.
// The baseline is the bare matcher the decisions are built on (minimatch on the same
// subject and pattern), measured in the same run.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { checkArgv, checkShell, Policy } from 'io-harness';
import { minimatch } from 'minimatch';

const root = mkdtempSync(join(tmpdir(), 'io-harness-bench-policy-'));
for (const dir of ['src/app', 'src/lib', 'test', 'secrets', 'docs']) mkdirSync(join(root, dir), { recursive: true });
for (let i = 0; i < 20; i++) writeFileSync(join(root, 'src', 'app', `module-${i}.ts`), 'export {};\n');

let policy = Policy.default().layer('org');
const orgRules = [
  ['denyRead', 'secrets/**'],
  ['denyRead', '**/.env'],
  ['denyRead', '**/*.pem'],
  ['denyWrite', '.git/**'],
  ['denyWrite', 'node_modules/**'],
  ['denyExec', 'curl*'],
  ['denyExec', 'wget*'],
  ['denyExec', 'ssh*'],
  ['denyExec', 'scp*'],
  ['denyExec', 'rm -rf*'],
  ['denyExec', 'sudo*'],
  ['denyExec', 'npm publish*'],
  ['denyExec', 'git push*'],
  ['denyNet', '*.internal'],
  ['denyNet', '169.254.169.254'],
  ['denyRead', '**/id_rsa'],
  ['denyWrite', '**/*.lock'],
];
for (const [method, pattern] of orgRules) policy = policy[method](pattern);
policy = policy.layer('project');
const projectRules = [
  ['allowRead', '**'],
  ['allowWrite', 'src/**'],
  ['allowWrite', 'test/**'],
  ['allowWrite', 'docs/**'],
  ['allowExec', 'npm test*'],
  ['allowExec', 'npm run lint*'],
  ['allowExec', 'npm run build*'],
  ['allowExec', 'node --test*'],
  ['allowExec', 'git status*'],
  ['allowExec', 'git diff*'],
  ['allowExec', 'git log*'],
  ['allowExec', 'ls*'],
  ['allowExec', 'cat*'],
  ['allowExec', 'grep*'],
  ['allowExec', 'wc*'],
  ['allowExec', 'head*'],
  ['allowExec', 'tail*'],
  ['askExec', 'git commit*'],
  ['askExec', 'npm install*'],
  ['allowNet', 'registry.npmjs.org'],
];
for (const [method, pattern] of projectRules) policy = policy[method](pattern);
policy = policy.layer('session');
const sessionRules = [
  ['denyWrite', 'src/lib/**'],
  ['allowWrite', 'src/app/**'],
  ['askWrite', 'package.json'],
  ['allowExec', 'tsc*'],
  ['denyExec', 'npm run deploy*'],
  ['allowExec', 'sort*'],
  ['allowExec', 'uniq*'],
  ['allowExec', 'cut*'],
  ['allowExec', 'tr*'],
  ['allowExec', 'sed -n*'],
  ['allowExec', 'echo*'],
  ['denyRead', 'docs/private/**'],
  ['allowExec', 'find . -name*'],
];
for (const [method, pattern] of sessionRules) policy = policy[method](pattern);
const ruleCount = policy.layers.reduce((sum, layer) => sum + layer.rules.length, 0);

const acts = [
  { kind: 'read', path: 'src/app/module-3.ts' },
  { kind: 'write', path: 'src/app/module-7.ts' },
  { kind: 'write', path: 'src/lib/util.ts' },
  { kind: 'read', path: 'secrets/prod.env' },
  { kind: 'read', path: '../outside.txt' },
  { kind: 'write', path: 'test/new.test.ts' },
  { kind: 'exec', argv: ['npm', 'test', '--', '--grep', 'parser'] },
  { kind: 'exec', argv: ['git', 'status', '--short'] },
  { kind: 'exec', argv: ['curl', 'https://example.com'] },
  { kind: 'exec', argv: ['npm', 'publish'] },
  { kind: 'net', host: 'registry.npmjs.org', port: 443 },
  { kind: 'write', path: 'package.json' },
];

function percentiles(samples) {
  samples.sort((a, b) => a - b);
  const at = (p) => samples[Math.min(samples.length - 1, Math.floor((samples.length * p) / 100))];
  return { p50: at(50), p99: at(99) };
}

// Warm up, then time each decision on its own.
for (let i = 0; i < 20_000; i++) policy.decide(acts[i % acts.length], root);
const decisionSamples = [];
const started = performance.now();
const N = 60_000;
for (let i = 0; i < N; i++) {
  const t = performance.now();
  policy.decide(acts[i % acts.length], root);
  decisionSamples.push((performance.now() - t) * 1000);
}
const elapsed = performance.now() - started;
const decisions = percentiles(decisionSamples);

// Path decisions and argv decisions apart: an argv decision resolves its program (PATH, or
// the real path of a path) before the rules are tried.
function timed(subset) {
  const samples = [];
  for (let i = 0; i < 30_000; i++) {
    const act = subset[i % subset.length];
    const t = performance.now();
    policy.decide(act, root);
    samples.push((performance.now() - t) * 1000);
  }
  return percentiles(samples);
}
const pathDecisions = timed(acts.filter((act) => act.kind === 'read' || act.kind === 'write'));
const execDecisions = timed([
  ...acts.filter((act) => act.kind === 'exec'),
  { kind: 'exec', argv: ['/usr/bin/git', 'status'] },
  { kind: 'exec', argv: ['./node_modules/.bin/vitest', 'run'] },
]);

// Baseline: one minimatch of a relative path against one glob, the unit a path decision repeats.
const baseSamples = [];
for (let i = 0; i < N; i++) {
  const t = performance.now();
  minimatch('src/app/module-3.ts', 'src/**', { dot: true });
  baseSamples.push((performance.now() - t) * 1000);
}
const base = percentiles(baseSamples);

const argv = ['npm', 'test', '--', '--grep', 'parser'];
const argvSamples = [];
for (let i = 0; i < 20_000; i++) {
  const t = performance.now();
  checkArgv(argv, policy, root);
  argvSamples.push((performance.now() - t) * 1000);
}
const argvCheck = percentiles(argvSamples);

const line =
  "cat src/app/module-1.ts | grep export | sort | uniq -c | sort -rn | head -n 20 | cut -c1-80 | tr a-z A-Z | sed -n '1,10p' | wc -l > src/app/out.txt";
const shellSamples = [];
for (let i = 0; i < 5_000; i++) {
  const t = performance.now();
  const check = checkShell(line, policy, root);
  shellSamples.push((performance.now() - t) * 1000);
  if (i === 0 && !check.ok) throw new Error(`the benchmark pipeline was refused: ${check.reason}`);
}
const shell = percentiles(shellSamples);

console.log(
  JSON.stringify({
    bench: 'policy',
    rules: ruleCount,
    layers: policy.layers.length,
    decisionsPerSec: Math.round(N / (elapsed / 1000)),
    decisionP50Us: +decisions.p50.toFixed(2),
    decisionP99Us: +decisions.p99.toFixed(2),
    pathDecisionP50Us: +pathDecisions.p50.toFixed(2),
    argvDecisionP50Us: +execDecisions.p50.toFixed(2),
    minimatchP50Us: +base.p50.toFixed(2),
    argvCheckP50Us: +argvCheck.p50.toFixed(2),
    shell10StageP50Us: +shell.p50.toFixed(2),
    shell10StageP99Us: +shell.p99.toFixed(2),
  }),
);
rmSync(root, { recursive: true, force: true });
