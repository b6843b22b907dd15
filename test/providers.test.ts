/**
 * Every wire against the scripted model server: a real HTTP server on loopback
 * speaking the vendors' formats, and recorded vendor transcripts played through it.
 */
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type Completion,
  type HttpProviderSpec,
  type ModelRequest,
  ProviderError,
  type TranscriptEntry,
} from '../dist/index.js';
import { loadProvider } from '../dist/runtime/providers/registry.js';
import { type ModelScript, type ScriptedCall, ScriptedModelServer } from '../dist/testing/index.js';

const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/wire/${name}`, import.meta.url));
let server: ScriptedModelServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const tools = [
  {
    name: 'get_weather',
    description: 'Weather for a city.',
    parameters: { type: 'object', properties: { city: { type: 'string' } } },
  },
  { name: 'list_events', description: 'Calendar events.', parameters: { type: 'object', properties: {} } },
];

function request(transcript: TranscriptEntry[]): ModelRequest {
  return {
    system: 'You are agent "root".',
    transcript,
    tools,
    metadata: { runId: 'r', rootId: 'r', address: 'root', parentAddress: null, depth: 0, seq: 1 },
    options: { cacheKey: 'a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6' },
  };
}

async function providerFor(kind: HttpProviderSpec['kind'], script: ModelScript, extra: Partial<HttpProviderSpec> = {}) {
  server = await ScriptedModelServer.start(script);
  const base = kind === 'anthropic' ? server.url : `${server.url}/v1`;
  return loadProvider({
    kind,
    model: `${kind}-model`,
    baseUrl: base,
    apiKey: 'test-key',
    retry: { baseDelayMs: 1 },
    ...extra,
  });
}

async function failure(promise: Promise<unknown>): Promise<ProviderError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof ProviderError) return error;
    throw error;
  }
  throw new Error('the call succeeded');
}

const usage = { inputTokens: 900, outputTokens: 70, cacheReadTokens: 600, cacheWriteTokens: 100, reasoningTokens: 20 };

describe.each(['openai', 'anthropic', 'openrouter', 'compatible'] as const)('the %s wire', (kind) => {
  it('round-trips text, parallel tool calls, their results and usage', async () => {
    const provider = await providerFor(kind, (call) =>
      call.index === 0
        ? {
            text: 'Checking both.',
            toolCalls: [
              { name: 'get_weather', args: { city: 'Paris', unit: 'celsius' } },
              { name: 'list_events', args: { date: '2025-06-14', limit: 5 } },
            ],
            usage,
          }
        : { text: 'Sunny, and two events.', usage },
    );
    const first = await provider.complete(request([{ role: 'user', text: 'weather and calendar?' }]));
    expect(first.text).toBe('Checking both.');
    expect(first.toolCalls.map((call) => [call.name, call.args])).toEqual([
      ['get_weather', { city: 'Paris', unit: 'celsius' }],
      ['list_events', { date: '2025-06-14', limit: 5 }],
    ]);
    // What each vendor reports: Anthropic does not count reasoning apart; the OpenAI shape does not report cache writes.
    const reported = kind === 'anthropic' ? { ...usage, reasoningTokens: 0 } : { ...usage, cacheWriteTokens: 0 };
    expect(first.usage).toEqual(reported);
    expect(first.provider).toBe(kind);
    const [a, b] = first.toolCalls as [Completion['toolCalls'][0], Completion['toolCalls'][0]];
    const second = await provider.complete(
      request([
        { role: 'user', text: 'weather and calendar?' },
        { role: 'assistant', text: first.text, toolCalls: first.toolCalls },
        { role: 'tool', callId: a.id, name: a.name, content: '21C, sunny', isError: false },
        { role: 'tool', callId: b.id, name: b.name, content: 'no calendar access', isError: true },
      ]),
    );
    expect(second.text).toBe('Sunny, and two events.');
    const sent = (server as ScriptedModelServer).calls[1] as ScriptedCall;
    const body = sent.body as Record<string, unknown>;
    if (kind === 'anthropic') {
      const messages = body.messages as { role: string; content: Record<string, unknown>[] }[];
      expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
      expect(messages[1]?.content.map((block) => block.type)).toEqual(['text', 'tool_use', 'tool_use']);
      expect(messages[2]?.content).toEqual([
        { type: 'tool_result', tool_use_id: a.id, content: '21C, sunny' },
        { type: 'tool_result', tool_use_id: b.id, content: 'no calendar access', is_error: true },
      ]);
      // One cache breakpoint, at the end of the system block: tools and instructions cached together.
      expect(body.system).toEqual([
        { type: 'text', text: 'You are agent "root".', cache_control: { type: 'ephemeral' } },
      ]);
      expect(sent.headers['x-api-key']).toBe('test-key');
      expect(sent.headers['anthropic-version']).toBe('2023-06-01');
    } else {
      const messages = body.messages as Record<string, unknown>[];
      expect(messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'tool']);
      expect(messages[2]?.tool_calls).toEqual([
        {
          id: a.id,
          type: 'function',
          function: { name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' },
        },
        { id: b.id, type: 'function', function: { name: 'list_events', arguments: '{"date":"2025-06-14","limit":5}' } },
      ]);
      expect(messages[3]).toEqual({ role: 'tool', tool_call_id: a.id, content: '21C, sunny' });
      expect(sent.headers.authorization).toBe('Bearer test-key');
    }
    // Cache affinity: the opaque digest, as a header on every wire and in the body where the vendor reads it.
    expect(sent.headers['x-session-affinity']).toBe('a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6');
    if (kind === 'openai' || kind === 'openrouter')
      expect(body.prompt_cache_key).toBe('a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6');
    if (kind === 'openrouter') {
      expect(sent.headers['x-title']).toBe('io-harness');
      expect(body.usage).toEqual({ include: true });
      expect((body.messages as { content: unknown }[])[0]?.content).toEqual([
        { type: 'text', text: 'You are agent "root".', cache_control: { type: 'ephemeral' } },
      ]);
    }
  });

  it('classifies a cut stream, an event that is not JSON and an HTTP 500', async () => {
    const answers = [
      { fault: 'truncate', afterEvents: 2 },
      { fault: 'malformed' },
      { fault: 'status', status: 500 },
      { fault: 'status', status: 401 },
    ] as const;
    const provider = await providerFor(kind, (call) => answers[call.index] ?? { text: 'late' }, {
      retry: { maxAttempts: 1 },
    });
    const ask = () => provider.complete(request([{ role: 'user', text: 'hi' }]));
    const cut = await failure(ask());
    expect([cut.kind, cut.isRetryable]).toEqual(['truncated', true]);
    const garbled = await failure(ask());
    expect([garbled.kind, garbled.isRetryable]).toEqual(['undecodable', false]);
    const broken = await failure(ask());
    expect([broken.kind, broken.statusCode, broken.isRetryable]).toEqual(['http', 500, true]);
    const denied = await failure(ask());
    expect([denied.kind, denied.statusCode, denied.isRetryable]).toEqual(['http', 401, false]);
  });
});

describe('vendor transcripts played through the loopback server', () => {
  it('decodes a recorded OpenAI stream with parallel tool calls, cache and reasoning tokens', async () => {
    const provider = await providerFor('openai', () => ({
      fault: 'fixture',
      file: fixture('openai-parallel-tools.sse'),
    }));
    const completion = await provider.complete(request([{ role: 'user', text: 'weather?' }]));
    expect(completion.text).toBe("I'll check the weather in Paris and your calendar for Saturday.");
    expect(completion.toolCalls).toEqual([
      { id: 'call_Jq7vR2mX9kLpT4sW8nYb3cDe', name: 'get_weather', args: { city: 'Paris', unit: 'celsius' } },
      { id: 'call_Bf2hN6tQ1zXr5vK0mLw9aUy', name: 'list_events', args: { date: '2025-06-14', limit: 5 } },
    ]);
    expect(completion.usage).toEqual({
      inputTokens: 1587,
      outputTokens: 142,
      cacheReadTokens: 1024,
      cacheWriteTokens: 0,
      reasoningTokens: 64,
    });
    expect(completion.finishReason).toBe('tool_calls');
  });

  it('decodes a recorded Anthropic stream with tool_use blocks and cache tokens', async () => {
    const provider = await providerFor('anthropic', () => ({ fault: 'fixture', file: fixture('anthropic-tools.sse') }));
    const completion = await provider.complete(request([{ role: 'user', text: 'weather?' }]));
    expect(completion.text).toBe("I'll look up the weather in Paris and search the docs for the retry policy.");
    expect(completion.toolCalls).toEqual([
      { id: 'toolu_01T1x1fJ34qAmk2tNTrN7Up6', name: 'get_weather', args: { city: 'Paris', unit: 'celsius' } },
      { id: 'toolu_01Nq8ZbW3xYcVd5Rk2LmHs9T', name: 'search_docs', args: { query: 'retry policy', max_results: 3 } },
    ]);
    expect(completion.usage).toEqual({
      inputTokens: 3032,
      outputTokens: 89,
      cacheReadTokens: 2048,
      cacheWriteTokens: 512,
      reasoningTokens: 0,
    });
    expect(completion.finishReason).toBe('tool_use');
  });
});

describe('retries, rate limits and the catalogue', () => {
  it('retries a 429 after its Retry-After, and carries both rate-limit families and unknown headers', async () => {
    const limits = {
      'x-ratelimit-limit-requests': '500',
      'x-ratelimit-remaining-requests': '499',
      'x-ratelimit-reset-requests': '120ms',
      'x-ratelimit-limit-tokens': '30000',
      'x-ratelimit-remaining-tokens': '29000',
      'x-ratelimit-reset-tokens': '1m30s',
      'x-ratelimit-experimental-burst': 'on',
    };
    const provider = await providerFor('openai', (call) =>
      call.index === 0
        ? {
            fault: 'status',
            status: 429,
            retryAfter: '0.05',
            headers: { 'anthropic-ratelimit-requests-remaining': '0' },
          }
        : { text: 'ok', headers: limits },
    );
    const completion = await provider.complete(request([{ role: 'user', text: 'hi' }]));
    expect(completion.text).toBe('ok');
    expect(completion.attempts).toHaveLength(1);
    expect(completion.attempts?.[0]).toMatchObject({ kind: 'http', statusCode: 429, next: 'retry' });
    expect(completion.attempts?.[0]?.delayMs).toBeGreaterThanOrEqual(50);
    expect(completion.rateLimits?.requests).toEqual({ limit: 500, remaining: 499, resetMs: 120 });
    expect(completion.rateLimits?.tokens).toEqual({ limit: 30000, remaining: 29000, resetMs: 90_000 });
    expect(completion.rateLimits?.raw).toEqual(Object.entries(limits));
  });

  it('carries the rate limits on the 429 itself', async () => {
    const provider = await providerFor(
      'anthropic',
      () => ({
        fault: 'status',
        status: 429,
        retryAfter: '7',
        headers: { 'anthropic-ratelimit-requests-limit': '50', 'anthropic-ratelimit-requests-remaining': '0' },
      }),
      { retry: { maxAttempts: 1 } },
    );
    const error = await failure(provider.complete(request([{ role: 'user', text: 'hi' }])));
    expect(error.statusCode).toBe(429);
    expect(error.retryAfterMs).toBe(7000);
    expect(error.rateLimits?.requests).toMatchObject({ limit: 50, remaining: 0 });
    expect(error.rateLimits?.raw.map(([name]) => name)).toContain('retry-after');
  });

  it('reports the catalogue: ids, context windows and prices', async () => {
    server = await ScriptedModelServer.start(() => ({ text: '' }), {
      models: [
        { id: 'vendor/big', contextLength: 200_000, pricing: { prompt: '0.000003', completion: '0.000015' } },
        { id: 'small' },
      ],
    });
    const { listModels } = await import('../dist/index.js');
    const models = await listModels({ kind: 'openrouter', model: 'x', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    expect(models).toEqual([
      { id: 'vendor/big', contextWindow: 200_000, price: { input: 3, output: 15 } },
      { id: 'small', contextWindow: null, price: null },
    ]);
  });
});

describe('the fast lane for plain text events', () => {
  it('reads any split of a long stream, with escapes, quotes and multi-byte text, as the full parse does', async () => {
    const { createServer } = await import('node:http');
    const pieces = [
      'plain ',
      'with "quotes" ',
      'a \\ backslash ',
      'tab\tand newline\n',
      'ünïcödé ',
      '😀 emoji ',
      'end',
    ];
    const texts: string[] = [];
    for (let i = 0; i < 300; i++) texts.push(pieces[i % pieces.length] as string);
    const frame = (delta: unknown, finish: string | null = null) =>
      `data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    const body = Buffer.from(
      [
        frame({ role: 'assistant', content: '' }),
        ...texts.map((text) => frame({ content: text })),
        frame({}, 'stop'),
        'data: [DONE]\n\n',
      ].join(''),
    );
    let cut = 1;
    const http = createServer((request, response) => {
      request.resume();
      request.on('end', async () => {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        // Chunks of a size that changes every request, so events and characters are split everywhere.
        for (let at = 0; at < body.length; at += cut) {
          response.write(body.subarray(at, at + cut));
          await new Promise((resolve) => setImmediate(resolve));
        }
        response.end();
      });
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const port = (http.address() as { port: number }).port;
    const provider = await loadProvider({
      kind: 'openai',
      model: 'm',
      baseUrl: `http://127.0.0.1:${port}/v1`,
      apiKey: 'k',
    });
    try {
      for (cut of [1, 7, 97, 1000, 65536]) {
        const completion = await provider.complete(request([{ role: 'user', text: 'go' }]));
        expect(completion.text, `chunks of ${cut}`).toBe(texts.join(''));
        expect(completion.finishReason).toBe('stop');
      }
    } finally {
      http.close();
    }
  });
});
