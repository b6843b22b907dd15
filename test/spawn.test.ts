import { afterEach, describe, expect, it } from 'vitest';
import { type StoreHarness, script, storeHarness } from './support/harness.js';
import { claimOf, createRoot, emptyStep, openStoreWriter } from './support/writer.js';

let h: StoreHarness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('spawns belong to the step that asked for them', () => {
  it('never starts a child whose parent\u2019s step cannot be charged: that step runs none of its tools', async () => {
    h = await storeHarness();
    const result = await h.supervisor.run({
      task: 'spawn two, then run out',
      budget: { tokens: 5 },
      provider: await script('program', {
        programs: {
          root: [
            {
              toolCalls: [
                { name: 'spawn_agent', args: { task: 'a', as: 'a', wait: false } },
                { name: 'spawn_agent', args: { task: 'b', as: 'b', wait: false } },
              ],
            },
          ],
          '*': [{ text: 'should never run' }],
        },
      }),
    }).result;
    expect(result.status).toBe('budget-exhausted');
    // The draw was known once the completion arrived; the step's spawns were never made.
    // (A reservation an uncommitted step did make is dropped: the writer-level case below.)
    const children = (await h.store.runs(result.rootId)).filter((run) => run.parentId === result.rootId);
    expect(children).toEqual([]);
    const events = await h.store.treeEvents(result.rootId);
    expect(events.filter((event) => event.type === 'budget-exhausted')).toMatchObject([{ ceiling: 'tokens' }]);
    expect(events.filter((event) => event.type === 'spawn-started')).toEqual([]);
    expect(events.filter((event) => event.type === 'spawn-queued')).toEqual([]);
    expect((await h.store.ledger(result.rootId))?.draws).toEqual([]);
  });

  it('releases a reserved child when the step commits, and drops one a re-run of the step did not ask for again', () => {
    const { db, writer } = openStoreWriter();
    const now = Date.now();
    const fence = createRoot(writer, 'p', { owner: 'o', now });
    const spawn = (key: string, as: string, newRunId: string) =>
      writer.call('spawn', {
        ...fence,
        key,
        task: as,
        as,
        asked: { steps: null, tokens: null, wallMs: null },
        maxWaitSecs: null,
        newRunId,
        queueNow: false,
        now,
      });
    // A first attempt at step 1 reserved two children, then the process died.
    expect(spawn('p:1:0', 'first', 'c1')).toMatchObject({ status: 'created', childStatus: 'pending' });
    expect(spawn('p:1:1', 'second', 'c2')).toMatchObject({ status: 'created', childStatus: 'pending' });
    writer.takeNotifications();
    // The re-run of step 1 asked only for the first again: it gets the same child.
    expect(spawn('p:1:0', 'first', 'c9')).toMatchObject({ status: 'existing', childId: 'c1', childStatus: 'pending' });
    writer.call('commitStep', emptyStep(fence, 1, { spawned: ['c1'], now }));
    const status = (id: string) =>
      (db.prepare('SELECT status FROM runs WHERE run_id = ?').get(id) as { status: string }).status;
    expect(status('c1')).toBe('queued');
    expect(status('c2')).toBe('cancelled');
    const notes = writer.takeNotifications();
    expect(notes.spawned).toEqual([{ rootId: 'p', childId: 'c1' }]);
    expect(notes.ended).toEqual([{ rootId: 'p', runId: 'c2', status: 'cancelled' }]);
    db.close();
  });

  it('admits nothing that left the queue since the supervisor read it', () => {
    const { db, writer } = openStoreWriter();
    const now = Date.now();
    const fence = createRoot(writer, 'p', { owner: 'o', now });
    writer.call('spawn', {
      ...fence,
      key: 'p:1:0',
      task: 'c',
      as: 'c',
      asked: { steps: null, tokens: null, wallMs: null },
      maxWaitSecs: null,
      newRunId: 'c',
      queueNow: true,
      now,
    });
    writer.call('cancelQueued', { rootId: 'p', now });
    const events = db.prepare('SELECT count(*) AS n FROM events').get();
    expect(writer.call('admit', { childId: 'c', ...claimOf({ owner: 'o', now }) })).toEqual({ status: 'gone' });
    expect(db.prepare("SELECT status, lease_owner FROM runs WHERE run_id = 'c'").get()).toEqual({
      status: 'cancelled',
      lease_owner: null,
    });
    expect(db.prepare('SELECT count(*) AS n FROM events').get()).toEqual(events);
    db.close();
  });
});
