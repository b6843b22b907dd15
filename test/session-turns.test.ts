/**
 * What a turn is and how a person reaches it while it runs, over the scripted model
 * server: a reply turn (one completion, no step) beside a work turn that goes on from its
 * first completion; a correction sent mid-turn (from this process and from another) that
 * the next request carries; an interrupt that ends the turn at the next boundary with its
 * steps kept; a contained turn that fans out to five children on one ledger, steered at
 * its root only; and the bad input around them refused with nothing written. Runs on
 * both backends (vitest.config.ts): on PostgreSQL a session's reads and steers are promises.
 */
import { describe, expect, it } from 'vitest';
import { ErrorCode, HarnessError, Policy, Session, Supervisor } from '../dist/index.js';
import type { ModelScript } from '../dist/testing/index.js';
import { type EitherStore, freshStore, openAt, openFresh, openInScript, sqlRows } from './support/backends.js';
import { runScript, serve, tempWorkspace } from './support/workspace.js';

type Message = { role: string; content?: unknown; tool_calls?: unknown[] };
type Request = { messages: Message[]; tools: string[] };

const policy = Policy.default().layer('test').allowRead('**');

/** The scripted server's requests as this test reads them: the messages, and the names of the tools offered. */
function requestOf(call: Parameters<ModelScript>[0]): Request {
  const body = call.body as { messages: Message[]; tools?: { function: { name: string } }[] };
  return { messages: body.messages, tools: (body.tools ?? []).map((tool) => tool.function.name) };
}

/** The first user message (the task of a child, the first turn of a root), and whether a tool result came last. */
function firstUser(messages: Message[]): string {
  return String(messages.find((message) => message.role === 'user')?.content ?? '');
}

function users(messages: Message[]): string[] {
  return messages.filter((message) => message.role === 'user').map((message) => String(message.content));
}

