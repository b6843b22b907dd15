/**
 * Patterns from outside never meet model-chosen text on a backtracking engine. A tool's
 * JSON Schema `pattern` (the embedder's, an MCP server's) and an MCP tool's output schema
 * are checked on the main thread; `^(a+)+$` against forty `a`s and a `!` would stop the
 * whole process there for hours on JavaScript's engine. Here a real supervisor runs two
 * trees on worker threads over the scripted model server: one whose model sends that
 * argument, one that keeps stepping beside it. Both end (the proof is that the test ends
 * at all); the crafted calls are observations, never a stalled thread. A pattern the
 * linear engine cannot run is refused up front, naming the tool and the pattern.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { ErrorCode, OpenAI, OutputSchema, Store, Supervisor, tool } from '../dist/index.js';
import { McpServers } from '../dist/mcp/index.js';
import { assistantTurns, type ModelScript, ScriptedModelServer } from '../dist/testing/index.js';
import { serveMcpOverHttp } from './support/mcp-http.js';
import { tempStorePath } from './support/processes.js';
import { later } from './support/workspace.js';

const EVIL = '^(a+)+$';
const CRAFTED = `${'a'.repeat(40)}!`;

/**
 * A streamable-HTTP MCP server on loopback, written with the SDK's low-level server so it
 * checks nothing itself: `echo` says its text back as structured content whose output
 * schema carries the evil pattern; `twice` asks for a backreference in its input; `peek`
 * promises output matched by a lookahead.
 */
async function mcpServer(): Promise<{ url: string; calls: string[] }> {
  const calls: string[] = [];
  const url = await serveMcpOverHttp(() => {
    const server = new Server({ name: 'evil', version: '1.0.0' }, { capabilities: { tools: {} } });
    const text = { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] };
    server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: [
        {
          name: 'echo',
          description: 'Says it back.',
          inputSchema: text,
          outputSchema: { type: 'object', properties: { echo: { type: 'string', pattern: EVIL } } },
        },
        {
          name: 'twice',
          description: 'x',
          inputSchema: { type: 'object', properties: { text: { type: 'string', pattern: '^(a)\\1$' } } },
        },
        {
          name: 'peek',
          description: 'Peeks.',
          inputSchema: text,
          outputSchema: { type: 'object', properties: { echo: { type: 'string', pattern: '^(?=a)' } } },
        },
      ],
    }));
    server.setRequestHandler(CallToolRequestSchema, async (call) => {
      const said = String((call.params.arguments as { text?: unknown }).text);
      calls.push(`${call.params.name} ${said}`);
      return { content: [{ type: 'text', text: said }], structuredContent: { echo: said } };
    });
    return server;
  });
  return { url, calls };
}

async function modelOf(script: ModelScript) {
  const server = await ScriptedModelServer.start(script);
  later(() => server.close());
  return OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k', retry: { baseDelayMs: 5 } });
}

/** The embedder's tool with the evil pattern in its JSON Schema. */
const lookup = tool({
  name: 'lookup',
  description: 'Looks a key up.',
  parameters: { type: 'object', properties: { key: { type: 'string', pattern: EVIL } }, required: ['key'] },
  effect: 'reads',
  execute: ({ key }) => `found ${String(key)}`,
});

const tick = tool({
  name: 'tick',
  description: 'Counts.',
  parameters: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] },
  effect: 'reads',
  execute: ({ n }) => `tick ${String(n)}`,
});

