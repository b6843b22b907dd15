/** Edges of the provider layer: keys that must not travel, decoders against odd but legal streams, retry limits. */
import { afterEach, describe, expect, it } from 'vitest';
import { HarnessError, OpenAI, ProviderError } from '../dist/index.js';
import { loadProvider, redactSpec } from '../dist/runtime/provider.js';
import { anthropicWire, openAiWire, toolCallsOf } from '../dist/runtime/providers/wires.js';
import { ScriptedModelServer } from '../dist/testing/index.js';

const saved = { ...process.env };
let server: ScriptedModelServer | undefined;
afterEach(async () => {
  process.env = { ...saved };
  await server?.close();
  server = undefined;
});

const config = {
  name: 'openai',
  baseUrl: 'http://127.0.0.1:9',
  model: 'm',
  headers: {},
  maxTokens: null,
  promptCacheKey: false,
  systemCacheMarker: false,
  extraBody: {},
};
const sse = (data: unknown, event: string | null = null) => ({ event, data: JSON.stringify(data), id: null });
const text = (parts: { type: string; text?: string }[]) => parts.map((part) => part.text ?? '').join('');

describe('keys', () => {
  it('stores no key or credential header, and a stored spec never borrows another key from the environment', async () => {
    const spec = OpenAI.create({
      model: 'm',
      apiKey: 'sk-direct',
      baseUrl: 'https://gateway.example/v1',
      headers: { 'x-api-key': 'h-secret', 'x-title': 'kept' },
    });
    const stored = redactSpec(spec);
    expect(JSON.stringify(stored)).not.toMatch(/sk-direct|h-secret/);
    expect(stored).toMatchObject({ apiKeyRedacted: true, headers: { 'x-title': 'kept' } });
    process.env.OPENAI_API_KEY = 'sk-from-the-environment';
    const error = await loadProvider(stored).then(
      () => null,
      (caught: unknown) => caught,
    );
    expect(HarnessError.isInstance(error) && error.code).toBe('PROVIDER_LOAD_FAILED');
    expect((error as Error).message).toContain('handed in directly');
  });
});

