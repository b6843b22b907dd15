/**
 * The agent loop with no thread: one run driven in this test's own thread against the
 * SQLite backend of the store port and a scripted model, through a tool call, a refusal,
 * a pause on an approval, its resume, and the budget's end; and the phases a run moves
 * through (preparing, planning, working, cancelling, ended).
 */
import { join } from 'node:path';
import { isMainThread, threadId } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { runAgent } from '../dist/actors/agent/loop.js';
import { systemClock } from '../dist/clock.js';
import { type ModuleProviderSpec, Policy, TaskContract, Verification } from '../dist/index.js';
import { directExecutor, type Executor } from '../dist/runtime/exec/executor.js';
import type { AgentHost } from '../dist/runtime/tools/ports.js';
import { openLocalStore } from '../dist/store/sqlite/local.js';
import { TraceReader } from '../dist/store/sqlite/reader.js';
import { stubHost } from './support/hosts.js';
import { createLoneRoot } from './support/in-process.js';
import { tempStorePath } from './support/processes.js';
import { later, tempWorkspace } from './support/workspace.js';
import { claimOf } from './support/writer.js';

const SCRIPT = join(import.meta.dirname, 'support', 'scripts', 'turns.mjs');

describe('an agent run in-process', () => {
  it('sends its start and its window to the store before waiting on either', async () => {
    const path = tempStorePath();
    const store = openLocalStore(path);
    later(() => store.close());
    const provider = { kind: 'module' as const, module: SCRIPT, options: { turns: [{ text: 'done', toolCalls: [] }] } };
    const runId = 'start-ahead';
    const generation = await createLoneRoot(store, {
      runId,
      task: 'say done',
      spec: { provider, policy: Policy.default().toJSON() },
      owner: 'o',
    });
    // A store that holds the answer to the run's first record of events until it is sent its
    // second: a run that waited for the first before sending the second would wait for ever.
    const seen: string[] = [];
    let release: (() => void) | null = null;
    const held = {
      ...store,
      call: (async (op: string, input: unknown) => {
        const records = seen.filter((entry) => entry.startsWith('sent recordEvents')).length;
        if (op === 'recordEvents')
          seen.push(`sent recordEvents ${(input as { events: { type: string }[] }).events[0]?.type}`);
        const answer = await (store.call as (op: string, input: unknown) => Promise<unknown>)(op, input);
        if (op === 'recordEvents' && records === 0) await new Promise<void>((resolve) => (release = resolve));
        else if (op === 'recordEvents') release?.();
        if (op === 'recordEvents')
          seen.push(`answered recordEvents ${(input as { events: { type: string }[] }).events[0]?.type}`);
        return answer;
      }) as typeof store.call,
    };
    const run = runAgent(
      { type: 'start', runId, generation, owner: 'o', resumed: false, provider },
      { store: held, host: stubHost(), clock: systemClock },
    );
    expect(await run.exit).toEqual({ kind: 'ended', status: 'finished' });
    expect(seen.slice(0, 2)).toEqual(['sent recordEvents run-start', 'sent recordEvents context-window']);
    // Committed in the order sent.
    const reader = new TraceReader(path);
    later(() => reader.close());
    const types = reader.events(runId).map((event) => event.type);
    expect(types.indexOf('run-start')).toBeLessThan(types.indexOf('context-window'));
  });

  it("asks the store for all it restores at once: the run's row, spec, steps, events and draft", async () => {
    const path = tempStorePath();
    const store = openLocalStore(path);
    later(() => store.close());
    const provider = { kind: 'module' as const, module: SCRIPT, options: { turns: [{ text: 'done', toolCalls: [] }] } };
    const runId = 'restore-together';
    const generation = await createLoneRoot(store, {
      runId,
      task: 'say done',
      spec: { provider, policy: Policy.default().toJSON() },
      owner: 'o',
    });
    // Each of the five reads, when its answer comes (a turn of the event loop later, as a
    // server's would): which of the others had been asked by then.
    const asked = new Set<string>();
    const askedBefore: Record<string, string[]> = {};
    const restoring = ['run', 'spec', 'steps', 'events', 'draft'] as const;
    const reads = { ...store } as Record<string, unknown>;
    for (const name of restoring) {
      const read = (store as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>)[name];
      reads[name] = async (...args: unknown[]) => {
        asked.add(name);
        const answer = await read?.apply(store, args);
        await new Promise((resolve) => setImmediate(resolve));
        askedBefore[name] ??= restoring.filter((other) => asked.has(other));
        return answer;
      };
    }
    const run = runAgent(
      { type: 'start', runId, generation, owner: 'o', resumed: false, provider },
      { store: reads as unknown as typeof store, host: stubHost(), clock: systemClock },
    );
    expect(await run.exit).toEqual({ kind: 'ended', status: 'finished' });
    // The run's row was not waited for before the rest was asked: one wait on a server's store, not two.
    expect(askedBefore.run).toEqual([...restoring]);
  });

  it('calls a tool, is refused, pauses on an approval, resumes, and ends on its step ceiling', async () => {
    const root = tempWorkspace({ 'a.txt': 'alpha\n' });
    const path = tempStorePath();
    const store = openLocalStore(path);
    later(() => store.close());
    const provider = {
      kind: 'module' as const,
      module: SCRIPT,
      options: {
        turns: [
          {
            text: 'reading',
            toolCalls: [
              { name: 'read_file', args: { path: 'a.txt' } },
              { name: 'read_file', args: { path: '../outside.txt' } },
            ],
          },
          { text: 'running', toolCalls: [{ name: 'exec', args: { argv: ['node', '--version'] } }] },
          { text: 'again', toolCalls: [{ name: 'read_file', args: { path: 'a.txt' } }] },
          { text: 'never asked', toolCalls: [] },
        ],
      },
    };
    const contract = TaskContract.workspace('read a.txt and print the node version', root).toJSON();
    const runId = 'in-process-root';
    const generation = await createLoneRoot(store, {
      runId,
      task: 'read a.txt and print the node version',
      spec: { provider, contract, policy: Policy.default().toJSON() },
      ceilings: { steps: 3 },
      owner: 'first',
    });
    const asked: string[] = [];
    const host = (answer: 'defer' | 'approve'): AgentHost =>
      stubHost({
        approve: async (request) => {
          asked.push(`${request.act.kind} ${request.subject}`);
          return answer;
        },
      });

    expect(isMainThread).toBe(true);
    const first = runAgent(
      { type: 'start', runId, generation, owner: 'first', resumed: false, provider },
      { store, host: host('defer'), clock: systemClock },
    );
    expect(await first.exit).toEqual({ kind: 'ended', status: 'paused' });
    expect(asked).toEqual(['exec node --version']);

    const open = await store.call('answer', {
      questionId: `approval:${runId}:2:0`,
      answer: 'approve',
      by: 'test',
      now: Date.now(),
    });
    expect(open).toEqual({ runId, rootId: runId });
    const resumed = await store.call('resumePaused', { runId, ...claimOf({ owner: 'second' }) });
    expect(resumed.status).toBe('resumed');
    const second = runAgent(
      {
        type: 'start',
        runId,
        generation: (resumed as { generation: number }).generation,
        owner: 'second',
        resumed: true,
        provider,
      },
      { store, host: host('approve'), clock: systemClock },
    );
    expect(await second.exit).toEqual({ kind: 'ended', status: 'budget-exhausted' });
    // The stored answer served the resume: the approver was not asked again.
    expect(asked).toEqual(['exec node --version']);

    const reader = new TraceReader(path);
    later(() => reader.close());
    expect(reader.run(runId)?.status).toBe('budget-exhausted');
    const steps = reader.steps(runId);
    expect(steps.map((step) => step.observations.map((o) => [o.name, o.isError]))).toEqual([
      [
        ['read_file', false],
        ['read_file', true],
      ],
      [['exec', false]],
      [['read_file', false]],
    ]);
    expect(steps[0]?.observations[0]?.content).toContain('alpha');
    expect(steps[1]?.observations[0]?.content).toContain(process.version);
    const events = reader.events(runId);
    expect(events.filter((event) => event.type === 'refusal')).toMatchObject([
      { tool: 'read_file', rule: 'workspace.boundary', layer: 'runtime' },
    ]);
    expect(events.filter((event) => event.type === 'policy-decision' && event.act === 'exec')).toMatchObject([
      { effect: 'ask', answer: 'defer' },
      { effect: 'ask', answer: 'approve' },
    ]);
    expect(events.filter((event) => event.type === 'budget-exhausted')).toMatchObject([
      { ceiling: 'steps', account: runId, limit: 3 },
    ]);
    // The loop ran in this test's own thread, with no agent worker behind it.
    expect(threadId).toBe(0);
  });
});

