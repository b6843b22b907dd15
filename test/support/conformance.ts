/**
 * The store port's contract, as one suite any backend runs: give it a way to open a fresh
 * store and it checks fencing, idempotent commits and spawns, draws that cross a ceiling,
 * exactly-once consumption of mail and compare-and-set answers, through the port alone.
 */
import { describe, expect, it } from 'vitest';
import type { StorePort } from '../../dist/store/port.js';
import type { CommitStepInput, Fence } from '../../dist/store/records.js';
import { claimOf, emptyStep, spawnInput as queued } from './writer.js';

/** What a promise rejected with; fails the test when it resolves. */
async function thrown(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => {
      throw new Error(`expected a rejection, got ${JSON.stringify(value)}`);
    },
    (error: unknown) => error,
  );
}

export interface OpenedPort {
  port: StorePort;
  close(): Promise<void> | void;
}

const completion = { text: '', toolCalls: [], usage: { inputTokens: 5, outputTokens: 5 }, model: 'm' };

function claim(owner: string, now = Date.now()) {
  return claimOf({ owner, now });
}

/** A step of five input and five output tokens: ten drawn. */
function step(fence: Fence, seq: number, extra: Partial<CommitStepInput> = {}) {
  return emptyStep(fence, seq, { completion, usage: completion.usage, ...extra });
}

async function root(
  port: StorePort,
  runId: string,
  ceilings = { steps: null, tokens: null, wallMs: null } as object,
  maxConcurrentAgents: number | null = null,
) {
  const { generation } = await port.call('createRoot', {
    runId,
    task: 't',
    spec: { provider: null },
    ceilings: { steps: null, tokens: null, wallMs: null, ...ceilings },
    maxTotalAgents: null,
    maxConcurrentAgents,
    maxWaitSecs: 30,
    claim: claim('owner-a'),
  });
  return { runId, generation, owner: 'owner-a' };
}

/** A spawn as the suite's tests make them: at the address `child` unless they say otherwise. */
const spawnInput = (fence: Fence, key: string, newRunId: string) => queued(fence, key, newRunId, { as: 'child' });

/** A root of `runId` under owner-a's lease whose tree holds at most `cap` agents at once; its fence. */
const cappedRoot = (port: StorePort, runId: string, cap: number) => root(port, runId, undefined, cap);

