/**
 * A supervisor on a PostgreSQL store (the tests' real server): its store actor writes
 * there, its agents read from there on their own threads, and it reads there to admit
 * and settle. A tree whose children mail each other finishes with every message read
 * once; a fan-out past the concurrency cap admits first in first out and never runs more
 * than the cap; a workspace contract runs to its gate; a run paused on an approval is
 * answered and resumed; an acting observer (config.hooks()) is given a way to follow the store.
 */

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { HarnessEvent } from '../dist/index.js';
import { CallbackApprover, OpenAI, Policy, runWith, Supervisor, TaskContract, Verification } from '../dist/index.js';
import { HOST } from '../dist/store/liveness.js';
import { PostgresStore } from '../dist/store/postgres/index.js';
import { assistantTurns, ScriptedModelServer } from '../dist/testing/index.js';
import { script } from './support/harness.js';
import { freshDatabase } from './support/postgres.js';
import { later, tempWorkspace } from './support/workspace.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function onPostgres(options: Parameters<typeof Supervisor.start>[1] = {}) {
  const db = await freshDatabase();
  cleanups.push(() => db.drop());
  const store = await PostgresStore.open(db.url);
  cleanups.push(() => store.close());
  const supervisor = await Supervisor.start(store, options);
  cleanups.push(() => supervisor.close());
  return { store, supervisor };
}

describe('a supervisor on PostgreSQL', () => {
  it('drives a tree whose children mail each other to its end, every message read once, the ledger the tree’s', async () => {
    const { store, supervisor } = await onPostgres();
    const events: HarnessEvent[] = [];
    supervisor.observe((event) => events.push(event));
    const result = await supervisor.run({ task: 'mail', provider: await script('mailbox', { scenario: 'ordered' }) })
      .result;
    expect(result.status).toBe('finished');
    const runs = await store.runs(result.rootId);
    expect(runs.every((run) => run.status === 'finished')).toBe(true);
    const reader = runs.find((run) => run.address === 'reader');
    expect(reader?.reply).toBe('m1,m2,m3,m4');
    const messages = (await store.messages(result.rootId)).filter((message) => message.toAddress === 'reader');
    expect(messages.map((message) => message.body)).toEqual(['m1', 'm2', 'm3', 'm4']);
    expect(messages.every((message) => message.consumedBy === reader?.runId)).toBe(true);
    // The observer saw every committed event of the tree, in commit order.
    const stored = await store.treeEvents(result.rootId);
    expect(events.filter((event) => event.rootId === result.rootId).map((event) => event.eventId)).toEqual(
      stored.map((event) => event.eventId),
    );
    const ledger = await store.ledger(result.rootId);
    expect(result.spent).toEqual(ledger?.root.spent);
    expect(ledger?.draws.length).toBeGreaterThan(0);
    // Every lease the tree took named this host.
    expect(new Set(runs.map((run) => run.lease.host))).toEqual(new Set([HOST]));
  });

  it('admits past the cap first in first out and never runs more than the cap at once', async () => {
    const { store, supervisor } = await onPostgres({ maxConcurrentAgents: 2 });
    const events: HarnessEvent[] = [];
    supervisor.observe((event) => events.push(event));
    const result = await supervisor.run({
      task: 'six',
      provider: await script('fanout', { children: 6, steps: 2, latencyMs: 20 }),
    }).result;
    expect(result).toMatchObject({ status: 'finished', reply: '6 reports', runs: 7 });
    let live = 0;
    let peak = 0;
    for (const event of events) {
      if (event.type === 'spawn-started') peak = Math.max(peak, ++live);
      if (event.type === 'run-end' && event.runId !== result.rootId) live--;
    }
    expect(peak).toBe(2);
    const queued = events.flatMap((event) => (event.type === 'spawn-queued' ? [event.childId] : []));
    const started = events.flatMap((event) => (event.type === 'spawn-started' ? [event.runId] : []));
    expect(started).toEqual(queued);
    expect((await store.queue(result.rootId)).every((entry) => entry.state === 'admitted')).toBe(true);
  });

  it('names a run rewindRun does not know, and hands an acting observer a way to follow the store', async () => {
    const { supervisor } = await onPostgres();
    // rewindRun is there (rewind.test.ts runs on both): a run it does not know, it names.
    await expect(supervisor.rewindRun('/tmp', 'nope')).rejects.toMatchObject({
      code: 'RUN_NOT_FOUND',
      message: expect.stringMatching(/no run nope in postgres:\/\//),
    });
    // config.hooks()'s kind of observer: on PostgreSQL it is given follow() (postgres-events.test.ts uses it).
    let given: { follow?: unknown } | null = null;
    const hook = Object.assign(() => undefined, {
      attach: (context: { follow?: unknown }) => {
        given = context;
      },
    });
    supervisor.observe(hook)();
    expect(typeof (given as { follow?: unknown } | null)?.follow).toBe('function');
  });

  it('runs a workspace contract to its gate, and a run paused on an approval is answered and resumed', async () => {
    const { store, supervisor } = await onPostgres();
    const repo = tempWorkspace({ 'notes.txt': 'ship on friday\n' });
    const server = await ScriptedModelServer.start((call) => {
      const task = String(call.body.messages.find((message) => message.role === 'user')?.content ?? '');
      const turn = assistantTurns(call);
      if (task.startsWith('edit'))
        return turn === 0
          ? { toolCalls: [{ name: 'write_file', args: { path: 'notes.txt', content: 'ship today\n' } }] }
          : { text: 'edited' };
      return turn === 0 ? { toolCalls: [{ name: 'exec', args: { argv: ['node', '--version'] } }] } : { text: 'ran it' };
    });
    later(() => server.close());
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const gated = TaskContract.workspace('edit the notes', repo).withVerification(
      Verification.command([
        'node',
        '-e',
        "process.exit(require('fs').readFileSync('notes.txt','utf8').includes('today')?0:1)",
      ]),
    );
    const edited = await runWith(gated, provider, store, Policy.default().layer('app').allowWrite('notes.txt'));
    expect(edited.outcome.kind).toBe('finished');
    expect(readFileSync(join(repo, 'notes.txt'), 'utf8')).toBe('ship today\n');
    expect((await store.gateEvaluations(edited.runId)).at(-1)).toMatchObject({ verdict: 'passed' });
    expect(await store.patch(edited.runId)).toContain('+ship today');

    const handle = supervisor.run({
      contract: TaskContract.workspace('version of node', repo),
      provider,
      policy: Policy.default(),
      approver: new CallbackApprover(() => 'defer'),
    });
    expect((await handle.result).status).toBe('paused');
    const [open] = await store.questions({ runId: handle.rootId, status: 'open' });
    await supervisor.answer(open?.questionId as string, 'approve');
    const resumed = await (await supervisor.resume(handle.rootId, { provider })).result;
    expect(resumed).toMatchObject({ status: 'finished', reply: 'ran it' });
    expect((await store.steps(handle.rootId))[0]?.observations[0]?.content).toContain(process.version);
  });
});
