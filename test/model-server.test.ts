import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import {
  assistantTurns,
  lastUserText,
  type ModelScript,
  type ScriptedCall,
  ScriptedModelServer,
  type ScriptedModelServerOptions,
  systemText,
  toolResults,
} from '../src/testing/model-server.js';

let server: ScriptedModelServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function start(script: ModelScript, options?: ScriptedModelServerOptions): Promise<ScriptedModelServer> {
  server = await ScriptedModelServer.start(script, options);
  return server;
}

function fixture(name: string): string {
  return fileURLToPath(new URL(`./fixtures/wire/${name}`, import.meta.url));
}

function post(target: ScriptedModelServer, path: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(`${target.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

interface WireEvent {
  event: string | null;
  data: string;
}

/** Splits SSE text into its complete events; whatever follows the last blank line is returned apart. */
function parseSse(text: string): { events: WireEvent[]; rest: string } {
  const blocks = text.split('\n\n');
  const rest = blocks.pop() ?? '';
  const events = blocks.map((block) => {
    let event: string | null = null;
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith('event: ')) event = line.slice('event: '.length);
      if (line.startsWith('data: ')) data.push(line.slice('data: '.length));
    }
    return { event, data: data.join('\n') };
  });
  return { events, rest };
}

/** Reads a body to its end or its failure, keeping every byte that arrived and how many reads it took. */
async function drain(response: Response): Promise<{ text: string; error: unknown; reads: number }> {
  const reader = response.body!.getReader();
  const chunks: Uint8Array[] = [];
  let error: unknown = null;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
    }
  } catch (caught) {
    error = caught;
  }
  return { text: Buffer.concat(chunks).toString('utf8'), error, reads: chunks.length };
}

interface OpenAiChunk {
  id: string;
  object: string;
  model: string;
  choices: {
    index: number;
    delta: {
      role?: string;
      content?: string;
      tool_calls?: { index: number; id?: string; type?: string; function: { name?: string; arguments: string } }[];
    };
    finish_reason: string | null;
  }[];
  usage?: {
    prompt_tokens: number;
    completion_tokens: number;
    total_tokens: number;
    prompt_tokens_details: { cached_tokens: number };
    completion_tokens_details: { reasoning_tokens: number };
  } | null;
}

/** Reassembles an OpenAI stream the way a client must: content appended, tool-call arguments joined per index. */
function assembleOpenAi(events: WireEvent[]) {
  const chunks = events
    .filter((event) => event.data !== '[DONE]')
    .map((event) => JSON.parse(event.data) as OpenAiChunk);
  let text = '';
  const calls = new Map<number, { id: string; name: string; argumentChunks: string[] }>();
  let finishReason: string | null = null;
  for (const chunk of chunks) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    text += choice.delta.content ?? '';
    for (const part of choice.delta.tool_calls ?? []) {
      if (part.id !== undefined)
        calls.set(part.index, { id: part.id, name: part.function.name ?? '', argumentChunks: [] });
      const call = calls.get(part.index)!;
      if (part.function.arguments !== '') call.argumentChunks.push(part.function.arguments);
    }
    finishReason = choice.finish_reason ?? finishReason;
  }
  const usage = chunks.find((chunk) => chunk.choices.length === 0)?.usage ?? null;
  return {
    chunks,
    text,
    finishReason,
    usage,
    calls: [...calls.entries()].map(([index, call]) => ({
      index,
      id: call.id,
      name: call.name,
      fragments: call.argumentChunks.length,
      args: JSON.parse(call.argumentChunks.join('')) as Record<string, unknown>,
    })),
  };
}

interface AnthropicEvent {
  type: string;
  index?: number;
  message?: { id: string; model: string; usage: Record<string, number> };
  content_block?: { type: string; text?: string; id?: string; name?: string; input?: unknown };
  delta?: { type?: string; text?: string; partial_json?: string; stop_reason?: string };
  usage?: { output_tokens: number };
}

/** Reassembles an Anthropic stream: text per text block, tool input from its JSON fragments. */
function assembleAnthropic(events: WireEvent[]) {
  const parsed = events.map((event) => ({ name: event.event, payload: JSON.parse(event.data) as AnthropicEvent }));
  const blocks = new Map<number, { type: string; id?: string; name?: string; text: string; fragments: string[] }>();
  for (const { payload } of parsed) {
    if (payload.type === 'content_block_start' && payload.content_block) {
      const block = payload.content_block;
      blocks.set(payload.index!, { type: block.type, id: block.id, name: block.name, text: '', fragments: [] });
    }
    if (payload.type === 'content_block_delta') {
      const block = blocks.get(payload.index!)!;
      if (payload.delta?.type === 'text_delta') block.text += payload.delta.text;
      if (payload.delta?.type === 'input_json_delta') block.fragments.push(payload.delta.partial_json ?? '');
    }
  }
  const start = parsed.find(({ payload }) => payload.type === 'message_start')?.payload.message;
  const delta = parsed.find(({ payload }) => payload.type === 'message_delta')?.payload;
  return {
    names: parsed.map(({ name }) => name),
    typesMatchNames: parsed.every(({ name, payload }) => name === payload.type),
    start,
    stopReason: delta?.delta?.stop_reason,
    outputTokens: delta?.usage?.output_tokens,
    text: [...blocks.values()]
      .filter((block) => block.type === 'text')
      .map((block) => block.text)
      .join(''),
    tools: [...blocks.values()]
      .filter((block) => block.type === 'tool_use')
      .map((block) => ({
        id: block.id,
        name: block.name,
        fragments: block.fragments.filter((fragment) => fragment !== '').length,
        args: JSON.parse(block.fragments.join('')) as Record<string, unknown>,
      })),
  };
}

/** Collapses runs of the same event name, so an event order reads like the vendor's documentation. */
function collapse(names: (string | null)[]): string[] {
  return names.flatMap((name, position) => (name === names[position - 1] ? [] : [name ?? 'message']));
}

const openAiRequest = {
  model: 'gpt-test',
  messages: [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Weather in Paris and my Saturday?' },
  ],
  tools: [
    { type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object' } } },
  ],
};

const anthropicRequest = {
  model: 'claude-test',
  max_tokens: 1024,
  system: [{ type: 'text', text: 'You are terse.', cache_control: { type: 'ephemeral' } }],
  messages: [{ role: 'user', content: 'Weather in Paris?' }],
  tools: [{ name: 'get_weather', description: 'Weather', input_schema: { type: 'object' } }],
};

const twoTools = [
  { name: 'get_weather', args: { city: 'Paris', unit: 'celsius' } },
  { name: 'list_events', args: { date: '2025-06-14', limit: 5, tags: ['home', 'café ☕'] } },
];

describe('OpenAI Chat Completions wire', () => {
  it('streams text and two tool calls whose arguments arrive in fragments', async () => {
    const target = await start(
      () => ({
        text: 'Checking both for you.',
        toolCalls: twoTools,
        usage: { inputTokens: 300, outputTokens: 40, cacheReadTokens: 128, reasoningTokens: 12 },
        headers: { 'x-ratelimit-remaining-requests': '41' },
      }),
      { chunkDelayMs: 2 },
    );
    const response = await post(target, '/v1/chat/completions', {
      ...openAiRequest,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(response.headers.get('x-ratelimit-remaining-requests')).toBe('41');
    const { text: body, error, reads } = await drain(response);
    expect(error).toBeNull();
    expect(reads).toBeGreaterThan(1);
    const { events, rest } = parseSse(body);
    expect(rest).toBe('');
    expect(events.at(-1)?.data).toBe('[DONE]');
    expect(events.every((event) => event.event === null)).toBe(true);

    const stream = assembleOpenAi(events);
    expect(stream.chunks[0]?.choices[0]?.delta).toEqual({ role: 'assistant', content: '', refusal: null });
    expect(
      stream.chunks.every((chunk) => chunk.object === 'chat.completion.chunk' && chunk.id === 'chatcmpl-scripted-0'),
    ).toBe(true);
    expect(stream.chunks[0]?.model).toBe('gpt-test');
    expect(stream.text).toBe('Checking both for you.');
    expect(stream.calls).toEqual([
      { index: 0, id: 'call_0_0', name: 'get_weather', fragments: 3, args: { city: 'Paris', unit: 'celsius' } },
      {
        index: 1,
        id: 'call_0_1',
        name: 'list_events',
        fragments: 5,
        args: { date: '2025-06-14', limit: 5, tags: ['home', 'café ☕'] },
      },
    ]);
    expect(stream.finishReason).toBe('tool_calls');
    expect(stream.usage).toEqual({
      prompt_tokens: 300,
      completion_tokens: 40,
      total_tokens: 340,
      prompt_tokens_details: { cached_tokens: 128, audio_tokens: 0 },
      completion_tokens_details: {
        reasoning_tokens: 12,
        audio_tokens: 0,
        accepted_prediction_tokens: 0,
        rejected_prediction_tokens: 0,
      },
    });
    // The usage chunk comes after the finish chunk and right before [DONE].
    expect(stream.chunks.at(-2)?.choices[0]?.finish_reason).toBe('tool_calls');
    expect(stream.chunks.at(-1)?.choices).toEqual([]);
  });

  it('sends no usage chunk unless the request asks for one, as OpenAI does', async () => {
    const target = await start(() => ({ text: 'Hi there.' }));
    const response = await post(target, '/v1/chat/completions', { ...openAiRequest, stream: true });
    const { events } = parseSse(await response.text());
    const stream = assembleOpenAi(events);
    expect(stream.text).toBe('Hi there.');
    expect(stream.finishReason).toBe('stop');
    expect(stream.usage).toBeNull();
    expect(stream.chunks.every((chunk) => !('usage' in chunk))).toBe(true);
    expect(events.map((event) => event.data).at(-1)).toBe('[DONE]');
  });

  it('answers one chat.completion object when not streaming, with default ids and token counts', async () => {
    const target = await start(() => ({ toolCalls: [{ name: 'get_weather', args: { city: 'Oslo' } }] }));
    await post(target, '/v1/chat/completions', openAiRequest);
    const raw = JSON.stringify({ ...openAiRequest, messages: [{ role: 'user', content: 'again' }] });
    const response = await post(target, '/v1/chat/completions', raw);
    expect(response.headers.get('content-type')).toBe('application/json');
    const completion = (await response.json()) as Record<string, unknown>;
    const callsJson = JSON.stringify([{ name: 'get_weather', args: { city: 'Oslo' } }]);
    expect(completion).toMatchObject({
      id: 'chatcmpl-scripted-1',
      object: 'chat.completion',
      model: 'gpt-test',
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'call_1_0', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
            ],
          },
          finish_reason: 'tool_calls',
        },
      ],
      usage: {
        prompt_tokens: Math.ceil(raw.length / 4),
        completion_tokens: Math.ceil(callsJson.length / 4),
        total_tokens: Math.ceil(raw.length / 4) + Math.ceil(callsJson.length / 4),
        prompt_tokens_details: { cached_tokens: 0 },
        completion_tokens_details: { reasoning_tokens: 0 },
      },
    });
  });
});

describe('Anthropic Messages wire', () => {
  it('streams a text block and a tool_use block in the vendor event order', async () => {
    const target = await start(() => ({
      text: 'Looking it up.',
      toolCalls: [{ name: 'get_weather', args: { city: 'Paris', unit: 'celsius' } }],
      usage: { inputTokens: 3000, outputTokens: 77, cacheReadTokens: 2048, cacheWriteTokens: 512 },
    }));
    const response = await post(target, '/v1/messages', { ...anthropicRequest, stream: true });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const { events, rest } = parseSse(await response.text());
    expect(rest).toBe('');
    const stream = assembleAnthropic(events);
    expect(collapse(stream.names)).toEqual([
      'message_start',
      'content_block_start',
      'ping',
      'content_block_delta',
      'content_block_stop',
      'content_block_start',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(stream.typesMatchNames).toBe(true);
    expect(stream.start).toEqual({
      id: 'msg_scripted_0',
      type: 'message',
      role: 'assistant',
      model: 'claude-test',
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 440, cache_creation_input_tokens: 512, cache_read_input_tokens: 2048, output_tokens: 1 },
    });
    expect(stream.text).toBe('Looking it up.');
    expect(stream.tools).toEqual([
      { id: 'toolu_0_0', name: 'get_weather', fragments: 3, args: { city: 'Paris', unit: 'celsius' } },
    ]);
    const toolStart = events.find((event) => event.data.includes('"tool_use"'));
    expect(JSON.parse(toolStart?.data ?? '')).toEqual({
      type: 'content_block_start',
      index: 1,
      content_block: { type: 'tool_use', id: 'toolu_0_0', name: 'get_weather', input: {} },
    });
    expect(stream.stopReason).toBe('tool_use');
    expect(stream.outputTokens).toBe(77);
  });

  it('streams two tool calls with no text, the ping after the first block opens', async () => {
    const target = await start(() => ({ toolCalls: twoTools }));
    const response = await post(target, '/v1/messages', { ...anthropicRequest, stream: true });
    const stream = assembleAnthropic(parseSse(await response.text()).events);
    expect(stream.names.slice(0, 3)).toEqual(['message_start', 'content_block_start', 'ping']);
    expect(stream.text).toBe('');
    expect(stream.tools.map(({ id, name, args }) => ({ id, name, args }))).toEqual([
      { id: 'toolu_0_0', name: 'get_weather', args: { city: 'Paris', unit: 'celsius' } },
      { id: 'toolu_0_1', name: 'list_events', args: { date: '2025-06-14', limit: 5, tags: ['home', 'café ☕'] } },
    ]);
    expect(stream.tools.every((tool) => tool.fragments >= 2)).toBe(true);
  });

  it('answers one message object when not streaming', async () => {
    const target = await start(() => ({ text: 'Sunny, 21°C.', usage: { inputTokens: 50, outputTokens: 6 } }));
    const response = await post(target, '/v1/messages', anthropicRequest);
    expect(await response.json()).toEqual({
      id: 'msg_scripted_0',
      type: 'message',
      role: 'assistant',
      model: 'claude-test',
      content: [{ type: 'text', text: 'Sunny, 21°C.' }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: 50, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 6 },
    });
  });
});

describe('recording and reading calls', () => {
  it('records every model call with its raw body, headers, wire and index', async () => {
    const seen: number[] = [];
    const target = await start((call) => {
      seen.push(call.index);
      return { text: `answer ${call.index}` };
    });
    const openAiRaw = `{ "model": "gpt-test",  "messages": [{"role": "user", "content": "spaced"}] }`;
    await post(target, '/v1/chat/completions?trace=1', openAiRaw, { authorization: 'Bearer sk-test' });
    await post(target, '/v1/messages', anthropicRequest, {
      'x-api-key': 'ant-test',
      'anthropic-version': '2023-06-01',
    });
    expect(seen).toEqual([0, 1]);
    expect(target.calls).toHaveLength(2);
    const [first, second] = target.calls as [ScriptedCall, ScriptedCall];
    expect(first).toMatchObject({ wire: 'openai', path: '/v1/chat/completions?trace=1', raw: openAiRaw, index: 0 });
    expect(first.body).toEqual({ model: 'gpt-test', messages: [{ role: 'user', content: 'spaced' }] });
    expect(first.headers.authorization).toBe('Bearer sk-test');
    expect(first.headers['content-type']).toBe('application/json');
    expect(second).toMatchObject({ wire: 'anthropic', path: '/v1/messages', raw: JSON.stringify(anthropicRequest) });
    expect(second.headers['x-api-key']).toBe('ant-test');
    expect(second.headers['anthropic-version']).toBe('2023-06-01');
  });

  it('reads the system prompt, last user text, tool results and turn count from either wire', async () => {
    const calls: ScriptedCall[] = [];
    const target = await start((call) => {
      calls.push(call);
      return { text: 'ok' };
    });
    await post(target, '/v1/chat/completions', {
      model: 'gpt-test',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: [{ type: 'text', text: 'Weather?' }] },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{}' } },
            { id: 'call_b', type: 'function', function: { name: 'list_events', arguments: '{}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_a', content: 'sunny' },
        { role: 'tool', tool_call_id: 'call_b', content: [{ type: 'text', text: 'two events' }] },
        { role: 'assistant', content: 'Sunny, two events.' },
        { role: 'user', content: 'And tomorrow?' },
      ],
    });
    await post(target, '/v1/messages', {
      model: 'claude-test',
      max_tokens: 100,
      system: [
        { type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } },
        { type: 'text', text: 'Use tools.' },
      ],
      messages: [
        { role: 'user', content: 'Weather?' },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Checking.' },
            { type: 'tool_use', id: 'toolu_a', name: 'get_weather', input: {} },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_a', content: [{ type: 'text', text: 'rain' }], is_error: true },
            { type: 'tool_result', tool_use_id: 'toolu_missing', content: 'orphan' },
          ],
        },
      ],
    });
    const [openAi, anthropic] = calls as [ScriptedCall, ScriptedCall];
    expect(systemText(openAi)).toBe('Be brief.');
    expect(lastUserText(openAi)).toBe('And tomorrow?');
    expect(toolResults(openAi)).toEqual([
      { name: 'get_weather', callId: 'call_a', content: 'sunny', isError: false },
      { name: 'list_events', callId: 'call_b', content: 'two events', isError: false },
    ]);
    expect(assistantTurns(openAi)).toBe(2);
    expect(systemText(anthropic)).toBe('Be brief.\nUse tools.');
    expect(lastUserText(anthropic)).toBe('Weather?');
    expect(toolResults(anthropic)).toEqual([
      { name: 'get_weather', callId: 'toolu_a', content: 'rain', isError: true },
      { callId: 'toolu_missing', content: 'orphan', isError: false },
    ]);
    expect(assistantTurns(anthropic)).toBe(1);
  });
});

describe('faults', () => {
  it('sends an error status in each vendor shape, with retry-after and extra headers', async () => {
    const target = await start((call) =>
      call.wire === 'openai'
        ? { fault: 'status', status: 429, retryAfter: '7', headers: { 'x-ratelimit-remaining-requests': '0' } }
        : { fault: 'status', status: 529, retryAfter: '2' },
    );
    const openAi = await post(target, '/v1/chat/completions', { ...openAiRequest, stream: true });
    expect(openAi.status).toBe(429);
    expect(openAi.headers.get('retry-after')).toBe('7');
    expect(openAi.headers.get('x-ratelimit-remaining-requests')).toBe('0');
    expect(await openAi.json()).toEqual({
      error: { message: 'scripted fault: status 429', type: 'requests', param: null, code: 'rate_limit_exceeded' },
    });
    const anthropic = await post(target, '/v1/messages', anthropicRequest);
    expect(anthropic.status).toBe(529);
    expect(anthropic.headers.get('retry-after')).toBe('2');
    expect(await anthropic.json()).toEqual({
      type: 'error',
      error: { type: 'overloaded_error', message: 'scripted fault: status 529' },
    });
  });

  it('sends a given error body verbatim and no retry-after when none is given', async () => {
    const target = await start(() => ({ fault: 'status', status: 502, body: '<html>Bad Gateway</html>' }));
    const response = await post(target, '/v1/chat/completions', openAiRequest);
    expect(response.status).toBe(502);
    expect(response.headers.get('retry-after')).toBeNull();
    expect(await response.text()).toBe('<html>Bad Gateway</html>');
  });

  it('truncates a stream mid-event and the client sees the cut', async () => {
    const target = await start(() => ({ fault: 'truncate', afterEvents: 3 }));
    for (const [path, body] of [
      ['/v1/chat/completions', { ...openAiRequest, stream: true }],
      ['/v1/messages', { ...anthropicRequest, stream: true }],
    ] as const) {
      const response = await post(target, path, body);
      expect(response.status).toBe(200);
      const { text, error } = await drain(response);
      const { events, rest } = parseSse(text);
      expect(events).toHaveLength(3);
      expect(rest.length).toBeGreaterThan(0);
      expect(error).toBeInstanceOf(Error);
      expect((error as Error).message).toBe('terminated');
    }
    const plain = await post(target, '/v1/chat/completions', openAiRequest);
    await expect(plain.text()).rejects.toThrow('terminated');
  });

  it('sends one valid event, then an event that is not JSON, then ends cleanly', async () => {
    const target = await start(() => ({ fault: 'malformed' }));
    const openAi = await post(target, '/v1/chat/completions', { ...openAiRequest, stream: true });
    const openAiText = await openAi.text();
    const { events, rest } = parseSse(openAiText);
    expect(rest).toBe('');
    expect(events).toHaveLength(2);
    expect(JSON.parse(events[0]?.data ?? '')).toMatchObject({ object: 'chat.completion.chunk' });
    expect(openAiText.endsWith('data: {not json\n\n')).toBe(true);

    const anthropic = await post(target, '/v1/messages', { ...anthropicRequest, stream: true });
    const parsed = parseSse(await anthropic.text());
    expect(parsed.events.map((event) => event.event)).toEqual(['message_start', 'content_block_delta']);
    expect(JSON.parse(parsed.events[0]?.data ?? '')).toMatchObject({ type: 'message_start' });
    expect(parsed.events[1]?.data).toBe('{not json');
  });

  it('holds a hanging request until close(), which ends it', async () => {
    const target = await start(() => ({ fault: 'hang' }));
    const pending = post(target, '/v1/messages', { ...anthropicRequest, stream: true });
    const settled = pending.then(
      () => 'answered',
      (error: Error) => error.message,
    );
    while (target.calls.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const early = await Promise.race([settled, new Promise((resolve) => setTimeout(() => resolve('still open'), 100))]);
    expect(early).toBe('still open');
    const closing = Date.now();
    await target.close();
    expect(await settled).toBe('fetch failed');
    expect(Date.now() - closing).toBeLessThan(1000);
  });

  it('replays the OpenAI fixture byte for byte, and it reads as its README says', async () => {
    const file = fixture('openai-parallel-tools.sse');
    const target = await start(() => ({ fault: 'fixture', file }));
    const response = await post(target, '/v1/chat/completions', { ...openAiRequest, stream: true });
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const bytes = Buffer.from(await response.arrayBuffer());
    expect(bytes.equals(readFileSync(file))).toBe(true);
    const { events } = parseSse(bytes.toString('utf8'));
    expect(events).toHaveLength(42);
    const stream = assembleOpenAi(events);
    expect(stream.text).toBe("I'll check the weather in Paris and your calendar for Saturday.");
    expect(stream.calls).toEqual([
      {
        index: 0,
        id: 'call_Jq7vR2mX9kLpT4sW8nYb3cDe',
        name: 'get_weather',
        fragments: 10,
        args: { city: 'Paris', unit: 'celsius' },
      },
      {
        index: 1,
        id: 'call_Bf2hN6tQ1zXr5vK0mLw9aUy',
        name: 'list_events',
        fragments: 14,
        args: { date: '2025-06-14', limit: 5 },
      },
    ]);
    expect(stream.finishReason).toBe('tool_calls');
    expect(stream.usage).toMatchObject({
      prompt_tokens: 1587,
      completion_tokens: 142,
      total_tokens: 1729,
      prompt_tokens_details: { cached_tokens: 1024 },
      completion_tokens_details: { reasoning_tokens: 64 },
    });
  });

  it('replays the Anthropic fixture byte for byte, and it reads as its README says', async () => {
    const file = fixture('anthropic-tools.sse');
    const target = await start(() => ({ fault: 'fixture', file }));
    const response = await post(target, '/v1/messages', { ...anthropicRequest, stream: true });
    const bytes = Buffer.from(await response.arrayBuffer());
    expect(bytes.equals(readFileSync(file))).toBe(true);
    const text = bytes.toString('utf8');
    expect(text).toContain('event: ping\ndata: {"type": "ping"}\n\n');
    const { events } = parseSse(text);
    expect(events).toHaveLength(23);
    const stream = assembleAnthropic(events);
    expect(stream.typesMatchNames).toBe(true);
    expect(stream.start?.usage).toMatchObject({
      input_tokens: 472,
      cache_creation_input_tokens: 512,
      cache_read_input_tokens: 2048,
      output_tokens: 3,
    });
    expect(stream.text).toBe("I'll look up the weather in Paris and search the docs for the retry policy.");
    expect(stream.tools).toEqual([
      {
        id: 'toolu_01T1x1fJ34qAmk2tNTrN7Up6',
        name: 'get_weather',
        fragments: 4,
        args: { city: 'Paris', unit: 'celsius' },
      },
      {
        id: 'toolu_01Nq8ZbW3xYcVd5Rk2LmHs9T',
        name: 'search_docs',
        fragments: 4,
        args: { query: 'retry policy', max_results: 3 },
      },
    ]);
    expect(stream.stopReason).toBe('tool_use');
    expect(stream.outputTokens).toBe(89);
  });

  it('answers 500 in the vendor shape when the fixture file is missing or the script throws', async () => {
    const target = await start((call) => {
      if (call.wire === 'openai') return { fault: 'fixture', file: fixture('no-such.sse') };
      throw new Error('script bug');
    });
    const missing = await post(target, '/v1/chat/completions', openAiRequest);
    expect(missing.status).toBe(500);
    const missingBody = (await missing.json()) as { error: { type: string; message: string } };
    expect(missingBody.error.type).toBe('server_error');
    expect(missingBody.error.message).toContain('no-such.sse');
    const thrown = await post(target, '/v1/messages', anthropicRequest);
    expect(thrown.status).toBe(500);
    expect(await thrown.json()).toEqual({
      type: 'error',
      error: { type: 'api_error', message: 'the script threw: script bug' },
    });
  });
});

describe('routing and robustness', () => {
  it('answers a bad request body with a 400 and keeps serving', async () => {
    const target = await start(() => ({ text: 'fine' }));
    const notJson = await post(target, '/v1/chat/completions', '{"model": "gpt-test", "messages": [');
    expect(notJson.status).toBe(400);
    const notJsonBody = (await notJson.json()) as { error: { type: string; message: string } };
    expect(notJsonBody.error.type).toBe('invalid_request_error');
    expect(notJsonBody.error.message).toMatch(/^request body is not JSON/);
    const noMaxTokens = await post(target, '/v1/messages', { model: 'claude-test', messages: [] });
    expect(noMaxTokens.status).toBe(400);
    expect(await noMaxTokens.json()).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'max_tokens: a number is required' },
    });
    const array = await post(target, '/v1/chat/completions', '[1, 2]');
    expect(array.status).toBe(400);
    expect(target.calls.map((call) => call.body)).toEqual([null, { model: 'claude-test', messages: [] }, [1, 2]]);
    const fine = await post(target, '/v1/chat/completions', openAiRequest);
    expect(fine.status).toBe(200);
    expect(((await fine.json()) as { choices: { message: { content: string } }[] }).choices[0]?.message.content).toBe(
      'fine',
    );
  });

  it('lists the configured models', async () => {
    const target = await start(() => ({ text: '' }), {
      models: [
        { id: 'vendor/large', contextLength: 200000, pricing: { prompt: '0.000003', completion: '0.000015' } },
        { id: 'vendor/small' },
      ],
    });
    const response = await fetch(`${target.url}/v1/models`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      object: 'list',
      data: [
        {
          id: 'vendor/large',
          object: 'model',
          created: 1_700_000_000,
          owned_by: 'scripted',
          context_length: 200000,
          pricing: { prompt: '0.000003', completion: '0.000015' },
        },
        { id: 'vendor/small', object: 'model', created: 1_700_000_000, owned_by: 'scripted' },
      ],
    });
    expect(target.calls).toHaveLength(0);
  });

  it('answers anything else with a 404 JSON error', async () => {
    const target = await start(() => ({ text: '' }));
    const unknown = await fetch(`${target.url}/v1/embeddings`, { method: 'POST', body: '{}' });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({
      error: { message: 'no route for POST /v1/embeddings', type: 'not_found_error' },
    });
    const wrongMethod = await fetch(`${target.url}/v1/messages`);
    expect(wrongMethod.status).toBe(404);
    expect(target.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  it('delays the response headers by latencyMs', async () => {
    const target = await start(() => ({ text: 'slow', latencyMs: 150 }));
    const started = Date.now();
    const response = await post(target, '/v1/messages', anthropicRequest);
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    expect(response.status).toBe(200);
  });

  it('answers twenty concurrent requests, each with its own answer', async () => {
    const target = await start(
      async (call) => {
        await new Promise((resolve) => setTimeout(resolve, 20));
        return { text: `for ${lastUserText(call)}`, toolCalls: [{ name: 'echo', args: { index: call.index } }] };
      },
      { chunkDelayMs: 1 },
    );
    const answers = await Promise.all(
      Array.from({ length: 20 }, async (_, agent) => {
        if (agent % 2 === 0) {
          const response = await post(target, '/v1/chat/completions', {
            model: 'gpt-test',
            stream: true,
            messages: [{ role: 'user', content: `agent ${agent}` }],
          });
          return { agent, status: response.status, ...assembleOpenAi(parseSse(await response.text()).events) };
        }
        const response = await post(target, '/v1/messages', {
          ...anthropicRequest,
          stream: true,
          messages: [{ role: 'user', content: `agent ${agent}` }],
        });
        const stream = assembleAnthropic(parseSse(await response.text()).events);
        return { agent, status: response.status, text: stream.text, calls: stream.tools };
      }),
    );
    expect(target.calls).toHaveLength(20);
    for (const answer of answers) {
      expect(answer.status).toBe(200);
      expect(answer.text).toBe(`for agent ${answer.agent}`);
      const call = target.calls.find((candidate) => lastUserText(candidate) === `agent ${answer.agent}`);
      expect(answer.calls[0]?.args).toEqual({ index: call?.index });
    }
    expect(new Set(target.calls.map((call) => call.index)).size).toBe(20);
  });
});
