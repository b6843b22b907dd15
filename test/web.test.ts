/**
 * Web search and fetch run by the model's vendor (`withWeb`): each wire asks for its
 * vendor's server-side tools (Anthropic's web search and fetch, OpenAI's search models,
 * OpenRouter's web search) against the scripted model server speaking that vendor's wire,
 * what the vendor found, fetched and cited lands in the trace (`webSources`, the call's
 * counts, the cost, `show`), a provider that cannot say what is asked is refused before
 * any call, and a run that asks for none sends the bytes the release before it sent.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { renderRun } from '../dist/cli/render.js';
import {
  Config,
  HarnessError,
  type HttpProviderSpec,
  type ProviderSpec,
  Store,
  Supervisor,
  TaskContract,
  tool,
  type WebOptions,
} from '../dist/index.js';
import { anthropicWire, openAiWire, type WireConfig } from '../dist/runtime/providers/wires.js';
import { type ModelScript, ScriptedModelServer, wireToolResults } from '../dist/testing/index.js';
import { type StoreHarness, storeHarness } from './support/harness.js';
import { CONFIGS, pinnedRequests } from './support/pinned-requests.mjs';
import { tempStorePath } from './support/processes.js';
import { later, tempWorkspace } from './support/workspace.js';

let h: StoreHarness | undefined;
const servers: ScriptedModelServer[] = [];
afterEach(async () => {
  await h?.close();
  h = undefined;
  for (const server of servers.splice(0)) await server.close();
});

async function serve(script: ModelScript): Promise<ScriptedModelServer> {
  const server = await ScriptedModelServer.start(script);
  servers.push(server);
  return server;
}

const spec = (kind: HttpProviderSpec['kind'], url: string, model = 'model-x'): HttpProviderSpec => ({
  kind,
  model,
  baseUrl: kind === 'anthropic' ? url : `${url}/v1`,
  apiKey: 'test-key',
  retry: { baseDelayMs: 1, maxAttempts: 1 },
});

const LTS = { url: 'https://docs.example.org/lts', title: 'Release schedule' };
const PAGE = { url: 'https://docs.example.org/22', title: 'Node.js 22', text: 'Node.js 22 is the active LTS line.' };
const CITED = { url: LTS.url, title: LTS.title, citedText: '22 is the active LTS line' };

/** A workspace run with `web`: a search and a read in its first step, an answer citing a page in its second. */
async function searchingRun(provider: HttpProviderSpec, web: WebOptions, fetches = false) {
  const root = tempWorkspace({ 'notes.md': 'which Node.js line is LTS?\n' });
  const server = await serve((call) =>
    wireToolResults(call).length === 0
      ? {
          text: 'Looking it up.',
          toolCalls: [{ name: 'read_file', args: { path: 'notes.md' } }],
          web: {
            searches: [{ query: 'node lts', results: [LTS] }],
            ...(fetches ? { fetches: [PAGE] } : {}),
          },
        }
      : { text: 'Node.js 22 is the active LTS line.', web: { citations: [CITED] } },
  );
  h = await storeHarness();
  const contract = TaskContract.workspace('which Node.js line is LTS?', root).withWeb(web);
  const result = await h.supervisor.run({ contract, provider: { ...provider, baseUrl: base(provider, server) } })
    .result;
  return { result, server, store: h.store };
}

const base = (provider: HttpProviderSpec, server: ScriptedModelServer) =>
  provider.kind === 'anthropic' ? server.url : `${server.url}/v1`;

const body = (server: ScriptedModelServer, index: number) => server.calls[index]?.body as Record<string, unknown>;

