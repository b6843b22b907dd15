/**
 * Runs that wait on a person: a deferred approval answered from another process after the
 * first exited; the plan gate approving, correcting, cancelling and deferring; a question
 * to the operator; a command interrupted by SIGKILL resuming paused on its intent; a child
 * that asks for more than its parent has. Runs on both backends (vitest.config.ts).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { answerQuestion, type PlanDecision, Policy, runWith, Supervisor, TaskContract } from '../dist/index.js';
import { assistantTurns, type ModelScript } from '../dist/testing/index.js';
import { freshStore, openAt, openFresh } from './support/backends.js';
import { Driver } from './support/processes.js';
import { drive, failure, later, serve, taskOf, tempWorkspace, turns } from './support/workspace.js';

describe('a deferred approval', () => {
  it('pauses the run; another process answers after the first exited; the first answer wins; resume continues', async () => {
    const root = tempWorkspace();
    const path = await freshStore();
    const base = {
      store: path,
      wireScript: 'workspace-command#commandScript',
      options: { argv: ['node', '--version'] },
      workspace: { goal: 'print the node version', root, policy: 'default' as const },
    };
    // Policy.default() asks about every command; this process's approver defers.
    const first = await drive({ ...base, mode: 'run', approver: 'defer' });
    expect(first.result?.status, first.stderr).toBe('paused');
    expect((await first.exited).code).toBe(0);
    const rootId = first.rootId as string;

    const store = await openAt(path);
    const open = await store.questions({ status: 'open' });
    expect(open).toHaveLength(1);
    expect(open[0]).toMatchObject({
      kind: 'approval',
      runId: rootId,
      payload: { subject: 'node --version', rule: 'ask-exec *', layer: 'default' },
    });
    const questionId = open[0]?.questionId as string;
    expect(await answerQuestion(store, questionId, 'approve', { by: 'alice' })).toEqual({ runId: rootId, rootId });
    const late = await failure(() => answerQuestion(store, questionId, 'deny', { by: 'bob' }));
    expect(late.code).toBe('ALREADY_ANSWERED');
    expect(late.message).toContain('alice');
    expect(await store.question(questionId)).toMatchObject({
      status: 'answered',
      answer: 'approve',
      answeredBy: 'alice',
    });
    expect((await failure(() => answerQuestion(store, 'approval:nope', 'approve'))).code).toBe('QUESTION_NOT_FOUND');

    // A third process resumes; it has no approver at all, and needs none: the answer is stored.
    const third = await drive({ ...base, mode: 'resume', rootId });
    expect(third.result?.status, third.stderr).toBe('finished');
    const observations = (await store.steps(rootId)).flatMap((step) => step.observations);
    expect(observations[0]?.content).toMatch(/node --version exited with status 0/);
    const decisions = (await store.events(rootId)).filter((event) => event.type === 'policy-decision');
    expect(decisions.map((event) => event.answer)).toEqual(['defer', 'approve']);
  }, 60_000);

  it('refuses an answer of the wrong shape, storing nothing', async () => {
    const root = tempWorkspace();
    const store = await openFresh();
    const { provider } = await serve(
      turns([{ text: 'x', toolCalls: [{ name: 'exec', args: { argv: ['node', '--version'] } }] }, { text: 'done' }]),
    );
    const result = await runWith(TaskContract.workspace('version', root), provider, store, Policy.default(), {
      decide: () => 'defer',
    });
    expect(result.outcome).toMatchObject({ kind: 'paused' });
    const [question] = await store.questions({ status: 'open' });
    const error = await failure(() => answerQuestion(store, question?.questionId as string, 'yes please'));
    expect(error.code).toBe('INVALID_ARGUMENT');
    expect((await store.question(question?.questionId as string))?.status).toBe('open');
  });
});

describe('the plan gate', () => {
  const planThenWork = () =>
    turns([
      {
        text: 'trying to write first',
        toolCalls: [{ name: 'write_file', args: { path: 'a.txt', content: 'early\n' } }],
      },
      {
        text: 'planning',
        toolCalls: [
          {
            name: 'submit_plan',
            args: { steps: [{ description: 'write a.txt' }, { description: 'check it', owner: 'root' }] },
          },
        ],
      },
      { text: 'working', toolCalls: [{ name: 'write_file', args: { path: 'a.txt', content: 'planned\n' } }] },
      { text: 'done' },
    ]);

  async function planned(gate: ((plan: unknown) => PlanDecision) | null) {
    const root = tempWorkspace();
    const store = await openFresh();
    const { provider, server } = await serve(planThenWork());
    const result = await runWith(
      TaskContract.workspace('write a.txt', root).withPlanGate(),
      provider,
      store,
      Policy.default(),
      undefined,
      gate ? { planGate: { review: gate } } : {},
    );
    return { root, store, result, server, provider };
  }

  it('refuses writes while planning, then lets an approved plan be carried out', async () => {
    const seen: unknown[] = [];
    const { root, store, result } = await planned((plan) => {
      seen.push(plan);
      return { decision: 'approve' };
    });
    expect(result.outcome.kind).toBe('finished');
    expect(readFileSync(join(root, 'a.txt'), 'utf8')).toBe('planned\n');
    const refusals = (await store.events(result.runId)).filter((event) => event.type === 'refusal');
    expect(refusals.map((event) => [event.tool, event.rule])).toEqual([['write_file', 'plan-gate']]);
    expect(seen).toMatchObject([
      { steps: [{ description: 'write a.txt' }, { description: 'check it', owner: 'root' }] },
    ]);
    expect((await store.events(result.runId)).filter((event) => event.type === 'plan-decided')).toMatchObject([
      { decision: 'approve' },
    ]);
  });

  it('carries out the corrected plan when the gate corrects it', async () => {
    const { store, result } = await planned(() => ({
      decision: 'correct',
      steps: [{ description: 'write a.txt, then stop' }],
      note: 'no check needed',
    }));
    expect(result.outcome.kind).toBe('finished');
    const told = (await store.steps(result.runId))[1]?.observations[0]?.content;
    expect(told).toContain('corrected and approved (no check needed)');
    expect(told).toContain('1. write a.txt, then stop');
  });

  it('ends the run cancelled when the gate cancels it, having written nothing', async () => {
    const { root, store, result } = await planned(() => ({ decision: 'cancel', note: 'not now' }));
    expect(result.outcome).toEqual({ kind: 'cancelled', reason: 'the plan gate cancelled the run: not now' });
    expect(existsSync(join(root, 'a.txt'))).toBe(false);
    expect((await store.events(result.runId)).some((event) => event.type === 'plan-decided')).toBe(true);
  });

  it('stores the plan and pauses with no gate in the process; an answer and a resume carry it out', async () => {
    const { root, store, result, server, provider } = await planned(null);
    expect(result.outcome).toMatchObject({ kind: 'paused' });
    const [question] = await store.questions({ status: 'open' });
    expect(question).toMatchObject({ kind: 'plan', payload: { steps: [{ description: 'write a.txt' }, {}] } });
    await answerQuestion(store, question?.questionId as string, { decision: 'approve' });
    const calls = server.calls.length;
    const supervisor = await Supervisor.start(store);
    later(() => supervisor.close());
    const tree = await (await supervisor.resume(result.runId, { provider })).result;
    expect(tree.status).toBe('finished');
    expect(readFileSync(join(root, 'a.txt'), 'utf8')).toBe('planned\n');
    // The paused step's completion was kept: resuming it did not ask the model again.
    expect(server.calls.length).toBe(calls + 2);
  });
});

describe('asking the operator', () => {
  it('answers in process, or pauses with the question and resumes on the stored answer', async () => {
    const root = tempWorkspace();
    const store = await openFresh();
    const script = turns([
      { text: 'unsure', toolCalls: [{ name: 'ask_operator', args: { question: 'keep the old API?' } }] },
      { text: 'done as told' },
    ]);
    const live = await serve(script);
    const answered = await runWith(
      TaskContract.workspace('refactor', root),
      live.provider,
      store,
      Policy.default(),
      undefined,
      {
        operator: { answer: ({ question }) => `yes: ${question}` },
      },
    );
    expect(answered.outcome.kind).toBe('finished');
    expect((await store.steps(answered.runId))[0]?.observations[0]?.content).toBe(
      'The operator answered: yes: keep the old API?',
    );

    const afterwards = await serve(script);
    const paused = await runWith(
      TaskContract.workspace('refactor', root),
      afterwards.provider,
      store,
      Policy.default(),
    );
    expect(paused.outcome).toMatchObject({ kind: 'paused' });
    const [question] = await store.questions({ runId: paused.runId, status: 'open' });
    expect(question).toMatchObject({ kind: 'question', payload: { question: 'keep the old API?' } });
    const supervisor = await Supervisor.start(store);
    later(() => supervisor.close());
    await supervisor.answer(question?.questionId as string, 'no, drop it');
    await expect(supervisor.answer(question?.questionId as string, 'again')).rejects.toThrow(/already answered/);
    expect((await (await supervisor.resume(paused.runId, { provider: afterwards.provider })).result).status).toBe(
      'finished',
    );
    expect((await store.steps(paused.runId))[0]?.observations[0]?.content).toBe('The operator answered: no, drop it');
  });
});

describe('an interrupted command', () => {
  it('resumes paused on its intent after a SIGKILL, and a skip does not run it again', async () => {
    const root = tempWorkspace();
    const path = await freshStore();
    // The command leaves a mark each time it starts, then runs for a while.
    const argv = ['node', '-e', "require('fs').appendFileSync('starts.txt', 'x'); setTimeout(() => {}, 4000)"];
    const base = {
      store: path,
      wireScript: 'workspace-command#commandScript',
      options: { argv },
      workspace: { goal: 'run it', root },
    };
    const first = new Driver({ ...base, mode: 'run' });
    later(() => {
      first.child.kill('SIGKILL');
    });
    const store = await openAt(path);
    for (let i = 0; i < 500 && !existsSync(join(root, 'starts.txt')); i++) await new Promise((r) => setTimeout(r, 20));
    expect(existsSync(join(root, 'starts.txt'))).toBe(true);
    first.child.kill('SIGKILL');
    await first.exited;
    const rootId = first.rootId as string;
    expect(await store.intents(rootId)).toMatchObject([{ kind: 'exec', result: null }]);

    const second = await drive({ ...base, mode: 'resume', rootId });
    expect(second.result?.status, second.stderr).toBe('paused');
    const [question] = await store.questions({ status: 'open' });
    expect(question).toMatchObject({ kind: 'intent', runId: rootId });
    expect(JSON.stringify(question?.payload)).toContain('appendFileSync');
    await answerQuestion(store, question?.questionId as string, 'skip');
    const third = await drive({ ...base, mode: 'resume', rootId });
    expect(third.result?.status, third.stderr).toBe('finished');
    expect(readFileSync(join(root, 'starts.txt'), 'utf8')).toBe('x');
    expect((await store.steps(rootId))[0]?.observations[0]?.content).toContain('chose to skip it');
  }, 60_000);
});

describe('an interrupted retry', () => {
  it('asks again when the command a person chose to retry is itself interrupted, instead of running it a third time', async () => {
    const root = tempWorkspace();
    const path = await freshStore();
    const argv = ['node', '-e', "require('fs').appendFileSync('starts.txt', 'x'); setTimeout(() => {}, 4000)"];
    const base = {
      store: path,
      wireScript: 'workspace-command#commandScript',
      options: { argv },
      workspace: { goal: 'run it', root },
    };
    const store = await openAt(path);
    const starts = () =>
      existsSync(join(root, 'starts.txt')) ? readFileSync(join(root, 'starts.txt'), 'utf8').length : 0;
    const killOnStart = async (config: Parameters<typeof drive>[0], count: number) => {
      const driver = new Driver(config);
      later(() => {
        driver.child.kill('SIGKILL');
      });
      for (let i = 0; i < 500 && starts() < count; i++) await new Promise((r) => setTimeout(r, 20));
      driver.child.kill('SIGKILL');
      await driver.exited;
      return driver;
    };
    const first = await killOnStart({ ...base, mode: 'run' }, 1);
    const rootId = first.rootId as string;
    expect((await drive({ ...base, mode: 'resume', rootId })).result?.status).toBe('paused');
    const [asked] = await store.questions({ status: 'open' });
    await answerQuestion(store, asked?.questionId as string, 'retry');
    // The retry starts the command again (the second start), and that process dies too.
    await killOnStart({ ...base, mode: 'resume', rootId }, 2);
    const again = await drive({ ...base, mode: 'resume', rootId });
    expect(again.result?.status, again.stderr).toBe('paused');
    const open = await store.questions({ status: 'open' });
    expect(open).toHaveLength(1);
    expect(open[0]?.questionId).not.toBe(asked?.questionId);
    await answerQuestion(store, open[0]?.questionId as string, 'skip');
    expect((await drive({ ...base, mode: 'resume', rootId })).result?.status).toBe('finished');
    expect(starts()).toBe(2);
  }, 90_000);
});

describe('a pause after a spawn in the same step', () => {
  it('settles the tree as paused, and a resume releases the child when the step commits', async () => {
    const root = tempWorkspace();
    const store = await openFresh();
    const script: ModelScript = (call) => {
      const task = taskOf(call);
      if (task.startsWith('helper')) return { text: 'helper done' };
      return assistantTurns(call) === 0
        ? {
            text: 'spawn, then run',
            toolCalls: [
              { name: 'spawn_agent', args: { task: 'helper work', as: 'helper', wait: false } },
              { name: 'exec', args: { argv: ['node', '--version'] } },
            ],
          }
        : { text: 'root done' };
    };
    const { provider } = await serve(script);
    const paused = await runWith(TaskContract.workspace('spawn and run', root), provider, store, Policy.default(), {
      decide: () => 'defer',
    });
    expect(paused.outcome).toMatchObject({ kind: 'paused' });
    const [question] = await store.questions({ status: 'open' });
    await answerQuestion(store, question?.questionId as string, 'approve');
    const supervisor = await Supervisor.start(store);
    later(() => supervisor.close());
    const tree = await (await supervisor.resume(paused.runId, { provider })).result;
    expect(tree.status).toBe('finished');
    expect((await store.runs(paused.runId)).find((run) => run.address === 'helper')?.status).toBe('finished');
  });
});

describe('inherit and narrow', () => {
  it('gives a child its parent policy plus deny-only layers, and refuses a child that asks for more', async () => {
    const root = tempWorkspace();
    const store = await openFresh();
    const script: ModelScript = (call) => {
      const task = taskOf(call);
      if (task.startsWith('write src')) {
        return assistantTurns(call) === 0
          ? { text: 'writing', toolCalls: [{ name: 'write_file', args: { path: 'src/x.txt', content: 'x\n' } }] }
          : { text: 'child done' };
      }
      return assistantTurns(call) === 0
        ? {
            text: 'delegating',
            toolCalls: [
              {
                name: 'spawn_agent',
                args: { task: 'write src/x.txt', as: 'narrow', policy: { deny: { write: ['src/**'] } } },
              },
              { name: 'spawn_agent', args: { task: 'anything', as: 'greedy', policy: { allow: { exec: ['*'] } } } },
            ],
          }
        : { text: 'root done' };
    };
    const { provider } = await serve(script);
    const result = await runWith(TaskContract.workspace('delegate', root), provider, store, Policy.default());
    expect(result.outcome.kind).toBe('finished');
    expect(existsSync(join(root, 'src', 'x.txt'))).toBe(false);
    const child = (await store.runs(result.runId)).find((run) => run.address === 'narrow');
    const refusal = (await store.events(child?.runId as string)).find((event) => event.type === 'refusal');
    expect(refusal).toMatchObject({ tool: 'write_file', rule: 'deny-write src/**' });
    expect(refusal?.type === 'refusal' && refusal.reason).toContain('layer narrowed for narrow by root');
    const rootRefusals = (await store.events(result.runId)).filter((event) => event.type === 'refusal');
    expect(rootRefusals).toMatchObject([{ tool: 'spawn_agent', rule: 'policy.narrow-only' }]);
    expect((await store.runs(result.runId)).some((run) => run.address === 'greedy')).toBe(false);
  });
});