describe('the executor', () => {
  it('starts every command of a run: exec, shell, shell_start, the checker and the gate', async () => {
    const root = tempWorkspace({ 'package.json': '{"name":"x","private":true}\n' });
    const path = tempStorePath();
    const store = openLocalStore(path);
    later(() => store.close());
    const provider: ModuleProviderSpec = {
      kind: 'module' as const,
      module: SCRIPT,
      options: {
        turns: [
          {
            text: 'working',
            toolCalls: [
              { name: 'write_file', args: { path: 'b.txt', content: 'beta\n' } },
              { name: 'exec', args: { argv: ['node', '-e', 'console.log(1)'] } },
              { name: 'shell', args: { command: 'node -e "console.log(2)"' } },
              { name: 'shell_start', args: { command: 'node -e "console.log(3)"' } },
            ],
          },
          { text: 'done', toolCalls: [] },
        ],
      },
    };
    const contract = TaskContract.workspace('run things', root)
      .withToolchain({ node: { check: ['node', '-e', 'process.exit(0)'] } })
      .withVerification(Verification.command(['node', '-e', 'process.exit(0)']))
      .toJSON();
    const policy = Policy.default().layer('test').allowWrite('**').allowExec('node *');
    const runId = 'executor-root';
    const generation = await createLoneRoot(store, {
      runId,
      task: 'run things',
      spec: { provider, contract, policy: policy.toJSON() },
      owner: 'only',
    });
    const started: string[] = [];
    const recording: Executor = {
      run: (request) => {
        started.push(`${request.purpose}: ${request.argv.join(' ')}`);
        return directExecutor.run(request);
      },
      start: (request) => {
        started.push(`${request.purpose}: ${request.argv.join(' ')}`);
        return directExecutor.start(request);
      },
      containment: () => directExecutor.containment(),
    };
    const host = stubHost();
    const { exit } = runAgent(
      { type: 'start', runId, generation, owner: 'only', resumed: false, provider },
      { store, host, clock: systemClock, executor: recording },
    );
    expect(await exit).toEqual({ kind: 'ended', status: 'finished' });
    expect(started.map((line) => line.replace(/ -c /, ' -c ').replace(/^(\w+): \S*sh -c /, '$1: sh -c '))).toEqual([
      'checker: node -e process.exit(0)',
      'exec: node -e console.log(1)',
      'shell: sh -c node -e "console.log(2)"',
      'shell_start: sh -c node -e "console.log(3)"',
      'gate: node -e process.exit(0)',
    ]);
    const reader = new TraceReader(path);
    later(() => reader.close());
    const observations = reader.steps(runId)[0]?.observations ?? [];
    expect(observations.map((o) => [o.name, o.isError])).toEqual([
      ['write_file', false],
      ['exec', false],
      ['shell', false],
      ['shell_start', false],
    ]);
    expect(reader.events(runId).filter((event) => event.type === 'gate-evaluated')).toMatchObject([
      { verdict: 'passed' },
    ]);
  });
});

