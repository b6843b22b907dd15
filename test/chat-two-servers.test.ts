/**
 * Two chat servers (examples/chat, real child processes) on one SQLite store file: a turn
 * asked of one is streamed, on a page's resume, by the other, which only follows it (the
 * first is alive and drives it): the second's UI message stream shows the turn's steps
 * as they commit and finishes when the first finishes the turn; nothing is run twice.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lastUserText, ScriptedModelServer } from '../dist/testing/index.js';
import { buildChatPage, startChatServer } from './support/chat.js';
import { closedPort } from './support/wire.js';

let dir: string;
let page: string;
let model: ScriptedModelServer;
/** Released by the test: the turn's second step answers only once the other server follows it. */
let release: () => void = () => undefined;
const released = new Promise<void>((resolve) => {
  release = resolve;
});
let secondAsked: () => void = () => undefined;
const secondStepAsked = new Promise<void>((resolve) => {
  secondAsked = resolve;
});
/** The second test's: its second step's first ask hangs, so its server is killed while it waits. */
let holdOnce = false;
let heldAskedNow: () => void = () => undefined;
const heldAsked = new Promise<void>((resolve) => {
  heldAskedNow = resolve;
});
const children: ChildProcess[] = [];
const serverSaid: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'io-harness-chat-two-'));
  page = buildChatPage(dir);
  model = await ScriptedModelServer.start(async (call) => {
    const messages = (call.body as { messages?: { role: string }[] }).messages ?? [];
    const step = messages.filter((message) => message.role === 'assistant').length;
    if (!lastUserText(call).includes('shed')) return { text: 'unexpected' };
    if (step === 0) return { text: 'Checking the shed.', toolCalls: [{ name: 'look_up', args: { place: 'shed' } }] };
    if (holdOnce) {
      // The killed server's ask: never answered (its process is gone).
      holdOnce = false;
      heldAskedNow();
      return { fault: 'hang' };
    }
    secondAsked();
    await released;
    return { text: 'The shed has a rake and a spade.' };
  });
}, 120_000);

afterAll(async () => {
  release();
  const running = (child: ChildProcess) => child.exitCode === null && child.signalCode === null;
  const exits = children.map((child) => (running(child) ? new Promise((r) => child.once('exit', r)) : 0));
  for (const child of children) if (running(child)) child.kill('SIGKILL');
  await Promise.all(exits);
  await model?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The example's server as a child process on `port`, on the shared store file; resolves once it listens. */
function startServer(port: number): Promise<ChildProcess> {
  return startChatServer({
    store: join(dir, 'chat.db'),
    port,
    page,
    modelUrl: model.url,
    said: serverSaid,
    track: children,
  });
}

/** The UI message stream's chunks in a response body, read to its end. */
async function chunksOf(response: Response): Promise<{ type: string; [key: string]: unknown }[]> {
  const text = await response.text();
  return text
    .split('\n')
    .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
    .map((line) => JSON.parse(line.slice(6)));
}

describe('two chat servers on one SQLite store', () => {
  it('streams, from the server a page resumed on, the turn the other server drives, to its end', async () => {
    const [portA, portB] = [await closedPort(), await closedPort()];
    await startServer(portA);
    await startServer(portB);
    const id = 'chat-two-servers';
    const asked = fetch(`http://127.0.0.1:${portA}/api/chat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        id,
        messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'What is in the shed?' }] }],
      }),
    });
    // Server A has committed the turn's first step and is waiting on the model for the second.
    await secondStepAsked;
    const resumed = await fetch(`http://127.0.0.1:${portB}/api/chat/${id}/stream`);
    expect(resumed.status).toBe(200);
    const followed = chunksOf(resumed);
    release();
    const [fromA, fromB] = await Promise.all([asked.then(chunksOf), followed]);
    const texts = (chunks: { type: string; delta?: unknown }[]) =>
      chunks
        .filter((chunk) => chunk.type === 'text-delta')
        .map((chunk) => chunk.delta)
        .join('');
    // Each server's stream shows the whole turn once, and finishes with it.
    for (const chunks of [fromA, fromB]) {
      expect(texts(chunks)).toBe('Checking the shed.The shed has a rake and a spade.');
      expect(chunks.filter((chunk) => chunk.type === 'tool-output-available')).toEqual([
        expect.objectContaining({ output: 'a rake and a spade' }),
      ]);
      expect(chunks.at(-1)).toMatchObject({ type: 'finish', messageMetadata: { status: 'finished' } });
    }
    // Server B only followed: the model was asked each step once.
    expect(model.calls.length).toBe(2);
  }, 90_000);

  it('takes the turn over on the server that follows it when the one driving it is killed', async () => {
    const [portA, portB] = [await closedPort(), await closedPort()];
    const a = await startServer(portA);
    await startServer(portB);
    const id = 'chat-two-servers-killed';
    holdOnce = true;
    const before = model.calls.length;
    void fetch(`http://127.0.0.1:${portA}/api/chat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        id,
        messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'What is in the shed, again?' }] }],
      }),
    }).catch(() => undefined);
    await heldAsked;
    const resumed = await fetch(`http://127.0.0.1:${portB}/api/chat/${id}/stream`);
    const followed = chunksOf(resumed);
    // Server A dies while the model is asked the turn's second step: B finds it gone and resumes the turn.
    const exited = new Promise((resolve) => a.once('exit', resolve));
    a.kill('SIGKILL');
    await exited;
    const chunks = await followed;
    expect(chunks.at(-1)).toMatchObject({ type: 'finish', messageMetadata: { status: 'finished' } });
    expect(JSON.stringify(chunks)).toContain('The shed has a rake and a spade.');
    // The committed first step was not asked again: step one once, step two twice (the killed ask, B's).
    expect(model.calls.length - before).toBe(3);
  }, 90_000);
});
