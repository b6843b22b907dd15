import { isUtf8 } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { isDone, type SseEvent, SseParser, scanTemplateRun, Utf8Chunks } from '../src/runtime/providers/sse.js';

/** Every event and the end report of a stream fed as the given chunks. */
function parseChunks(chunks: string[]): { events: SseEvent[]; incomplete: boolean } {
  const parser = new SseParser();
  const events: SseEvent[] = [];
  for (const chunk of chunks) events.push(...parser.push(chunk));
  const end = parser.end();
  events.push(...end.events);
  return { events, incomplete: end.incomplete };
}

/** A small deterministic generator, so a failing random split can be reproduced. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1_664_525 + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
}

function randomSplit(text: string, random: () => number): string[] {
  const chunks: string[] = [];
  let position = 0;
  while (position < text.length) {
    const length = 1 + Math.floor(random() * 12);
    chunks.push(text.slice(position, position + length));
    position += length;
  }
  return chunks;
}

const openAiChunk = (content: string) =>
  JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content } }] });

const openAiStream = [
  `data: ${openAiChunk('Hel')}`,
  '',
  ': keep-alive',
  '',
  `data: ${openAiChunk('lo, wörld €')}`,
  '',
  `data: ${openAiChunk(' 😀')}`,
  '',
  'data: [DONE]',
  '',
  '',
].join('\n');

const openAiEvents: SseEvent[] = [
  { event: null, data: openAiChunk('Hel'), id: null },
  { event: null, data: openAiChunk('lo, wörld €'), id: null },
  { event: null, data: openAiChunk(' 😀'), id: null },
  { event: null, data: '[DONE]', id: null },
];

const anthropicPayloads: [string, string][] = [
  ['message_start', '{"type":"message_start","message":{"id":"msg_1","role":"assistant","content":[]}}'],
  ['content_block_start', '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'],
  ['ping', '{"type": "ping"}'],
  ['content_block_delta', '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi: there"}}'],
  ['content_block_stop', '{"type":"content_block_stop","index":0}'],
  ['message_delta', '{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}'],
  ['message_stop', '{"type":"message_stop"}'],
];

const anthropicStream = anthropicPayloads.map(([event, data]) => `event: ${event}\ndata: ${data}\n\n`).join('');
const anthropicEvents: SseEvent[] = anthropicPayloads.map(([event, data]) => ({ event, data, id: null }));

const streams: { name: string; text: string; events: SseEvent[] }[] = [
  { name: 'OpenAI-style, LF', text: openAiStream, events: openAiEvents },
  { name: 'OpenAI-style, CRLF', text: openAiStream.replaceAll('\n', '\r\n'), events: openAiEvents },
  { name: 'OpenAI-style, CR', text: openAiStream.replaceAll('\n', '\r'), events: openAiEvents },
  { name: 'Anthropic-style, LF', text: anthropicStream, events: anthropicEvents },
  { name: 'Anthropic-style, CRLF', text: anthropicStream.replaceAll('\n', '\r\n'), events: anthropicEvents },
  { name: 'Anthropic-style, CR', text: anthropicStream.replaceAll('\n', '\r'), events: anthropicEvents },
];

describe('SseParser on realistic streams', () => {
  describe.each(streams)('$name', ({ text, events }) => {
    it('parses the whole stream into the expected events, ending cleanly', () => {
      expect(parseChunks([text])).toEqual({ events, incomplete: false });
    });

    it('gives the same events for every 2-way split', () => {
      for (let split = 0; split <= text.length; split++) {
        const result = parseChunks([text.slice(0, split), text.slice(split)]);
        expect(result, `split at ${split}`).toEqual({ events, incomplete: false });
      }
    });

    it('gives the same events one character at a time', () => {
      expect(parseChunks([...text])).toEqual({ events, incomplete: false });
      expect(parseChunks(text.split(''))).toEqual({ events, incomplete: false });
    });

    it('gives the same events for random splits with empty chunks in between', () => {
      const random = seededRandom(text.length);
      for (let trial = 0; trial < 200; trial++) {
        const chunks = randomSplit(text, random).flatMap((chunk) => (random() < 0.2 ? [chunk, ''] : [chunk]));
        expect(parseChunks(chunks), `trial ${trial}`).toEqual({ events, incomplete: false });
      }
    });

    it('returns each event from the push that completed it', () => {
      const parser = new SseParser();
      const perPush = [...text].map((character) => parser.push(character).length);
      expect(perPush.reduce((sum, count) => sum + count, 0)).toBe(events.length);
      expect(Math.max(...perPush)).toBe(1);
    });
  });

  it('recognises the [DONE] sentinel without interpreting it', () => {
    const { events } = parseChunks([openAiStream]);
    expect(events.map(isDone)).toEqual([false, false, false, true]);
    expect(events.at(-1)?.data).toBe('[DONE]');
    // Whitespace around the sentinel (a second space after `data:`) still ends the stream.
    expect(isDone({ event: null, data: ' [DONE]', id: null })).toBe(true);
    expect(isDone({ event: null, data: '[DONE]\n', id: null })).toBe(true);
    expect(isDone({ event: null, data: '[DONE]x', id: null })).toBe(false);
    expect(isDone({ event: null, data: '"[DONE]"', id: null })).toBe(false);
  });
});

describe('SseParser line endings', () => {
  it('does not read a CRLF split across chunks as two line ends', () => {
    // An extra empty line would dispatch "a" on its own before "b" arrives.
    expect(parseChunks(['data: a\r', '\ndata: b\r', '\n\r', '\n']).events).toEqual([
      { event: null, data: 'a\nb', id: null },
    ]);
  });

  it('keeps the pending CR across empty chunks', () => {
    expect(parseChunks(['data: a\r', '', '', '\ndata: b\r\n\r\n']).events).toEqual([
      { event: null, data: 'a\nb', id: null },
    ]);
  });

  it('treats a lone CR followed by a CR as an empty line', () => {
    expect(parseChunks(['data: a\r', '\r']).events).toEqual([{ event: null, data: 'a', id: null }]);
  });

  it('accepts mixed line endings in one stream', () => {
    expect(parseChunks(['data: a\rdata: b\ndata: c\r\n\n', 'data: d\r\r']).events).toEqual([
      { event: null, data: 'a\nb\nc', id: null },
      { event: null, data: 'd', id: null },
    ]);
  });

  it('joins a line spread over many chunks', () => {
    const long = 'x'.repeat(10_000);
    const chunks = ['da', 'ta', ': ', ...long.match(/.{1,7}/g)!, '\n', '\n'];
    expect(parseChunks(chunks).events).toEqual([{ event: null, data: long, id: null }]);
  });
});

describe('SseParser fields', () => {
  it.each([
    { name: 'a comment line', text: ': this is a comment\n\n', events: [] },
    { name: 'a bare colon keep-alive', text: ':\n\n:\n\n', events: [] },
    {
      name: 'a comment inside an event',
      text: 'data: one\n: ping\ndata: two\n\n',
      events: [{ event: null, data: 'one\ntwo', id: null }],
    },
    {
      name: 'multi-line data',
      text: 'data: first\ndata:\ndata: third\n\n',
      events: [{ event: null, data: 'first\n\nthird', id: null }],
    },
    {
      name: 'only one leading space removed',
      text: 'data:  two spaces\ndata:none\ndata:\ttab\n\n',
      events: [{ event: null, data: ' two spaces\nnone\n\ttab', id: null }],
    },
    {
      name: 'colons after the first kept in the value',
      text: 'data: {"a":"b:c"}\n\n',
      events: [{ event: null, data: '{"a":"b:c"}', id: null }],
    },
    {
      name: 'a field with no colon has an empty value',
      text: 'data\n\ndata\ndata\n\n',
      events: [
        { event: null, data: '', id: null },
        { event: null, data: '\n', id: null },
      ],
    },
    { name: 'an event with no data is not dispatched', text: 'event: lonely\n\nid: 7\n\n', events: [] },
    {
      name: 'the event type resets after each dispatch, even an undispatched one',
      text: 'event: first\ndata: 1\n\nevent: dropped\n\ndata: 2\n\n',
      events: [
        { event: 'first', data: '1', id: null },
        { event: null, data: '2', id: null },
      ],
    },
    {
      name: 'an empty event type means none',
      text: 'event:\ndata: x\n\n',
      events: [{ event: null, data: 'x', id: null }],
    },
    {
      name: 'the last event id carries over until reset',
      text: 'id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\n',
      events: [
        { event: null, data: 'a', id: '1' },
        { event: null, data: 'b', id: '1' },
        { event: null, data: 'c', id: null },
      ],
    },
    {
      name: 'an id containing NUL is ignored',
      text: 'id: good\ndata: a\n\nid: b\0d\ndata: b\n\n',
      events: [
        { event: null, data: 'a', id: 'good' },
        { event: null, data: 'b', id: 'good' },
      ],
    },
    {
      name: 'retry and unknown fields are ignored',
      text: 'retry: 1000\nfoo: bar\nData: wrong case\ndata: kept\n\n',
      events: [{ event: null, data: 'kept', id: null }],
    },
    {
      name: 'a field name is not trimmed',
      text: ' data: leading space\ndata : trailing space\n\n',
      events: [],
    },
  ])('$name', ({ text, events }) => {
    expect(parseChunks([text]).events).toEqual(events);
    expect(parseChunks([...text]).events).toEqual(events);
  });
});

describe('SseParser byte order mark', () => {
  it('skips a BOM at the very start', () => {
    expect(parseChunks(['\uFEFFdata: x\n\n']).events).toEqual([{ event: null, data: 'x', id: null }]);
  });

  it('skips a BOM arriving as its own chunk, after empty chunks', () => {
    expect(parseChunks(['', '\uFEFF', 'data: x\n\n']).events).toEqual([{ event: null, data: 'x', id: null }]);
  });

  it('skips only one BOM, and none later in the stream', () => {
    // A second BOM starts the field name, which makes it an unknown field.
    expect(parseChunks(['\uFEFF\uFEFFdata: x\n\n']).events).toEqual([]);
    expect(parseChunks(['data: x\n\n', '\uFEFFdata: y\n\n']).events).toEqual([{ event: null, data: 'x', id: null }]);
    expect(parseChunks(['data: \uFEFFz\n\n']).events).toEqual([{ event: null, data: '\uFEFFz', id: null }]);
  });
});

describe('SseParser end()', () => {
  it.each([
    { name: 'an empty stream', chunks: [], incomplete: false },
    { name: 'a stream ending on a blank line', chunks: ['data: a\n\n'], incomplete: false },
    { name: 'a stream ending on a CRLF blank line', chunks: ['data: a\r\n\r', '\n'], incomplete: false },
    { name: 'a stream of only keep-alives', chunks: [': ping\n\n: ping\n'], incomplete: false },
    { name: 'an event with no data ended by a blank line', chunks: ['event: x\n\n'], incomplete: false },
    { name: 'a cut inside a data line', chunks: ['data: a\n\ndata: {"cho'], incomplete: true },
    { name: 'a cut after the field name', chunks: ['data: a\n\nda'], incomplete: true },
    { name: 'a cut before the closing blank line', chunks: ['data: a\n\ndata: b\n'], incomplete: true },
    { name: 'a cut after an event line', chunks: ['event: message_delta\n'], incomplete: true },
    { name: 'a cut inside a comment', chunks: [': keep-al'], incomplete: true },
  ])('$name', ({ chunks, incomplete }) => {
    expect(parseChunks(chunks).incomplete).toBe(incomplete);
  });

  it('never dispatches the unfinished event, only the complete ones before it', () => {
    const parser = new SseParser();
    expect(parser.push('data: done\n\ndata: partial\n')).toEqual([{ event: null, data: 'done', id: null }]);
    expect(parser.end()).toEqual({ events: [], incomplete: true });
  });

  it('refuses input after the stream has ended', () => {
    const parser = new SseParser();
    parser.end();
    expect(() => parser.push('data: late\n\n')).toThrow(/after end/);
  });
});

describe('Utf8Chunks', () => {
  const encoder = new TextEncoder();

  it('joins multi-byte characters split at every byte boundary', () => {
    const text = 'a€b😀cé中';
    const bytes = encoder.encode(text);
    for (let split = 0; split <= bytes.length; split++) {
      const decoder = new Utf8Chunks();
      const decoded = decoder.push(bytes.subarray(0, split)) + decoder.push(bytes.subarray(split)) + decoder.end();
      expect(decoded, `split at byte ${split}`).toBe(text);
    }
  });

  it('holds back an unfinished character until its last byte arrives', () => {
    const decoder = new Utf8Chunks();
    const euro = encoder.encode('€');
    expect(decoder.push(euro.subarray(0, 1))).toBe('');
    expect(decoder.push(euro.subarray(1, 2))).toBe('');
    expect(decoder.push(euro.subarray(2))).toBe('€');
    expect(decoder.end()).toBe('');
  });

  it('feeds the parser one byte at a time with the same events as the whole stream', () => {
    for (const { text, events } of streams) {
      const bytes = encoder.encode(text);
      const decoder = new Utf8Chunks();
      const parser = new SseParser();
      const parsed: SseEvent[] = [];
      for (let index = 0; index < bytes.length; index++) {
        parsed.push(...parser.push(decoder.push(bytes.subarray(index, index + 1))));
      }
      parsed.push(...parser.push(decoder.end()));
      expect(parsed).toEqual(events);
      expect(parser.end().incomplete).toBe(false);
    }
  });

  it('drops a byte order mark split across chunks', () => {
    const decoder = new Utf8Chunks();
    const text = decoder.push(Uint8Array.of(0xef, 0xbb)) + decoder.push(Uint8Array.of(0xbf, 0x64)) + decoder.end();
    expect(text).toBe('d');
  });

  it('throws on bytes that are not UTF-8 rather than replacing them', () => {
    expect(() => new Utf8Chunks().push(Uint8Array.of(0x61, 0xff, 0x62))).toThrow(TypeError);
  });

  it('throws when the stream ends inside a character', () => {
    const decoder = new Utf8Chunks();
    expect(decoder.push(encoder.encode('😀').subarray(0, 2))).toBe('');
    expect(() => decoder.end()).toThrow(TypeError);
  });

  it('replaces undecodable bytes when asked to', () => {
    const decoder = new Utf8Chunks({ fatal: false });
    expect(decoder.push(Uint8Array.of(0x61, 0xff, 0x62)) + decoder.end()).toBe('a\uFFFDb');
  });
});

describe('scanTemplateRun', () => {
  const lead = Buffer.from('data: {"choices":[{"delta":{"content":"');
  const tail = Buffer.from('"}}]}\n\n');
  const event = (content: string) => `${lead}${content}${tail}`;
  const run = (text: string | Uint8Array, start = 0, head: Uint8Array = lead, end: Uint8Array = tail) =>
    scanTemplateRun(typeof text === 'string' ? Buffer.from(text) : text, start, head, end);

  it('reads a run of template events, joining their texts, and stops at the first that differs', () => {
    const body = `${event('Hel')}${event('lo')}${event('')}${event(' wörld 😀')}data: {"other":1}\n\n${event('late')}`;
    const read = run(body);
    expect(read).toEqual({
      end: Buffer.byteLength(body.slice(0, body.indexOf('data: {"other"'))),
      text: 'Hello wörld 😀',
      escaped: false,
    });
    expect(run(body, read?.end)).toEqual({ end: read?.end, text: '', escaped: false });
  });

  it('starts where it is told and leaves an event cut by the end of the bytes', () => {
    const body = Buffer.from(`xx${event('a')}${event('b')}`);
    for (let cut = body.length - 1; cut > 2; cut--) {
      const read = run(body.subarray(0, cut), 2);
      const whole = cut >= 2 + Buffer.byteLength(event('a'));
      expect(read, `cut at ${cut}`).toEqual({
        end: whole ? 2 + Buffer.byteLength(event('a')) : 2,
        text: whole ? 'a' : '',
        escaped: false,
      });
    }
    expect(run(body, 2)).toEqual({ end: body.length, text: 'ab', escaped: false });
  });

  it('keeps escapes as they are, flagged, and reads only valid ones', () => {
    const escapes = 'a\\"b\\\\c\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\ude00';
    expect(run(event(escapes))).toEqual({ end: Buffer.byteLength(event(escapes)), text: escapes, escaped: true });
    for (const bad of ['\\x', '\\u12', '\\u12g4', '\\u00\u0001f', '\\', '\\U0041', '\\\u0000']) {
      expect(run(`${event('ok')}${event(bad)}`), JSON.stringify(bad)).toEqual({
        end: Buffer.byteLength(event('ok')),
        text: 'ok',
        escaped: false,
      });
    }
  });

  it('stops at a raw control character or a quote the template does not expect', () => {
    for (const bad of ['a\nb', 'a\tb', 'a\u0000', 'a\u001fb', 'a"b', '\u007f"x']) {
      expect(run(`${event('ok')}${event(bad)}`), JSON.stringify(bad)).toEqual({
        end: Buffer.byteLength(event('ok')),
        text: 'ok',
        escaped: false,
      });
    }
    expect(run(`${event('ok')}${event('\u007f')}`)?.text).toBe('ok\u007f');
  });

  it('stops at a character whose bytes are not whole, and leaves a run holding bytes that are not UTF-8 to the decoder', () => {
    const ok = Buffer.from(event('ok'));
    const withBytes = (...bytes: number[]) => Buffer.concat([ok, lead, Buffer.from(bytes), tail]);
    // Structure: a lone continuation byte, a character cut by the closing quote or by ASCII.
    for (const bytes of [[0x80], [0xe2, 0x82], [0xc3, 0x61], [0xf0, 0x9f, 0x98]]) {
      expect(run(withBytes(...bytes)), bytes.join(',')).toEqual({ end: ok.length, text: 'ok', escaped: false });
    }
    // Whole-looking but invalid (overlong, surrogate, past U+10FFFF): none of the run is read.
    for (const bytes of [
      [0xc0, 0x80],
      [0xed, 0xa0, 0x80],
      [0xf4, 0x90, 0x80, 0x80],
      [0xff, 0x80, 0x80, 0x80],
    ]) {
      expect(run(withBytes(...bytes)), bytes.join(',')).toEqual({ end: 0, text: '', escaped: false });
    }
  });

  it('compares short and long templates exactly', () => {
    for (const [head, end] of [
      ['x"', '"\n\n'],
      ['data: {"t":"', '"}\n\n'],
      [`data: {"id":"${'i'.repeat(50)}","text":"`, `","pad":"${'p'.repeat(33)}"}\n\n`],
    ] as const) {
      const body = `${head}one${end}${head}two${end}`;
      const read = run(body, 0, Buffer.from(head), Buffer.from(end));
      expect(read).toEqual({ end: Buffer.byteLength(body), text: 'onetwo', escaped: false });
      // One byte changed anywhere in the second event's template ends the run before it.
      const second = Buffer.byteLength(`${head}one${end}`);
      const bytes = Buffer.from(body);
      for (let at = second; at < bytes.length; at++) {
        if (at >= second + head.length && at < second + head.length + 3) continue;
        const changed = Buffer.from(bytes);
        changed[at] = (changed[at] as number) ^ 0x01;
        expect(run(changed, 0, Buffer.from(head), Buffer.from(end)), `byte ${at}`).toEqual({
          end: second,
          text: 'one',
          escaped: false,
        });
      }
    }
  });

  it('reads a chunk a megabyte at a time, leaving the event its window cuts', () => {
    const one = Buffer.from(event('x'.repeat(1000)));
    const body = Buffer.concat(Array.from({ length: 1100 }, () => one));
    const read = run(body);
    const whole = Math.floor((1 << 20) / one.length);
    expect(read).toEqual({ end: whole * one.length, text: 'x'.repeat(1000 * whole), escaped: false });
    expect(run(body, read?.end)?.end).toBe(body.length);
  });

  it('reads random runs as a byte-by-byte reference does', () => {
    const random = seededRandom(7);
    const pieces = [
      'a',
      'tok ',
      'é',
      '中',
      '😀',
      '\\n',
      '\\"',
      '\\\\',
      '\\u00e9',
      '\\ud83d',
      '"',
      '\\',
      '\n',
      '\u0001',
      '\\q',
      '\\u00',
      '\\u0g00',
    ];
    const templates = [
      [Buffer.from('data: {"c":"'), Buffer.from('"}\n\n')],
      [lead, tail],
    ];
    for (let round = 0; round < 400; round++) {
      const [head, end] = templates[round % 2] as [Buffer, Buffer];
      const parts: Buffer[] = [];
      const count = 1 + Math.floor(random() * 40);
      for (let index = 0; index < count; index++) {
        let content = '';
        const length = Math.floor(random() * 6);
        for (let k = 0; k < length; k++) content += pieces[Math.floor(random() ** 3 * pieces.length)];
        const other = random() < 0.05;
        parts.push(Buffer.concat([other ? Buffer.from('data: {"x":"') : head, Buffer.from(content), end]));
      }
      let bytes: Uint8Array = Buffer.concat(parts);
      if (random() < 0.3) bytes = bytes.subarray(0, Math.floor(random() * bytes.length));
      // Now and then a stray byte that is not UTF-8.
      if (random() < 0.1 && bytes.length > 0) bytes[Math.floor(random() * bytes.length)] = 0xff;
      // Mostly from the start, now and then from anywhere (a run then rarely begins there).
      const start = random() < 0.8 ? 0 : Math.floor(random() * bytes.length);
      expect(run(bytes, start, head, end), `round ${round}`).toEqual(reference(bytes, start, head, end));
    }
  });
});

/** What scanTemplateRun reads, the slow way: event by event, byte by byte. */
function reference(view: Uint8Array, start: number, lead: Buffer, tail: Buffer) {
  const bytes = Buffer.from(view.buffer, view.byteOffset, view.byteLength);
  let position = start;
  const texts: Buffer[] = [];
  let escaped = false;
  for (;;) {
    if (position + lead.length + tail.length > bytes.length) break;
    if (!bytes.subarray(position, position + lead.length).equals(lead)) break;
    let at = position + lead.length;
    let need = 0;
    let closed = false;
    let hasEscape = false;
    for (;;) {
      if (at >= bytes.length) break;
      const byte = bytes[at] as number;
      if (byte >= 0x80) {
        if (byte < 0xc0) {
          if (need === 0) break;
          need--;
        } else {
          if (need !== 0) break;
          need = byte >= 0xf0 ? 3 : byte >= 0xe0 ? 2 : 1;
        }
        at++;
        continue;
      }
      if (need !== 0) break;
      if (byte === 0x22) {
        closed = true;
        break;
      }
      if (byte < 0x20) break;
      if (byte === 0x5c) {
        const next = bytes[at + 1];
        if (next === undefined) break;
        if (next === 0x75) {
          if (at + 6 > bytes.length) break;
          const hex = bytes.subarray(at + 2, at + 6).toString('latin1');
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) break;
          at += 6;
        } else if ('"\\/bfnrt'.includes(String.fromCharCode(next))) {
          at += 2;
        } else break;
        hasEscape = true;
        continue;
      }
      at++;
    }
    if (!closed) break;
    if (at + tail.length > bytes.length || !bytes.subarray(at, at + tail.length).equals(tail)) break;
    texts.push(bytes.subarray(position + lead.length, at));
    escaped ||= hasEscape;
    position = at + tail.length;
  }
  const text = Buffer.concat(texts);
  if (!isUtf8(text)) return { end: start, text: '', escaped: false };
  return { end: position, text: text.toString('utf8'), escaped: texts.length > 0 && escaped };
}
