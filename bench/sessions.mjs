// node bench/sessions.mjs — what a session's turns cost beyond the model, on a model that
// answers at once (in-process), so every millisecond measured is the harness's.
//  - A reply turn (`hi`: one completion, no step) against, in the same run, a work turn of
//    two steps (a read, then the answer) and a one-shot runWith of the same greeting (a
//    run that commits its one step). First with no supervisor given (a session opened
//    without one: its turns, like runWith, on the store's shared supervisor; before it
//    existed each started and closed a supervisor of its own), then on one supervisor kept
//    running (Session.open(store, root, { supervisor })). 21 of each after 3 unmeasured; p50.
//  - Assembling the next turn's transcript (session.history(), what turn() does before it
//    starts the run) at 50, 100, 150 and 200 work turns: p50 of 21 calls each, and per turn.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Policy, runWith, Session, Store, Supervisor, TaskContract } from 'io-harness';
import { tempDir } from './support/temp.mjs';

const ROUNDS = 21;
const WARM = 3;
const TURNS = Number(process.env.BENCH_TURNS ?? 200);
const root = tempDir('io-harness-bench-sessions-');
writeFileSync(join(root, 'notes.txt'), 'codeword: heron\n');
const store = await Store.open(join(tempDir(), 'runs.db'));
const provider = { kind: 'module', module: fileURLToPath(new URL('./support/session-model.mjs', import.meta.url)) };
const policy = Policy.default().layer('bench').allowRead('**');
const p50 = (list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)];

async function timed(body) {
  const samples = [];
  for (let round = 0; round < WARM + ROUNDS; round++) {
    const start = performance.now();
    await body();
    if (round >= WARM) samples.push(performance.now() - start);
  }
  return Number(p50(samples).toFixed(2));
}

// Each case in a session of its own, so no case pays for another's history.
async function turns(options, text, kind) {
  const session = await Session.open(store, root, options);
  return timed(async () => {
    const turn = await session.turn(text, { provider, policy });
    if (turn.kind !== kind) throw new Error(`expected a ${kind} turn, got ${turn.kind}`);
  });
}
const replyTurn = await turns({}, 'hi', 'reply');
const workTurn = await turns({}, 'read the notes', 'work');
// The same, on one supervisor the embedder keeps running (Session.open(store, root, { supervisor })).
const supervisor = await Supervisor.start(store);
const replyTurnKept = await turns({ supervisor }, 'hi', 'reply');
const workTurnKept = await turns({ supervisor }, 'read the notes', 'work');
const oneShotKept = await timed(async () => {
  const handle = supervisor.run({ contract: TaskContract.workspace('hi', root), provider, policy });
  if ((await handle.result).status !== 'finished') throw new Error('the run did not finish');
});
const oneShot = await timed(async () => {
  const result = await runWith(TaskContract.workspace('hi', root), provider, store, policy);
  if (result.outcome.kind !== 'finished') throw new Error(result.outcome.kind);
});

// A long conversation: TURNS work turns (on the kept supervisor), the transcript assembled at four lengths.
const long = await Session.open(store, root, { supervisor });
const assembly = {};
for (let turn = 1; turn <= TURNS; turn++) {
  await long.turn(`read the notes, turn ${turn}`, { provider, policy });
  if (turn % (TURNS / 4) === 0) {
    let entries = 0;
    const ms = await timed(async () => {
      entries = long.history().length;
    });
    assembly[turn] = { ms, entries, perTurnUs: Number(((ms * 1000) / turn).toFixed(1)) };
  }
}
await supervisor.close();
store.close();
console.log(
  JSON.stringify({
    bench: 'sessions',
    p50Ms: { replyTurn, workTurn, oneShotRunWith: oneShot, replyTurnKept, workTurnKept, oneShotKept },
    replyOverWork: Number((replyTurn / workTurn).toFixed(2)),
    replyOverOneShot: Number((replyTurn / oneShot).toFixed(2)),
    keptReplyOverWork: Number((replyTurnKept / workTurnKept).toFixed(2)),
    keptReplyOverOneShot: Number((replyTurnKept / oneShotKept).toFixed(2)),
    ownOverKept: Number((replyTurn / replyTurnKept).toFixed(2)),
    assembly,
  }),
);
