/** Edges of the provider layer: keys that must not travel, decoders against odd but legal streams, retry limits. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { HarnessError, OpenAI, ProviderError } from '../dist/index.js';
import { redactSpec } from '../dist/runtime/provider.js';
import { loadProvider } from '../dist/runtime/providers/registry.js';
import { anthropicWire, openAiWire, toolCallsOf } from '../dist/runtime/providers/wires.js';
import { ScriptedModelServer } from '../dist/testing/index.js';
import { stubTransport, wireConfig } from './support/wire.js';

const saved = { ...process.env };
let server: ScriptedModelServer | undefined;
afterEach(async () => {
  process.env = { ...saved };
  await server?.close();
  server = undefined;
});

const config = wireConfig;
const sse = (data: unknown, event: string | null = null) => ({ event, data: JSON.stringify(data), id: null });
const text = (parts: { type: string; text?: string }[]) => parts.map((part) => part.text ?? '').join('');
/** The stream's own end, `data: [DONE]`, then the decoder's close. */
const done = (decoder: ReturnType<typeof openAiWire.decoder>) => [
  ...decoder.event({ event: null, data: '[DONE]', id: null }),
  ...decoder.finish(false),
];

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
    const parts = done(decoder);
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
    expect(done(decoder).at(-1)).toEqual({ type: 'end', finishReason: 'stop' });
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
      ...done(decoder),
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
      ...done(decoder),
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

