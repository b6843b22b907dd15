/**
 * The provider client against streams as vendors, gateways and compatible local
 * runtimes really send them, played byte for byte through the scripted model server's
 * raw mode over loopback: media types and content codings read as HTTP defines them,
 * tool-call chunks keyed by the rule of each wire, a stream finished at the vendor's
 * terminator (not at the server's close), cut streams told from finished ones, and an
 * idle deadline for a stream that goes silent. Each case is asserted through both
 * `complete()` and `stream()`.
 */
import { gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { type Completion, type HttpProviderSpec, type ModelRequest, ProviderError } from '../dist/index.js';
import { HttpProvider } from '../dist/runtime/providers/client.js';
import { loadProvider } from '../dist/runtime/providers/registry.js';
import { openAiWire } from '../dist/runtime/providers/wires.js';
import { type ScriptedAnswer, type ScriptedCall, ScriptedModelServer } from '../dist/testing/index.js';
import { type Harness, harness } from './support/harness.js';
import { stubTransport, wireConfig } from './support/wire.js';

const servers: ScriptedModelServer[] = [];
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
  for (const server of servers.splice(0)) await server.close();
});

type Raw = Extract<ScriptedAnswer, { fault: 'raw' }>;
type Wire = 'openai' | 'anthropic';

const request: ModelRequest = {
  system: 'You are agent "root".',
  transcript: [{ role: 'user', text: 'go' }],
  tools: [{ name: 'read_file', description: 'Read a file.', parameters: { type: 'object', properties: {} } }],
  metadata: { runId: 'r', rootId: 'r', address: 'root', parentAddress: null, depth: 0, seq: 1 },
};

async function serve(answer: ScriptedAnswer | ((call: ScriptedCall) => ScriptedAnswer)): Promise<ScriptedModelServer> {
  const server = await ScriptedModelServer.start(typeof answer === 'function' ? answer : () => answer);
  servers.push(server);
  return server;
}

function specFor(wire: Wire, server: ScriptedModelServer, extra: Partial<HttpProviderSpec> = {}): HttpProviderSpec {
  return {
    kind: wire,
    model: `${wire}-model`,
    baseUrl: wire === 'anthropic' ? server.url : `${server.url}/v1`,
    apiKey: 'test-key',
    retry: { maxAttempts: 1, baseDelayMs: 1 },
    ...extra,
  };
}

async function providerFor(wire: Wire, server: ScriptedModelServer, extra: Partial<HttpProviderSpec> = {}) {
  return (await loadProvider(specFor(wire, server, extra))) as InstanceType<typeof HttpProvider>;
}

/** What a completion says, in a shape both `complete()` and a gathered `stream()` give. */
interface Said {
  text: string;
  calls: { id: string; name: string; args: Record<string, unknown>; invalid?: boolean }[];
  usage: Completion['usage'] | null;
  finishReason: string | null;
}

function saidOf(completion: Completion): Said {
  return {
    text: completion.text,
    calls: completion.toolCalls.map((call) => ({
      id: call.id,
      name: call.name,
      args: call.args,
      ...(call.invalid ? { invalid: true } : {}),
    })),
    usage: completion.usageReported === false ? null : completion.usage,
    finishReason: completion.finishReason ?? null,
  };
}

async function streamed(provider: InstanceType<typeof HttpProvider>): Promise<Said> {
  let text = '';
  const ends = new Map<number, Said['calls'][number]>();
  let usage: Said['usage'] = null;
  let finishReason: string | null = null;
  for await (const part of provider.stream(request)) {
    if (part.type === 'text-delta') text += part.text;
    else if (part.type === 'tool-call-end')
      ends.set(part.index, {
        id: part.id,
        name: part.name,
        args: part.args,
        ...(part.invalid ? { invalid: true } : {}),
      });
    else if (part.type === 'usage') usage = part.usage;
    else if (part.type === 'end') finishReason = part.finishReason;
  }
  const calls = [...ends.entries()].sort((a, b) => a[0] - b[0]).map(([, call]) => call);
  return { text, calls, usage, finishReason };
}

/** The same raw answer read through `complete()` and through `stream()`: both must say the same. */
async function bothSay(wire: Wire, answer: Raw, extra: Partial<HttpProviderSpec> = {}): Promise<Said> {
  const server = await serve(answer);
  const provider = await providerFor(wire, server, extra);
  const whole = saidOf(await provider.complete(request));
  expect(await streamed(provider)).toEqual(whole);
  return whole;
}

