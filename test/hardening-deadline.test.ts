/**
 * The wall-clock ceiling holds inside a step: at the deadline the model call in flight is
 * aborted, a running command is killed, a search is stopped and any other call is left
 * behind, and the run ends as budget-exhausted on the wall clock. A regular expression
 * that backtracks catastrophically runs on the search pool, where it is stopped.
 *
 * Every case is a real run (a SQLite store file, real commands, the search pool) over the
 * scripted model server on loopback. Nothing here measures how long anything took: where
 * the deadline is the point, the run is driven in-process on a clock the test moves past
 * it at a chosen moment (the model's request, a command that has started, a call that has
 * begun), so how fast the machine is decides nothing. The search limit is the search
 * pool's own, in real time.
 */
import { existsSync, readFileSync, watch, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../dist/clock.js';
import { Policy, runWith, type Store, TaskContract } from '../dist/index.js';
import { runInProcess } from './support/in-process.js';
import { noneLeftUnder } from './support/processes.js';
import { later, openStore, serve, tempWorkspace, turns } from './support/workspace.js';

const WALL_SECS = 5;
const TIMEOUT = 60_000;

/** The budget-exhausted events of a run. */
function crossings(store: Store, runId: string) {
  return store.events(runId).filter((event) => event.type === 'budget-exhausted');
}

/** A file's text, or the empty string while it is not there. */
function readIfThere(path: string): string {
  return existsSync(path) ? readFileSync(path, 'utf8').trim() : '';
}

/** The run's store file and its write-ahead log, as bytes. */
function storeBytes(store: Store): string {
  const parts = [store.path, `${store.path}-wal`].filter((path) => existsSync(path));
  return parts.map((path) => readFileSync(path).toString('latin1')).join('');
}

describe('the wall clock inside a step', () => {
  it(
    'aborts a model call in flight at the deadline and ends the run on the wall clock',
    async () => {
      const root = tempWorkspace({ 'a.txt': 'hello\n' });
      const clock = new ManualClock(Date.now());
      // The model never answers, and the wall clock passes the deadline while it is asked.
      const { server, provider } = await serve(() => {
        clock.advance(WALL_SECS * 1000);
        return { fault: 'hang' };
      });
      const contract = TaskContract.workspace('say hello', root).withBudget({ wallSecs: WALL_SECS });
      const { runId, exit, store } = await runInProcess(contract, provider, clock);
      expect(exit).toEqual({ kind: 'ended', status: 'budget-exhausted' });
      expect(store.run(runId)?.status).toBe('budget-exhausted');
      expect(crossings(store, runId)).toMatchObject([{ ceiling: 'wallMs', account: runId, limit: WALL_SECS * 1000 }]);
      // The step had nothing to commit: no completion came.
      expect(store.steps(runId)).toEqual([]);
      expect(server.calls).toHaveLength(1);
    },
    TIMEOUT,
  );

  it(
    'kills a command running at the deadline, keeps the write before it, and marks the call not reached',
    async () => {
      // A command that says it ran (its pid, from /proc/self), then waits five minutes.
      const root = tempWorkspace({
        'sleeper.mjs':
          "import { readlinkSync, writeFileSync } from 'node:fs';\nwriteFileSync('pid', readlinkSync('/proc/self'));\nsetTimeout(() => {}, 300_000);\n",
      });
      const { provider } = await serve(
        turns([
          {
            text: 'working',
            toolCalls: [
              { name: 'write_file', args: { path: 'notes.txt', content: 'written before the deadline\n' } },
              { name: 'exec', args: { argv: ['node', 'sleeper.mjs'], timeout_secs: 600 } },
              { name: 'read_file', args: { path: 'notes.txt' } },
            ],
          },
          { text: 'done' },
        ]),
      );
      // The wall clock passes the deadline once the command has said it runs.
      const clock = new ManualClock(Date.now());
      const watcher = watch(root, () => {
        if (readIfThere(join(root, 'pid')) === '') return;
        watcher.close();
        clock.advance(WALL_SECS * 1000);
      });
      later(() => watcher.close());
      const policy = Policy.default().layer('test').allowExec('node sleeper.mjs');
      const contract = TaskContract.workspace('write and wait', root).withBudget({ wallSecs: WALL_SECS });
      const result = await runInProcess(contract, provider, clock, { policy });
      const { store } = result;
      expect(result.exit).toEqual({ kind: 'ended', status: 'budget-exhausted' });
      expect(store.run(result.runId)?.status).toBe('budget-exhausted');
      expect(crossings(store, result.runId)).toMatchObject([{ ceiling: 'wallMs', account: result.runId }]);
      const events = store.events(result.runId);
      expect(
        events.some((event) => event.type === 'policy-decision' && event.act === 'exec' && event.effect === 'allow'),
      ).toBe(true);
      // The command ran (it wrote its pid) and is gone: nothing is left working in the workspace.
      expect(Number(readFileSync(join(root, 'pid'), 'utf8').trim())).toBeGreaterThan(0);
      expect(await noneLeftUnder(root)).toBe(true);
      // The step committed what it did: the write and its diff, the killed command, the call not reached.
      const [step] = store.steps(result.runId);
      const observations = step?.observations ?? [];
      expect(observations.map((observation) => observation.name)).toEqual(['write_file', 'exec', 'read_file']);
      expect(observations[1]?.content).toContain('wallMs ceiling');
      expect(observations[1]?.isError).toBe(true);
      expect(observations[2]?.content).toMatch(/^not run: the wallMs ceiling/);
      expect(store.fileChanges(result.runId).map((change) => change.path)).toEqual(['notes.txt']);
      expect(store.patch(result.runId)).toContain('+written before the deadline');
      expect(readFileSync(join(root, 'notes.txt'), 'utf8')).toBe('written before the deadline\n');
    },
    TIMEOUT,
  );

  it(
    'leaves behind a call that does not listen to the deadline, whatever the tool',
    async () => {
      const root = tempWorkspace();
      // read_messages waits on the inbox (up to 30 s) and listens to a cancel, not to the clock.
      const { provider } = await serve(
        turns([{ text: 'waiting', toolCalls: [{ name: 'read_messages', args: { wait_secs: 30 } }] }, { text: 'done' }]),
      );
      const contract = TaskContract.workspace('wait for mail', root).withBudget({ wallSecs: WALL_SECS });
      // The wall clock passes the deadline once the wait has begun.
      const clock = new ManualClock(Date.now());
      const result = await runInProcess(contract, provider, clock, {
        onLive: (data) => {
          if (data.type === 'tool-call-start') clock.advance(WALL_SECS * 1000);
        },
      });
      const { store } = result;
      expect(result.exit).toEqual({ kind: 'ended', status: 'budget-exhausted' });
      expect(store.run(result.runId)?.status).toBe('budget-exhausted');
      expect(crossings(store, result.runId)).toMatchObject([{ ceiling: 'wallMs', account: result.runId }]);
      const [observation] = store.steps(result.runId)[0]?.observations ?? [];
      expect(observation).toMatchObject({ name: 'read_messages', isError: true });
      expect(observation?.content).toMatch(/^stopped: the wallMs ceiling of run .* was reached while this call ran/);
    },
    TIMEOUT,
  );
});

describe('a search that backtracks catastrophically', () => {
  /** A workspace whose file has long lines of a's that end in a character the pattern cannot match. */
  function backtracking(): string {
    const root = tempWorkspace();
    writeFileSync(join(root, 'aaa.txt'), `${`${'a'.repeat(64)}!\n`.repeat(50)}`);
    writeFileSync(join(root, 'secret.env'), 'TOKEN=sk-deadline-0123456789\n');
    return root;
  }
  const PATTERN = '(a+)+$';

  it(
    'is stopped at the run deadline, and the run ends on the wall clock',
    async () => {
      const root = backtracking();
      const { provider } = await serve(
        turns([{ text: 'searching', toolCalls: [{ name: 'grep', args: { pattern: PATTERN } }] }, { text: 'done' }]),
      );
      const contract = TaskContract.workspace('find the a lines', root).withBudget({ wallSecs: WALL_SECS });
      // The wall clock passes the deadline once the search has begun, well inside the search pool's own limit.
      const clock = new ManualClock(Date.now());
      const result = await runInProcess(contract, provider, clock, {
        onLive: (data) => {
          if (data.type === 'tool-call-start') clock.advance(WALL_SECS * 1000);
        },
      });
      const { store } = result;
      expect(result.exit).toEqual({ kind: 'ended', status: 'budget-exhausted' });
      expect(store.run(result.runId)?.status).toBe('budget-exhausted');
      expect(crossings(store, result.runId)).toMatchObject([{ ceiling: 'wallMs', account: result.runId }]);
      const [observation] = store.steps(result.runId)[0]?.observations ?? [];
      expect(observation).toMatchObject({ name: 'grep', isError: true });
      expect(observation?.content).toContain('the grep was stopped before it finished');
    },
    TIMEOUT,
  );

  it(
    'is stopped at the search limit with a generous wall clock, says why, and the run goes on to finish',
    async () => {
      const root = backtracking();
      const store = await openStore();
      const { provider } = await serve(
        turns([
          { text: 'searching', toolCalls: [{ name: 'grep', args: { pattern: PATTERN } }] },
          // After the stopped search, an ordinary one: the pool has a fresh thread for it.
          { text: 'again', toolCalls: [{ name: 'grep', args: { pattern: '^TOKEN=' } }] },
          { text: 'done' },
        ]),
      );
      // The policy keeps secret.env out of every search.
      const policy = Policy.default().layer('secrets').denyRead('*.env');
      const contract = TaskContract.workspace('find the a lines', root).withBudget({ wallSecs: 300 });
      const result = await runWith(contract, provider, store, policy);
      expect(result.outcome.kind).toBe('finished');
      const steps = store.steps(result.runId);
      const first = steps[0]?.observations[0];
      expect(first).toMatchObject({ name: 'grep', isError: true });
      expect(first?.content).toContain('the search was stopped after 10 s');
      expect(first?.content).toContain(JSON.stringify(PATTERN));
      expect(first?.content).toContain('simplify it');
      const second = steps[1]?.observations[0];
      expect(second?.content).toMatch(
        /^no matches for \/\^TOKEN=\/ in the workspace: 1 file searched; 1 path withheld by the policy\.$/,
      );
      expect(crossings(store, result.runId)).toEqual([]);
      expect(storeBytes(store)).not.toContain('sk-deadline-0123456789');
    },
    TIMEOUT,
  );
});