describe('what a caller does with a completion', () => {
  const request = {
    system: 's',
    transcript: [{ role: 'user' as const, text: 'hi' }],
    tools: [],
    metadata: { runId: 'r', rootId: 'r', address: 'root', parentAddress: null, depth: 0, seq: 1 },
  };

  it('lets an error thrown by a hook reach the caller as it is, without asking the model again', async () => {
    // Two calls: the first ends (and reaches the hook) while the body is still being read.
    server = await ScriptedModelServer.start(() => ({
      toolCalls: [
        { name: 'read_file', args: { path: 'a' } },
        { name: 'read_file', args: { path: 'b' } },
      ],
    }));
    const provider = await loadProvider({ kind: 'openai', model: 'm', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const broken = new Error('the hook broke');
    const error = await provider
      .complete(request, undefined, {
        onToolCall() {
          throw broken;
        },
      })
      .then(
        () => null,
        (caught: unknown) => caught,
      );
    expect(error).toBe(broken);
    expect(server.calls).toHaveLength(1);
  });

  it('ends the request when the caller stops reading a stream', async () => {
    const { createServer } = await import('node:http');
    const closed = new Promise<void>((resolve) => {
      const http = createServer((incoming, response) => {
        incoming.resume();
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        response.write(`data: ${JSON.stringify({ id: 'x', choices: [{ index: 0, delta: { content: 'hi' } }] })}\n\n`);
        // and nothing more: only the caller can end this
        response.on('close', () => {
          http.close();
          resolve();
        });
      });
      http.listen(0, '127.0.0.1', async () => {
        const port = (http.address() as { port: number }).port;
        const provider = (await loadProvider({
          kind: 'openai',
          model: 'm',
          baseUrl: `http://127.0.0.1:${port}/v1`,
          apiKey: 'k',
        })) as unknown as { stream(r: typeof request): AsyncIterable<{ type: string }> };
        for await (const part of provider.stream(request)) {
          expect(part.type).toBe('text-delta');
          break;
        }
      });
    });
    await closed;
  }, 20_000);
});

/** A transport answering every request with these chunks of an event stream, in order. */
function sseTransport(parts: Uint8Array[]) {
  return stubTransport([['content-type', 'text/event-stream']], () => parts);
}

describe('the fast lanes against the full parse', () => {
  /** A small deterministic generator, so a failing stream can be reproduced. */
  function seededRandom(seed: number): () => number {
    let state = seed >>> 0;
    return () => {
      state = (state * 1_664_525 + 1_013_904_223) >>> 0;
      return state / 2 ** 32;
    };
  }
  const pieces = ['tok ', 'a', 'é', '中文', '😀', '"q"', '\\', '\n', '\t', '\u0001', '\u2028', 'data: x\n\n', '}'];
  const modelRequest = {
    system: 's',
    transcript: [{ role: 'user' as const, text: 'go' }],
    tools: [],
    metadata: { runId: 'r', rootId: 'r', address: 'root', parentAddress: null, depth: 0, seq: 1 },
  };

  /** A random completion on a wire: its SSE body and what the full parse makes of it. */
  function completion(vendor: 'openai' | 'anthropic', random: () => number) {
    const texts: string[] = [];
    const events: string[] = [];
    const text = () => {
      let content = '';
      const length = Math.floor(random() * 5);
      for (let k = 0; k < length; k++) content += pieces[Math.floor(random() ** 2 * pieces.length)];
      texts.push(content);
      return content;
    };
    // Now and then an escape the serializer would not write, or a comment between events.
    const spice = (json: string) =>
      random() < 0.1 ? json.replaceAll('é', '\\u00e9') : random() < 0.05 ? `: keep-alive\n${json}` : json;
    let calls = 0;
    if (vendor === 'openai') {
      const frame = (delta: unknown, extra: Record<string, unknown> = {}) =>
        spice(
          `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: null }], ...extra })}`,
        );
      events.push(frame({ role: 'assistant', content: '' }));
      const count = 5 + Math.floor(random() * 120);
      for (let index = 0; index < count; index++) {
        const roll = random();
        if (roll < 0.04) {
          events.push(
            frame({ tool_calls: [{ index: calls, id: `call_${calls}`, function: { name: 'f', arguments: '{}' } }] }),
          );
          calls++;
        } else if (roll < 0.07) events.push(frame({ content: text() }, { system_fingerprint: 'fp' }));
        else events.push(frame({ content: text() }));
      }
      events.push(`data: ${JSON.stringify({ id: 'c', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}`);
      events.push(
        `data: ${JSON.stringify({ id: 'c', choices: [], usage: { prompt_tokens: 3, completion_tokens: count } })}`,
      );
      events.push('data: [DONE]');
    } else {
      const frame = (type: string, payload: Record<string, unknown>) =>
        spice(`event: ${type}\ndata: ${JSON.stringify({ type, ...payload })}`);
      events.push(frame('message_start', { message: { usage: { input_tokens: 3, output_tokens: 1 } } }));
      events.push(frame('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }));
      const count = 5 + Math.floor(random() * 120);
      for (let index = 0; index < count; index++) {
        if (random() < 0.03) events.push(frame('ping', {}));
        else events.push(frame('content_block_delta', { index: 0, delta: { type: 'text_delta', text: text() } }));
      }
      events.push(frame('content_block_stop', { index: 0 }));
      events.push(frame('message_delta', { delta: { stop_reason: 'end_turn' }, usage: { output_tokens: count } }));
      events.push(frame('message_stop', {}));
    }
    let body = `${events.join('\n\n')}\n\n`;
    if (random() < 0.15) body = body.replaceAll('\n', '\r\n');
    return { body: Buffer.from(body), text: texts.join(''), calls };
  }

  function chunks(body: Buffer, random: () => number): Buffer[] {
    const out: Buffer[] = [];
    const most = [1, 3, 17, 200, 5000, 70_000][Math.floor(random() * 6)] as number;
    for (let at = 0; at < body.length; ) {
      const size = 1 + Math.floor(random() * most);
      out.push(body.subarray(at, at + size));
      at += size;
    }
    return out;
  }

  it.each(['openai', 'anthropic'] as const)(
    'gathers the same %s completion from any split, whole and streamed, as the events say',
    async (vendor) => {
      const { HttpProvider } = await import('../dist/index.js');
      const random = seededRandom(vendor === 'openai' ? 11 : 12);
      for (let round = 0; round < 150; round++) {
        const { body, text, calls } = completion(vendor, random);
        const parts = chunks(body, random);
        const transport = sseTransport(parts);
        const wire = vendor === 'openai' ? openAiWire : anthropicWire;
        const provider = new HttpProvider(wire, { ...config, name: vendor }, transport);
        const whole = await provider.once(modelRequest);
        expect(whole.text, `round ${round}`).toBe(text);
        expect(whole.toolCalls).toHaveLength(calls);
        expect(whole.finishReason).toBe(vendor === 'openai' ? 'stop' : 'end_turn');
        let streamed = '';
        for await (const part of provider.stream(modelRequest)) if (part.type === 'text-delta') streamed += part.text;
        expect(streamed, `round ${round}, streamed`).toBe(text);
      }
    },
  );

  it('reads the same completion where the thread has no WebAssembly', async () => {
    vi.resetModules();
    vi.stubGlobal('WebAssembly', undefined);
    try {
      const { HttpProvider } = await import('../dist/index.js');
      const { openAiWire: wire } = await import('../dist/runtime/providers/wires.js');
      const { scanTemplateRun } = await import('../dist/runtime/providers/sse.js');
      expect(scanTemplateRun(Buffer.from('ab'), 0, Buffer.from('a'), Buffer.from('b'))).toBeNull();
      const frame = (delta: unknown, finish: string | null = null) =>
        `data: ${JSON.stringify({ id: 'c', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      const texts = Array.from({ length: 300 }, (_, index) => (index % 7 ? `tok${index} ` : `line\n"${index}" `));
      const body = Buffer.from(
        [
          frame({ role: 'assistant', content: '' }),
          ...texts.map((content) => frame({ content })),
          frame({}, 'stop'),
          'data: [DONE]\n\n',
        ].join(''),
      );
      for (const size of [7, 1000, body.length]) {
        const parts: Buffer[] = [];
        for (let at = 0; at < body.length; at += size) parts.push(body.subarray(at, at + size));
        const transport = sseTransport(parts);
        const completion = await new HttpProvider(wire, config, transport).once(modelRequest);
        expect(completion.text, `chunks of ${size}`).toBe(texts.join(''));
        expect(completion.finishReason).toBe('stop');
      }
    } finally {
      vi.unstubAllGlobals();
      vi.resetModules();
    }
  });

  it('leaves a text that is not UTF-8 to the decoder, which replaces it as before', async () => {
    const { HttpProvider } = await import('../dist/index.js');
    const frame = (content: string) =>
      Buffer.from(
        `data: ${JSON.stringify({ id: 'c', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`,
      );
    const bad = frame('b?d');
    bad[bad.indexOf('?')] = 0xff;
    const body = Buffer.concat([
      frame('a'),
      frame('b'),
      bad,
      frame('c'),
      Buffer.from(
        `data: ${JSON.stringify({ id: 'c', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\ndata: [DONE]\n\n`,
      ),
    ]);
    for (const size of [1, 2, 5, 1000]) {
      const parts: Buffer[] = [];
      for (let at = 0; at < body.length; at += size) parts.push(body.subarray(at, at + size));
      const transport = sseTransport(parts);
      const provider = new HttpProvider(openAiWire, config, transport);
      expect((await provider.once(modelRequest)).text, `chunks of ${size}`).toBe('abb\uFFFDdc');
    }
  });
});