/** The failure both `complete()` and `stream()` end with. */
async function bothFail(wire: Wire, answer: Raw | ScriptedAnswer, extra: Partial<HttpProviderSpec> = {}) {
  const server = await serve(answer);
  const provider = await providerFor(wire, server, extra);
  const failures: ProviderError[] = [];
  for (const attempt of [() => provider.complete(request), () => streamed(provider)]) {
    const error = await attempt().then(
      () => null,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(ProviderError);
    failures.push(error as ProviderError);
  }
  const [first, second] = failures as [ProviderError, ProviderError];
  expect([second.kind, second.isRetryable]).toEqual([first.kind, first.isRetryable]);
  return { error: first, server };
}

// ------------------------------------------------------------------ wire frames

const SSE = { 'content-type': 'text/event-stream' };
const oa = (delta: Record<string, unknown>, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const oaUsage = (prompt = 11, completion = 7) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-1', choices: [], usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } })}\n\n`;
const DONE = 'data: [DONE]\n\n';
const oaText = (text: string) => [oa({ role: 'assistant', content: '' }), oa({ content: text }), oa({}, 'stop')];
const usage = (input: number, output: number) => ({
  inputTokens: input,
  outputTokens: output,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  reasoningTokens: 0,
});

const an = (type: string, body: Record<string, unknown>) =>
  `event: ${type}\ndata: ${JSON.stringify({ type, ...body })}\n\n`;
const anStart = (usageOf: Record<string, unknown> | null = { input_tokens: 20, output_tokens: 1 }) =>
  an('message_start', {
    message: {
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      content: [],
      model: 'anthropic-model',
      ...(usageOf === null ? {} : { usage: usageOf }),
    },
  });
const anText = (text: string) => [
  an('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
  an('content_block_delta', { index: 0, delta: { type: 'text_delta', text } }),
  an('content_block_stop', { index: 0 }),
];
const anEnd = (reason = 'end_turn', output = 9) => [
  an('message_delta', { delta: { stop_reason: reason }, usage: { output_tokens: output } }),
  an('message_stop', {}),
];

const openAiWhole = {
  id: 'chatcmpl-1',
  object: 'chat.completion',
  choices: [{ index: 0, message: { role: 'assistant', content: 'whole answer' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
};
const anthropicWhole = {
  id: 'msg_1',
  type: 'message',
  role: 'assistant',
  content: [{ type: 'text', text: 'whole answer' }],
  stop_reason: 'end_turn',
  usage: { input_tokens: 5, output_tokens: 2 },
};

// ------------------------------------------------------------------ 1. media types

describe('media types and content codings, read as RFC 9110 defines them', () => {
  it.each([
    ['Application/JSON; Charset=UTF-8', 'openai'],
    ['APPLICATION/JSON;charset="utf-8"', 'anthropic'],
    ['application/vnd.gateway+json', 'openai'],
    ['  application/json  ;  charset=utf-8', 'anthropic'],
  ] as const)('reads a whole JSON answer sent as %s (%s)', async (type, wire) => {
    const body = JSON.stringify(wire === 'openai' ? openAiWhole : anthropicWhole);
    const said = await bothSay(wire, { fault: 'raw', headers: { 'Content-Type': type }, chunks: [body] });
    expect(said).toEqual({
      text: 'whole answer',
      calls: [],
      usage: usage(5, 2),
      finishReason: wire === 'openai' ? 'stop' : 'end_turn',
    });
  });

  it.each([
    ['TEXT/Event-Stream; Charset=UTF-8', 'openai'],
    ['text/event-stream; profile="application/json"', 'openai'],
    ['text/event-stream;note="a;b=application/json"', 'anthropic'],
  ] as const)('reads an event stream sent as %s (%s), whatever its parameters say', async (type, wire) => {
    const chunks =
      wire === 'openai' ? [...oaText('streamed'), oaUsage(), DONE] : [anStart(), ...anText('streamed'), ...anEnd()];
    const said = await bothSay(wire, { fault: 'raw', headers: { 'Content-Type': type }, chunks });
    expect(said).toEqual({
      text: 'streamed',
      calls: [],
      usage: wire === 'openai' ? usage(11, 7) : usage(20, 9),
      finishReason: wire === 'openai' ? 'stop' : 'end_turn',
    });
  });

  it('reads a body with no Content-Type by its first byte: JSON, or an event stream', async () => {
    expect(
      await bothSay('openai', { fault: 'raw', headers: {}, chunks: [`\n  ${JSON.stringify(openAiWhole)}`] }),
    ).toMatchObject({
      text: 'whole answer',
      usage: usage(5, 2),
    });
    expect(
      await bothSay('anthropic', { fault: 'raw', headers: {}, chunks: [anStart(), ...anText('sniffed'), ...anEnd()] }),
    ).toMatchObject({ text: 'sniffed', finishReason: 'end_turn' });
  });

  it('reads a whole JSON answer behind a byte order mark, with or without its media type', async () => {
    const body = `\uFEFF${JSON.stringify(openAiWhole)}`;
    for (const headers of [{ 'content-type': 'application/json' }, {}] as Record<string, string>[]) {
      expect(await bothSay('openai', { fault: 'raw', headers, chunks: [body] })).toMatchObject({
        text: 'whole answer',
      });
    }
  });

  it('refuses an event longer than 64 Mi characters, and a stream longer than 256 MiB, as undecodable', async () => {
    const megabyte = 1024 * 1024;
    const endless = (chunk: Buffer) =>
      stubTransport([['content-type', 'text/event-stream']], function* () {
        for (;;) yield chunk;
      });
    const line = Buffer.alloc(megabyte, 'a');
    const comments = Buffer.alloc(megabyte, 'x');
    comments[0] = 0x3a; // ':' opens a comment line
    comments[megabyte - 2] = 0x0a;
    comments[megabyte - 1] = 0x0a;
    for (const [chunk, what] of [
      [line, /event .* longer than/],
      [comments, /more than 268435456 bytes/],
    ] as const) {
      const error = await new HttpProvider(openAiWire, wireConfig, endless(chunk)).once(request).then(
        () => null,
        (caught: unknown) => caught,
      );
      if (!(error instanceof ProviderError)) throw new Error(`expected a ProviderError, got ${String(error)}`);
      expect([error.kind, error.isRetryable]).toEqual(['undecodable', false]);
      expect(error.message).toMatch(what);
    }
  });

  it('reads a header whatever the case of its name, from any transport', async () => {
    const body = Buffer.from(JSON.stringify(openAiWhole));
    const transport = stubTransport([['Content-Type', 'Application/Json']], () => [body]);
    const completion = await new HttpProvider(openAiWire, wireConfig, transport).once(request);
    expect(completion.text).toBe('whole answer');
  });

  it.each([
    ['GZIP', 'openai'],
    ['x-gzip', 'anthropic'],
    ['Gzip, identity', 'openai'],
  ] as const)('undoes a content coding it never asked for (%s, %s)', async (coding, wire) => {
    const stream =
      wire === 'openai'
        ? [...oaText('coded'), oaUsage(), DONE].join('')
        : [anStart(), ...anText('coded'), ...anEnd()].join('');
    const bytes = gzipSync(stream);
    // The coded bytes cut anywhere: the decoder keeps its state across chunks.
    const chunks = [bytes.subarray(0, 7), bytes.subarray(7, 30), bytes.subarray(30)];
    const said = await bothSay(wire, { fault: 'raw', headers: { ...SSE, 'Content-Encoding': coding }, chunks });
    expect(said.text).toBe('coded');
  });

  it('refuses a content coding it cannot read, and a body that is not in the coding named, as undecodable', async () => {
    const unknown = await bothFail('openai', {
      fault: 'raw',
      headers: { ...SSE, 'content-encoding': 'compress' },
      chunks: ['x'],
    });
    expect([unknown.error.kind, unknown.error.isRetryable]).toEqual(['undecodable', false]);
    expect(unknown.error.message).toContain('"compress"');
    const corrupt = await bothFail('openai', {
      fault: 'raw',
      headers: { ...SSE, 'content-encoding': 'gzip' },
      chunks: ['this is not gzip at all, it is plain text'],
    });
    expect([corrupt.error.kind, corrupt.error.isRetryable]).toEqual(['undecodable', false]);
  });

  it('takes an empty body under any media type, or none, as a cut stream', async () => {
    for (const headers of [{}, { 'content-type': 'text/plain' }, SSE] as Record<string, string>[]) {
      const { error } = await bothFail('openai', { fault: 'raw', headers, chunks: [] });
      expect([error.kind, error.isRetryable], JSON.stringify(headers)).toEqual(['truncated', true]);
    }
  });

  it('says an answer that is neither an event stream nor JSON is undecodable, naming its media type', async () => {
    const { error } = await bothFail('openai', {
      fault: 'raw',
      headers: { 'Content-Type': 'Text/HTML; charset=utf-8' },
      chunks: ['<html><body>Sign in to the network</body></html>'],
    });
    expect([error.kind, error.isRetryable]).toEqual(['undecodable', false]);
    expect(error.message).toContain('Text/HTML');
  });
});

// ------------------------------------------------------------------ 2. tool-call chunks

describe('tool-call chunks on the OpenAI wire: the index keys the call, only a new non-empty id starts another', () => {
  const call = (item: Record<string, unknown>) => oa({ tool_calls: [item] });
  const finish = [oa({}, 'tool_calls'), oaUsage(), DONE];

  // Every way a continuation chunk may be spelled: id absent, null, empty or the same;
  // `type` repeated or not; the index given or left out; the name repeated, empty or absent.
  const firstIds = [
    ['call_abc', 'call_abc'],
    ['', 'call_0'],
    [undefined, 'call_0'],
  ] as const;
  const continuationIds = ['absent', null, '', 'same'] as const;
  const types = [undefined, 'function'] as const;
  const indexes = [0, undefined] as const;
  const names = [undefined, '', 'read_file'] as const;
  const combinations: [string, Record<string, unknown>, Record<string, unknown>, string][] = [];
  for (const [firstId, expectedId] of firstIds)
    for (const continuationId of continuationIds)
      for (const type of types)
        for (const index of indexes)
          for (const name of names) {
            // A repeated id only means something when the first chunk had one.
            if (continuationId === 'same' && (firstId === '' || firstId === undefined)) continue;
            const first: Record<string, unknown> = {
              index: 0,
              type: 'function',
              function: { name: 'read_file', arguments: '{"pa' },
            };
            if (firstId !== undefined) first.id = firstId;
            const next: Record<string, unknown> = { function: { arguments: 'th":"a.txt"}' } };
            if (continuationId === 'same') next.id = firstId;
            else if (continuationId !== 'absent') next.id = continuationId;
            if (type !== undefined) next.type = type;
            if (index !== undefined) next.index = index;
            if (name !== undefined) (next.function as Record<string, unknown>).name = name;
            combinations.push([JSON.stringify(next), first, next, expectedId]);
          }

  it('reads one call whichever way its continuation chunks are spelled (every combination, both reads)', async () => {
    expect(combinations.length).toBe(120);
    for (const [label, first, next, id] of combinations) {
      const said = await bothSay('openai', {
        fault: 'raw',
        headers: SSE,
        chunks: [
          oa({ role: 'assistant', content: null }),
          call(first),
          call(next),
          call({ ...next, function: { arguments: '' } }),
          ...finish,
        ],
      });
      expect(said.calls, label).toEqual([{ id, name: 'read_file', args: { path: 'a.txt' } }]);
      expect(said.finishReason).toBe('tool_calls');
    }
  });

  it('starts a second call only at a new non-empty id, at the same index or the next', async () => {
    for (const secondIndex of [0, 1, undefined]) {
      const second: Record<string, unknown> = {
        id: 'call_two',
        type: 'function',
        function: { name: 'list', arguments: '{}' },
      };
      if (secondIndex !== undefined) second.index = secondIndex;
      const said = await bothSay('openai', {
        fault: 'raw',
        headers: SSE,
        chunks: [
          call({ index: 0, id: 'call_one', type: 'function', function: { name: 'read_file', arguments: '{"path":' } }),
          call({ index: 0, id: '', function: { arguments: '"a"}' } }),
          call(second),
          // An empty id after the second began continues the second, never starts a third.
          call({
            ...(secondIndex === undefined ? {} : { index: secondIndex }),
            id: '',
            type: 'function',
            function: { arguments: '' },
          }),
          ...finish,
        ],
      });
      expect(said.calls, `second at ${secondIndex}`).toEqual([
        { id: 'call_one', name: 'read_file', args: { path: 'a' } },
        { id: 'call_two', name: 'list', args: {} },
      ]);
    }
  });

  it('gives two calls that a server sent with one id two ids, and names a call whose name came late', async () => {
    const said = await bothSay('openai', {
      fault: 'raw',
      headers: SSE,
      chunks: [
        call({ index: 0, id: 'dup', function: { name: 'read_file', arguments: '{}' } }),
        call({ index: 1, id: 'dup', function: { name: 'list', arguments: '{}' } }),
        call({ index: 2, id: '', function: { arguments: '{"x":1}' } }),
        call({ index: 2, function: { name: 'late' } }),
        ...finish,
      ],
    });
    expect(said.calls).toEqual([
      { id: 'dup', name: 'read_file', args: {} },
      { id: 'dup_1', name: 'list', args: {} },
      { id: 'call_2', name: 'late', args: { x: 1 } },
    ]);
  });

  it('reads a whole answer whose calls have no ids, or decoded arguments', async () => {
    const body = {
      ...openAiWhole,
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: null,
            tool_calls: [
              { type: 'function', function: { name: 'a', arguments: '{"n":1}' } },
              { id: '', type: 'function', function: { name: 'b', arguments: { n: 2 } } },
            ],
          },
          finish_reason: 'tool_calls',
        },
      ],
    };
    const said = await bothSay('openai', {
      fault: 'raw',
      headers: { 'content-type': 'application/json' },
      chunks: [JSON.stringify(body)],
    });
    expect(said.calls).toEqual([
      { id: 'call_0', name: 'a', args: { n: 1 } },
      { id: 'call_1', name: 'b', args: { n: 2 } },
    ]);
  });
});

describe('tool_use blocks on the Anthropic wire: input whole in the start, in deltas, or both', () => {
  const start = (input: unknown, id = 'toolu_1') =>
    an('content_block_start', {
      index: 1,
      content_block: { type: 'tool_use', id, name: 'read_file', ...(input === undefined ? {} : { input }) },
    });
  const delta = (partial: string) =>
    an('content_block_delta', { index: 1, delta: { type: 'input_json_delta', partial_json: partial } });
  const stop = an('content_block_stop', { index: 1 });

  it.each([
    ['no input and no deltas', undefined, [], {}],
    ['an empty input and no deltas', {}, [], {}],
    ['an empty input, then deltas (the vendor itself)', {}, ['{"path":', '"a.txt"}'], { path: 'a.txt' }],
    ['no input, then deltas', undefined, ['{"path":"a.txt"}'], { path: 'a.txt' }],
    ['the whole input and no deltas', { path: 'a.txt' }, [], { path: 'a.txt' }],
    ['the whole input, then an empty delta', { path: 'a.txt' }, [''], { path: 'a.txt' }],
    ['the whole input, then deltas repeating it', { path: 'a.txt' }, ['{"path":', '"a.txt"}'], { path: 'a.txt' }],
    [
      'part of the input, then deltas with the rest',
      { path: 'a.txt' },
      ['{"limit":', '5}'],
      { path: 'a.txt', limit: 5 },
    ],
    ['an input, then deltas that change a key', { path: 'a.txt' }, ['{"path":"b.txt"}'], { path: 'b.txt' }],
  ] as const)('%s', async (_label, input, deltas, args) => {
    const said = await bothSay('anthropic', {
      fault: 'raw',
      headers: SSE,
      chunks: [anStart(), ...anText('calling'), start(input), ...deltas.map(delta), stop, ...anEnd('tool_use')],
    });
    expect(said).toEqual({
      text: 'calling',
      calls: [{ id: 'toolu_1', name: 'read_file', args }],
      usage: usage(20, 9),
      finishReason: 'tool_use',
    });
  });

  it('marks a call invalid when its input is not an object, or its deltas are not JSON, whatever the start held', async () => {
    for (const [input, deltas] of [
      [['a.txt'], []],
      [{ path: 'a.txt' }, ['{"path":']],
      [undefined, ['not json']],
    ] as const) {
      const said = await bothSay('anthropic', {
        fault: 'raw',
        headers: SSE,
        chunks: [anStart(), start(input), ...deltas.map(delta), stop, ...anEnd('tool_use')],
      });
      expect(said.calls, JSON.stringify([input, deltas])).toEqual([
        { id: 'toolu_1', name: 'read_file', args: {}, invalid: true },
      ]);
    }
  });

  it('gives a block with no id one, and two blocks that share an id two', async () => {
    const second = (index: number, id: string) =>
      an('content_block_start', { index, content_block: { type: 'tool_use', id, name: 'list', input: { n: index } } });
    const said = await bothSay('anthropic', {
      fault: 'raw',
      headers: SSE,
      chunks: [
        anStart(),
        start({ path: 'a' }, ''),
        stop,
        second(2, 'same'),
        an('content_block_stop', { index: 2 }),
        second(3, 'same'),
        an('content_block_stop', { index: 3 }),
        ...anEnd('tool_use'),
      ],
    });
    expect(said.calls).toEqual([
      { id: 'toolu_1', name: 'read_file', args: { path: 'a' } },
      { id: 'same', name: 'list', args: { n: 2 } },
      { id: 'same_2', name: 'list', args: { n: 3 } },
    ]);
  });
});

// ------------------------------------------------------------------ 3. the terminator

describe('a stream is done when the vendor says so', () => {
  it.each([
    ['openai', 'comments', [...oaText('kept alive'), oaUsage(), DONE], ': keep-alive\n\n'],
    ['openai', 'more events', [...oaText('kept alive'), oaUsage(), DONE], oa({ content: ' and more' })],
    ['anthropic', 'pings', [anStart(), ...anText('kept alive'), ...anEnd()], an('ping', {})],
    ['anthropic', 'comments', [anStart(), ...anText('kept alive'), ...anEnd()], ':\n\n'],
  ] as const)(
    '%s: returns at the terminator though the body goes on with %s, and closes the connection',
    async (wire, _what, chunks, send) => {
      const server = await serve({ fault: 'raw', headers: SSE, chunks: [...chunks], after: { every: 10, send } });
      const provider = await providerFor(wire, server);
      const completion = await provider.complete(request);
      expect(completion.text).toBe('kept alive');
      expect(completion.usageReported).toBeUndefined();
      // The server never ends this body: only the client can have closed it.
      expect(await server.responseEnd(0)).toBe('closed');
      expect((await streamed(provider)).text).toBe('kept alive');
      expect(await server.responseEnd(1)).toBe('closed');
    },
  );

  it('ignores whatever follows the terminator in the same chunk, even what is not JSON', async () => {
    const said = await bothSay('openai', {
      fault: 'raw',
      headers: SSE,
      chunks: [[...oaText('exact'), oaUsage(), DONE, 'data: {not json\n\n', oa({ content: 'late' })].join('')],
    });
    expect(said).toEqual({ text: 'exact', calls: [], usage: usage(11, 7), finishReason: 'stop' });
  });

  it('leaves the socket in the pool when the body ends just after the terminator', async () => {
    const server = await serve({ fault: 'raw', headers: SSE, chunks: [...oaText('pooled'), oaUsage(), DONE] });
    const provider = await providerFor('openai', server);
    await provider.complete(request);
    expect(await server.responseEnd(0)).toBe('finished');
    // The client reads the body's end a moment after the server wrote it; then the socket is free.
    await new Promise((resolve) => setTimeout(resolve, 50));
    await provider.complete(request);
    expect(server.calls.map((call) => call.connection)).toEqual([0, 0]);
  });

  it('takes a stream that ends after its finish reason, before the usage asked for and before [DONE], as cut', async () => {
    for (const chunks of [
      [...oaText('cut')],
      [oa({ role: 'assistant', content: '' }), oa({ content: 'cut' }, 'stop')],
      [oa({ tool_calls: [{ index: 0, id: 'c', function: { name: 'read_file', arguments: '{}' } }] }, 'tool_calls')],
    ]) {
      const { error } = await bothFail('openai', { fault: 'raw', headers: SSE, chunks });
      expect([error.kind, error.isRetryable]).toEqual(['truncated', true]);
      expect(error.message).toContain('no usage');
    }
  });

  it('accepts a stream with its finish reason and usage but no [DONE], which some servers never send', async () => {
    expect(
      await bothSay('openai', { fault: 'raw', headers: SSE, chunks: [...oaText('no sentinel'), oaUsage(3, 4)] }),
    ).toEqual({
      text: 'no sentinel',
      calls: [],
      usage: usage(3, 4),
      finishReason: 'stop',
    });
  });

  it('says the usage is unknown (and estimates it) when the vendor finished without reporting any', async () => {
    for (const [wire, chunks] of [
      ['openai', [...oaText('unmetered'), DONE]],
      [
        'anthropic',
        [
          anStart(null),
          ...anText('unmetered'),
          an('message_delta', { delta: { stop_reason: 'end_turn' } }),
          an('message_stop', {}),
        ],
      ],
    ] as const) {
      const server = await serve({ fault: 'raw', headers: SSE, chunks: [...chunks] });
      const provider = await providerFor(wire, server);
      const completion = await provider.complete(request);
      expect(completion.usageReported).toBe(false);
      // Never a zero taken for a fact: an estimate from what was sent and received.
      expect(completion.usage.inputTokens).toBeGreaterThan(0);
      expect(completion.usage.outputTokens).toBe(Math.ceil('unmetered'.length / 4));
      expect(await streamed(provider)).toMatchObject({ text: 'unmetered', usage: null });
    }
  });

  it('in a run: a call with no usage draws its estimate on the ledger, and its row says it was estimated', async () => {
    const server = await serve({ fault: 'raw', headers: SSE, chunks: [...oaText('done'), DONE] });
    h = await harness();
    const result = await h.supervisor.run({ task: 'go', provider: specFor('openai', server) }).result;
    expect(result).toMatchObject({ status: 'finished', reply: 'done' });
    const [row] = h.store.modelCalls({ rootId: result.rootId });
    expect(row).toMatchObject({ outcome: 'ok', usageReported: false, outputTokens: 1 });
    expect(row?.inputTokens).toBeGreaterThan(0);
    expect(h.store.ledger(result.rootId)?.root.spent.tokens).toBe((row?.inputTokens ?? 0) + (row?.outputTokens ?? 0));
  });

  it('reads a named error event on the OpenAI wire as the vendor error it is', async () => {
    const { error } = await bothFail('openai', {
      fault: 'raw',
      headers: SSE,
      chunks: [oa({ content: 'par' }), 'event: error\ndata: {"message":"model overloaded","code":503}\n\n'],
    });
    expect([error.kind, error.statusCode, error.isRetryable]).toEqual(['http', 503, true]);
    expect(error.message).toContain('model overloaded');
  });

  it('takes an Anthropic stream that ends before message_stop as cut, whatever came before', async () => {
    for (const chunks of [
      [anStart(), ...anText('cut')],
      [
        anStart(),
        ...anText('cut'),
        an('message_delta', { delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 2 } }),
      ],
    ]) {
      const { error } = await bothFail('anthropic', { fault: 'raw', headers: SSE, chunks });
      expect([error.kind, error.isRetryable]).toEqual(['truncated', true]);
    }
  });
});

// ------------------------------------------------------------------ 4. the idle deadline

describe('an idle-stream deadline', () => {
  it.each<[Wire, string, Pick<Raw, 'chunks' | 'after'>]>([
    ['openai', 'silence after the first event', { chunks: [oa({ role: 'assistant', content: 'hel' })], after: 'hang' }],
    [
      'openai',
      'only keep-alive comments',
      { chunks: [oa({ content: 'hel' })], after: { every: 20, send: ': ping\n\n' } },
    ],
    [
      'anthropic',
      'an event that never ends, a byte at a time',
      { chunks: [anStart(), 'event: content_block_delta\ndata: {'], after: { every: 20, send: ' ' } },
    ],
    ['anthropic', 'silence before the first byte of the body', { chunks: [], after: 'hang' }],
  ])('%s: %s ends as a retryable stalled failure', async (wire, _what, shape) => {
    const { error, server } = await bothFail(
      wire,
      { fault: 'raw', headers: SSE, ...shape },
      {
        idleTimeoutMs: 250,
      },
    );
    expect([error.kind, error.isRetryable]).toEqual(['stalled', true]);
    expect(error.message).toContain('250 ms');
    expect(await server.responseEnd(0)).toBe('closed');
  });

  it('counts the wait for the headers as idle too', async () => {
    const { error } = await bothFail('openai', { fault: 'hang' }, { idleTimeoutMs: 250 });
    expect([error.kind, error.isRetryable]).toEqual(['stalled', true]);
  });

  it('does not stall a stream whose events keep coming, each within the deadline, however long it runs', async () => {
    const chunks: Raw['chunks'] = [anStart()];
    for (let index = 0; index < 6; index++) chunks.push({ waitMs: 120 }, an('ping', {}));
    chunks.push(...anText('slow but alive'), ...anEnd());
    expect((await bothSay('anthropic', { fault: 'raw', headers: SSE, chunks }, { idleTimeoutMs: 300 })).text).toBe(
      'slow but alive',
    );
  });

  it('retries a stalled call, and says so in the attempts', async () => {
    let first = true;
    const server = await serve((): ScriptedAnswer => {
      if (first) {
        first = false;
        return { fault: 'raw', headers: SSE, chunks: [oa({ content: 'par' })], after: 'hang' };
      }
      return { fault: 'raw', headers: SSE, chunks: [...oaText('second try'), oaUsage(), DONE] };
    });
    const provider = await providerFor('openai', server, {
      idleTimeoutMs: 200,
      retry: { maxAttempts: 2, baseDelayMs: 1 },
    });
    const completion = await provider.complete(request);
    expect(completion.text).toBe('second try');
    expect(completion.attempts).toMatchObject([{ kind: 'stalled', next: 'retry' }]);
  });

  it('holds a whole JSON answer to one deadline from its headers: trickled bytes do not keep it open', async () => {
    const { error } = await bothFail(
      'openai',
      { fault: 'raw', headers: { 'content-type': 'application/json' }, chunks: ['{'], after: { every: 20, send: ' ' } },
      { idleTimeoutMs: 250 },
    );
    expect([error.kind, error.isRetryable]).toEqual(['stalled', true]);
  });

  it('refuses an idle timeout that is not a positive number of milliseconds', async () => {
    const server = await serve({ text: 'x' });
    for (const idleTimeoutMs of [0, -1, Number.NaN, 2 ** 40]) {
      await expect(providerFor('openai', server, { idleTimeoutMs })).rejects.toThrow(/idle timeout/);
    }
  });

  it('in a run: the stalled call is retried, the step commits once, and the trace says stalled', async () => {
    let first = true;
    const server = await serve((call): ScriptedAnswer => {
      if (first) {
        first = false;
        return {
          fault: 'raw',
          headers: SSE,
          chunks: [oa({ content: 'thin' })],
          after: { every: 25, send: ': still here\n\n' },
        };
      }
      return call.index === 1 ? { text: 'done' } : { text: 'unexpected' };
    });
    h = await harness();
    const spec = specFor('openai', server, { idleTimeoutMs: 300, retry: { maxAttempts: 3, baseDelayMs: 1 } });
    const result = await h.supervisor.run({ task: 'go', provider: spec }).result;
    expect(result).toMatchObject({ status: 'finished', reply: 'done' });
    expect(h.store.steps(result.rootId).map((step) => step.seq)).toEqual([1]);
    expect(h.store.modelCalls({ rootId: result.rootId }).map((row) => [row.seq, row.attempt, row.outcome])).toEqual([
      [1, 0, 'stalled'],
      [1, 1, 'ok'],
    ]);
    expect(h.store.events(result.rootId).find((event) => event.type === 'model-retry')).toMatchObject({
      kind: 'stalled',
    });
    expect(await server.responseEnd(0)).toBe('closed');
  });
});

// ------------------------------------------------------------------ classes an adversarial review found

describe('what a hostile server tried after the first hardening', () => {
  it('keeps ids unique however the server spells its clashes, in linear time for thousands of calls', async () => {
    const call = (index: number, id: string) =>
      oa({ tool_calls: [{ index, id, type: 'function', function: { name: 'f', arguments: '{}' } }] });
    const said = await bothSay('openai', {
      fault: 'raw',
      headers: SSE,
      chunks: [call(0, 'x_2'), call(1, 'x'), call(2, 'x'), oa({}, 'tool_calls'), oaUsage(), DONE],
    });
    expect(new Set(said.calls.map((c) => c.id)).size).toBe(3);
    const blocks: string[] = [anStart()];
    for (let index = 0; index < 8000; index++) {
      blocks.push(
        an('content_block_start', { index, content_block: { type: 'tool_use', id: 'same', name: 'f', input: {} } }),
        an('content_block_stop', { index }),
      );
    }
    const many = await bothSay('anthropic', {
      fault: 'raw',
      headers: SSE,
      chunks: [[...blocks, ...anEnd('tool_use')].join('')],
    });
    expect(new Set(many.calls.map((c) => c.id)).size).toBe(8000);
  });

  it('reads the text of choice 0 by its index, not the first in the list', async () => {
    const two = `data: ${JSON.stringify({
      choices: [
        { index: 1, delta: { content: 'WRONG' }, finish_reason: null },
        { index: 0, delta: { content: 'right' }, finish_reason: null },
      ],
    })}\n\n`;
    for (const chunks of [[two], [oa({ content: 'a ' }), oa({ content: 'b ' }), two]]) {
      const said = await bothSay('openai', {
        fault: 'raw',
        headers: SSE,
        chunks: [...chunks, oa({}, 'stop'), oaUsage(), DONE],
      });
      expect(said.text.endsWith('right')).toBe(true);
      expect(said.text).not.toContain('WRONG');
    }
  });

  it('takes usage sent before the finish reason as a running count: a stream that ends then is cut', async () => {
    const early = `data: ${JSON.stringify({ choices: [{ index: 0, delta: { role: 'assistant', content: '' } }], usage: { prompt_tokens: 11, completion_tokens: 0 } })}\n\n`;
    const { error } = await bothFail('openai', {
      fault: 'raw',
      headers: SSE,
      chunks: [early, oa({ content: 'partial' }), oa({}, 'stop')],
    });
    expect([error.kind, error.isRetryable]).toEqual(['truncated', true]);
  });

  it('keeps an error status whatever its body: coded unreadably, or trickled past the deadline', async () => {
    const coded = await bothFail('openai', {
      fault: 'raw',
      status: 503,
      headers: { 'content-encoding': 'zstd', 'retry-after': '1' },
      chunks: ['(zstd bytes)'],
    });
    expect([coded.error.kind, coded.error.statusCode, coded.error.isRetryable, coded.error.retryAfterMs]).toEqual([
      'http',
      503,
      true,
      1000,
    ]);
    const trickled = await bothFail(
      'openai',
      {
        fault: 'raw',
        status: 401,
        headers: { 'content-type': 'application/json' },
        chunks: ['{"error":{"message":"bad key"'],
        after: { every: 20, send: ' ' },
      },
      { idleTimeoutMs: 250 },
    );
    expect([trickled.error.kind, trickled.error.statusCode, trickled.error.isRetryable]).toEqual(['http', 401, false]);
  });

  it('refuses a whole JSON body that is not a completion of its wire', async () => {
    for (const wire of ['openai', 'anthropic'] as const) {
      const { error } = await bothFail(wire, {
        fault: 'raw',
        headers: { 'content-type': 'application/json' },
        chunks: ['{"detail":"upstream busy"}'],
      });
      expect([error.kind, error.isRetryable], wire).toEqual(['undecodable', false]);
    }
  });

  it('finds a JSON answer behind a byte order mark the network cut in two, and an event stream by its first line', async () => {
    const bytes = Buffer.from(`\uFEFF${JSON.stringify(openAiWhole)}`);
    expect(
      await bothSay('openai', { fault: 'raw', headers: {}, chunks: [bytes.subarray(0, 1), bytes.subarray(1)] }),
    ).toMatchObject({ text: 'whole answer' });
    const { error } = await bothFail('openai', { fault: 'raw', headers: {}, chunks: [': only a comment\n\n'] });
    expect([error.kind, error.isRetryable]).toEqual(['truncated', true]);
  });

  it('reads the status a vendor error type stands for, in a stream and in a 200 body', async () => {
    const cases: [Wire, Raw, number, boolean][] = [
      [
        'anthropic',
        {
          fault: 'raw',
          headers: SSE,
          chunks: [anStart(), an('error', { error: { type: 'invalid_request_error', message: 'prompt is too long' } })],
        },
        400,
        false,
      ],
      [
        'anthropic',
        {
          fault: 'raw',
          headers: { 'content-type': 'application/json' },
          chunks: ['{"type":"error","error":{"type":"authentication_error","message":"no"}}'],
        },
        401,
        false,
      ],
      [
        'anthropic',
        {
          fault: 'raw',
          headers: SSE,
          chunks: [anStart(), an('error', { error: { type: 'overloaded_error', message: 'busy' } })],
        },
        529,
        true,
      ],
      [
        'openai',
        {
          fault: 'raw',
          headers: SSE,
          chunks: [
            oa({ content: 'x' }),
            'data: {"error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"too long"}}\n\n',
          ],
        },
        400,
        false,
      ],
      [
        'openai',
        {
          fault: 'raw',
          headers: SSE,
          chunks: ['data: {"error":{"code":"rate_limit_exceeded","message":"slow down"}}\n\n'],
        },
        429,
        true,
      ],
    ];
    for (const [wire, answer, status, retryable] of cases) {
      const { error } = await bothFail(wire, answer);
      expect([error.kind, error.statusCode, error.isRetryable], `${wire} ${status}`).toEqual([
        'http',
        status,
        retryable,
      ]);
    }
  });

  it('keeps a second tool_use block started at an index whose block was never stopped', async () => {
    const start = (id: string, input: Record<string, unknown>) =>
      an('content_block_start', { index: 1, content_block: { type: 'tool_use', id, name: 'f', input } });
    const said = await bothSay('anthropic', {
      fault: 'raw',
      headers: SSE,
      chunks: [
        anStart(),
        start('t1', { n: 1 }),
        start('t2', { n: 2 }),
        an('content_block_stop', { index: 1 }),
        ...anEnd('tool_use'),
      ],
    });
    expect(said.calls).toEqual([
      { id: 't1', name: 'f', args: { n: 1 } },
      { id: 't2', name: 'f', args: { n: 2 } },
    ]);
  });
});
