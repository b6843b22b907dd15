/**
 * An AI SDK language model as a provider: `@ai-sdk/openai-compatible` (a real provider
 * package, over real HTTP on loopback) against the scripted model server, inside agent
 * threads, with fallback to a native wire. Usage and cost land in the same rows as a
 * native call; failures are classified as the native wires classify them; keys are
 * checked, never stored, and named when refused; a program that names no such provider
 * loads none of the AI SDK.
 */
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { type AiSdkOptions, aiSdk, withFallback } from '../dist/index.js';
import { assistantTurns, ScriptedModelServer } from '../dist/testing/index.js';
import { type Harness, harness, moduleScript } from './support/harness.js';
import { agentOf, closedPort, openAiAt, programs } from './support/wire.js';

let h: Harness | undefined;
const servers: ScriptedModelServer[] = [];
afterEach(async () => {
  await h?.close();
  h = undefined;
  for (const server of servers.splice(0)) await server.close();
  delete process.env.AISDK_TEST_KEY;
});

async function serve(script: Parameters<typeof ScriptedModelServer.start>[0]): Promise<ScriptedModelServer> {
  const server = await ScriptedModelServer.start(script);
  servers.push(server);
  return server;
}

/** The OpenAI-compatible AI SDK provider, pointed at a scripted server. */
const compatible = (url: string, extra: Partial<AiSdkOptions> = {}) =>
  aiSdk({
    package: '@ai-sdk/openai-compatible',
    factory: 'createOpenAICompatible',
    options: { name: 'scripted', baseURL: `${url}/v1`, includeUsage: true },
    model: 'gpt-scripted',
    apiKey: 'test-key-for-the-ai-sdk',
    retry: { baseDelayMs: 1 },
    ...extra,
  });

const native = (url: string) => openAiAt(url, { apiKey: 'native-test-key', name: 'native' });

const usage = { inputTokens: 1000, outputTokens: 100, cacheReadTokens: 800, reasoningTokens: 10 };
const tree = programs({
  root: [
    { text: 'delegating', toolCalls: [{ name: 'spawn_agent', args: { task: 'look', as: 'helper' } }], usage },
    { text: 'all done', usage },
  ],
  helper: [
    { toolCalls: [{ name: 'read_messages', args: {} }], usage },
    { text: 'looked', usage },
  ],
});