describe('the run phase', () => {
  it('moves from preparing to planning, to working once the plan is approved, and to ended', async () => {
    const root = tempWorkspace();
    const path = tempStorePath();
    const store = openLocalStore(path);
    later(() => store.close());
    const provider: ModuleProviderSpec = {
      kind: 'module' as const,
      module: SCRIPT,
      options: {
        turns: [
          { text: 'planning', toolCalls: [{ name: 'submit_plan', args: { steps: [{ description: 'write b' }] } }] },
          { text: 'writing', toolCalls: [{ name: 'write_file', args: { path: 'b.txt', content: 'beta\n' } }] },
          { text: 'done', toolCalls: [] },
        ],
      },
    };
    const contract = TaskContract.workspace('write b', root).withPlanGate().toJSON();
    const policy = Policy.default().layer('test').allowWrite('**');
    const runId = 'phases-root';
    const generation = await createLoneRoot(store, {
      runId,
      task: 'write b',
      spec: { provider, contract, policy: policy.toJSON() },
      owner: 'only',
    });
    const seen: string[] = [];
    const live = {
      publish: (data: { type: string }) => {
        if (data.type === 'tool-call-start') seen.push(handle.agent.phase);
      },
      flush: () => Promise.resolve(),
    };
    const host = stubHost({ reviewPlan: async () => ({ decision: 'approve' }) });
    const handle = runAgent(
      { type: 'start', runId, generation, owner: 'only', resumed: false, provider },
      { store, host, clock: systemClock, live },
    );
    expect(handle.agent.phase).toBe('preparing');
    expect(await handle.exit).toEqual({ kind: 'ended', status: 'finished' });
    expect(seen).toEqual(['planning', 'working']);
    expect(handle.agent.phase).toBe('ended');
  });

  it('is cancelling from a cancel until the run has left, and a cancel ends the run as cancelled', async () => {
    const root = tempWorkspace();
    const path = tempStorePath();
    const store = openLocalStore(path);
    later(() => store.close());
    const provider: ModuleProviderSpec = {
      kind: 'module' as const,
      module: SCRIPT,
      options: { turns: [{ text: 'asking', toolCalls: [{ name: 'ask_operator', args: { question: 'which?' } }] }] },
    };
    const contract = TaskContract.workspace('ask', root).toJSON();
    const runId = 'cancel-root';
    const generation = await createLoneRoot(store, {
      runId,
      task: 'ask',
      spec: { provider, contract, policy: Policy.default().toJSON() },
      owner: 'only',
    });
    const phases: string[] = [];
    // The operator is asked, and the run is cancelled while the question waits.
    const host = stubHost({
      askOperator: () => {
        phases.push(handle.agent.phase);
        handle.agent.cancel('the test cancelled it');
        phases.push(handle.agent.phase);
        return new Promise(() => undefined);
      },
    });
    const handle = runAgent(
      { type: 'start', runId, generation, owner: 'only', resumed: false, provider },
      { store, host, clock: systemClock },
    );
    expect(await handle.exit).toEqual({ kind: 'ended', status: 'cancelled' });
    expect(phases).toEqual(['working', 'cancelling']);
    expect(handle.agent.phase).toBe('ended');
    const reader = new TraceReader(path);
    later(() => reader.close());
    expect(reader.run(runId)?.outcome).toEqual({ status: 'cancelled', reason: 'the test cancelled it' });
  });
});
