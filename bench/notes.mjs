// node bench/notes.mjs — what durable memory costs, at the default cap of 64 notes and at 4,096.
//  - Ranking: the memory block for a run's goal and the paths it has named, when the notes
//    outgrow the block's share (so every note is scored and the best that fit are kept),
//    p50 of 501 after 50 warm. Beside it, in the same run, serialising the same notes as
//    JSON: a baseline for "one pass over the notes".
//  - A capped write that evicts: Memory.remember of a new key into a workspace at its cap,
//    in a real store file (the restatement check, the eviction of the least drawn-on note,
//    the insert, in one transaction), p50 of 201 after 20 warm. Beside it, the same write
//    under a key already held (no eviction), in the same store.
// The 4,096 case is the test that nothing here is quadratic: its ratio to the 64 case should
// be near 64 (linear) or below, never near 4,096.

import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Memory, Store } from 'io-harness';
import { memoryBlock, runTerms } from '../dist/runtime/context/memory.js';
import { tempDir } from './support/temp.mjs';

const p50 = (list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)];
const timed = (body, rounds, warm) => {
  const samples = [];
  for (let round = 0; round < warm + rounds; round++) {
    const start = performance.now();
    body(round);
    if (round >= warm) samples.push(performance.now() - start);
  }
  return p50(samples);
};

const topics = ['parser', 'billing', 'renderer', 'scheduler', 'storage', 'network', 'auth', 'search'];
const text = (n) =>
  `The ${topics[n % topics.length]} module: observation ${n} about how it behaves under load, kept from an earlier investigation of src/${topics[n % topics.length]}/index.ts.`;

const figures = {};
for (const count of [64, 4096]) {
  const notes = Array.from({ length: count }, (_, id) => ({
    id,
    scope: '/ws',
    key: `note-${id}`,
    kind: 'fact',
    text: text(id),
    pinned: false,
    runs: id % 7,
    writtenBy: null,
    createdAt: 0,
    updatedAt: 0,
  }));
  const terms = runTerms('fix the parser crash on empty input', ['src/parser/index.ts', 'test/parser.test.ts']);
  // A share a quarter of the notes fit in: the ranking decides.
  const most = Math.floor((notes.reduce((sum, note) => sum + note.text.length + 20, 0) / 4) | 0);
  const rankMs = timed(() => memoryBlock(notes, terms, most), 501, 50);
  const serialiseMs = timed(() => JSON.stringify(notes), 501, 50);

  const store = await Store.open(join(tempDir(), 'notes.db'));
  const memory = Memory.of(store, { workspace: tempDir(), cap: count });
  for (let n = 0; n < count; n++) memory.remember(`note-${n}`, text(n));
  let next = count;
  const evictMs = timed(
    () => {
      const written = memory.remember(`note-${next}`, text(next));
      next++;
      if (written.status !== 'written' || !written.evicted) throw new Error('the write at the cap did not evict');
    },
    201,
    20,
  );
  const replaceMs = timed((round) => memory.remember(`note-${next - 1 - (round % 10)}`, text(round)), 201, 20);
  store.close();
  figures[count] = { rankMs, serialiseMs, evictMs, replaceMs };
}

const round = (value, places = 3) => Number(value.toFixed(places));
console.log(
  JSON.stringify({
    bench: 'notes',
    rankMsAt64: round(figures[64].rankMs),
    rankMsAt4096: round(figures[4096].rankMs),
    rankOverSerialiseAt64: round(figures[64].rankMs / figures[64].serialiseMs, 2),
    rankOverSerialiseAt4096: round(figures[4096].rankMs / figures[4096].serialiseMs, 2),
    evictingWriteMsAt64: round(figures[64].evictMs),
    evictingWriteMsAt4096: round(figures[4096].evictMs),
    evictOverReplaceAt64: round(figures[64].evictMs / figures[64].replaceMs, 2),
    evictOverReplaceAt4096: round(figures[4096].evictMs / figures[4096].replaceMs, 2),
    rank4096Over64: round(figures[4096].rankMs / figures[64].rankMs, 1),
    write4096Over64: round(figures[4096].evictMs / figures[64].evictMs, 1),
    reference: { rankMsAt64: 1.106, evictingWriteMsAt64: 0.965, evictingWriteMsAt4096: 73 },
  }),
);
