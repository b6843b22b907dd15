/**
 * A request body is serialised from what each transcript entry and tool definition became
 * the first time it was sent (src/runtime/providers/wire-request.ts, entryJson and
 * bodyWithArrays), so a run's request costs what its last step added, not its whole
 * length again. Checked on both wires: each entry is read once however often it is sent;
 * the bytes are the body's canonical JSON, with the shape each vendor reads; an entry's
 * cache breakpoint and its images, which depend on more than the entry, are made each
 * time; an `extraBody` that replaces the messages or the tools, and a model whose name
 * spells `"messages":[]`, change nothing of that.
 */
import { describe, expect, it } from 'vitest';
import type { ModelRequest, TranscriptEntry } from '../dist/index.js';
import { anthropicWire } from '../dist/runtime/providers/anthropic-wire.js';
import { openAiWire } from '../dist/runtime/providers/openai-wire.js';
import { wireConfig } from './support/wire.js';

const metadata = { runId: 'r', rootId: 'r', address: 'root', parentAddress: null, depth: 0, seq: 1 };
const tool = { name: 'look', description: 'Looks.', parameters: { type: 'object', properties: {} } };
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

/** A user entry that counts how often its text is read. */
function countedUser(text: string): { entry: TranscriptEntry; reads: () => number } {
  let reads = 0;
  const entry = {
    role: 'user' as const,
    get text() {
      reads++;
      return text;
    },
  };
  return { entry, reads: () => reads };
}

function request(transcript: TranscriptEntry[], options: ModelRequest['options'] = {}): ModelRequest {
  return { system: 'be brief', transcript, tools: [tool], metadata, options };
}

function body(wire: typeof openAiWire, req: ModelRequest, config: Partial<typeof wireConfig> = {}) {
  const text = wire.request(req, { ...wireConfig, ...config }).body as string;
  // The bytes are the body's own canonical JSON: nothing spliced in out of place.
  expect(JSON.stringify(JSON.parse(text))).toBe(text);
  return { text, json: JSON.parse(text) as Record<string, unknown> };
}

const call = { id: 'c1', name: 'look', args: { at: 'x' } };

describe.each([
  ['OpenAI', openAiWire],
  ['Anthropic', anthropicWire],
])('a request body on the %s wire', (_name, wire) => {
  it('reads each entry once however often it is sent, and sends the same bytes for it each time', () => {
    const first = countedUser('find x');
    const transcript: TranscriptEntry[] = [
      first.entry,
      { role: 'assistant', text: 'looking', toolCalls: [call] },
      { role: 'tool', callId: 'c1', name: 'look', content: 'x is here', isError: false },
    ];
    const one = body(wire, request(transcript));
    const readsAfterOne = first.reads();
    transcript.push(
      { role: 'assistant', text: '', toolCalls: [{ ...call, id: 'c2' }] },
      { role: 'tool', callId: 'c2', name: 'look', content: 'failed', isError: true },
    );
    const two = body(wire, request(transcript));
    expect(first.reads()).toBe(readsAfterOne);
    const messages = (text: string) => JSON.stringify((JSON.parse(text) as { messages: unknown[] }).messages);
    // What was sent before is sent again byte for byte, with the step's additions after it.
    expect(messages(two.text).startsWith(messages(one.text).slice(0, -2))).toBe(true);
    expect(two.json.tools).toEqual(one.json.tools);
  });

  it('marks a breakpoint where the request asks and nowhere else, whatever was sent before', () => {
    const transcript: TranscriptEntry[] = [
      { role: 'user', text: 'first' },
      { role: 'assistant', text: 'ok', toolCalls: [] },
      { role: 'user', text: 'second' },
    ];
    const marked = (json: Record<string, unknown>) =>
      (JSON.stringify(json.messages).match(/cache_control/g) ?? []).length;
    const config = { systemCacheMarker: true };
    // The system block's own breakpoint (in the messages on the OpenAI wire) is there either way.
    const base = marked(body(wire, request(transcript), config).json);
    expect(marked(body(wire, request(transcript, { cacheBreakpoint: 2 }), config).json)).toBe(base + 1);
    expect(JSON.stringify(body(wire, request(transcript, { cacheBreakpoint: 2 }), config).json.messages)).toMatch(
      /"second","cache_control"/,
    );
    expect(marked(body(wire, request(transcript), config).json)).toBe(base);
  });

  it('sends a tool result’s images while they are among the latest, and says so when they are not', () => {
    const withImage: TranscriptEntry = {
      role: 'tool',
      callId: 'c1',
      name: 'look',
      content: 'a picture',
      isError: false,
      images: [{ mimeType: 'image/png', data: PNG }],
    };
    const transcript: TranscriptEntry[] = [
      { role: 'user', text: 'look' },
      { role: 'assistant', text: '', toolCalls: [call] },
      withImage,
    ];
    expect(body(wire, request(transcript)).text).toContain(PNG);
    // The same entry, sent to a model that takes text only: no image, and a line that says so.
    const textOnly = body(wire, request(transcript), { images: false }).text;
    expect(textOnly).not.toContain(PNG);
    expect(textOnly).toContain('a picture');
  });

  it('keeps the messages and tools an extraBody gives, and a model named like a key', () => {
    const transcript: TranscriptEntry[] = [{ role: 'user', text: 'hi' }];
    const model = 'm","messages":[],"tools":[]';
    const named = body(wire, request(transcript), { model });
    expect(named.json.model).toBe(model);
    expect(JSON.stringify(named.json.messages)).toContain('hi');
    expect((named.json.tools as unknown[]).length).toBe(1);
    const replaced = body(wire, request(transcript), {
      extraBody: { messages: [{ role: 'user', content: 'instead' }], tools: [] },
    });
    expect(replaced.json.messages).toEqual([{ role: 'user', content: 'instead' }]);
    expect(replaced.json.tools).toEqual([]);
  });
});