describe('an AI SDK model in a tree', () => {
  it('runs every agent, falls back to a native wire where it fails, and accounts both in the same rows', async () => {
    // The AI SDK's endpoint fails the helper's first call, twice (a retry), then the native wire answers it.
    const viaAiSdk = await serve((call) =>
      agentOf(call) === 'helper' && assistantTurns(call) === 0 ? { fault: 'status', status: 503 } : tree(call),
    );
    const viaNative = await serve(tree);
    h = await harness();
    const provider = withFallback([
      compatible(viaAiSdk.url, { retry: { maxAttempts: 2, baseDelayMs: 1 } }),
      native(viaNative.url),
    ]);
    const result = await h.supervisor.run({ task: 'go', provider }).result;
    expect(result).toMatchObject({ status: 'finished', reply: 'all done' });

    const calls = h.store.modelCalls({ rootId: result.rootId });
    const rows = calls.map((call) => [
      call.provider,
      call.model,
      call.outcome,
      call.inputTokens,
      call.outputTokens,
      call.cacheReadTokens,
      call.reasoningTokens,
    ]);
    const aiSdkOk = ['ai-sdk:@ai-sdk/openai-compatible', 'gpt-scripted', 'ok', 1000, 100, 800, 10];
    // Root: two calls through the AI SDK. Helper: its first call failed there twice and went native; its second went through the AI SDK.
    expect(rows.filter((row) => row[2] === 'ok')).toHaveLength(4);
    expect(rows).toContainEqual(['native', 'gpt-scripted', 'ok', 1000, 100, 800, 10]);
    expect(rows.filter((row) => JSON.stringify(row) === JSON.stringify(aiSdkOk))).toHaveLength(3);
    expect(rows.filter((row) => row[2] === 'http')).toEqual([
      ['ai-sdk:@ai-sdk/openai-compatible', 'gpt-scripted', 'http', 0, 0, 0, 0],
      ['ai-sdk:@ai-sdk/openai-compatible', 'gpt-scripted', 'http', 0, 0, 0, 0],
    ]);
    for (const call of calls.filter((row) => row.outcome === 'ok')) {
      expect(call.latencyMs).toBeGreaterThan(0);
      expect(call.ttftMs).not.toBeNull();
    }
    // Cost is derived from the same rows: four answered calls of one model.
    const cost = h.store.cost(result.rootId, { 'gpt-scripted': { input: 2, cacheRead: 0.5, output: 8 } });
    expect(cost.total).toBeCloseTo(4 * 0.0016, 10);
    expect(cost.unpriced).toEqual([]);

    // The helper's trace says it was retried, then fell back, each by status.
    const helper = h.store.runs(result.rootId).find((run) => run.parentId !== null);
    const events = h.store.events(helper?.runId as string).filter((event) => event.seq === 1);
    expect(events.filter((event) => event.type === 'model-retry')).toMatchObject([
      { provider: 'ai-sdk:@ai-sdk/openai-compatible', statusCode: 503 },
    ]);
    expect(events.filter((event) => event.type === 'model-fallback')).toMatchObject([
      { from: 'ai-sdk:@ai-sdk/openai-compatible', to: 'native', statusCode: 503 },
    ]);

    // What the AI SDK sent is the run's request: the system prompt, the task, the tools, streamed, with the key.
    const first = viaAiSdk.calls[0];
    const body = first?.body as {
      stream?: boolean;
      messages: { role: string }[];
      tools?: { function: { name: string } }[];
    };
    expect(body.stream).toBe(true);
    expect(body.messages.map((message) => message.role).slice(0, 2)).toEqual(['system', 'user']);
    expect(body.tools?.map((tool) => tool.function.name)).toContain('spawn_agent');
    expect(first?.headers.authorization).toBe('Bearer test-key-for-the-ai-sdk');
    // The key the run was handed is not in the store.
    expect(readFileSync(h.store.path).includes('test-key-for-the-ai-sdk')).toBe(false);
  });

  it('classifies a cut stream as the native wires do: retried, and the retry is in the trace', async () => {
    let cut = false;
    const server = await serve((call) => {
      if (!cut) {
        cut = true;
        return { fault: 'truncate', afterEvents: 1 };
      }
      return programs({ root: [{ text: 'fine' }] })(call);
    });
    h = await harness();
    const result = await h.supervisor.run({ task: 'go', provider: compatible(server.url) }).result;
    expect(result).toMatchObject({ status: 'finished', reply: 'fine' });
    expect(h.store.modelCalls({ rootId: result.rootId }).map((call) => call.outcome)).toEqual(['truncated', 'ok']);
    expect(h.store.events(result.rootId).find((event) => event.type === 'model-retry')).toMatchObject({
      kind: 'truncated',
    });
  });

  it('names the variable a refused key came from, and refuses a key with a stray newline where it is made', async () => {
    const server = await serve(() => ({
      fault: 'status',
      status: 401,
      body: JSON.stringify({ error: { message: 'bad key' } }),
    }));
    // Agent threads take the environment as it is when they start.
    process.env.AISDK_TEST_KEY = 'some-key-that-is-wrong';
    h = await harness();
    const { apiKey: _omit, ...rest } = compatible(server.url);
    const result = await h.supervisor.run({ task: 'go', provider: { ...rest, apiKeyEnv: 'AISDK_TEST_KEY' } }).result;
    expect(result.status).toBe('failed');
    expect(result.reason).toContain('HTTP 401: bad key');
    expect(result.reason).toContain('the environment variable AISDK_TEST_KEY');
    expect(() => compatible(server.url, { apiKey: 'key-with-newline\n' })).toThrow(/stray space or line break/);
    await h.close();
    process.env.AISDK_TEST_KEY = 'key-with-newline\n';
    h = await harness();
    const stray = h.supervisor.run({ task: 'go', provider: { ...rest, apiKeyEnv: 'AISDK_TEST_KEY' } });
    await expect(stray.result).rejects.toThrow(/AISDK_TEST_KEY has a stray space or line break/);
  });

  it('says what to do with a package that is not installed, an export it lacks, or options that are not JSON', async () => {
    h = await harness();
    const missing = h.supervisor.run({
      task: 'go',
      provider: aiSdk({ package: '@ai-sdk/not-installed-here', factory: 'x', model: 'm' }),
    });
    await expect(missing.result).rejects.toThrow(/npm install @ai-sdk\/not-installed-here/);
    const wrong = h.supervisor.run({
      task: 'go',
      provider: aiSdk({ package: '@ai-sdk/openai-compatible', factory: 'createOpenAI', model: 'm' }),
    });
    await expect(wrong.result).rejects.toThrow(
      /no function export "createOpenAI"; it exports .*createOpenAICompatible/,
    );
    expect(() =>
      aiSdk({
        package: '@ai-sdk/openai-compatible',
        factory: 'createOpenAICompatible',
        model: 'm',
        options: { fetch: (() => null) as never },
      }),
    ).toThrow(/options must be plain JSON/);
  });
});