describe('patterns from outside against model-chosen text', () => {
  it('check a crafted argument in linear time on the main thread while another run keeps stepping', async () => {
    const web = await mcpServer();
    const mcp = await McpServers.connect([{ name: 'evil', url: web.url }], { connectTimeoutMs: 5_000 });
    later(() => mcp.close());

    const store = await Store.open(tempStorePath());
    const supervisor = await Supervisor.start(store, { tools: [lookup, tick, ...mcp.tools()] });
    later(async () => {
      await supervisor.close();
      store.close();
    });

    const STEPS = 6;
    const steady = await modelOf((call) =>
      assistantTurns(call) < STEPS
        ? { text: 'ticking', toolCalls: [{ name: 'tick', args: { n: assistantTurns(call) } }] }
        : { text: 'counted' },
    );
    const crafted = await modelOf((call) =>
      assistantTurns(call) === 0
        ? {
            text: 'trying',
            toolCalls: [
              { name: 'lookup', args: { key: CRAFTED } },
              { name: 'evil__echo', args: { text: CRAFTED } },
              { name: 'evil__peek', args: { text: 'a' } },
              { name: 'lookup', args: { key: 'aaaa' } },
            ],
          }
        : { text: 'gave up' },
    );
    const beside = supervisor.run({ task: 'count', provider: steady });
    const attack = supervisor.run({ task: 'look up', provider: crafted });
    const [calm, evil] = await Promise.all([beside.result, attack.result]);

    expect(calm.status).toBe('finished');
    expect(store.steps(calm.rootId)).toHaveLength(STEPS + 1);
    expect(evil.status).toBe('finished');
    const observations = store.steps(evil.rootId)[0]?.observations ?? [];
    expect(observations.map((o) => [o.name, o.isError])).toEqual([
      ['lookup', true],
      ['evil__echo', true],
      ['evil__peek', true],
      ['lookup', false],
    ]);
    // The embedder's tool: refused by its schema, never called.
    expect(observations[0]?.content).toMatch(
      /^the arguments to lookup are not valid: key: must match pattern "\^\(a\+\)\+\$"/,
    );
    // The MCP tool: called, and its echoed result refused by its output schema.
    expect(observations[1]?.content).toContain('output schema');
    // One whose output schema cannot be run in linear time: each call says so, naming the pattern.
    expect(observations[2]?.content).toContain('"^(?=a)"');
    expect(observations[2]?.content).toContain('cannot be matched in linear time');
    expect(observations[3]?.content).toBe('found aaaa');
    expect(web.calls).toEqual([`echo ${CRAFTED}`, 'peek a']);
    // The tools whose patterns the linear engine cannot run are not offered, and say why.
    expect(mcp.skipped).toMatchObject([{ server: 'evil', tool: 'twice' }]);
    expect(mcp.skipped[0]?.reason).toContain('tool(evil__twice)');
    expect(mcp.skipped[0]?.reason).toContain('"^(a)\\\\1$"');
    expect(mcp.skipped[0]?.reason).toMatch(/cannot be matched in linear time.*Rewrite the pattern/);
  });

  it('refuses a pattern the linear engine cannot run, naming the tool and the pattern and saying what to do', () => {
    let refused: unknown;
    try {
      tool({
        name: 'twice',
        description: 'Repeats.',
        parameters: { type: 'object', properties: { word: { type: 'string', pattern: '^(\\w+) \\1$' } } },
        execute: () => 'x',
      });
    } catch (error) {
      refused = error;
    }
    expect(refused).toMatchObject({
      code: ErrorCode.InvalidArgument,
      details: { tool: 'twice', pattern: '^(\\w+) \\1$' },
    });
    const message = (refused as Error).message;
    expect(message).toContain('tool(twice)');
    expect(message).toContain('"^(\\\\w+) \\\\1$"');
    expect(message).toMatch(/cannot be matched in linear time/);
    expect(message).toMatch(/Rewrite the pattern without backreferences/);
    // Lookaround too, and in patternProperties; never handed to the backtracking engine instead.
    expect(() =>
      tool({
        name: 'look',
        description: 'x',
        parameters: { type: 'object', patternProperties: { '^(?!x)': { type: 'string' } } },
        execute: () => 'x',
      }),
    ).toThrow(/tool\(look\): .*"\^\(\?!x\)" cannot be matched in linear time/);
    // A run's output schema: refused when it is declared.
    expect(() => OutputSchema.of({ type: 'string', pattern: '(?<=a)b' })).toThrow(
      /"\(\?<=a\)b" cannot be matched in linear time/,
    );
  });

  it("reads a pattern with JavaScript's meaning where RE2's syntax differs", () => {
    const check = (pattern: string, text: string) =>
      tool({
        name: 'probe',
        description: 'x',
        parameters: { type: 'object', properties: { text: { type: 'string', pattern } } },
        execute: () => 'x',
      }).check({ text }) === null;
    // The crafted text, refused in one pass (a backtracking engine takes ages over this one), and a long match.
    expect(check(EVIL, `${'a'.repeat(60)}!`)).toBe(false);
    expect(check(EVIL, 'a'.repeat(100_000))).toBe(true);
    const cases: [string, string][] = [
      ['^[\\u0041-\\u005A]+$', 'ABC'],
      ['^[\\u0041-\\u005A]+$', 'abc'],
      ['^\\uD83D\\uDE00$', '😀'],
      ['^\\s$', '\u00a0'],
      ['^\\S$', '\u00a0'],
      ['^.$', '\r'],
      ['^.$', '😀'],
      ['^[^]$', '\n'],
      ['\\\\u0041', '\\u0041'],
      ['^\\cJ$', '\n'],
      ['^\\p{Lu}+$', 'ÁB'],
      ['^(?<year>\\d{4})-\\d{2}$', '2024-05'],
    ];
    for (const [pattern, text] of cases) {
      expect([pattern, text, check(pattern, text)]).toEqual([pattern, text, new RegExp(pattern, 'u').test(text)]);
    }
  });
});
