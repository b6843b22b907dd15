/**
 * The requests a run that asks for no opt-in family sends, built by each wire from one
 * fixed model request: what test/web.test.ts pins to the bytes the release before the web
 * tools sent (test/fixtures/requests-without-web.json, made by running this module against
 * that release's build).
 */

/** The fixed request: a system block, a step with a tool call and its result, an answer, two tools. */
export const REQUEST = {
  system: 'You are a careful agent. Answer briefly.',
  transcript: [
    { role: 'user', text: 'What does a.txt say?' },
    {
      role: 'assistant',
      text: 'Reading it.',
      toolCalls: [{ id: 'call_1', name: 'read_file', args: { path: 'a.txt' } }],
    },
    { role: 'tool', callId: 'call_1', name: 'read_file', content: 'hello\n', isError: false },
    { role: 'assistant', text: 'It says hello.', toolCalls: [] },
    { role: 'user', text: 'Thanks; now write b.txt.' },
  ],
  tools: [
    {
      name: 'read_file',
      description: 'Reads a file of the workspace.',
      parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
    },
    {
      name: 'write_file',
      description: 'Writes a file of the workspace.',
      parameters: {
        type: 'object',
        properties: { path: { type: 'string' }, content: { type: 'string' } },
        required: ['path', 'content'],
      },
    },
  ],
  metadata: { runId: 'r', rootId: 'r', address: 'root', parentAddress: null, depth: 0, seq: 3 },
  options: { cacheKey: 'tree-digest', cacheBreakpoint: 0 },
};

const base = {
  baseUrl: 'http://127.0.0.1:1/v1',
  model: 'model-x',
  headers: { 'user-agent': 'io-harness', authorization: 'Bearer k' },
  maxTokens: null,
  promptCacheKey: false,
  systemCacheMarker: false,
  extraBody: {},
  images: true,
};

/** The wire configurations of each kind of provider, as from-spec builds them (less the web field, which is new). */
export const CONFIGS = {
  openai: { ...base, name: 'openai', promptCacheKey: true },
  openrouter: {
    ...base,
    name: 'openrouter',
    promptCacheKey: true,
    systemCacheMarker: true,
    extraBody: { usage: { include: true } },
  },
  compatible: { ...base, name: 'compatible' },
  anthropic: {
    ...base,
    name: 'anthropic',
    baseUrl: 'http://127.0.0.1:1',
    headers: { 'user-agent': 'io-harness', 'x-api-key': 'k', 'anthropic-version': '2023-06-01' },
    maxTokens: 1024,
  },
};

/** Each kind's request as `{ url, headers, body }`, from the wires module of a build. */
export function pinnedRequests(wires, web = {}) {
  const out = {};
  for (const [kind, config] of Object.entries(CONFIGS)) {
    const wire = kind === 'anthropic' ? wires.anthropicWire : wires.openAiWire;
    const request = wire.request(REQUEST, { ...config, ...web[kind] });
    out[kind] = { url: request.url, headers: request.headers, body: request.body };
  }
  return out;
}