describe('a program that names no AI SDK model', () => {
  it("loads no part of the AI SDK in its agents' threads; one that does, loads it there", async () => {
    h = await harness();
    const plain = await h.supervisor.run({ task: 'which modules?', provider: moduleScript('loaded-modules') }).result;
    const loaded = JSON.parse(plain.reply as string) as string[];
    expect(loaded).toContain('actors/agent/loop.js');
    expect(loaded.filter((name) => /ai-sdk|^pkg:ai$/.test(name))).toEqual([]);
    // The control: a fallback whose first member is an AI SDK model (at a closed port) loads its package, then answers.
    const port = await closedPort();
    const provider = withFallback([
      compatible(`http://127.0.0.1:${port}`, { retry: { maxAttempts: 1 } }),
      moduleScript('loaded-modules'),
    ]);
    const named = await h.supervisor.run({ task: 'which modules?', provider }).result;
    const after = JSON.parse(named.reply as string) as string[];
    expect(after).toContain('runtime/providers/ai-sdk.js');
    expect(after).toContain('pkg:@ai-sdk/openai-compatible');
    expect(h.store.modelCalls({ rootId: named.rootId }).map((call) => call.outcome)).toEqual(['connection', 'ok']);
  });
});

describe('reading what an AI SDK model reports', () => {
  it('takes usage in the V3 (nested) and the V2 (flat) shape, and none as none', async () => {
    const { usageOf } = await import('../dist/runtime/providers/ai-sdk.js');
    expect(
      usageOf({
        inputTokens: { total: 1000, noCache: 150, cacheRead: 800, cacheWrite: 50 },
        outputTokens: { total: 100, text: 90, reasoning: 10 },
      }),
    ).toEqual({
      inputTokens: 1000,
      outputTokens: 100,
      cacheReadTokens: 800,
      cacheWriteTokens: 50,
      reasoningTokens: 10,
    });
    expect(usageOf({ inputTokens: 1000, outputTokens: 100, cachedInputTokens: 800, reasoningTokens: 10 })).toEqual({
      inputTokens: 1000,
      outputTokens: 100,
      cacheReadTokens: 800,
      cacheWriteTokens: 0,
      reasoningTokens: 10,
    });
    expect(usageOf({ inputTokens: { total: undefined }, outputTokens: { total: undefined } })).toBeNull();
  });

  it('sends the latest images a tool attached, as image parts of its result, and says so where they are left out', async () => {
    const { promptOf } = await import('../dist/runtime/providers/ai-sdk.js');
    const image = { mimeType: 'image/png' as const, data: 'iVBORw0KGgo=' };
    const request = {
      system: 's',
      transcript: [
        { role: 'user' as const, text: 'look' },
        {
          role: 'assistant' as const,
          text: '',
          toolCalls: [
            { id: 'c1', name: 'shot', args: {} },
            { id: 'c2', name: 'fail', args: {} },
          ],
        },
        { role: 'tool' as const, callId: 'c1', name: 'shot', content: 'a picture', isError: false, images: [image] },
        { role: 'tool' as const, callId: 'c2', name: 'fail', content: 'no', isError: true },
      ],
      tools: [],
      metadata: { runId: 'r', rootId: 'r', address: 'root', parentAddress: null, depth: 0, seq: 1 },
    };
    const prompt = promptOf(request, true, 'v3');
    // The two results are one tool message, in order.
    expect(prompt.map((message) => message.role)).toEqual(['system', 'user', 'assistant', 'tool']);
    expect(prompt[3]).toMatchObject({
      content: [
        {
          toolCallId: 'c1',
          output: {
            type: 'content',
            value: [
              { type: 'text', text: 'a picture' },
              { type: 'image-data', mediaType: 'image/png', data: image.data },
            ],
          },
        },
        { toolCallId: 'c2', output: { type: 'error-text', value: 'no' } },
      ],
    });
    const textOnly = promptOf(request, false, 'v3');
    expect(textOnly[3]).toMatchObject({
      content: [{ output: { type: 'text', value: expect.stringContaining('a picture\n') } }, {}],
    });
  });
});

