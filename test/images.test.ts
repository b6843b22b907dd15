/**
 * Images a tool hands back, attached to its observation: from a real stdio MCP server
 * (test/fixtures/mcp-server.mjs, mode `images`) and from a tool of the embedder's own
 * (ToolOutput), called by a worker-thread agent, sent to the scripted model server on the
 * OpenAI and the Anthropic wire in the shapes each vendor takes (the server refuses, as the
 * vendors do, a shape they refuse), kept in the trace; images no model takes are lines of
 * the observation's text saying why; a provider made with `images: false` sends none.
 */
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Anthropic, OpenAI, Policy, runWith, Store, TaskContract, ToolOutput, tool } from '../dist/index.js';
import { checkImage, MAX_IMAGES_SHOWN, shownImages } from '../dist/runtime/images.js';
import { assistantTurns, ScriptedModelServer } from '../dist/testing/index.js';
import { tempStorePath } from './support/processes.js';
import { later, tempWorkspace } from './support/workspace.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/mcp-server.mjs', import.meta.url));
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

/** A scripted model server that calls each tool once, in order, then answers; every request body kept. */
async function model(wire: 'openai' | 'anthropic', calls: string[], options: { images?: boolean } = {}) {
  const bodies: Record<string, unknown>[] = [];
  const server = await ScriptedModelServer.start((call) => {
    bodies.push(call.body as Record<string, unknown>);
    const next = calls[assistantTurns(call)];
    return next ? { text: 'looking', toolCalls: [{ name: next, args: {} }] } : { text: 'seen' };
  });
  later(() => server.close());
  const provider =
    wire === 'openai'
      ? OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k', ...options })
      : Anthropic.create({ model: 'scripted', baseUrl: server.url, apiKey: 'k', ...options });
  return { provider, bodies };
}

async function store() {
  const opened = await Store.open(tempStorePath());
  cleanup.push(async () => opened.close());
  return opened;
}

type Message = { role: string; content: unknown; tool_call_id?: string };

