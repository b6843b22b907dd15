/**
 * A run's handle as a stream: `for await (const part of handle)` over a plain run and a
 * tree (agents in worker threads, the scripted model server over loopback HTTP) yields
 * the text as it streams, tool calls starting and ending, steps as they commit, runs as
 * they end, and the outcome last; `textStream` is the root's text alone.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { RunPart } from '../dist/index.js';
import { AGENT_HEADER, assistantTurns, ScriptedModelServer } from '../dist/testing/index.js';
import { type Harness, harness } from './support/harness.js';
import { openAiAt, programs } from './support/wire.js';

let h: Harness | undefined;
let server: ScriptedModelServer | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
  await server?.close();
  server = undefined;
});

const openai = (url: string) => openAiAt(url);

describe('iterating a run', () => {
  it('yields the text as it streams, the tool call, each step as it commits, and the outcome last', async () => {
    server = await ScriptedModelServer.start(
      programs({
        root: [{ text: 'Let me look.', toolCalls: [{ name: 'read_messages', args: {} }] }, { text: 'All done.' }],
      }),
    );
    h = await harness();
    const handle = h.supervisor.run({ task: 'go', provider: openai(server.url) });
    const parts: RunPart[] = [];
    for await (const part of handle) parts.push(part);
    const result = await handle.result;
    expect(result).toMatchObject({ status: 'finished', reply: 'All done.' });
    const root = handle.rootId;

    const text = parts.filter((part) => part.type === 'text-delta');
    expect(text.map((part) => part.text).join('')).toBe('Let me look.All done.');
    expect(text.every((part) => part.runId === root && part.address === 'root')).toBe(true);
    expect(parts.filter((part) => part.type === 'tool-call-start' || part.type === 'tool-call-end')).toMatchObject([
      { type: 'tool-call-start', name: 'read_messages', address: 'root' },
      { type: 'tool-call-end', name: 'read_messages', isError: false },
    ]);
    expect(parts.filter((part) => part.type === 'step')).toMatchObject([
      { seq: 1, runId: root, toolCalls: ['read_messages'] },
      { seq: 2, runId: root, toolCalls: [] },
    ]);
    // In the order it happened: the first step's text and call before it commits, the run's end before the outcome.
    const kinds = parts.map((part) => part.type);
    expect(kinds.indexOf('tool-call-end')).toBeLessThan(kinds.indexOf('step'));
    expect(kinds.at(-2)).toBe('run-end');
    expect(parts.at(-1)).toEqual({ type: 'outcome', result });
  });

  it("names each agent's parts in a tree; textStream is the root's text alone", async () => {
    server = await ScriptedModelServer.start(
      programs({
        root: [
          {
            text: 'Asking a helper.',
            toolCalls: [{ name: 'spawn_agent', args: { task: 'look', as: 'helper', wait: true } }],
          },
          { text: 'The helper looked.' },
        ],
        helper: [{ text: 'Looking around.' }],
      }),
    );
    h = await harness();
    const handle = h.supervisor.run({ task: 'go', provider: openai(server.url) });
    // Two iterations at once, each its own: the parts, and the root's text.
    const [parts, text] = await Promise.all([
      (async () => {
        const seen: RunPart[] = [];
        for await (const part of handle) seen.push(part);
        return seen;
      })(),
      (async () => {
        const seen: string[] = [];
        for await (const delta of handle.textStream) seen.push(delta);
        return seen.join('');
      })(),
    ]);
    expect(text).toBe('Asking a helper.The helper looked.');
    const helperText = parts
      .filter((part) => part.type === 'text-delta' && part.address !== 'root')
      .map((part) => (part.type === 'text-delta' ? part.text : ''));
    expect(helperText.join('')).toBe('Looking around.');
    const started = parts.filter((part) => part.type === 'run-start');
    expect(started.map((part) => (part.type === 'run-start' ? part.address : ''))).toEqual(['root', 'helper']);
    expect(parts.filter((part) => part.type === 'run-end')).toHaveLength(2);
    expect(parts.at(-1)).toMatchObject({ type: 'outcome', result: { status: 'finished', runs: 2 } });
  });

  it('stops only itself when broken off, and throws what the result rejects with when the run cannot start', async () => {
    server = await ScriptedModelServer.start(programs({ root: [{ text: 'One.' }] }));
    h = await harness();
    const handle = h.supervisor.run({ task: 'go', provider: openai(server.url) });
    for await (const part of handle) if (part.type === 'text-delta') break;
    expect(await handle.result).toMatchObject({ status: 'finished', reply: 'One.' });
    // After the tree settled, an iteration still ends with its outcome.
    const late: RunPart[] = [];
    for await (const part of handle) late.push(part);
    expect(late).toEqual([{ type: 'outcome', result: await handle.result }]);

    const failing = h.supervisor.run({
      task: 'go',
      provider: { kind: 'module', module: '/nonexistent/provider-module.mjs' },
    });
    await expect(
      (async () => {
        for await (const _part of failing) {
          // nothing is expected before the failure
        }
      })(),
    ).rejects.toThrow(/cannot import provider module/);
  });
});

describe('telling which agent asks', () => {
  it("sends the agent's address only where a spec names the header, and the scripted server reads it as call.agent", async () => {
    server = await ScriptedModelServer.start((call) =>
      call.agent === 'root' && assistantTurns(call) === 0
        ? { toolCalls: [{ name: 'spawn_agent', args: { task: 'look', as: 'helper', wait: true } }] }
        : { text: `answered ${call.agent}` },
    );
    h = await harness();
    const named = await h.supervisor.run({ task: 'go', provider: server.provider() }).result;
    expect(named.reply).toBe('answered root');
    expect(server.calls.map((call) => call.agent)).toEqual(['root', 'helper', 'root']);
    const before = server.calls.length;
    await h.supervisor.run({ task: 'go', provider: openai(server.url) }).result;
    const plain = server.calls.slice(before);
    expect(plain.length).toBeGreaterThan(0);
    for (const call of plain) {
      expect(call.agent).toBeNull();
      expect(Object.keys(call.headers)).not.toContain(AGENT_HEADER);
    }
    expect(() =>
      h?.supervisor.run({ task: 'go', provider: { ...openai(server?.url as string), agentHeader: 'x agent' } }),
    ).toThrow(/agentHeader names the header/);
  });
});

describe("a run as the AI SDK's UI message stream", () => {
  /** The chunks of a UI message stream response, read back as the AI SDK's client reads them. */
  async function chunksOf(response: Response): Promise<{ type: string; [key: string]: unknown }[]> {
    const text = await response.text();
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    return text
      .split('\n\n')
      .filter((event) => event.startsWith('data: {'))
      .map((event) => JSON.parse(event.slice('data: '.length)));
  }

  it('writes text, the tool call with its input and output, and the finish with usage; the AI SDK reads it as one message', async () => {
    server = await ScriptedModelServer.start(
      programs({
        root: [
          {
            text: 'Reading.',
            toolCalls: [{ name: 'read_messages', args: {} }],
            usage: { inputTokens: 100, outputTokens: 5 },
          },
          { text: 'Nothing came.', usage: { inputTokens: 120, outputTokens: 4 } },
        ],
      }),
    );
    h = await harness();
    const handle = h.supervisor.run({ task: 'go', provider: openai(server.url) });
    const response = handle.toUIMessageStreamResponse();
    expect(response.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    const chunks = await chunksOf(response);
    expect(chunks[0]).toEqual({ type: 'start', messageId: handle.rootId });
    expect(chunks.find((chunk) => chunk.type === 'tool-input-available')).toMatchObject({
      toolName: 'read_messages',
      input: {},
    });
    expect(chunks.find((chunk) => chunk.type === 'tool-output-available')).toMatchObject({ dynamic: true });
    expect(chunks.at(-1)).toMatchObject({
      type: 'finish',
      messageMetadata: { status: 'finished', usage: { inputTokens: 220, outputTokens: 9, steps: 2 } },
    });
    // The AI SDK's own reader makes one assistant message of it: two steps, the tool's output, the text.
    const { readUIMessageStream } = await import('ai');
    const stream = new ReadableStream({
      start(controller) {
        for (const chunk of chunks) controller.enqueue(chunk);
        controller.close();
      },
    });
    let last: { id: string; parts: { type: string; text?: string; state?: string }[] } | undefined;
    for await (const message of readUIMessageStream({ stream: stream as never, terminateOnError: true }))
      last = message as typeof last;
    expect(last?.id).toBe(handle.rootId);
    expect(last?.parts.filter((part) => part.type === 'text').map((part) => part.text)).toEqual([
      'Reading.',
      'Nothing came.',
    ]);
    expect(last?.parts.find((part) => part.type === 'dynamic-tool')).toMatchObject({ state: 'output-available' });
  });

  it('ends with an error part for a run that fails, and one for a tree that cannot start', async () => {
    server = await ScriptedModelServer.start(() => ({
      fault: 'status',
      status: 400,
      body: '{"error":{"message":"bad request"}}',
    }));
    h = await harness();
    const failed = await chunksOf(
      h.supervisor.run({ task: 'go', provider: openai(server.url) }).toUIMessageStreamResponse(),
    );
    expect(failed.find((chunk) => chunk.type === 'error')).toMatchObject({
      errorText: expect.stringContaining('failed:'),
    });
    expect(failed.at(-1)).toMatchObject({ type: 'finish', messageMetadata: { status: 'failed' } });
    const unstarted = await chunksOf(
      h.supervisor
        .run({ task: 'go', provider: { kind: 'module', module: '/nonexistent/provider-module.mjs' } })
        .toUIMessageStreamResponse(),
    );
    expect(unstarted.find((chunk) => chunk.type === 'error')).toMatchObject({
      errorText: expect.stringContaining('cannot import provider module'),
    });
  });
});
