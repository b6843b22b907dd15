import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../dist/clock.js';
import type { RunContext } from '../dist/runtime/tools/context.js';
import { MailWake, read } from '../dist/runtime/tools/families/tree.js';
import { observationsOf, runAt, type StoreHarness, script, storeHarness } from './support/harness.js';

let h: StoreHarness;
afterEach(async () => {
  await h?.close();
});

describe('mailbox', () => {
  it('delivers every message exactly once, oldest first', async () => {
    h = await storeHarness();
    const result = await h.supervisor.run({ task: 'mail', provider: await script('mailbox', { scenario: 'ordered' }) })
      .result;
    expect(result.status).toBe('finished');
    const reader = await runAt(h.store, result.rootId, 'reader');
    expect(reader.reply).toBe('m1,m2,m3,m4');
    const messages = (await h.store.messages(result.rootId)).filter((message) => message.toAddress === 'reader');
    expect(messages.map((message) => message.body)).toEqual(['m1', 'm2', 'm3', 'm4']);
    for (const message of messages) {
      expect(message.consumedBy).toBe(reader.runId);
      // consumed in the step whose observation returned it
      const step = (await h.store.steps(reader.runId)).find((candidate) => candidate.seq === message.consumedSeq);
      expect(step?.observations.some((o) => o.content.includes(message.msgId))).toBe(true);
    }
    // the reader's finishing line reached its parent
    const line = (await h.store.messages(result.rootId)).find((message) => message.toAddress === 'root');
    expect(line?.body).toMatch(/^\[reader finished\] m1,m2,m3,m4 \(steps \d+, tokens \d+\)$/);
    // message-read events name exactly the consumed ids, once each
    const readIds = (await h.store.events(reader.runId)).flatMap((event) =>
      event.type === 'message-read' ? event.msgIds : [],
    );
    expect(readIds).toEqual(messages.map((message) => message.msgId));
  });

  it('returns after a bounded wait when nothing arrives, and caps a longer wait at maxWaitSecs', async () => {
    h = await storeHarness();
    const honoured = await h.supervisor.run({
      task: 'wait',
      provider: await script('mailbox', { scenario: 'timeout', wait: 0.3 }),
    }).result;
    expect(honoured.reply).toBe('no messages after waiting 0.3s.');
    const capped = await h.supervisor.run({
      task: 'wait long',
      provider: await script('mailbox', { scenario: 'timeout', wait: 600 }),
      maxWaitSecs: 0.2,
    }).result;
    expect(capped.reply).toBe('no messages after waiting 0.2s (the wait asked for 600s was capped at 0.2s).');
  });

  it('refuses an address outside the sender\u2019s own tree', async () => {
    h = await storeHarness();
    const other = await h.supervisor.run({
      task: 'spawn a named child',
      provider: await script('program', {
        programs: {
          root: [{ toolCalls: [{ name: 'spawn_agent', args: { task: 'x', as: 'only-in-x' } }] }, { text: 'ok' }],
          'only-in-x': [{ text: 'here' }],
        },
      }),
    }).result;
    expect(await h.store.hasAddress(other.rootId, 'only-in-x')).toBe(true);
    const result = await h.supervisor.run({
      task: 'reach out',
      provider: await script('mailbox', { scenario: 'outsider', to: 'only-in-x' }),
    }).result;
    const [observation] = await observationsOf(h.store, result.rootId);
    expect(observation?.isError).toBe(true);
    expect(observation?.content).toContain('no agent has the address "only-in-x" in this tree');
    const refusal = (await h.store.events(result.rootId)).find((event) => event.type === 'refusal');
    expect(refusal).toMatchObject({ type: 'refusal', tool: 'send_message', rule: 'mailbox.tree' });
    expect((await h.store.messages(other.rootId)).filter((message) => message.body === 'psst')).toEqual([]);
    expect(await h.store.messages(result.rootId)).toEqual([]);
  });

  it('lets a child lower its longest wait and never raise it', async () => {
    h = await storeHarness();
    const result = await h.supervisor.run({
      task: 'spawn two',
      maxWaitSecs: 10,
      provider: await script('program', {
        programs: {
          root: [
            {
              toolCalls: [
                { name: 'spawn_agent', args: { task: 'a', as: 'lower', max_wait_secs: 2 } },
                { name: 'spawn_agent', args: { task: 'b', as: 'higher', max_wait_secs: 100 } },
              ],
            },
            { text: 'ok' },
          ],
          '*': [{ text: 'done' }],
        },
      }),
    }).result;
    expect((await h.store.account((await runAt(h.store, result.rootId, 'lower')).runId))?.maxWaitSecs).toBe(2);
    expect((await h.store.account((await runAt(h.store, result.rootId, 'higher')).runId))?.maxWaitSecs).toBe(10);
  });
});

describe('an inbox wait', () => {
  /** A run as read_messages sees it: an empty inbox, a cap of 30 s, the given clock. */
  function emptyInbox(clock: ManualClock) {
    return {
      clock,
      cancelled: false,
      run: { runId: 'r', rootId: 'root', address: 'reader' },
      step: { consumed: [] as string[] },
      store: { account: async () => ({ maxWaitSecs: 30 }), inbox: async () => [] },
    } as unknown as RunContext;
  }

  it('reads its deadline on the run’s clock, and still ends on a clock that does not move', async () => {
    const clock = new ManualClock();
    const mail = new MailWake();
    let waiting: () => void = () => undefined;
    const asleep = new Promise<void>((resolve) => {
      waiting = resolve;
    });
    const watched = {
      wait: (ms: number) => {
        waiting();
        return mail.wait(ms);
      },
    };
    // The run's clock passes the deadline while the tool waits: the next wake ends a 30 s wait at once.
    const waited = read(emptyInbox(clock), { wait_secs: 30 }, watched);
    await asleep;
    clock.advance(31_000);
    mail.wake();
    expect((await waited).content).toBe('no messages after waiting 30s.');
    // A clock that never moves: the wait still ends once its time has passed for real.
    const started = Date.now();
    const frozen = await read(emptyInbox(new ManualClock()), { wait_secs: 0.2 }, new MailWake());
    expect(frozen.content).toBe('no messages after waiting 0.2s.');
    expect(Date.now() - started).toBeGreaterThanOrEqual(150);
  });
});
