/**
 * Sessions over the scripted model server: each turn a run whose request begins with the
 * turns before it on its branch, a session re-opened from another process, two processes
 * racing a turn on one head, a branch from an earlier turn, and bad input refused with
 * nothing written. The model decides by the request it is sent, so what a turn's request
 * held is what the answers show. Runs on both backends (vitest.config.ts).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  Attach,
  CallbackApprover,
  ErrorCode,
  HarnessError,
  Policy,
  Session,
  TurnConflictError,
} from '../dist/index.js';
import type { ModelScript } from '../dist/testing/index.js';
import { freshStore, openAt, openFresh, openInScript } from './support/backends.js';
import { runScript, serve, tempWorkspace } from './support/workspace.js';

type Message = { role: string; content?: unknown; tool_calls?: unknown[] };

function messagesOf(call: Parameters<ModelScript>[0]): Message[] {
  return (call.body as { messages: Message[] }).messages;
}

/** The user message the request's own turn opened with, and what came after it. */
function ownTurn(messages: Message[]): { opening: string; after: Message[] } {
  let at = messages.length - 1;
  // A tool result is sent as a tool message; the opening is the last user message before the turn's steps
  // (a correction sent mid-turn comes after a tool result, and opens nothing).
  while (at >= 0 && (messages[at]?.role !== 'user' || messages[at - 1]?.role === 'tool')) at--;
  return { opening: String(messages[at]?.content ?? ''), after: messages.slice(at + 1) };
}

/** Every request the model was sent, by the opening of the turn it came from. */
const requests: { opening: string; messages: Message[] }[] = [];

/**
 * `read notes.txt` reads the file, then says so; `what was the code word?` answers from
 * whatever the request holds; `slow …` waits before answering; anything else is a reply.
 */
const script: ModelScript = async (call) => {
  const messages = messagesOf(call);
  const { opening, after } = ownTurn(messages);
  requests.push({ opening, messages });
  if (opening.startsWith('read notes.txt')) {
    if (!after.some((message) => message.role === 'tool'))
      return { text: 'reading', toolCalls: [{ name: 'read_file', args: { path: 'notes.txt' } }] };
    return { text: 'I read notes.txt.' };
  }
  if (opening.startsWith('what was the code word?')) {
    const all = JSON.stringify(messages);
    const word = /codeword: (\w+)/.exec(all)?.[1];
    return { text: word ? `The code word is ${word}.` : 'I have not seen a code word.' };
  }
  if (opening.startsWith('slow')) return { text: 'slowly answered', latencyMs: 1500 };
  return { text: `You said: ${opening.split('\n')[0]}` };
};

const policy = Policy.default().layer('test').allowRead('**');

/** Runs `body` (an async function's body, given `Session`, `store` and `provider`) in a node process of its own. */
async function inProcess(
  location: string,
  provider: unknown,
  body: string,
  started: (pid: number) => void = () => undefined,
): Promise<string> {
  const dist = new URL('../dist/index.js', import.meta.url).href;
  const code = `
    const { Session, Policy } = await import(${JSON.stringify(dist)});
    ${openInScript(location)}
    const provider = ${JSON.stringify(provider)};
    const policy = Policy.default().layer('test').allowRead('**');
    try { ${body} } catch (error) { console.log('error ' + error.code + ' ' + error.message); }
    await store.close();`;
  return runScript(code, started);
}

