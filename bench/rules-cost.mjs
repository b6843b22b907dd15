// What the write rules cost SQLite as generators (one set for both backends) against the
// rules as they were before, as direct calls: raw step commits on the main thread, the
// two alternated five times in one process, the median of each. Needs the build of the
// commit before in BEFORE_DIST:
//   git worktree add /tmp/before 1a21523 && (cd /tmp/before && npm ci && npm run build)
//   BEFORE_DIST=/tmp/before/dist node bench/rules-cost.mjs
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { openWriter } from '../dist/store/sqlite/schema.js';
import { sqliteWriter } from '../dist/store/sqlite/writer.js';
import { rootInput, stepInput } from './support/rows.mjs';

const before = process.env.BEFORE_DIST;
if (!before) {
  console.log(JSON.stringify({ bench: 'rules-cost', skipped: 'set BEFORE_DIST to the dist of the commit before' }));
  process.exit(0);
}
const old = await import(pathToFileURL(join(before, 'store', 'writer.js')).href);
const { openWriter: openBefore } = await import(pathToFileURL(join(before, 'store', 'schema.js')).href);
const COMMITS = Number(process.env.BENCH_COMMITS ?? 6_000);

function rate(open, make) {
  const db = open(join(mkdtempSync(join(tmpdir(), 'io-harness-bench-')), 'runs.db'));
  const writer = make(db);
  const { generation } = writer.call('createRoot', rootInput('raw', 'bench'));
  const fence = { runId: 'raw', generation, owner: 'bench' };
  const commit = db.transaction((seq) => writer.call('commitStep', stepInput(fence, seq)));
  const start = performance.now();
  for (let seq = 1; seq <= COMMITS; seq++) commit.immediate(seq);
  const perSecond = COMMITS / ((performance.now() - start) / 1000);
  db.close();
  return perSecond;
}

const was = [];
const now = [];
for (let i = 0; i < 5; i++) {
  was.push(
    rate(openBefore, (db) => {
      // The writer before had a method per operation.
      const writer = new old.StoreWriter(db);
      return { call: (op, input) => writer[op](input) };
    }),
  );
  now.push(rate(openWriter, (db) => sqliteWriter(db)));
}
const median = (values) => values.sort((a, b) => a - b)[2];
console.log(
  JSON.stringify({
    bench: 'rules-cost',
    commits: COMMITS,
    beforePerSecond: Math.round(median(was)),
    afterPerSecond: Math.round(median(now)),
    ratio: +(median(now) / median(was)).toFixed(3),
  }),
);