describe('web search and fetch by the vendor', () => {
  it('asks Anthropic for its search and fetch tools with the hosts and the cap, and keeps what they found, fetched and cited', async () => {
    const { result, server, store } = await searchingRun(
      spec('anthropic', ''),
      { fetch: true, maxUses: 3, allowedHosts: ['docs.example.org'] },
      true,
    );
    expect(result.status).toBe('finished');
    const limits = { max_uses: 3, allowed_domains: ['docs.example.org'] };
    for (const index of [0, 1]) {
      const tools = body(server, index).tools as Record<string, unknown>[];
      // The run's own tools first, then the vendor's, on every request.
      expect(tools.slice(-2)).toEqual([
        { type: 'web_search_20250305', name: 'web_search', ...limits },
        { type: 'web_fetch_20250910', name: 'web_fetch', ...limits },
      ]);
      expect(tools.slice(0, -2).every((tool) => typeof tool.input_schema === 'object')).toBe(true);
      expect(server.calls[index]?.headers['anthropic-beta']).toBe('web-fetch-2025-09-10');
    }
    // The vendor's own tool blocks are not calls for the run to make.
    const steps = await store.steps(result.rootId);
    expect(steps.map((step) => step.completion.toolCalls.map((call) => call.name))).toEqual([['read_file'], []]);
    expect(
      (await store.webSources(result.rootId)).map(({ seq, kind, url, title, citedText }) => [
        seq,
        kind,
        url,
        title,
        citedText,
      ]),
    ).toEqual([
      [1, 'result', LTS.url, LTS.title, null],
      [1, 'fetched', PAGE.url, PAGE.title, null],
      [2, 'citation', CITED.url, CITED.title, CITED.citedText],
    ]);
    const calls = await store.modelCalls({ runId: result.rootId });
    expect(calls.map((call) => [call.seq, call.webSearches, call.webFetches])).toEqual([
      [1, 1, 1],
      [2, 0, 0],
    ]);
    // Priced by the thousand where the table says ($10 a thousand searches, $1 a thousand fetches), on top of the tokens.
    const tokensOnly = (await store.cost(result.rootId, { 'model-x': { input: 0, output: 0 } })).total;
    const withWeb = (
      await store.cost(result.rootId, { 'model-x': { input: 0, output: 0, webSearch: 10, webFetch: 1 } })
    ).total;
    expect(tokensOnly).toBe(0);
    expect(withWeb).toBeCloseTo(0.011, 10);
    // `show` lists them under the step that found them.
    const shown = await renderRun(store as never, (await store.run(result.rootId)) as never);
    expect(shown).toContain('web: 1 searches, 1 fetches (by the vendor)');
    expect(shown).toContain(`found ${LTS.url} (${LTS.title})`);
    expect(shown).toContain(`fetched ${PAGE.url} (${PAGE.title})`);
    expect(shown).toContain(`cited ${CITED.url} (${CITED.title}): "${CITED.citedText}"`);
  });

  it('asks OpenRouter for its web search tool with the hosts to leave out, and counts the searches it reports', async () => {
    const { result, server, store } = await searchingRun(spec('openrouter', ''), { blockedHosts: ['spam.example'] });
    expect(result.status).toBe('finished');
    const tools = body(server, 0).tools as Record<string, unknown>[];
    expect(tools.at(-1)).toEqual({ type: 'openrouter:web_search', parameters: { excluded_domains: ['spam.example'] } });
    expect(body(server, 0).web_search_options).toBeUndefined();
    expect((await store.modelCalls({ runId: result.rootId })).map((call) => call.webSearches)).toEqual([1, 0]);
    expect((await store.webSources(result.rootId)).map(({ kind, url }) => [kind, url])).toEqual([
      ['citation', CITED.url],
    ]);
  });

  it.each<[string, (url: string) => ProviderSpec, WebOptions, RegExp]>([
    [
      'an OpenAI-compatible endpoint',
      (url) => spec('compatible', url),
      {},
      /compatible endpoint has no standard web tool/,
    ],
    [
      'OpenAI, whose search models take no tools of the run',
      (url) => spec('openai', url, 'gpt-4o-search-preview'),
      {},
      /search models, which take no function tools/,
    ],
    ['OpenRouter asked to fetch', (url) => spec('openrouter', url), { fetch: true }, /not for page fetches/],
    ['OpenRouter with a cap', (url) => spec('openrouter', url), { maxUses: 2 }, /no cap on searches/],
    [
      'Anthropic with both lists',
      (url) => spec('anthropic', url),
      { allowedHosts: ['a.org'], blockedHosts: ['b.org'] },
      /allowed hosts or blocked hosts, not both/,
    ],
    [
      'a fallback one of whose providers cannot',
      (url) => ({ kind: 'fallback', providers: [spec('anthropic', url), spec('compatible', url)] }),
      {},
      /fallback provider 1: an OpenAI-compatible endpoint/,
    ],
  ])('refuses %s before anything is stored or called', async (_label, provider, web, message) => {
    const server = await serve(() => ({ text: 'never asked' }));
    h = await storeHarness();
    const contract = TaskContract.workspace('look it up', tempWorkspace()).withWeb(web);
    let thrown: unknown;
    try {
      h.supervisor.run({ contract, provider: provider(server.url) });
    } catch (error) {
      thrown = error;
    }
    expect(HarnessError.isInstance(thrown) && thrown.code).toBe('WEB_UNSUPPORTED');
    expect((thrown as Error).message).toMatch(message);
    expect(server.calls).toHaveLength(0);
    expect(await h.store.runs()).toEqual([]);
  });

  it("refuses a tree whose own tool takes the name of the vendor's web tool", async () => {
    const server = await serve(() => ({ text: 'never asked' }));
    h = await storeHarness();
    const mine = tool({
      name: 'web_search',
      description: 'Searches our intranet.',
      parameters: { type: 'object', properties: {} },
      execute: () => 'nothing',
    });
    const contract = TaskContract.workspace('look it up', tempWorkspace());
    expect(() =>
      h?.supervisor.run({ contract: contract.withWeb(), provider: spec('anthropic', server.url), tools: [mine] }),
    ).toThrow(/your tool web_search has the name of the vendor's own web tool/);
    // Without the web, the name is the embedder's to use.
    const result = await h.supervisor.run({ contract, provider: spec('anthropic', server.url), tools: [mine] }).result;
    expect(result.status).toBe('finished');
  });

  it('asks the model to go on after the vendor paused its turn, and keeps measuring requests by what was sent', async () => {
    const root = tempWorkspace({ 'notes.md': 'which Node.js line is LTS?\n' });
    // The vendor reports the search's results as input: 200,000 tokens for a request of a few thousand characters.
    const server = await serve((call) =>
      call.index === 0
        ? {
            web: { searches: [{ query: 'node lts', results: [LTS] }] },
            usage: { inputTokens: 200_000 },
            finishReason: 'pause_turn',
          }
        : call.index === 1
          ? { toolCalls: [{ name: 'read_file', args: { path: 'notes.md' } }] }
          : { text: 'Node.js 22 is the active LTS line.' },
    );
    h = await storeHarness();
    const contract = TaskContract.workspace('which Node.js line is LTS?', root)
      .withWeb()
      .withContext({ window: 64_000 });
    const result = await h.supervisor.run({ contract, provider: spec('anthropic', server.url) }).result;
    expect(result).toMatchObject({ status: 'finished', reply: 'Node.js 22 is the active LTS line.' });
    const steps = await h.store.steps(result.rootId);
    expect(steps.map((step) => step.observations.map((observation) => observation.name))).toEqual([
      ['@paused'],
      ['read_file'],
      [],
    ]);
    expect(JSON.stringify(body(server, 1).messages)).toContain('go on from where you stopped');
    // The paused turn said nothing: no empty text block (which Anthropic refuses) in the request after it.
    expect(JSON.stringify(body(server, 1).messages)).not.toContain('"text":""');
    // Had the search's input been taken for the request's size, the next request would have looked
    // three times the window, and the run would have folded or ended.
    const events = await h.store.events(result.rootId);
    expect(events.filter((event) => event.type === 'assembled')).toEqual([]);
  });

  it('ends a run resumed with a provider that cannot carry its web settings before it calls it', async () => {
    const first = await serve(() => ({ fault: 'hang' }));
    const path = tempStorePath();
    const store = await Store.open(path);
    later(() => rmSync(dirname(path), { recursive: true, force: true }));
    later(() => store.close());
    const left = await Supervisor.start(store);
    const contract = TaskContract.workspace('look it up', tempWorkspace()).withWeb();
    const handle = left.run({ contract, provider: spec('anthropic', first.url) });
    handle.result.catch(() => undefined);
    while (first.calls.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    await left.close();
    const second = await serve(() => ({ text: 'never asked' }));
    const again = await Supervisor.start(store);
    later(() => again.close());
    // A tool given at the resume is held to the tree's web settings as run() held the first ones, accepted or not.
    const mine = tool({
      name: 'web_fetch',
      description: 'Fetches from our intranet.',
      parameters: { type: 'object', properties: {} },
      execute: () => 'nothing',
    });
    await expect(
      again.resume(handle.rootId, { provider: spec('anthropic', second.url), tools: [mine], acceptChanges: true }),
    ).rejects.toThrow(/your tool web_fetch has the name of the vendor's own web tool/);
    const result = await (await again.resume(handle.rootId, { provider: spec('compatible', second.url) })).result;
    expect(result.status).toBe('failed');
    expect(result.reason).toMatch(
      /asks for the web \(withWeb\), and an OpenAI-compatible endpoint has no standard web tool/,
    );
    expect(second.calls).toHaveLength(0);
  });

  it('sends, from a run that asks for no web, the bytes the release before it sent', () => {
    const pinned = JSON.parse(readFileSync(new URL('./fixtures/requests-without-web.json', import.meta.url), 'utf8'));
    // Each kind's wire configuration as from-spec now builds it: with the web tools it could ask for, unasked.
    const web = {
      openai: { web: null },
      openrouter: { web: 'openrouter' },
      anthropic: { web: 'anthropic' },
      compatible: { web: null },
    };
    expect(pinnedRequests({ anthropicWire, openAiWire }, web)).toEqual(pinned);
    expect(Object.keys(pinned)).toEqual(Object.keys(CONFIGS));
  });

  it('reads the sources of an answer sent whole, on both wires (OpenRouter on the OpenAI shape)', () => {
    const config = (web: WireConfig['web']): WireConfig => ({ ...CONFIGS.openai, web }) as WireConfig;
    const anthropic = anthropicWire.decoder(config('anthropic')).whole({
      type: 'message',
      role: 'assistant',
      content: [
        { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'node lts' } },
        {
          type: 'web_search_tool_result',
          tool_use_id: 'srvtoolu_1',
          content: [
            { type: 'web_search_result', url: LTS.url, title: LTS.title, encrypted_content: 'x', page_age: null },
          ],
        },
        {
          type: 'text',
          text: 'Node.js 22.',
          citations: [
            { type: 'web_search_result_location', url: CITED.url, title: CITED.title, cited_text: CITED.citedText },
          ],
        },
      ],
      stop_reason: 'end_turn',
      usage: { input_tokens: 10, output_tokens: 5, server_tool_use: { web_search_requests: 1 } },
    });
    expect(anthropic.filter((part) => part.type.startsWith('web'))).toEqual([
      { type: 'web-source', source: { kind: 'result', url: LTS.url, title: LTS.title, citedText: null } },
      {
        type: 'web-source',
        source: { kind: 'citation', url: CITED.url, title: CITED.title, citedText: CITED.citedText },
      },
      { type: 'web-use', searches: 1, fetches: 0 },
    ]);
    expect(anthropic.some((part) => part.type === 'tool-call-start')).toBe(false);
    const openai = openAiWire.decoder(config('openrouter')).whole({
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: 'Node.js 22.',
            annotations: [
              { type: 'url_citation', url_citation: { url: LTS.url, title: LTS.title, start_index: 0, end_index: 5 } },
            ],
          },
          finish_reason: 'stop',
        },
      ],
      usage: { prompt_tokens: 10, completion_tokens: 5 },
    });
    expect(openai.filter((part) => part.type.startsWith('web'))).toEqual([
      { type: 'web-source', source: { kind: 'citation', url: LTS.url, title: LTS.title, citedText: null } },
    ]);
  });

  it('reads a citation riding on a text chunk, the first of its stream or a later one', () => {
    const config = { ...CONFIGS.openrouter, web: 'openrouter' } as WireConfig;
    const annotations = [{ type: 'url_citation', url_citation: { url: LTS.url, title: LTS.title } }];
    const chunk = (delta: Record<string, unknown>) => ({
      event: null,
      id: null,
      data: JSON.stringify({ id: 'c', choices: [{ index: 0, delta, finish_reason: null }] }),
    });
    const decoder = openAiWire.decoder(config);
    // Its annotations first, so the text closes its object: still not a plain text event to learn from.
    const first = decoder.event(chunk({ annotations, content: 'Node' }));
    const plain = decoder.event(chunk({ content: ' 22' }));
    const later = decoder.event(chunk({ annotations, content: '.' }));
    for (const parts of [first, later])
      expect(parts.filter((part) => part.type === 'web-source')).toEqual([
        { type: 'web-source', source: { kind: 'citation', url: LTS.url, title: LTS.title, citedText: null } },
      ]);
    expect([...first, ...plain, ...later].flatMap((part) => (part.type === 'text-delta' ? [part.text] : []))).toEqual([
      'Node',
      ' 22',
      '.',
    ]);
  });

  it('takes its settings checked, from the contract or the user file, never from the workspace', () => {
    const contract = TaskContract.workspace('x', tempWorkspace());
    expect(contract.withWeb().toJSON().web).toEqual({ search: true, fetch: false });
    expect(contract.toJSON().web).toBeUndefined();
    const refusals: [WebOptions, RegExp][] = [
      [{ search: false }, /both off/],
      [{ allowedHosts: ['https://docs.example.org/a'] }, /host names, not URLs or paths: give "docs.example.org"/],
      [{ blockedHosts: ['not a host'] }, /is not a host name/],
      [{ allowedHosts: [] }, /non-empty list of host names/],
      [{ allowedHosts: ['A.org'], blockedHosts: ['a.org'] }, /a\.org is both allowed and blocked/],
      [{ maxUses: 0 }, /a whole number from 1/],
      [{ hosts: ['a.org'] } as never, /unknown option "hosts"/],
    ];
    for (const [options, message] of refusals) expect(() => contract.withWeb(options), message.source).toThrow(message);
    // Stored and read back whole.
    const data = contract.withWeb({ fetch: true, maxUses: 2, blockedHosts: ['spam.example'] }).toJSON();
    expect(TaskContract.from(data).toJSON().web).toEqual({
      search: true,
      fetch: true,
      maxUses: 2,
      blockedHosts: ['spam.example'],
    });
    // io.toml: the user file's [web] turns it on; a workspace file may not; a bad host is named by file and line.
    const root = tempWorkspace();
    const home = tempWorkspace();
    const userFile = join(home, 'io.toml');
    writeFileSync(userFile, '[web]\nfetch = true\nallowed_hosts = ["nodejs.org"]\nmax_uses = 4\n');
    expect(Config.discover(root, { userFile }).contract('x').toJSON().web).toEqual({
      search: true,
      fetch: true,
      maxUses: 4,
      allowedHosts: ['nodejs.org'],
    });
    writeFileSync(join(root, 'io.toml'), '[web]\n');
    expect(() => Config.discover(root, { userFile })).toThrow(/web opens a route to the web/);
    writeFileSync(join(root, 'io.toml'), '');
    writeFileSync(userFile, '\n[web]\nallowed_hosts = ["https://nodejs.org"]\n');
    expect(() => Config.discover(root, { userFile })).toThrow(/io\.toml:2: web: .*host names, not URLs/);
  });
});
