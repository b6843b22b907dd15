/**
 * Undo: restore points written before the file, rewind after a real SIGKILL and a
 * resume in another process, rewindRun leaving the trace and the ledger as they were,
 * and rewindStep reversing one step's hunks or refusing, changing nothing. Runs on both
 * backends (vitest.config.ts): on PostgreSQL every read, and every rewind, is a promise.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  answerQuestion,
  type HttpProviderSpec,
  Policy,
  rewind,
  rewindRun,
  rewindStep,
  runWith,
  Supervisor,
  TaskContract,
} from '../dist/index.js';
import { assistantTurns, type ModelScript, ScriptedModelServer } from '../dist/testing/index.js';
import { type EitherStore, freshStore, openAt, openFresh } from './support/backends.js';
import { drive, failure, later, tempWorkspace } from './support/workspace.js';

describe('rewind after a crash', () => {
  it('restores a modified file and deletes a created one after SIGKILL and resume; rewindRun keeps steps and ledger', async () => {
    const root = tempWorkspace({ 'kept.txt': 'original kept\n', 'late.txt': 'original late\n' });
    const location = await freshStore();
    const base = {
      store: location,
      wireScript: 'workspace-crash#crashScript',
      workspace: { goal: 'change files', root },
    };
    // Killed inside the store actor before step 2 commits: step 2's writes are on disk, its step is not.
    const first = await drive({ ...base, mode: 'run', killAt: 'commitStep:2:before' });
    expect((await first.exited).signal).toBe('SIGKILL');
    const rootId = first.rootId as string;
    expect(readFileSync(join(root, 'late.txt'), 'utf8')).toBe('changed in step two\n');
    const store = await openAt(location);
    expect((await store.run(rootId))?.lastSeq).toBe(1);
    // The restore point of a file first touched by the uncommitted step was committed before the write.
    expect((await store.restorePoint(rootId, 'late.txt'))?.content?.toString()).toBe('original late\n');

    const second = await drive({ ...base, mode: 'resume', rootId });
    expect(second.result?.status, second.stderr).toBe('finished');
    expect(readFileSync(join(root, 'kept.txt'), 'utf8')).toBe('changed twice\n');
    expect((await store.restorePoint(rootId, 'late.txt'))?.content?.toString()).toBe('original late\n');

    expect(await rewind(root, store, rootId, 'kept.txt')).toEqual({ path: 'kept.txt', action: 'restored' });
    expect(readFileSync(join(root, 'kept.txt'), 'utf8')).toBe('original kept\n');
    expect(await rewind(root, store, rootId, join(root, 'created.txt'))).toEqual({
      path: 'created.txt',
      action: 'deleted',
    });
    expect(existsSync(join(root, 'created.txt'))).toBe(false);
    const none = await failure(() => rewind(root, store, rootId, 'never-touched.txt'));
    expect(none.code).toBe('NO_RESTORE_POINT');
    expect(none.message).toContain('never wrote that file');

    const steps = JSON.stringify(await store.steps(rootId));
    const ledger = JSON.stringify(await store.ledger(rootId));
    const events = (await store.events(rootId)).length;
    const whole = await rewindRun(root, store, rootId);
    expect(whole.files).toEqual([
      { path: 'created.txt', action: 'unchanged' },
      { path: 'kept.txt', action: 'unchanged' },
      { path: 'late.txt', action: 'restored' },
    ]);
    expect(readFileSync(join(root, 'late.txt'), 'utf8')).toBe('original late\n');
    expect(JSON.stringify(await store.steps(rootId))).toBe(steps);
    expect(JSON.stringify(await store.ledger(rootId))).toBe(ledger);
    expect((await store.events(rootId)).length).toBe(events);
    // Through a supervisor on the same store, the same answer.
    writeFileSync(join(root, 'late.txt'), 'changed by hand\n');
    const supervisor = await Supervisor.start(store);
    later(() => supervisor.close());
    expect((await supervisor.rewindRun(root, rootId)).files).toContainEqual({ path: 'late.txt', action: 'restored' });
    expect(readFileSync(join(root, 'late.txt'), 'utf8')).toBe('original late\n');
  }, 120_000);
});

describe('a paused step resumed', () => {
  it('keeps what the step wrote before it paused: the calls it had made are not made again, nor undone', async () => {
    const root = tempWorkspace({ 'a.txt': 'before\n' });
    const store = await openFresh();
    const steps: Awaited<ReturnType<ModelScript>>[] = [
      {
        toolCalls: [
          { name: 'write_file', args: { path: 'a.txt', content: 'written before the pause\n' } },
          { name: 'exec', args: { argv: ['true'] } },
        ],
      },
      { text: 'done' },
    ];
    const server = await ScriptedModelServer.start(
      (call) => steps[Math.min(assistantTurns(call), steps.length - 1)] as Awaited<ReturnType<ModelScript>>,
    );
    later(() => server.close());
    const provider: HttpProviderSpec = { kind: 'openai', model: 'm', baseUrl: `${server.url}/v1`, apiKey: 'k' };
    // The exec is asked about and deferred: the step pauses after its write.
    const first = await runWith(TaskContract.workspace('write, then run', root), provider, store, Policy.default(), {
      decide: () => 'defer',
    });
    expect(first.outcome.kind).toBe('paused');
    expect(readFileSync(join(root, 'a.txt'), 'utf8')).toBe('written before the pause\n');
    const [question] = await store.questions({ status: 'open' });
    await answerQuestion(store, question?.questionId as string, 'approve');
    const supervisor = await Supervisor.start(store);
    later(() => supervisor.close());
    const resumed = await (await supervisor.resume(first.runId, { provider })).result;
    expect(resumed.status).toBe('finished');
    // Without the pause clearing the step's images, the resume put the file back as it was before the step.
    expect(readFileSync(join(root, 'a.txt'), 'utf8')).toBe('written before the pause\n');
    expect((await store.events(first.runId)).some((event) => event.type === 'step-rolled-back')).toBe(false);
  });
});

describe('rewindStep and the patch series', () => {
  const lines = (n: number, change: Record<number, string> = {}) =>
    `${Array.from({ length: n }, (_, i) => change[i + 1] ?? `line ${i + 1}`).join('\n')}\n`;

  async function threeSteps(): Promise<{ root: string; store: EitherStore; runId: string }> {
    const root = tempWorkspace({ 'a.txt': lines(30) });
    const store = await openFresh();
    const script: ModelScript = (call) =>
      [
        {
          text: 'one',
          toolCalls: [{ name: 'edit_file', args: { path: 'a.txt', old_string: 'line 2\n', new_string: 'TWO\n' } }],
        },
        {
          text: 'two',
          toolCalls: [
            { name: 'edit_file', args: { path: 'a.txt', old_string: 'line 25\n', new_string: 'TWENTY-FIVE\n' } },
            { name: 'write_file', args: { path: 'b.txt', content: 'new file\n' } },
          ],
        },
        { text: 'done' },
      ][Math.min(assistantTurns(call), 2)] as Awaited<ReturnType<ModelScript>>;
    const server = await ScriptedModelServer.start(script);
    later(() => server.close());
    const provider: HttpProviderSpec = { kind: 'openai', model: 'm', baseUrl: `${server.url}/v1`, apiKey: 'k' };
    const result = await runWith(TaskContract.workspace('edit', root), provider, store, Policy.permissive());
    expect(result.outcome.kind).toBe('finished');
    return { root, store, runId: result.runId };
  }

  it('renders a step-ordered patch series and reverses steps newest first', async () => {
    const { root, store, runId } = await threeSteps();
    const series = await store.patch(runId);
    expect(series.indexOf('step 1')).toBeLessThan(series.indexOf('step 2'));
    expect(series).toContain('+TWO');
    expect(series).toContain('+++ b/b.txt');
    expect(await rewindStep(root, store, runId, 2)).toEqual([
      { path: 'b.txt', action: 'deleted' },
      { path: 'a.txt', action: 'restored' },
    ]);
    expect(readFileSync(join(root, 'a.txt'), 'utf8')).toBe(lines(30, { 2: 'TWO' }));
    await rewindStep(root, store, runId, 1);
    expect(readFileSync(join(root, 'a.txt'), 'utf8')).toBe(lines(30));
  });

  it('refuses a step whose hunk no longer fits, naming it, and changes nothing', async () => {
    const { root, store, runId } = await threeSteps();
    writeFileSync(join(root, 'a.txt'), lines(30, { 2: 'edited by hand', 25: 'TWENTY-FIVE' }));
    const before = readFileSync(join(root, 'a.txt'), 'utf8');
    const error = await failure(() => rewindStep(root, store, runId, 1));
    expect(error.code).toBe('REWIND_CONFLICT');
    expect(error.message).toMatch(/a\.txt, hunk 1 \(@@ -1,\d+ \+1,\d+ @@\)/);
    expect(readFileSync(join(root, 'a.txt'), 'utf8')).toBe(before);
    expect(existsSync(join(root, 'b.txt'))).toBe(true);
    expect((await failure(() => rewindStep(root, store, runId, 3))).code).toBe('NO_RESTORE_POINT');
  });
});