describe('images from tools', () => {
  for (const wire of ['openai', 'anthropic'] as const) {
    it(`attaches an MCP server's image to its observation and sends it on the ${wire} wire as the vendor takes it`, async () => {
      const dir = tempWorkspace();
      const trace = await store();
      const { provider, bodies } = await model(wire, ['images__shot', 'images__odd']);
      const policy = Policy.default().layer('mcp').allowTool('images__*').allowExec('node *');
      const result = await runWith(
        TaskContract.workspace('look at the screen', dir),
        provider,
        trace,
        policy,
        undefined,
        {
          mcp: [{ name: 'images', command: ['node', FIXTURE, 'images'], cwd: dir }],
        },
      );
      // A request the vendor would refuse is a 400 from the scripted server, and the run would fail.
      expect(result.outcome.kind, JSON.stringify(result.outcome)).toBe('finished');
      const [shot, odd] = trace.steps(result.runId).flatMap((step) => step.observations);
      expect(shot).toMatchObject({
        name: 'images__shot',
        isError: false,
        content: 'the screen\n[image image/png, 1 KiB, attached]',
        images: [{ mimeType: 'image/png', data: PNG }],
      });
      // Each image no model takes is named, with why; none is attached.
      expect(odd?.images).toBeUndefined();
      expect(odd?.content.split('\n')).toEqual([
        // Named by what its bytes are, with the conversion that makes it one a model takes.
        expect.stringMatching(/^\[image SVG, 1 KiB, not attached: it is drawn, not pixels: render it to PNG first/),
        expect.stringMatching(/^\[image image\/jpeg, 1 KiB, not attached: it is not a whole JPEG/),
        expect.stringMatching(/^\[image image\/png, 1 KiB, 9000×10 pixels, not attached: a side may be at most 8000/),
        expect.stringMatching(/^\[image image\/png, 6\.0 MiB, not attached: an image may be at most 5 MiB\]$/),
      ]);
      // The request after the shot carries the image, in the wire's own shape.
      const messages = bodies[1]?.messages as Message[];
      if (wire === 'openai') {
        const at = messages.findIndex((message) => message.role === 'tool');
        expect(messages[at]?.content).toBe('the screen\n[image image/png, 1 KiB, attached]');
        expect(messages[at + 1]).toEqual({
          role: 'user',
          content: [
            { type: 'text', text: `Images returned by the tool call ${messages[at]?.tool_call_id} (images__shot):` },
            { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG}` } },
          ],
        });
      } else {
        const results = messages.flatMap((message) =>
          Array.isArray(message.content)
            ? (message.content as { type: string; content?: unknown }[]).filter((block) => block.type === 'tool_result')
            : [],
        );
        expect(results[0]?.content).toEqual([
          { type: 'text', text: 'the screen\n[image image/png, 1 KiB, attached]' },
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
        ]);
      }
      // The scripted server reads the image back onto its call, as the model was shown it.
      expect(JSON.stringify(bodies[2])).toContain(PNG);
    });
  }

  it("attaches a tool's own images (ToolOutput); a provider made with images: false sends none and says so", async () => {
    const dir = tempWorkspace();
    const screenshot = tool({
      name: 'screenshot',
      description: 'Takes a screenshot.',
      parameters: z.object({}),
      effect: 'reads',
      execute: () =>
        new ToolOutput('the page', {
          images: [
            { mimeType: 'image/png', data: Buffer.from(PNG, 'base64') },
            { mimeType: 'image/png', data: 'not base64 at all!' },
          ],
        }),
    });
    for (const images of [true, false]) {
      const trace = await store();
      const { provider, bodies } = await model('anthropic', ['screenshot'], { images });
      const result = await runWith(TaskContract.workspace('look', dir), provider, trace, Policy.default(), undefined, {
        tools: [screenshot],
      });
      expect(result.outcome.kind).toBe('finished');
      const [seen] = trace.steps(result.runId).flatMap((step) => step.observations);
      // The bytes given as a Buffer are kept as base64; the string that is not base64 is a line saying so.
      expect(seen).toMatchObject({
        content:
          'the page\n[image image/png, 1 KiB, attached]\n[image image/png, not attached: its bytes are not base64]',
        images: [{ mimeType: 'image/png', data: PNG }],
      });
      const sent = JSON.stringify(bodies[1]);
      if (images) expect(sent).toContain(`"data":"${PNG}"`);
      else {
        expect(sent).not.toContain(PNG);
        expect(sent).toContain('[its image is not sent: this model is given text only]');
      }
    }
  });
});

describe('an image, checked', () => {
  it('is told by its bytes, not the type it claims, and bounded by its header before anything is decoded', () => {
    // A JPEG with an APP0 segment before its frame header: 640×480.
    const jpeg = Buffer.from([
      0xff, 0xd8, 0xff, 0xe0, 0x00, 0x04, 0x4a, 0x46, 0xff, 0xc0, 0x00, 0x11, 0x08, 0x01, 0xe0, 0x02, 0x80, 0x03,
    ]);
    expect(checkImage('image/png', jpeg.toString('base64'))).toEqual({
      image: { mimeType: 'image/jpeg', data: jpeg.toString('base64') },
    });
    const webp = Buffer.alloc(30);
    webp.write('RIFF', 0, 'latin1');
    webp.write('WEBPVP8X', 8, 'latin1');
    webp.writeUIntLE(8999, 24, 3);
    webp.writeUIntLE(99, 27, 3);
    expect(checkImage('image/webp', webp.toString('base64'))).toEqual({
      refused: expect.stringContaining('9000×100 pixels, not attached'),
    });
    const gif = Buffer.from('GIF89a\x10\x00\x20\x00', 'latin1');
    expect(checkImage(undefined, gif)).toEqual({ image: { mimeType: 'image/gif', data: gif.toString('base64') } });
    expect(checkImage('image/png', null)).toEqual({ refused: expect.stringContaining('came without its bytes') });
    // Far over the bound: refused by its length alone.
    expect(checkImage('image/png', 'A'.repeat(40 * 1024 * 1024))).toEqual({
      refused: expect.stringContaining('an image may be at most 5 MiB'),
    });
  });

  it('is sent only while it is among the latest a request carries, the same answer for the same transcript', () => {
    const entry = (n: number) => ({ role: 'tool', n, images: [{ mimeType: 'image/png' as const, data: PNG }] });
    const transcript = [{ role: 'user' }, ...Array.from({ length: MAX_IMAGES_SHOWN + 3 }, (_, n) => entry(n))];
    const shown = [...shownImages(transcript)].map((item) => (item as { n: number }).n).sort((a, b) => a - b);
    expect(shown).toEqual(Array.from({ length: MAX_IMAGES_SHOWN }, (_, n) => n + 3));
    expect([...shownImages(transcript)]).toEqual([...shownImages(transcript)]);
  });
});