export function storePortConformance(backend: string, open: () => Promise<OpenedPort>): void {
  async function withPort(body: (port: StorePort) => Promise<void>): Promise<void> {
    const opened = await open();
    try {
      await body(opened.port);
    } finally {
      await opened.close();
    }
  }

  describe(`the store port's contract (${backend})`, () => {
    it('fences every write by the lease: a live holder is a conflict, a taken-over one is refused and writes nothing', () =>
      withPort(async (port) => {
        const fence = await root(port, 'fenced');
        const conflict = await thrown(port.call('acquireLease', { runId: 'fenced', ...claim('owner-b') }));
        expect(conflict).toMatchObject({ name: 'ConflictError', code: 'CONFLICT' });
        // The lease lapses (a claim far in the future), and another driver takes the run.
        const later = Date.now() + 3_600_000;
        const taken = await port.call('acquireLease', { runId: 'fenced', ...claim('owner-b', later) });
        expect(taken.generation).toBe(fence.generation + 1);
        const stale = await thrown(port.call('commitStep', step(fence, 1)));
        expect(stale).toMatchObject({ name: 'LeaseLostError', code: 'LEASE_LOST' });
        expect(await port.steps('fenced')).toEqual([]);
        const current = { runId: 'fenced', generation: taken.generation, owner: 'owner-b' };
        expect(await port.call('commitStep', step(current, 1))).toMatchObject({ status: 'committed', seq: 1 });
      }));

    it('commits a step once: the same step again is a duplicate, and a gap is refused', () =>
      withPort(async (port) => {
        const fence = await root(port, 'once');
        expect(await port.call('commitStep', step(fence, 1))).toMatchObject({ status: 'committed' });
        expect(await port.call('commitStep', step(fence, 1))).toEqual({ status: 'duplicate', seq: 1 });
        const gap = await thrown(port.call('commitStep', step(fence, 3)));
        expect(gap).toMatchObject({ code: 'STEP_OUT_OF_ORDER' });
        expect((await port.steps('once')).map((s) => s.seq)).toEqual([1]);
      }));

    it('spawns once per key: the same spawn again names the same child', () =>
      withPort(async (port) => {
        const fence = await root(port, 'parent');
        const first = await port.call('spawn', spawnInput(fence, 'parent:1:0', 'child-1'));
        const again = await port.call('spawn', spawnInput(fence, 'parent:1:0', 'child-2'));
        expect(first).toMatchObject({ status: 'created', childId: 'child-1', address: 'child' });
        expect(again).toMatchObject({ status: 'existing', childId: 'child-1', address: 'child' });
        expect(await port.run('child-2')).toBeNull();
        expect(await port.run('child-1')).toMatchObject({ parentId: 'parent', rootId: 'parent', address: 'child' });
      }));

    it('numbers a child past an address already held, and counts a lapsed reservation out before the tree’s total', () =>
      withPort(async (port) => {
        const { generation } = await port.call('createRoot', {
          runId: 'numbered',
          task: 't',
          spec: { provider: null },
          ceilings: { steps: null, tokens: null, wallMs: null },
          maxTotalAgents: 2,
          maxConcurrentAgents: null,
          maxWaitSecs: 30,
          claim: claim('owner-a'),
        });
        const fence = { runId: 'numbered', generation, owner: 'owner-a' };
        const reserve = (key: string, newRunId: string, extra: object) =>
          port.call('spawn', { ...spawnInput(fence, key, newRunId), queueNow: false, ...extra });
        // The next numbered address (root.2) is taken by name first: the numbered child goes past it.
        expect(await reserve('numbered:1:0', 'n-named', { as: 'root.2' })).toMatchObject({ address: 'root.2' });
        expect(await reserve('numbered:1:1', 'n-numbered', { as: null })).toMatchObject({
          status: 'created',
          address: 'root.3',
        });
        // The tree holds two, its most. The step runs again and asks something else at call 1:
        // the child reserved there lapses, so a new one fits.
        expect(await reserve('numbered:1:1', 'n-again', { as: null, task: 'another task' })).toMatchObject({
          status: 'created',
          childId: 'n-again',
        });
        expect(await port.run('n-numbered')).toMatchObject({ status: 'cancelled' });
        // An uncommitted attempt's reservation of an address lapses when a later attempt asks for it.
        expect(await reserve('numbered:2:0', 'n-taker', { as: 'root.2' })).toMatchObject({
          status: 'created',
          childId: 'n-taker',
          address: 'root.2',
        });
        expect(await port.run('n-named')).toMatchObject({ status: 'cancelled' });
        expect(await reserve('numbered:2:1', 'n-over', { as: null })).toMatchObject({
          status: 'refused',
          rule: 'maxTotalAgents',
        });
      }));

    it('refuses a draw that crosses a ceiling, and writes nothing of that step', () =>
      withPort(async (port) => {
        const fence = await root(port, 'capped', { steps: 1, tokens: 15 });
        expect(await port.call('commitStep', step(fence, 1))).toMatchObject({ status: 'committed' });
        const over = await port.call('commitStep', step(fence, 2));
        expect(over).toMatchObject({ status: 'exhausted', runId: 'capped', ceiling: 'steps', limit: 1 });
        expect((await port.steps('capped')).map((s) => s.seq)).toEqual([1]);
        expect(await port.account('capped')).toMatchObject({ spent: { steps: 1, tokens: 10 } });
      }));

    it('charges a child to its whole chain: its draw that crosses the root is refused', () =>
      withPort(async (port) => {
        const fence = await root(port, 'tree', { tokens: 15 });
        const child = await port.call('spawn', spawnInput(fence, 'tree:1:0', 'tree-child'));
        expect(child.status).toBe('created');
        const admitted = await port.call('admit', { childId: 'tree-child', ...claim('owner-a') });
        expect(admitted.status).toBe('admitted');
        const childFence = {
          runId: 'tree-child',
          generation: (admitted as { generation: number }).generation,
          owner: 'owner-a',
        };
        expect(await port.call('commitStep', step(childFence, 1))).toMatchObject({ status: 'committed' });
        expect(await port.call('commitStep', step(fence, 1))).toMatchObject({
          status: 'exhausted',
          runId: 'tree',
          ceiling: 'tokens',
        });
        expect(await port.account('tree')).toMatchObject({ spent: { tokens: 10 } });
      }));

    it('ends a child on its last step: its line to the parent says its spend, its stale reservations go, its released children stay', () =>
      withPort(async (port) => {
        const fence = await root(port, 'ender');
        const admitted = async (childId: string, key: string) => {
          await port.call('spawn', { ...spawnInput(fence, key, childId), as: childId });
          const taken = (await port.call('admit', { childId, ...claim('owner-a') })) as { generation: number };
          return { runId: childId, generation: taken.generation, owner: 'owner-a' };
        };
        const reserve = (parent: Fence, key: string, childId: string) =>
          port.call('spawn', { ...spawnInput(parent, key, childId), as: childId, queueNow: false });
        // One child ends on a step that also releases a child it reserved in that step.
        const releasing = await admitted('releasing', 'ender:1:0');
        await reserve(releasing, 'releasing:2:0', 'released');
        expect(await port.call('commitStep', step(releasing, 1))).toMatchObject({ status: 'committed' });
        const last = { status: 'finished' as const, reply: 'all done' };
        expect(await port.call('commitStep', step(releasing, 2, { spawned: ['released'], final: last }))).toMatchObject(
          { status: 'committed' },
        );
        expect(await port.run('released')).toMatchObject({ status: 'queued' });
        // The other ends on a plain last step, with a reservation an uncommitted attempt left behind.
        const plain = await admitted('plain', 'ender:1:1');
        await reserve(plain, 'plain:0:0', 'stale');
        expect(await port.call('commitStep', step(plain, 1, { final: last }))).toMatchObject({ status: 'committed' });
        expect(await port.run('stale')).toMatchObject({ status: 'cancelled' });
        expect(await port.run('plain')).toMatchObject({ status: 'finished' });
        const lines = (await port.inbox('ender', 'root')).map((message) => message.body);
        expect(lines).toEqual([
          '[releasing finished] all done (steps 2, tokens 20)',
          '[plain finished] all done (steps 1, tokens 10)',
        ]);
      }));

    it('consumes a message exactly once', () =>
      withPort(async (port) => {
        const fence = await root(port, 'mail');
        await port.call('commitStep', step(fence, 1, { sent: [{ to: 'root', body: 'hello' }] }));
        const inbox = await port.inbox('mail', 'root');
        expect(inbox.map((message) => message.body)).toEqual(['hello']);
        const msgId = inbox[0]?.msgId as string;
        expect(await port.call('commitStep', step(fence, 2, { consumed: [msgId] }))).toMatchObject({
          status: 'committed',
        });
        const twice = await thrown(port.call('commitStep', step(fence, 3, { consumed: [msgId] })));
        expect(twice).toMatchObject({ code: 'MAILBOX_CONFLICT' });
        expect(await port.inbox('mail', 'root')).toEqual([]);
        expect((await port.steps('mail')).map((s) => s.seq)).toEqual([1, 2]);
      }));

    it('answers a question once: the first answer stands, a second is refused naming it', () =>
      withPort(async (port) => {
        const fence = await root(port, 'asked');
        await port.call('pause', {
          ...fence,
          seq: 1,
          completion,
          partial: null,
          question: { questionId: 'q-1', kind: 'question', payload: { question: 'which?' }, summary: 'which?' },
          events: [],
          now: Date.now(),
        });
        expect(await port.run('asked')).toMatchObject({ status: 'paused' });
        expect(await port.call('answer', { questionId: 'q-1', answer: 'the left one', by: 'alice', now: 1 })).toEqual({
          runId: 'asked',
          rootId: 'asked',
        });
        const second = await thrown(
          port.call('answer', { questionId: 'q-1', answer: 'the right one', by: 'bob', now: 2 }),
        );
        expect(second).toMatchObject({ code: 'ALREADY_ANSWERED', details: { answeredBy: 'alice' } });
        expect(await port.question('q-1')).toMatchObject({
          status: 'answered',
          answer: 'the left one',
          answeredBy: 'alice',
        });
        const resumed = await port.call('resumePaused', { runId: 'asked', ...claim('owner-b') });
        expect(resumed.status).toBe('resumed');
      }));

    it('gives a root what it was sent at the boundary after a step, ends it on an interrupt, and steers no child', () =>
      withPort(async (port) => {
        const fence = await root(port, 'steered');
        // Only a session's turn is steered: before it names the run, the run is refused.
        expect(
          await thrown(port.call('steer', { runId: 'steered', kind: 'steer', text: 'x', by: 'a', now: 1 })),
        ).toMatchObject({ code: 'RUN_NOT_FOUND' });
        await port.call('openSession', { sessionId: 's', root: '/tmp', now: 1 });
        await port.call('beginTurn', { sessionId: 's', turnId: 't', parent: null, text: 'go', now: 1 });
        await port.call('startedTurn', { turnId: 't', runId: 'steered' });
        const send = (kind: 'steer' | 'interrupt', text: string | null, runId = 'steered') =>
          port.call('steer', { runId, kind, text, by: 'alice', now: Date.now() });
        await send('steer', 'first');
        // Waiting before the first step: taken as the run starts.
        expect(await port.call('takeSteers', { ...fence, now: Date.now() })).toEqual({
          steers: ['first'],
          interrupt: false,
        });
        await send('steer', 'second');
        await send('steer', 'third');
        expect(await port.call('commitStep', step(fence, 1))).toMatchObject({
          status: 'committed',
          steers: ['second', 'third'],
        });
        // Taken once: the next step gets none of them again.
        expect(await port.call('commitStep', step(fence, 2))).not.toHaveProperty('steers');
        const steered = (await port.events('steered')).filter((event) => event.type === 'steered');
        expect(steered).toMatchObject([
          { text: 'first', before: 1, by: 'alice' },
          { text: 'second', before: 2 },
          { text: 'third', before: 2 },
        ]);
        const child = await port.call('spawn', spawnInput(fence, 'steered:3:0', 'steered-child'));
        expect(child).toMatchObject({ status: 'created' });
        expect(await thrown(send('steer', 'x', 'steered-child'))).toMatchObject({ code: 'INVALID_ARGUMENT' });
        expect(await thrown(send('steer', 'x', 'nobody'))).toMatchObject({ code: 'RUN_NOT_FOUND' });
        await send('steer', 'left untaken');
        await send('interrupt', null);
        expect(await port.call('commitStep', step(fence, 3))).toMatchObject({ status: 'interrupted', seq: 3 });
        expect(await port.run('steered')).toMatchObject({ status: 'interrupted', lastSeq: 3 });
        expect((await port.steps('steered')).map((s) => s.seq)).toEqual([1, 2, 3]);
        expect(await thrown(send('steer', 'too late'))).toMatchObject({ code: 'TURN_ENDED' });
      }));

    it('ends a root on a reply with no step: its tokens drawn, its call recorded, a crossing one exhausted', () =>
      withPort(async (port) => {
        const fence = await root(port, 'replied');
        const call = {
          provider: 'p',
          model: 'm',
          outcome: 'ok',
          statusCode: 200,
          inputTokens: 5,
          outputTokens: 5,
          cacheReadTokens: 0,
          cacheWriteTokens: 0,
          reasoningTokens: 0,
          latencyMs: 1,
          ttftMs: null,
        };
        const reply = { ...completion, text: 'hello' };
        expect(
          await port.call('endReply', { ...fence, completion: reply, calls: [call], events: [], now: Date.now() }),
        ).toEqual({ status: 'finished' });
        expect(await port.run('replied')).toMatchObject({ status: 'finished', reply: 'hello', lastSeq: 0 });
        expect(await port.steps('replied')).toEqual([]);
        expect(await port.account('replied')).toMatchObject({ spent: { steps: 0, tokens: 10 } });
        expect(await port.modelCalls({ rootId: 'replied' })).toHaveLength(1);
        const capped = await root(port, 'reply-capped', { tokens: 5 });
        expect(
          await port.call('endReply', { ...capped, completion: reply, calls: [call], events: [], now: Date.now() }),
        ).toEqual({ status: 'exhausted' });
        expect(await port.run('reply-capped')).toMatchObject({ status: 'budget-exhausted', reply: null });
        expect(await port.account('reply-capped')).toMatchObject({ spent: { steps: 0, tokens: 0 } });
      }));

    // Durable memory, table-tested: each row a case through the port alone.
    const now = Date.now();
    const note = (key: string, text: string, extra: Record<string, unknown> = {}) => ({
      scope: '/ws',
      key,
      kind: 'fact' as const,
      text,
      by: null,
      cap: 3,
      now,
      ...extra,
    });

    it('evicts at the cap the note the fewest separate runs drew on, not the oldest', () =>
      withPort(async (port) => {
        const runs = await Promise.all(['r1', 'r2', 'r3'].map((id) => root(port, id)));
        for (const [key, text] of [
          ['oldest', 'the build runs with make'],
          ['middle', 'tests live under spec'],
          ['newest', 'lint with biome'],
        ] as const)
          await port.call('remember', note(key, text));
        const ids = Object.fromEntries((await port.notes(['/ws'])).map((item) => [item.key, item.id]));
        // Drawn on: the oldest by three runs, the newest by two, the middle by one (and twice by one run, counted once).
        const table: [string, string[]][] = [
          ['oldest', ['r1', 'r2', 'r3']],
          ['newest', ['r1', 'r2']],
          ['middle', ['r3', 'r3']],
        ];
        for (const [key, drawers] of table)
          for (const id of drawers) {
            const by = runs.find((fence) => fence.runId === id) as Fence;
            await port.call('drawNotes', { by, noteIds: [ids[key] as number], how: 'recall', now });
          }
        expect((await port.notes(['/ws'])).map((item) => [item.key, item.runs])).toEqual([
          ['oldest', 3],
          ['middle', 1],
          ['newest', 2],
        ]);
        const written = await port.call('remember', note('fourth', 'deploys go through the staging branch'));
        expect(written).toMatchObject({ status: 'written', evicted: { key: 'middle', runs: 1 }, replaced: false });
        expect((await port.notes(['/ws'])).map((item) => item.key)).toEqual(['oldest', 'newest', 'fourth']);
        // An overwrite of a key held takes no room: nothing goes.
        expect(await port.call('remember', note('oldest', 'the build runs with make -j'))).toMatchObject({
          status: 'written',
          replaced: true,
          evicted: null,
        });
        // Overwritten, a note keeps its place in the store's order.
        expect((await port.notes(['/ws'])).map((item) => item.key)).toEqual(['oldest', 'newest', 'fourth']);
      }));

    it('refuses a run that overwrites or forgets a pinned note; the embedder may', () =>
      withPort(async (port) => {
        const by = await root(port, 'writer');
        await port.call('remember', note('style', 'two spaces, no tabs', { pin: true }));
        const cases: [string, Promise<unknown>, object][] = [
          ['a run overwrites', port.call('remember', note('style', 'tabs', { by })), { status: 'pinned' }],
          ['a run forgets', port.call('forget', { scope: '/ws', key: 'style', by, now }), { status: 'pinned' }],
        ];
        for (const [what, result, expected] of cases) expect(await result, what).toMatchObject(expected);
        expect((await port.notes(['/ws']))[0]).toMatchObject({ text: 'two spaces, no tabs', pinned: true });
        // A pinned note is never the one evicted, and a scope of pinned notes only refuses a new one.
        for (const key of ['a', 'b']) await port.call('remember', note(key, `${key} pinned`, { pin: true }));
        expect(await port.call('remember', note('d', 'one more', { by }))).toEqual({ status: 'full', cap: 3 });
        // The embedder corrects it, unpins it, and then a run may forget it.
        expect(await port.call('remember', note('style', 'tabs after all'))).toMatchObject({ status: 'written' });
        expect(await port.call('pinNote', { scope: '/ws', key: 'style', pinned: false, now })).toEqual({
          status: 'done',
        });
        expect(await port.call('forget', { scope: '/ws', key: 'style', by, now })).toEqual({ status: 'forgotten' });
        expect(await port.call('forget', { scope: '/ws', key: 'style', by, now })).toEqual({ status: 'absent' });
      }));

    it('reports a note that restates one held under another key, in its scope or the global one', () =>
      withPort(async (port) => {
        await port.call('remember', note('tests', 'Run the tests with npm test before a commit.'));
        await port.call('remember', note('deploy', 'Deploys need a signed tag.', { scope: 'global' }));
        const table: [string, string, string | null][] = [
          ['checks', 'before a commit, run the tests with npm test', 'tests'],
          ['release', 'deploys need a signed tag', 'deploy'],
          // Its own key rewritten in other words restates nothing; the same words under it would name `checks`.
          ['tests', 'the suite is slow on CI machines', null],
          ['other', 'the docs are built with typedoc', null],
        ];
        for (const [key, text, restates] of table)
          expect(await port.call('remember', note(key, text, { cap: 64 })), key).toMatchObject({
            status: 'written',
            restates,
          });
      }));

    it('keeps a run to its own workspace: fenced by its lease, no global note written or shadowed, no pin', () =>
      withPort(async (port) => {
        const fence = await root(port, 'memory-fenced');
        await port.call('remember', note('license', 'MIT everywhere', { scope: 'global', pin: true }));
        const cases: [string, Promise<unknown>, object][] = [
          [
            'a run shadows a pinned global note',
            port.call('remember', note('license', 'Apache here', { by: fence })),
            { status: 'pinned', note: { scope: 'global', text: 'MIT everywhere' } },
          ],
          [
            'a run writes the global scope',
            thrown(port.call('remember', note('style', 'tabs', { by: fence, scope: 'global' }))),
            { name: 'InvalidArgumentError' },
          ],
          [
            'a run pins',
            thrown(port.call('remember', note('style', 'tabs', { by: fence, pin: true }))),
            { name: 'InvalidArgumentError' },
          ],
          [
            'a run forgets a global note',
            thrown(port.call('forget', { scope: 'global', key: 'license', by: fence, now })),
            { name: 'InvalidArgumentError' },
          ],
          [
            'a key that could pass for marks',
            thrown(port.call('remember', note('x (fact, pinned)', 'y'))),
            { name: 'InvalidArgumentError' },
          ],
        ];
        for (const [what, result, expected] of cases) expect(await result, what).toMatchObject(expected);
        expect(await port.notes(['/ws'])).toEqual([]);
        // Once its lease is taken over, the run writes no note and draws on none.
        const later = Date.now() + 3_600_000;
        await port.call('acquireLease', { runId: 'memory-fenced', ...claim('owner-b', later) });
        expect(await thrown(port.call('remember', note('style', 'tabs', { by: fence })))).toMatchObject({
          code: 'LEASE_LOST',
        });
        const [global] = await port.notes(['global']);
        expect(
          await thrown(port.call('drawNotes', { by: fence, noteIds: [global?.id as number], how: 'recall', now })),
        ).toMatchObject({ code: 'LEASE_LOST' });
        expect(await port.notes(['/ws', 'global'])).toMatchObject([{ key: 'license', runs: 0 }]);
      }));

    it('spares a run’s own new note from its next write at the cap, and evicts down to a lowered cap', () =>
      withPort(async (port) => {
        const fence = await root(port, 'memory-writer');
        for (const key of ['a', 'b', 'c']) await port.call('remember', note(key, `embedder note ${key}`));
        const [first, second] = [
          await port.call('remember', note('mine-1', 'the first thing this run learned', { by: fence })),
          await port.call('remember', note('mine-2', 'the second thing this run learned', { by: fence })),
        ];
        expect(first).toMatchObject({ status: 'written', evicted: { key: 'a' } });
        // Its own note has no draws either, and is newer: the embedder's next least drawn-on goes instead.
        expect(second).toMatchObject({ status: 'written', evicted: { key: 'b' } });
        expect((await port.notes(['/ws'])).map((item) => item.key)).toEqual(['c', 'mine-1', 'mine-2']);
        // A cap lowered to 2: the next new key brings the scope down to it.
        expect(await port.call('remember', note('d', 'embedder note d', { cap: 2 }))).toMatchObject({
          status: 'written',
        });
        expect((await port.notes(['/ws'])).map((item) => item.key)).toEqual(['mine-2', 'd']);
      }));

    it('keeps the global scope apart from a workspace’s, and records which runs drew on which note', () =>
      withPort(async (port) => {
        const by = await root(port, 'drawer');
        await port.call('remember', note('style', 'tabs', { scope: 'global' }));
        await port.call('remember', note('style', 'spaces'));
        await port.call('remember', note('style', 'semicolons', { scope: '/other' }));
        const table: [string[], string[]][] = [
          [['/ws'], ['spaces']],
          [['global'], ['tabs']],
          [
            ['global', '/ws'],
            ['tabs', 'spaces'],
          ],
          [['/nowhere'], []],
        ];
        for (const [scopes, texts] of table)
          expect(
            (await port.notes(scopes)).map((item) => item.text),
            scopes.join(),
          ).toEqual(texts);
        const [global, own] = await port.notes(['global', '/ws']);
        expect(
          await port.call('drawNotes', { by, noteIds: [global?.id as number, own?.id as number], how: 'block', now }),
        ).toEqual({ drawn: 2 });
        expect(await port.call('drawNotes', { by, noteIds: [own?.id as number], how: 'recall', now })).toEqual({
          drawn: 0,
        });
        expect((await port.notes(['global', '/ws'])).map((item) => item.runs)).toEqual([1, 1]);
      }));

    it('claims a host its runnable agents within the tree’s cap, takes lapsed runs over first, and parks a waiting parent', () =>
      withPort(async (port) => {
        const fence = await cappedRoot(port, 'shared', 2);
        for (const n of [1, 2, 3, 4])
          await port.call('spawn', { ...spawnInput(fence, `shared:1:${n}`, `c${n}`), as: `c${n}` });
        const now = Date.now();
        const onB = { ...claimOf({ owner: 'owner-b', host: 'host-b', now }), roots: ['shared'], limit: 10 };
        const onC = { ...claimOf({ owner: 'owner-c', host: 'host-c', now }), roots: ['shared'], limit: 10 };
        // The cap admits two, first in first out; another host then finds the tree full.
        const first = await port.call('claim', onB);
        expect(first.claimed.map((run) => [run.runId, run.resumed])).toEqual([
          ['c1', false],
          ['c2', false],
        ]);
        expect((await port.call('claim', onC)).claimed).toEqual([]);
        // c1 waits on a child: its slot goes to the next in the queue, on whichever host claims.
        const c1 = { runId: 'c1', generation: first.claimed[0]?.generation as number, owner: 'owner-b' };
        expect(await port.call('park', { ...c1, want: 'park', now })).toEqual({ granted: true });
        expect((await port.call('claim', onC)).claimed.map((run) => run.runId)).toEqual(['c3']);
        // Its child ended: the tree is full, so c1 waits for a slot, and is counted as wanting one.
        expect(await port.call('park', { ...c1, want: 'back', now })).toEqual({ granted: false });
        const c3 = (await port.run('c3'))?.lease.generation as number;
        await port.call('endRun', {
          runId: 'c3',
          generation: c3,
          owner: 'owner-c',
          status: 'finished',
          reply: 'done',
          reason: 'done',
          events: [],
          now,
        });
        // The slot c3 freed is c1's before the queue's: c4 stays queued.
        expect((await port.call('claim', onC)).claimed).toEqual([]);
        expect(await port.call('park', { ...c1, want: 'back', now })).toEqual({ granted: true });
        const later = now + 3_600_000;
        // B was only slow: woken past its ttl it still drives c1 and c2, whose lapsed leases keep
        // their slots, so c4 is not admitted beside them; the root's lapsed lease it takes.
        const woken = await port.call('claim', {
          ...claimOf({ owner: 'owner-b', host: 'host-b', now: later }),
          roots: ['shared'],
          limit: 10,
          driving: ['c1', 'c2'],
        });
        expect(woken.claimed.map((run) => run.runId)).toEqual(['shared']);
        // B goes silent for good: C takes c1 and c2 over, resumed at a new generation, and, since
        // they keep their slots, admits nothing beside them.
        const takeover = await port.call('claim', {
          ...claimOf({ owner: 'owner-c', host: 'host-c', now: later }),
          roots: ['shared'],
          limit: 10,
        });
        expect(takeover.claimed.map((run) => [run.runId, run.resumed])).toEqual([
          ['c1', true],
          ['c2', true],
        ]);
        expect(takeover.claimed[0]?.generation).toBeGreaterThan(c1.generation);
        const stale = await thrown(port.call('park', { ...c1, want: 'park', now: later }));
        expect(stale).toMatchObject({ code: 'LEASE_LOST' });
        // A lease of this owner's own that lapsed is taken again, unless it drives that run now.
        const own = (at: number, driving: string[]) =>
          port.call('claim', {
            ...claimOf({ owner: 'owner-c', host: 'host-c', now: at }),
            roots: ['shared'],
            limit: 10,
            driving,
          });
        expect((await own(later + 3_600_000, ['c1', 'c2'])).claimed.map((run) => run.runId)).toEqual(['shared']);
        // Both lapsed, so in the order they were made (the same millisecond, then by id): compared as a set.
        expect((await own(later + 7_200_000, ['c1'])).claimed.map((run) => run.runId).sort()).toEqual(['c2', 'shared']);
      }));

    it('counts a run a claim takes over that held no slot against the cap, before the queue', () =>
      withPort(async (port) => {
        const fence = await cappedRoot(port, 'capped', 2);
        await port.call('spawn', { ...spawnInput(fence, 'capped:1:1', 'k1'), as: 'k1' });
        const now = Date.now();
        const onA = { ...claimOf({ owner: 'owner-a', now }), roots: ['capped'], limit: 1 };
        const [k1] = (await port.call('claim', onA)).claimed;
        expect(k1?.runId).toBe('k1');
        // k1's host lets it go: running, under no lease, so holding no slot until it is taken.
        await port.call('releaseLease', { runId: 'k1', generation: k1?.generation as number, owner: 'owner-a' });
        for (const n of [2, 3])
          await port.call('spawn', { ...spawnInput(fence, `capped:1:${n}`, `k${n}`), as: `k${n}` });
        // One claim takes k1 over (a slot), then admits from the queue only what the cap has left.
        const onB = { ...claimOf({ owner: 'owner-b', host: 'host-b', now }), roots: ['capped'], limit: 10 };
        expect((await port.call('claim', onB)).claimed.map((run) => [run.runId, run.resumed])).toEqual([
          ['k1', true],
          ['k2', false],
        ]);
      }));
  });
}