describe('an AI SDK spec kept in the store', () => {
  it('keeps no credential of its options, however deep, and this process scrubs every one of them', async () => {
    const { redactSpec } = await import('../dist/runtime/provider.js');
    const { providerSecrets } = await import('../dist/runtime/secrets.js');
    const spec = aiSdk({
      package: '@ai-sdk/google-vertex',
      factory: 'createVertex',
      model: 'gemini-2.5-pro',
      options: {
        project: 'my-project',
        googleAuthOptions: { credentials: { client_email: 'a@b.iam', private_key: 'PRIVATE-KEY-0123456789' } },
        queryParams: { 'api-key': 'QUERY-KEY-0123456789', region: 'eu' },
        headers: { 'x-trace': 'trace-value', authorization: 'Bearer HEADER-TOKEN-0123456789' },
        base_url: 'https://user:URL-PASSWORD-0123456789@gateway.example/v1',
      },
    });
    const stored = JSON.stringify(redactSpec(spec));
    for (const secret of [
      'PRIVATE-KEY-0123456789',
      'QUERY-KEY-0123456789',
      'HEADER-TOKEN-0123456789',
      'URL-PASSWORD-0123456789',
      'a@b.iam',
    ])
      expect(stored).not.toContain(secret);
    // What is not a credential stays, and the stored spec says it must be handed the provider again.
    expect(JSON.parse(stored)).toMatchObject({
      apiKeyRedacted: true,
      options: { project: 'my-project', queryParams: { region: 'eu' } },
    });
    const held = providerSecrets(spec);
    for (const secret of [
      'PRIVATE-KEY-0123456789',
      'QUERY-KEY-0123456789',
      'HEADER-TOKEN-0123456789',
      'URL-PASSWORD-0123456789',
    ])
      expect(held).toContain(secret);
    expect(held).not.toContain('my-project');
  });

  it('holds as secrets the variables a package may read its own key from, when it is given none', async () => {
    const { providerSecrets } = await import('../dist/runtime/secrets.js');
    const env = {
      OPENAI_API_KEY: 'sk-openai-default-0123',
      GOOGLE_GENERATIVE_AI_API_KEY: 'google-default-0123',
      AWS_SECRET_ACCESS_KEY: 'aws-secret-default-0123',
      VERCEL_OIDC_TOKEN: 'oidc-default-0123456',
      HOME: '/home/someone-long',
      MONKEY_BUSINESS: 'not-a-credential',
    };
    const bare = providerSecrets(aiSdk({ package: '@ai-sdk/openai', factory: 'openai', model: 'gpt-x' }), env);
    expect(bare).toEqual(
      expect.arrayContaining([
        'sk-openai-default-0123',
        'google-default-0123',
        'aws-secret-default-0123',
        'oidc-default-0123456',
      ]),
    );
    expect(bare).not.toContain('/home/someone-long');
    expect(bare).not.toContain('not-a-credential');
    // Given a key, or the variable to read it from, that is the key: nothing else is guessed at.
    const named = aiSdk({ package: '@ai-sdk/openai', factory: 'openai', model: 'gpt-x', apiKeyEnv: 'OPENAI_API_KEY' });
    expect(providerSecrets(named, env)).toEqual(['sk-openai-default-0123']);
  });

  it('retries an error the vendor sends mid-stream as the native wires do (a server error is worth another try)', async () => {
    let failed = false;
    const server = await serve((call) => {
      if (!failed) {
        failed = true;
        return {
          fault: 'raw',
          headers: { 'content-type': 'text/event-stream' },
          chunks: ['data: {"error":{"message":"the model is overloaded","type":"server_error"}}\n\n'],
        };
      }
      return programs({ root: [{ text: 'after the retry' }] })(call);
    });
    h = await harness();
    const result = await h.supervisor.run({ task: 'go', provider: compatible(server.url) }).result;
    expect(result).toMatchObject({ status: 'finished', reply: 'after the retry' });
    expect(h.store.events(result.rootId).find((event) => event.type === 'model-retry')).toMatchObject({
      kind: 'http',
      statusCode: 500,
    });
  });
});