describe('sessions', () => {
  it("carries what turn 1's tool found to turn 3, across a second process that re-opens the session", async () => {
    const root = tempWorkspace({ 'notes.txt': 'codeword: pelican\n' });
    const path = await freshStore();
    const store = await openAt(path);
    const { provider } = await serve(script);
    const session = await Session.open(store, root);
    const first = await session.turn('read notes.txt', { provider, policy });
    expect(first.reply).toBe('I read notes.txt.');
    const second = await session.turn('thanks', { provider, policy });
    expect(second.reply).toMatch(/^You said: thanks/);
    expect(await session.head).toBe(second.turnId);
    // Turn 3 in another process, from the store alone.
    const said = await inProcess(
      path,
      provider,
      `const session = await Session.resume(store, ${JSON.stringify(session.id)});
       const third = await session.turn('what was the code word?', { provider, policy });
       console.log('reply ' + third.reply);`,
    );
    expect(said).toContain('reply The code word is pelican.');
    const turns = await session.turns();
    expect(turns.map((turn) => [turn.text, turn.status, turn.parent])).toEqual([
      ['read notes.txt', 'finished', null],
      ['thanks', 'finished', first.turnId],
      ['what was the code word?', 'finished', second.turnId],
    ]);
    expect(await session.head).toBe(turns[2]?.turnId);
    // Each turn is a run of its own, and the third's request held the first's tool result.
    expect(new Set(turns.map((turn) => turn.runId)).size).toBe(3);
    const third = requests.filter((request) => request.opening.startsWith('what was the code word?')).at(-1);
    expect(JSON.stringify(third?.messages)).toContain('codeword: pelican');
    expect(third?.messages.filter((message) => message.role === 'user').map((message) => message.content)).toEqual([
      'read notes.txt',
      'thanks',
      expect.stringMatching(/^what was the code word\?/),
    ]);
  });

  it('streams the reply as the model writes it, in order and before the outcome; a reader that stops stops nothing', async () => {
    const root = tempWorkspace({ 'notes.txt': 'codeword: heron\n' });
    const store = await openFresh();
    const { provider } = await serve(script);
    const session = await Session.open(store, root);
    const order: string[] = [];
    const handle = session.turn('stream a long answer, word by word, so that it comes in many pieces', {
      provider,
      policy,
    });
    void handle.result.then(() => order.push('result'));
    let text = '';
    for await (const event of handle) {
      if (event.type === 'text') {
        text += event.text;
        order.push('text');
      }
    }
    const result = await handle;
    expect(result.reply).toMatch(/^You said: stream a long answer/);
    expect(text).toBe(result.reply);
    expect(order.filter((item) => item === 'text').length).toBeGreaterThan(1);
    expect(order.indexOf('result')).toBe(order.length - 1);
    // A reader that leaves after the first piece: the turn goes on to its end, its tool calls seen by those who stay.
    const next = session.turn('read notes.txt', { provider, policy });
    for await (const _event of next) break;
    const seen: string[] = [];
    for await (const event of next) seen.push(event.type);
    expect((await next).reply).toBe('I read notes.txt.');
    expect(seen).toEqual(expect.arrayContaining(['text', 'tool-call-start', 'tool-call-end']));
    expect((await session.turns()).map((turn) => turn.status)).toEqual(['finished', 'finished']);
  });

  it('lets one of two processes racing a turn on one head win; the other gets ConflictError and its row stays', async () => {
    const root = tempWorkspace();
    const path = await freshStore();
    const store = await openAt(path);
    const { provider } = await serve(script);
    const session = await Session.open(store, root);
    await session.turn('hello', { provider, policy });
    // The other process begins a slow turn on the same head; this one begins a fast turn after it and ends first.
    const racing = inProcess(
      path,
      provider,
      `const session = await Session.resume(store, ${JSON.stringify(session.id)});
       await session.turn('slow answer please', { provider, policy });
       console.log('won');`,
    );
    for (let i = 0; i < 500 && (await session.turns()).length < 2; i++) await new Promise((r) => setTimeout(r, 10));
    expect(await session.turns()).toHaveLength(2);
    const fast = await session.turn('quick one', { provider, policy });
    const said = await racing;
    expect(said).toMatch(/error CONFLICT session \S+: turn \S+ ended after another turn moved the head/);
    expect(said).not.toContain('won');
    const turns = await session.turns();
    const slow = turns.find((turn) => turn.text === 'slow answer please');
    // Kept and readable, reply and all, but not on the head's branch.
    expect(slow).toMatchObject({ status: 'conflicted', reply: 'slowly answered', parent: turns[0]?.turnId });
    expect(await session.head).toBe(fast.turnId);
  });

  it('completes a turn whose process was killed mid-turn: no committed step again, and the head on it', async () => {
    const root = tempWorkspace({ 'notes.txt': 'codeword: osprey\n' });
    const path = await freshStore();
    const store = await openAt(path);
    // The first request after the file was read never comes back in time: the process is killed while it waits.
    let stalled = false;
    const { server, provider } = await serve(async (call) => {
      const answer = await script(call);
      const read = ownTurn(messagesOf(call)).after.some((message) => message.role === 'tool');
      if (read && !stalled) {
        stalled = true;
        return { ...answer, latencyMs: 60_000 };
      }
      return answer;
    });
    const session = await Session.open(store, root);
    let killer = 0;
    const child = inProcess(
      path,
      provider,
      `const session = await Session.resume(store, ${JSON.stringify(session.id)});
       await session.turn('read notes.txt', { provider, policy });
       console.log('ended by itself');`,
      (pid) => {
        killer = pid;
      },
    );
    for (let i = 0; i < 1000 && !stalled; i++) await new Promise((r) => setTimeout(r, 10));
    expect(stalled).toBe(true);
    // A correction sent while the turn's process is stalled outlives the kill: the resumed run takes it.
    await session.steer((await session.turns())[0]?.turnId as string, 'keep it short STEER-AFTER-KILL');
    process.kill(killer, 'SIGKILL');
    expect(await child).not.toContain('ended by itself');
    const [killed] = await session.turns();
    expect(killed).toMatchObject({ status: 'running', text: 'read notes.txt' });
    const steps = await store.steps(killed?.runId as string);
    expect(steps).toHaveLength(1);
    const before = server.calls.length;
    const resumed = await session.resumeTurn(undefined, { provider });
    expect(resumed).toMatchObject({ turnId: killed?.turnId, reply: 'I read notes.txt.' });
    expect(resumed.outcome.kind).toBe('finished');
    // The read committed before the kill was not run again: one more request, for the answer only.
    expect(server.calls.length).toBe(before + 1);
    const last = messagesOf(server.calls.at(-1) as Parameters<ModelScript>[0]);
    expect(last.slice(-2)).toMatchObject([
      { role: 'tool' },
      { role: 'user', content: 'keep it short STEER-AFTER-KILL' },
    ]);
    expect((await store.events(killed?.runId as string)).filter((event) => event.type === 'steered')).toMatchObject([
      { text: 'keep it short STEER-AFTER-KILL', before: 2 },
    ]);
    expect((await store.events(killed?.runId as string)).filter((event) => event.type === 'tool-call')).toHaveLength(1);
    expect(await session.turns()).toMatchObject([
      { turnId: killed?.turnId, status: 'finished', reply: 'I read notes.txt.' },
    ]);
    expect(await session.head).toBe(killed?.turnId);
    await expect(session.resumeTurn()).rejects.toMatchObject({ code: ErrorCode.TurnNotFound });
  });

  it('is followed from a second process: every event once and in order, a deferred approval answered there, the turn resumed', async () => {
    const root = tempWorkspace({ 'notes.txt': 'old\n' });
    const path = await freshStore();
    const store = await openAt(path);
    const { provider } = await serve(async (call) => {
      const { opening, after } = ownTurn(messagesOf(call));
      if (!opening.startsWith('rewrite notes.txt')) return script(call);
      if (after.some((message) => message.role === 'tool')) return { text: 'rewritten' };
      return { toolCalls: [{ name: 'write_file', args: { path: 'notes.txt', content: 'new\n' } }] };
    });
    const session = await Session.open(store, root);
    const attach = await Attach.open(store, session.id);
    const seen: number[] = [];
    const following = (async () => {
      for await (const event of attach.events({ pollMs: 10 })) seen.push(event.eventId);
    })();
    // The owner: a turn whose write needs an approval, deferred by its approver, so the turn pauses.
    const owner = await inProcess(
      path,
      provider,
      `const { CallbackApprover } = await import(${JSON.stringify(new URL('../dist/index.js', import.meta.url).href)});
       const session = await Session.resume(store, ${JSON.stringify(session.id)});
       const turn = await session.turn('rewrite notes.txt', {
         provider,
         policy: Policy.default().layer('test').allowRead('**').askWrite('**'),
         approver: new CallbackApprover(() => 'defer'),
       });
       console.log('owner ' + turn.outcome.kind);`,
    );
    expect(owner).toContain('owner paused');
    const [parked] = await attach.parked();
    expect(parked).toMatchObject({ kind: 'approval', status: 'open' });
    await attach.answer(parked?.questionId as string, 'approve', { by: 'attacher' });
    let lost: unknown = null;
    try {
      await attach.answer(parked?.questionId as string, 'deny', { by: 'late' });
    } catch (error) {
      lost = error;
    }
    expect(lost).toMatchObject({
      code: ErrorCode.AlreadyAnswered,
      message: expect.stringContaining('answered by attacher'),
    });
    expect(readFileSync(join(root, 'notes.txt'), 'utf8')).toBe('old\n');
    // The owner's side picks the turn up again (here, this process): the approved write happens, the turn ends.
    const resumed = await session.resumeTurn(undefined, {
      provider,
      approver: new CallbackApprover(() => 'deny'),
    });
    expect(resumed.outcome.kind).toBe('finished');
    expect(readFileSync(join(root, 'notes.txt'), 'utf8')).toBe('new\n');
    expect(await session.head).toBe(resumed.turnId);
    for (let i = 0; i < 100 && seen.length < (await attach.read()).length; i++)
      await new Promise((r) => setTimeout(r, 10));
    attach.close();
    await following;
    // Every committed event of the turn, once each, in commit order.
    expect(seen).toEqual((await attach.read()).map((event) => event.eventId));
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.length).toBeGreaterThan(5);
    await expect(Promise.resolve().then(() => Attach.open(store, 'nothing-by-this-id'))).rejects.toThrow(
      /no run and no session nothing-by-this-id/,
    );
  });

  it('branches from an earlier turn: the next request holds that turn and none after it', async () => {
    const root = tempWorkspace();
    const store = await openFresh();
    const { provider } = await serve(script);
    const session = await Session.open(store, root);
    const one = await session.turn('one', { provider, policy });
    await session.turn('two', { provider, policy });
    await session.turn('three', { provider, policy });
    await session.branch(one.turnId);
    expect(await session.head).toBe(one.turnId);
    const four = await session.turn('four', { provider, policy });
    const request = requests.filter((item) => item.opening.startsWith('four')).at(-1);
    const users = request?.messages.filter((message) => message.role === 'user').map((message) => message.content);
    expect(users).toEqual(['one', expect.stringMatching(/^four/)]);
    expect(JSON.stringify(request?.messages)).not.toMatch(/You said: (two|three)|"(two|three)"/);
    expect((await session.turns()).find((turn) => turn.turnId === four.turnId)?.parent).toBe(one.turnId);
    expect(await session.head).toBe(four.turnId);
  });

  it('refuses a session or turn that is not there, a turn of another session, and empty input, writing nothing', async () => {
    const store = await openFresh();
    const { provider } = await serve(script);
    const code = async (action: () => unknown) => {
      try {
        await action();
      } catch (error) {
        expect(HarnessError.isInstance(error)).toBe(true);
        return { code: (error as HarnessError).code, message: (error as Error).message };
      }
      throw new Error('expected a refusal');
    };
    expect(await code(() => Session.resume(store, 'no-such-session'))).toMatchObject({
      code: ErrorCode.SessionNotFound,
      message: expect.stringContaining('no session no-such-session'),
    });
    const mine = await Session.open(store, tempWorkspace());
    const other = await Session.open(store, tempWorkspace());
    const theirs = await other.turn('hi', { provider, policy });
    expect(await code(() => mine.branch('no-such-turn'))).toMatchObject({ code: ErrorCode.TurnNotFound });
    expect(await code(() => mine.branch(theirs.turnId))).toMatchObject({
      code: ErrorCode.InvalidArgument,
      message: expect.stringContaining(`belongs to session ${other.id}`),
    });
    expect(await code(() => mine.turn('   ', { provider, policy }))).toMatchObject({ code: ErrorCode.InvalidArgument });
    expect(await code(() => Session.open(store, tempWorkspace(), { id: mine.id }))).toMatchObject({
      code: ErrorCode.InvalidArgument,
      message: expect.stringContaining('already in this store'),
    });
    expect(await mine.turns()).toEqual([]);
    expect(await mine.head).toBeNull();
    expect((await store.sessions()).map((item) => item.sessionId)).toEqual([mine.id, other.id]);
    expect(join(mine.root as string)).toBe(mine.root);
  });

  it('is a conflict error by class too', () => {
    const error = new TurnConflictError('s', 't', 'h');
    expect(error.code).toBe(ErrorCode.Conflict);
    expect(error.details).toMatchObject({ sessionId: 's', turnId: 't', head: 'h' });
  });
});