describe('the OpenAI decoder on odd but legal streams', () => {
  const learn = { id: 'x', choices: [{ index: 0, delta: { content: 'a' }, finish_reason: null }] };

  it('does not let the fast lane skip a finish reason or an error placed before the text', () => {
    const decoder = openAiWire.decoder(config);
    expect(text(decoder.event(sse(learn)))).toBe('a');
    expect(
      text(decoder.event(sse({ id: 'x', choices: [{ finish_reason: 'length', index: 0, delta: { content: 'b' } }] }))),
    ).toBe('b');
    const parts = decoder.finish(false);
    expect(parts.at(-1)).toEqual({ type: 'end', finishReason: 'length' });
    const failing = openAiWire.decoder(config);
    failing.event(sse(learn));
    expect(() =>
      failing.event(
        sse({ error: { message: 'boom', code: 502 }, id: 'x', choices: [{ index: 0, delta: { content: 'b' } }] }),
      ),
    ).toThrow(ProviderError);
  });

  it('learns no template from an event that says more than its text, however its JSON is spaced or nested', () => {
    const decoder = openAiWire.decoder(config);
    expect(text(decoder.event(sse(learn)))).toBe('a');
    // Spaced JSON: the finish reason after the text must not become part of a "plain" template.
    const spaced = '{"id":"x","choices":[{"index":0,"delta":{"content":"z"},"finish_reason": "stop"}]}';
    expect(text(decoder.event({ event: null, data: spaced, id: null }))).toBe('z');
    expect(decoder.finish(false).at(-1)).toEqual({ type: 'end', finishReason: 'stop' });
    // The marker inside another object: the gap the template would leave is not the text.
    const nested = openAiWire.decoder(config);
    const event = (meta: string) =>
      `{"meta":{"delta":{"content":"${meta}"}},"choices":[{"index":0,"delta":{"content":"A"},"finish_reason":null}]}`;
    expect(text(nested.event({ event: null, data: event('A'), id: null }))).toBe('A');
    expect(text(nested.event({ event: null, data: event('B'), id: null }))).toBe('A');
  });

  it('learns no Anthropic template from an event whose own type is not a delta', () => {
    const decoder = anthropicWire.decoder({ ...config, name: 'anthropic' });
    const error = {
      type: 'error',
      delta: { type: 'text_delta', text: 'x' },
      error: { type: 'overloaded_error', message: 'busy' },
    };
    expect(() => decoder.event(sse(error, 'content_block_delta'))).toThrow(ProviderError);
  });

  it('refuses a raw control character as the full parse does', () => {
    const decoder = openAiWire.decoder(config);
    decoder.event(sse(learn));
    const raw = JSON.stringify(learn).replace('"a"', '"x\u0001y"');
    expect(() => decoder.event({ event: null, data: raw, id: null })).toThrow(/not JSON/);
  });

  it('keeps two calls apart when a server numbers both 0, and sends an unnumbered chunk to the last call', () => {
    const decoder = openAiWire.decoder(config);
    const call = (item: Record<string, unknown>) =>
      sse({ id: 'x', choices: [{ index: 0, delta: { tool_calls: [item] }, finish_reason: null }] });
    const parts = [
      ...decoder.event(call({ index: 0, id: 'a', function: { name: 'first', arguments: '{"x":' } })),
      ...decoder.event(call({ index: 0, function: { arguments: '1}' } })),
      ...decoder.event(call({ index: 0, id: 'b', function: { name: 'second', arguments: '{"y":' } })),
      ...decoder.event(call({ function: { arguments: '2}' } })),
      ...decoder.event(sse({ id: 'x', choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] })),
      ...decoder.finish(false),
    ];
    const ends = parts.filter((part) => part.type === 'tool-call-end');
    expect(ends).toMatchObject([
      { id: 'a', name: 'first', args: { x: 1 } },
      { id: 'b', name: 'second', args: { y: 2 } },
    ]);
    // The first call ends as soon as the second begins, not at the close of the stream.
    const types = parts.map((part) => part.type);
    expect(types.indexOf('tool-call-end')).toBeLessThan(types.lastIndexOf('tool-call-start'));
  });

  it('ends a call again at the close when more of its arguments came after it was ended early; the later end stands', () => {
    const decoder = openAiWire.decoder(config);
    const call = (item: Record<string, unknown>) =>
      sse({ id: 'x', choices: [{ index: 0, delta: { tool_calls: [item] }, finish_reason: null }] });
    const parts = [
      ...decoder.event(call({ index: 0, id: 'a', function: { name: 'first', arguments: '{"x":1}' } })),
      ...decoder.event(call({ index: 1, id: 'b', function: { name: 'second', arguments: '{}' } })),
      // A server interleaving: more for the first call after the second began.
      ...decoder.event(call({ index: 0, function: { arguments: ' ' } })),
      ...decoder.event(sse({ id: 'x', choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] })),
      ...decoder.finish(false),
    ];
    const ends = parts.filter((part) => part.type === 'tool-call-end');
    expect(ends.map((end) => end.id)).toEqual(['a', 'a', 'b']);
    expect(toolCallsOf(ends)).toEqual([
      { id: 'a', name: 'first', args: { x: 1 } },
      { id: 'b', name: 'second', args: {} },
    ]);
  });
});

describe('the Anthropic decoder', () => {
  it('merges usage from message_delta field by field, so a null leaves what message_start said', () => {
    const decoder = anthropicWire.decoder({ ...config, name: 'anthropic' });
    decoder.event(
      sse({
        type: 'message_start',
        message: {
          usage: { input_tokens: 10, cache_read_input_tokens: 90, cache_creation_input_tokens: 5, output_tokens: 1 },
        },
      }),
    );
    decoder.event(
      sse({
        type: 'message_delta',
        delta: { stop_reason: 'end_turn' },
        usage: { input_tokens: null, output_tokens: 7 },
      }),
    );
    const parts = decoder.event(sse({ type: 'message_stop' }));
    expect(parts).toEqual([
      {
        type: 'usage',
        usage: { inputTokens: 105, outputTokens: 7, cacheReadTokens: 90, cacheWriteTokens: 5, reasoningTokens: 0 },
      },
    ]);
  });
});

describe('retry limits', () => {
  it('moves on instead of asking early when the vendor wants a longer wait than allowed', async () => {
    server = await ScriptedModelServer.start(() => ({ fault: 'status', status: 429, retryAfter: '30' }));
    const provider = await loadProvider({
      kind: 'openai',
      model: 'm',
      baseUrl: `${server.url}/v1`,
      apiKey: 'k',
      retry: { maxAttempts: 3, maxDelayMs: 100 },
    });
    const request = {
      system: 's',
      transcript: [{ role: 'user' as const, text: 'hi' }],
      tools: [],
      metadata: { runId: 'r', rootId: 'r', address: 'root', parentAddress: null, depth: 0, seq: 1 },
    };
    const error = await provider.complete(request).then(
      () => null,
      (caught: unknown) => caught as ProviderError,
    );
    expect(error?.statusCode).toBe(429);
    expect(server.calls).toHaveLength(1);
    expect(error?.details.attempts).toMatchObject([{ statusCode: 429, next: 'none' }]);
  });
});