/** The error of a call that throws, or whose promise (a PostgreSQL store's answer) is rejected. */
async function thrown(action: () => unknown): Promise<HarnessError> {
  try {
    await action();
  } catch (error) {
    if (HarnessError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('expected the call to throw');
}

/** Runs `body` in a node process of its own, with `Session` and `store` (the store at `location`) in scope. */
async function inProcess(location: string, body: string): Promise<string> {
  const dist = new URL('../dist/index.js', import.meta.url).href;
  return runScript(
    `const { Session } = await import(${JSON.stringify(dist)});
     ${openInScript(location)}
     try { ${body} } catch (error) { console.log('error ' + error.code + ' ' + error.message); }
     await store.close();`,
  );
}

describe('session turns', () => {
  it('answers a greeting with one completion and no step; a request with work runs from that same completion', async () => {
    const root = tempWorkspace({ 'notes.txt': 'codeword: heron\n' });
    const path = await freshStore();
    const store = await openAt(path);
    const requests: Request[] = [];
    const { provider } = await serve((call) => {
      const request = requestOf(call);
      requests.push(request);
      const last = request.messages.at(-1);
      if (last?.role === 'tool') return { text: 'The notes say heron.' };
      if (String(last?.content).startsWith('hi, what do the notes say?'))
        return { text: 'Let me look.', toolCalls: [{ name: 'read_file', args: { path: 'notes.txt' } }] };
      return { text: 'Hello! What shall we work on?' };
    });
    const session = await Session.open(store, root);
    const greeting = await session.turn('hi', { provider, policy });
    expect(greeting.kind).toBe('reply');
    expect(greeting.reply).toBe('Hello! What shall we work on?');
    expect(requests).toHaveLength(1);
    // No step, no checkpoint; the one call recorded and its tokens drawn on the turn's ledger.
    expect(await store.steps(greeting.runId)).toEqual([]);
    expect(await sqlRows(path, 'SELECT * FROM checkpoints WHERE run_id = ?', greeting.runId)).toEqual([]);
    expect(await store.modelCalls({ rootId: greeting.runId })).toHaveLength(1);
    expect(greeting.usage.steps).toBe(0);
    expect(greeting.usage.tokens).toBeGreaterThan(0);
    expect((await store.account(greeting.runId))?.spent.tokens).toBe(greeting.usage.tokens);
    expect((await store.events(greeting.runId)).map((event) => event.type)).toEqual([
      'lease-taken',
      'run-start',
      // The window its request was fitted to (see context.test.ts).
      'context-window',
      'spend',
      'run-end',
    ]);
    expect((await session.turns())[0]).toMatchObject({ kind: 'reply', status: 'finished', reply: greeting.reply });

    const work = await session.turn('hi, what do the notes say?', { provider, policy });
    expect(work.kind).toBe('work');
    expect(work.reply).toBe('The notes say heron.');
    // Two requests in all: the first completion's tool call was acted on, not asked for again.
    expect(requests).toHaveLength(3);
    expect(requests[1]?.messages.at(-1)?.role).toBe('user');
    expect(requests[2]?.messages.at(-1)?.role).toBe('tool');
    const steps = await store.steps(work.runId);
    expect(steps.map((step) => step.completion.toolCalls.map((call) => call.name))).toEqual([['read_file'], []]);
    expect(steps[0]?.completion.text).toBe('Let me look.');
    // The reply turn is in the next turn's transcript like any other.
    expect(users(requests[1]?.messages ?? []).slice(0, 1)).toEqual(['hi']);
    expect(requests[1]?.messages[2]).toMatchObject({ role: 'assistant', content: 'Hello! What shall we work on?' });
  });

  it('does not close a turn whose contract has a gate as a reply: the gate still judges a text-only answer', async () => {
    const root = tempWorkspace();
    const store = await openFresh();
    const { provider } = await serve(() => ({ text: 'nothing to do' }));
    const session = await Session.open(store, root);
    const { TaskContract, Verification } = await import('../dist/index.js');
    const contract = TaskContract.workspace('check it', root).withVerification(
      Verification.command(['node', '-e', 'process.exit(1)']),
    );
    const turn = await session.turn('check it', { provider, policy, contract });
    expect(turn.kind).toBe('work');
    expect(turn.outcome.kind).toBe('gate-failed');
    expect((await store.gateEvaluations(turn.runId)).length).toBeGreaterThan(0);
    // Asking for replies on a gated run by hand skips no gate either.
    const supervisor = await Supervisor.start(store);
    const run = await supervisor.run({ contract, provider, policy, reply: true }).result;
    await supervisor.close();
    expect(run.status).toBe('gate-failed');
    expect((await store.steps(run.rootId)).length).toBeGreaterThan(0);
  });

  it('interrupts a turn paused on a person at once: it ends as interrupted and nothing of it is left to resume', async () => {
    const { CallbackApprover } = await import('../dist/index.js');
    const root = tempWorkspace({ 'notes.txt': 'old\n' });
    const path = await freshStore();
    const store = await openAt(path);
    const { provider } = await serve(() => ({
      toolCalls: [{ name: 'write_file', args: { path: 'notes.txt', content: 'new\n' } }],
    }));
    const session = await Session.open(store, root);
    const turn = session.turn('rewrite notes.txt', {
      provider,
      policy: Policy.default().layer('test').allowRead('**').askWrite('**'),
      approver: new CallbackApprover(() => 'defer'),
    });
    const paused = await turn;
    expect(paused.outcome.kind).toBe('paused');
    expect(paused.undelivered).toEqual([]);
    // The handle's result is in, but the turn has not ended: it can still be interrupted.
    await turn.interrupt();
    expect((await store.run(paused.runId))?.status).toBe('interrupted');
    expect((await session.turns())[0]).toMatchObject({ status: 'interrupted' });
    await expect(session.resumeTurn(paused.turnId)).rejects.toMatchObject({ code: ErrorCode.InvalidArgument });
    expect((await thrown(() => turn.steer('and more'))).code).toBe(ErrorCode.TurnEnded);
  });

  it('carries a correction sent mid-turn, from this process or another, into the next request and the trace', async () => {
    const root = tempWorkspace({ 'a.txt': 'alpha\n', 'b.txt': 'beta\n' });
    const path = await freshStore();
    const store = await openAt(path);
    const requests: Request[] = [];
    let steered: Promise<string> | null = null;
    let turn: ReturnType<Session<EitherStore>['turn']> | null = null;
    const { provider } = await serve(async (call) => {
      const request = requestOf(call);
      requests.push(request);
      const tools = request.messages.filter((message) => message.role === 'tool').length;
      if (tools === 0) {
        // While the first completion is on its way: one correction from here, one from another process.
        await turn?.steer('mention FLAMINGO too');
        steered = inProcess(
          path,
          `const session = await Session.resume(store, ${JSON.stringify(session.id)});
           const [running] = (await session.turns()).filter((t) => t.status === 'running');
           await session.steer(running.turnId, 'and PUFFIN');
           console.log('steered');`,
        );
        await steered;
        return { toolCalls: [{ name: 'read_file', args: { path: 'a.txt' } }] };
      }
      if (tools === 1) return { toolCalls: [{ name: 'read_file', args: { path: 'b.txt' } }] };
      return { text: 'done' };
    });
    const session = await Session.open(store, root);
    turn = session.turn('read the files', { provider, policy });
    const result = await turn;
    expect(await (steered as unknown as Promise<string>)).toContain('steered');
    expect(result.outcome.kind).toBe('finished');
    expect(result.undelivered).toEqual([]);
    expect(requests).toHaveLength(3);
    // The first request had neither; the second carried both, as the user's words after the first step's result.
    expect(JSON.stringify(requests[0]?.messages)).not.toMatch(/FLAMINGO|PUFFIN/);
    const second = requests[1]?.messages ?? [];
    expect(second.slice(-3)).toMatchObject([
      { role: 'tool' },
      { role: 'user', content: 'mention FLAMINGO too' },
      { role: 'user', content: 'and PUFFIN' },
    ]);
    // The third still has them, where they were given.
    expect(users(requests[2]?.messages ?? []).slice(1)).toEqual(['mention FLAMINGO too', 'and PUFFIN']);
    const events = (await store.events(result.runId)).filter((event) => event.type === 'steered');
    expect(events).toMatchObject([
      { type: 'steered', text: 'mention FLAMINGO too', before: 2, seq: 1 },
      { type: 'steered', text: 'and PUFFIN', before: 2, seq: 1 },
    ]);
    // The next turn's transcript keeps the corrections where they came.
    requests.length = 0;
    await session.turn('thanks', { provider, policy });
    expect(users(requests[0]?.messages ?? []).slice(1, 3)).toEqual(['mention FLAMINGO too', 'and PUFFIN']);
  });

  it('takes a correction sent before the turn\u2019s run exists, at its first boundary, with none lost', async () => {
    const root = tempWorkspace({ 'a.txt': 'alpha\n' });
    const store = await openFresh();
    const requests: Request[] = [];
    const { provider } = await serve((call) => {
      const request = requestOf(call);
      requests.push(request);
      return request.messages.some((message) => message.role === 'tool')
        ? { text: 'done' }
        : { toolCalls: [{ name: 'read_file', args: { path: 'a.txt' } }] };
    });
    const session = await Session.open(store, root);
    const turn = session.turn('read a.txt', { provider, policy });
    // Sent at once: the handle holds them until the run is there, then sends them in order.
    await turn.steer('EARLY ONE');
    await turn.steer('EARLY TWO');
    const result = await turn;
    expect(result.outcome.kind).toBe('finished');
    expect(result.undelivered).toEqual([]);
    expect(
      (await store.events(result.runId)).filter((event) => event.type === 'steered').map((event) => event.text),
    ).toEqual(['EARLY ONE', 'EARLY TWO']);
    expect(users(requests.at(-1)?.messages ?? []).slice(1)).toEqual(['EARLY ONE', 'EARLY TWO']);
  });

  it('ends an interrupted turn at the next boundary, its steps kept; steering or interrupting it after is refused', async () => {
    const root = tempWorkspace({ 'a.txt': 'alpha\n' });
    const path = await freshStore();
    const store = await openAt(path);
    let requests = 0;
    let turn: ReturnType<Session<EitherStore>['turn']> | null = null;
    const { provider } = await serve(async () => {
      requests++;
      // Interrupted while its second completion is on its way: that step commits, and the turn ends after it.
      if (requests === 2) await turn?.interrupt();
      return { toolCalls: [{ name: 'read_file', args: { path: 'a.txt' } }] };
    });
    const session = await Session.open(store, root);
    turn = session.turn('read a.txt forever', { provider, policy });
    const result = await turn;
    expect(result.outcome).toMatchObject({ kind: 'interrupted', reason: 'interrupted by the user' });
    expect(requests).toBe(2);
    expect(await store.steps(result.runId)).toHaveLength(2);
    expect((await store.run(result.runId))?.status).toBe('interrupted');
    expect((await store.events(result.runId)).at(-1)).toMatchObject({ type: 'run-end', status: 'interrupted' });
    expect((await session.turns())[0]).toMatchObject({ status: 'interrupted', kind: 'work' });
    expect(await session.head).toBe(result.turnId);
    // Too late now, from the handle or by id: a clear error, and no row written.
    const before = await sqlRows(path, 'SELECT COUNT(*) AS n FROM steers');
    expect((await thrown(() => turn?.steer('and more'))).code).toBe(ErrorCode.TurnEnded);
    expect((await thrown(() => turn?.interrupt())).code).toBe(ErrorCode.TurnEnded);
    const byId = await thrown(() => session.steer(result.turnId, 'and more'));
    expect(byId.code).toBe(ErrorCode.TurnEnded);
    expect(byId.message).toContain('has ended (interrupted)');
    expect((await thrown(() => session.interrupt(result.turnId))).code).toBe(ErrorCode.TurnEnded);
    expect((await thrown(() => session.steer('no-such-turn', 'x'))).code).toBe(ErrorCode.TurnNotFound);
    expect((await thrown(() => turn?.steer(''))).code).toBe(ErrorCode.InvalidArgument);
    expect(await sqlRows(path, 'SELECT COUNT(*) AS n FROM steers')).toEqual(before);
  });

  it('fans a contained turn out to five children on its one ledger, steered at the root only; a plain turn has no spawn', async () => {
    const root = tempWorkspace();
    const path = await freshStore();
    const store = await openAt(path);
    const requests: Request[] = [];
    let turn: ReturnType<Session<EitherStore>['turn']> | null = null;
    const { provider } = await serve(async (call) => {
      const request = requestOf(call);
      requests.push(request);
      const task = firstUser(request.messages);
      if (task.startsWith('part ')) {
        // The first child to be asked is when the root is corrected.
        if (task.startsWith('part 1')) await turn?.steer('say OSPREY at the end');
        return { text: `${task.split('\n')[0]} done` };
      }
      const last = request.messages.at(-1);
      // After the children: the correction, if it came, is the last message, after their results.
      if (request.messages.some((message) => message.role === 'tool'))
        return { text: `all five done${JSON.stringify(request.messages).includes('OSPREY') ? ', OSPREY' : ''}` };
      if (String(last?.content).startsWith('split the work'))
        return {
          toolCalls: [1, 2, 3, 4, 5].map((n) => ({ name: 'spawn_agent', args: { task: `part ${n}`, wait: true } })),
        };
      return { text: 'plain' };
    });
    const session = await Session.open(store, root);
    const seen: { runId: string; type: string }[] = [];
    turn = session.turn('split the work', {
      provider,
      policy,
      contained: { maxTotalAgents: 6, maxConcurrentAgents: 2 },
      observer: (event) => seen.push({ runId: event.runId, type: event.type }),
    });
    const result = await turn;
    expect(result.outcome.kind).toBe('finished');
    expect(result.reply).toBe('all five done, OSPREY');
    const runs = await store.runs(result.runId);
    expect(runs).toHaveLength(6);
    const children = runs.filter((run) => run.parentId === result.runId);
    expect(children).toHaveLength(5);
    expect(children.every((run) => run.status === 'finished')).toBe(true);
    // One ledger: every draw of the tree is on the turn's root, and it holds them all.
    const draws = await sqlRows(
      path,
      'SELECT DISTINCT root_id FROM draws WHERE run_id IN (SELECT run_id FROM runs WHERE root_id = ?)',
      result.runId,
    );
    expect(draws).toEqual([{ root_id: result.runId }]);
    let steps = 0;
    for (const run of runs) steps += (await store.steps(run.runId)).length;
    expect(result.usage.steps).toBe(steps);
    expect((await store.account(result.runId))?.spent.steps).toBe(steps);
    // The caller's observer heard the children too.
    for (const child of children) expect(seen).toContainEqual({ runId: child.runId, type: 'run-start' });
    // The correction reached the root and no child.
    const childRequests = requests.filter((request) => firstUser(request.messages).startsWith('part '));
    expect(childRequests).toHaveLength(5);
    for (const request of childRequests) expect(JSON.stringify(request.messages)).not.toContain('OSPREY');
    expect((await store.events(result.runId)).filter((event) => event.type === 'steered')).toHaveLength(1);
    for (const child of children)
      expect((await store.events(child.runId)).filter((event) => event.type === 'steered')).toEqual([]);
    // A child is not steered by id either.
    const childId = children[0]?.runId as string;
    const steer = { runId: childId, kind: 'steer', text: 'x', by: 'x', now: 1 } as const;
    expect(
      (await thrown(() => (store.kind === 'postgres' ? store.call('steer', steer) : store.write('steer', steer))))
        .message,
    ).toMatch(/only the root of a turn is steered/);
    // The contained turn was offered spawn_agent; a plain turn is not.
    expect(requests[0]?.tools).toContain('spawn_agent');
    requests.length = 0;
    await session.turn('and now?', { provider, policy });
    expect(requests[0]?.tools).not.toContain('spawn_agent');
    expect(requests[0]?.tools).toContain('read_file');
  });

  it('runs every turn on a supervisor the embedder keeps, leaves it running, and refuses one on another store', async () => {
    const root = tempWorkspace();
    const store = await openFresh();
    const { provider } = await serve(() => ({ text: 'hello' }));
    const supervisor = await Supervisor.start(store);
    const heard = new Set<string>();
    supervisor.observe((event) => heard.add(event.runId));
    const session = await Session.open(store, root, { supervisor });
    const first = await session.turn('hi', { provider, policy });
    const second = await session.turn('hi again', { provider, policy });
    expect([first.kind, second.kind]).toEqual(['reply', 'reply']);
    expect(heard).toEqual(new Set([first.runId, second.runId]));
    // Still the embedder's: it runs the next tree, and a resumed session uses it too.
    const again = await Session.resume(store, session.id, { supervisor });
    expect((await again.turn('and again', { provider, policy })).kind).toBe('reply');
    expect(heard.size).toBe(3);
    const other = await openFresh();
    await expect(Session.open(other, root, { supervisor })).rejects.toMatchObject({
      code: ErrorCode.InvalidArgument,
      message: expect.stringContaining('start it on the same store'),
    });
    await expect(Session.open(store, root, { supervisor: {} as never })).rejects.toMatchObject({
      code: ErrorCode.InvalidArgument,
    });
    expect(await other.sessions()).toEqual([]);
    await supervisor.close();
  });

  it('refuses a contained option that is not whole numbers of at least one, writing nothing', async () => {
    const root = tempWorkspace();
    const path = await freshStore();
    const store = await openAt(path);
    const { provider } = await serve(() => ({ text: 'x' }));
    const session = await Session.open(store, root);
    for (const contained of [
      { maxTotalAgents: 0 },
      { maxTotalAgents: 2.5 },
      { maxConcurrentAgents: 2 },
      { maxTotalAgents: 3, wide: 1 },
      'many',
    ]) {
      const error = await session.turn('go', { provider, policy, contained: contained as never }).then(
        () => null,
        (caught: unknown) => caught as HarnessError,
      );
      expect(error?.code).toBe(ErrorCode.InvalidArgument);
      expect(error?.message).toMatch(/contained/);
    }
    expect(await session.turns()).toEqual([]);
  });
});
