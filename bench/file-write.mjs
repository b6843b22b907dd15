// What a file tool's write costs now that it follows no link between its check and its act
// (src/runtime/workspace/beneath.ts): write_file's file work — the plan (resolve the path,
// read the file, diff it) and the act (a temporary file renamed over it) — on a 7 KB file
// three directories deep, through the Workspace the harness uses. The baseline, in the same
// run, is the same work done by path the way the harness did it before: resolve once, then
// stat, read, mkdir, write and rename by name. The act alone (the temporary file and its
// rename) is also timed both ways. They alternate five times; the median of each is quoted. With BEFORE_DIST set to the build of the commit before, that build's own
// Workspace is timed too:
//   git worktree add /tmp/before 5568517 && (cd /tmp/before && npm ci && npm run build)
//   BEFORE_DIST=/tmp/before/dist node bench/file-write.mjs
import {
  chmodSync,
  closeSync,
  constants,
  fstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { replaceBeneath, walksByDescriptor } from '../dist/runtime/workspace/beneath.js';
import { unifiedDiff, Workspace } from '../dist/runtime/workspace/files.js';
import { tempDir } from './support/temp.mjs';

const WRITES = Number(process.env.BENCH_WRITES ?? 2000);
const ROUNDS = 5;
const FILES = 50;

const root = realpathSync(tempDir('io-harness-bench-write-'));
const directory = join(root, 'src', 'app', 'lib');
mkdirSync(directory, { recursive: true });
const lines = Array.from({ length: 250 }, (_, i) => `export const value${i} = ${i} * 2; // line ${i}`);
const original = `${lines.join('\n')}\n`;
const paths = Array.from({ length: FILES }, (_, i) => `src/app/lib/module-${String(i).padStart(2, '0')}.js`);
for (const path of paths) writeFileSync(join(root, path), original);
const content = (n) => original.replace('value0 = 0', `value0 = ${n}`);

/** Each write through a Workspace: plan (resolve, read, diff), then apply. */
function throughWorkspace(workspace) {
  return (path, n) => {
    const planned = workspace.planWrite({ path, content: content(n) });
    if (!planned.ok) throw new Error(planned.result.content);
    workspace.apply(planned.change);
  };
}

/** The act alone, walked beneath the root with no link followed: what the new checks cost. */
function actBeneath(path, n) {
  const done = replaceBeneath(root, path, content(n));
  if (!done.ok) throw new Error(done.reason);
}

/** The act alone by path, as before: resolve once, then mkdir, stat, write and rename by name. */
function actByPath(path, n) {
  replaceByPath(realpathSync(join(root, path)), content(n), n);
}

function replaceByPath(target, after, n) {
  mkdirSync(dirname(target), { recursive: true });
  const mode = statSync(target).mode;
  const temporary = join(dirname(target), `.${basename(target)}.${process.pid}.${n}.tmp`);
  try {
    writeFileSync(temporary, after, { flag: 'wx' });
    chmodSync(temporary, mode & 0o7777);
    renameSync(temporary, target);
  } catch (problem) {
    rmSync(temporary, { force: true });
    throw problem;
  }
}

/** The same work by path, as the harness did it before: resolve once, then act by name. */
function byPath(path, n) {
  const absolute = realpathSync(join(root, path));
  const stats = statSync(absolute);
  if (!stats.isFile()) throw new Error('not a file');
  const fd = openSync(absolute, constants.O_RDONLY | constants.O_NONBLOCK);
  let before;
  try {
    if (fstatSync(fd).nlink > 1) throw new Error('linked');
    before = readFileSync(fd, 'utf8');
  } finally {
    closeSync(fd);
  }
  const after = content(n);
  unifiedDiff(relative(root, absolute), before, after);
  replaceByPath(realpathSync(join(root, path)), after, n);
}

// Every write gives its file new content (a write of the same content is no write).
let written = 0;
function timePerWrite(write) {
  const start = performance.now();
  for (let i = 0; i < WRITES; i++) write(paths[i % FILES], ++written);
  return ((performance.now() - start) * 1000) / WRITES;
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const round2 = (value) => Math.round(value * 100) / 100;

const kinds = {
  now: throughWorkspace(new Workspace({ root })),
  baseline: byPath,
  actBeneath,
  actByPath,
};
if (process.env.BEFORE_DIST) {
  const old = await import(pathToFileURL(join(process.env.BEFORE_DIST, 'runtime', 'workspace', 'files.js')).href);
  kinds.before = throughWorkspace(new old.Workspace({ root }));
}
const times = Object.fromEntries(Object.keys(kinds).map((kind) => [kind, []]));
// Warm up each, then alternate them round by round.
for (const write of Object.values(kinds)) timePerWrite(write);
for (let round = 0; round < ROUNDS; round++) {
  for (const [kind, write] of Object.entries(kinds)) times[kind].push(timePerWrite(write));
}
const us = Object.fromEntries(Object.entries(times).map(([kind, list]) => [kind, round2(median(list))]));
console.log(
  JSON.stringify({
    bench: 'file-write',
    writes: WRITES,
    rounds: ROUNDS,
    byDescriptor: walksByDescriptor(),
    usPerWrite: us,
    nowVsBaseline: round2(us.now / us.baseline),
    actVsByPath: round2(us.actBeneath / us.actByPath),
    ...(us.before === undefined ? {} : { nowVsBefore: round2(us.now / us.before) }),
  }),
);
