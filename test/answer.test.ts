/**
 * Answering a paused run through a running supervisor: the answer goes through its store
 * actor, its observers see it, the first answer stands, and a resume carries the run on.
 * Runs on both backends (vitest.config.ts); answerQuestion, from a process with no
 * supervisor, on the suite's backend too.
 */
import { describe, expect, it } from 'vitest';
import {
  answerQuestion,
  CallbackApprover,
  type HarnessEvent,
  OpenAI,
  Policy,
  Supervisor,
  TaskContract,
} from '../dist/index.js';
import { assistantTurns, ScriptedModelServer } from '../dist/testing/index.js';
import { openFresh } from './support/backends.js';
import { later, tempWorkspace } from './support/workspace.js';

describe('supervisor.answer', () => {
  it('answers through the store actor: observers see it, a second answer is refused, resume goes on', async () => {
    const root = tempWorkspace();
    const server = await ScriptedModelServer.start((call) =>
      assistantTurns(call) === 0
        ? { toolCalls: [{ name: 'exec', args: { argv: ['node', '--version'] } }] }
        : { text: 'done' },
    );
    later(() => server.close());
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const store = await openFresh();
    const supervisor = await Supervisor.start(store);
    later(() => supervisor.close());
    const seen: HarnessEvent[] = [];
    supervisor.observe((event) => seen.push(event));
    const paused = await supervisor.run({
      contract: TaskContract.workspace('print the node version', root),
      policy: Policy.default(),
      provider,
      approver: new CallbackApprover(() => 'defer'),
    }).result;
    expect(paused.status).toBe('paused');
    const [question] = await store.questions({ status: 'open' });
    expect(question?.kind).toBe('approval');
    const questionId = question?.questionId as string;

    await supervisor.answer(questionId, 'approve', { by: 'alice' });
    expect(seen.filter((event) => event.type === 'question-answered')).toMatchObject([
      { questionId, answer: 'approve', by: 'alice' },
    ]);
    await expect(supervisor.answer(questionId, 'deny', { by: 'bob' })).rejects.toMatchObject({
      code: 'ALREADY_ANSWERED',
      details: { answeredBy: 'alice' },
    });
    const resumed = await (await supervisor.resume(paused.rootId, { provider })).result;
    expect(resumed.status).toBe('finished');
    expect((await store.steps(paused.rootId))[0]?.observations[0]?.content).toContain(process.version);
    // answerQuestion, from no supervisor, on a question answered already: refused, naming the first.
    await expect(
      Promise.resolve().then(() => answerQuestion(store, questionId, 'deny', { by: 'carol' })),
    ).rejects.toMatchObject({
      code: 'ALREADY_ANSWERED',
    });
  });
});
