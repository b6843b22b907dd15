import { afterEach, describe, expect, it } from 'vitest';
import { observationsOf, runAt, type StoreHarness, script, storeHarness } from './support/harness.js';

let h: StoreHarness;
afterEach(async () => {
  await h?.close();
});

/** `store`, every member it is asked to call named in `reads` as it is called. */
function countingReads<T extends object>(store: T, reads: string[]): T {
  return new Proxy(store, {
    get: (target, name) => {
      const member = Reflect.get(target, name);
      if (typeof member !== 'function') return member;
      return (...args: unknown[]) => {
        reads.push(String(name));
        return member.apply(target, args);
      };
    },
  });
}

async function sumDraws(h: StoreHarness, rootId: string) {
  const draws = (await h.store.ledger(rootId))?.draws ?? [];
  return { steps: draws.reduce((s, d) => s + d.steps, 0), tokens: draws.reduce((s, d) => s + d.tokens, 0) };
}

describe('one ledger per tree', () => {
  it('clamps a child that asks for more than its parent has left, and records the clamp', async () => {
    h = await storeHarness();
    const result = await h.supervisor.run({
      task: 'delegate',
      budget: { steps: 20 },
      provider: await script('program', {
        programs: {
          root: [
            {
              toolCalls: [
                { name: 'spawn_agent', args: { task: 'big', as: 'big', budget: { steps: 50, tokens: 100_000 } } },
              ],
            },
            { text: 'ok' },
          ],
          big: [
            { toolCalls: [{ name: 'spawn_agent', args: { task: 'bigger', as: 'bigger', budget: { steps: 100 } } }] },
            { text: 'ok' },
          ],
          bigger: [{ text: 'done' }],
        },
      }),
    }).result;
    expect(result.status).toBe('finished');
    const big = await runAt(h.store, result.rootId, 'big');
    const bigger = await runAt(h.store, result.rootId, 'bigger');
    expect((await h.store.account(big.runId))?.ceilings).toEqual({ steps: 20, tokens: 100_000, wallMs: null });
    expect((await h.store.account(bigger.runId))?.ceilings).toEqual({ steps: 20, tokens: 100_000, wallMs: null });
    const clamps = (await h.store.treeEvents(result.rootId)).filter((event) => event.type === 'budget-clamped');
    expect(clamps).toEqual([
      expect.objectContaining({
        runId: result.rootId,
        childId: big.runId,
        clamps: [{ field: 'steps', asked: 50, granted: 20 }],
      }),
      expect.objectContaining({
        runId: big.runId,
        childId: bigger.runId,
        clamps: [{ field: 'steps', asked: 100, granted: 20 }],
      }),
    ]);
    expect((await observationsOf(h.store, result.rootId))[0]?.content).toContain('narrowed');
    // Every descendant's draw counts against the root's one account.
    expect((await h.store.ledger(result.rootId))?.root.spent).toEqual(await sumDraws(h, result.rootId));
    expect((await h.store.ledger(result.rootId))?.root.spent.steps).toBe(5);
    // A chain's accounts in one read, in the order asked, a run with no account left out.
    const chain = [bigger.runId, result.rootId, 'no-such-run', big.runId];
    expect((await h.store.accounts(chain)).map((account) => account.runId)).toEqual([
      bigger.runId,
      result.rootId,
      big.runId,
    ]);
    expect(await h.store.accounts([])).toEqual([]);
    // A step's budget checks read the whole chain (root, big, bigger) once each, not an account at a time.
    const reads: string[] = [];
    const counted = countingReads(h.store, reads);
    const { Budget } = await import('../dist/actors/agent/budget.js');
    const { systemClock } = await import('../dist/clock.js');
    const budget = new Budget(counted as never, systemClock, bigger, null);
    expect(budget.chain).toEqual([result.rootId, big.runId, bigger.runId]);
    expect(await budget.precheck()).toEqual({ crossing: null, firstWall: null });
    const completion = { text: '', toolCalls: [], usage: { inputTokens: 10, outputTokens: 5 }, model: 'm' };
    expect(await budget.wouldCross(completion as never)).toBeNull();
    expect(reads).toEqual(['accounts', 'accounts']);
  });

  it('reads a chain with no ceiling once: nothing it spends can cross what it does not have', async () => {
    h = await storeHarness();
    const result = await h.supervisor.run({
      task: 'delegate',
      provider: await script('program', {
        programs: {
          root: [{ toolCalls: [{ name: 'spawn_agent', args: { task: 'free', as: 'free' } }] }, { text: 'ok' }],
          free: [{ text: 'done' }],
        },
      }),
    }).result;
    expect(result.status).toBe('finished');
    const free = await runAt(h.store, result.rootId, 'free');
    expect((await h.store.accounts([result.rootId, free.runId])).map((account) => account.ceilings)).toEqual([
      { steps: null, tokens: null, wallMs: null },
      { steps: null, tokens: null, wallMs: null },
    ]);
    const reads: string[] = [];
    const counted = countingReads(h.store, reads);
    const { Budget } = await import('../dist/actors/agent/budget.js');
    const { systemClock } = await import('../dist/clock.js');
    const budget = new Budget(counted as never, systemClock, free, null);
    const completion = { text: '', toolCalls: [], usage: { inputTokens: 10, outputTokens: 5 }, model: 'm' };
    for (let step = 0; step < 3; step++) {
      expect(await budget.precheck()).toEqual({ crossing: null, firstWall: null });
      expect(await budget.wouldCross(completion as never)).toBeNull();
    }
    // The first read showed no ceiling anywhere on the chain: no step reads it again.
    expect(reads).toEqual(['accounts']);
  });

  it('ends a run as budget-exhausted on the step ceiling, with the crossing draw in the trace', async () => {
    h = await storeHarness();
    const result = await h.supervisor.run({
      task: 'loop',
      budget: { steps: 3 },
      provider: await script('loop', { steps: 10 }),
    }).result;
    expect(result.status).toBe('budget-exhausted');
    expect(result.spent.steps).toBe(3);
    expect((await sumDraws(h, result.rootId)).steps).toBe(3);
    const exhausted = (await h.store.events(result.rootId)).find((event) => event.type === 'budget-exhausted');
    expect(exhausted).toMatchObject({
      ceiling: 'steps',
      limit: 3,
      spent: 3,
      draw: { steps: 1, tokens: 0 },
      account: result.rootId,
    });
  });

  it('refuses the draw that would cross the token ceiling and commits nothing of that step', async () => {
    h = await storeHarness();
    const result = await h.supervisor.run({
      task: 'loop',
      budget: { tokens: 400 },
      provider: await script('loop', { steps: 30 }),
    }).result;
    expect(result.status).toBe('budget-exhausted');
    const ledger = await h.store.ledger(result.rootId);
    expect(ledger?.root.spent.tokens).toBeLessThanOrEqual(400);
    expect(ledger?.root.spent).toEqual(await sumDraws(h, result.rootId));
    const exhausted = (await h.store.events(result.rootId)).find((event) => event.type === 'budget-exhausted');
    if (exhausted?.type !== 'budget-exhausted') throw new Error('no budget-exhausted event');
    expect(exhausted.ceiling).toBe('tokens');
    expect(exhausted.spent + exhausted.draw.tokens).toBeGreaterThan(400);
    expect((await h.store.run(result.rootId))?.lastSeq).toBe(ledger?.draws.length);
  });

  it('makes a child share the tree\u2019s ceiling: its draws exhaust the root\u2019s account', async () => {
    h = await storeHarness();
    const result = await h.supervisor.run({
      task: 'share',
      budget: { steps: 5 },
      provider: await script('program', {
        programs: {
          root: [
            { toolCalls: [{ name: 'spawn_agent', args: { task: 'spend it all', as: 'spender' } }] },
            { text: 'ok' },
          ],
          spender: [{ toolCalls: [{ name: 'read_messages', args: {} }] }],
        },
      }),
    }).result;
    const spender = await runAt(h.store, result.rootId, 'spender');
    expect(spender.status).toBe('budget-exhausted');
    expect(result.status).toBe('budget-exhausted');
    expect(result.spent.steps).toBe(5);
    expect((await sumDraws(h, result.rootId)).steps).toBe(5);
    const [spenderEnd] = (await h.store.events(spender.runId)).filter((event) => event.type === 'budget-exhausted');
    expect(spenderEnd).toMatchObject({ account: result.rootId, ceiling: 'steps', limit: 5 });
    // The root's own step (the one that waited) would cross the ceiling too: refused, not committed.
    expect((await h.store.run(result.rootId))?.lastSeq).toBe(0);
    expect((await h.store.events(result.rootId)).find((event) => event.type === 'budget-exhausted')).toMatchObject({
      account: result.rootId,
      draw: { steps: 1 },
    });
  });
});
