/**
 * An incremental Server-Sent Events parser, following the WHATWG EventSource rules
 * (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation).
 * Vendors stream completions as SSE and the network cuts the body wherever it likes, so
 * the parser keeps no assumption about where a chunk ends: a line, a field, or the two
 * characters of a CRLF may straddle any boundary. It knows nothing about vendor payloads;
 * `[DONE]` and JSON are the caller's to read.
 */
import { isUtf8 } from 'node:buffer';
import { TEMPLATE_LANE } from './template-lane.js';

/** One dispatched event. `event` and `id` are null where the stream did not set them. */
export interface SseEvent {
  event: string | null;
  data: string;
  /** The last event ID the stream set; per the spec it carries over to later events. */
  id: string | null;
}

const LINE_FEED = 10;
const COLON = 58;
const SPACE = 32;
const BYTE_ORDER_MARK = 0xfeff;

export class SseParser {
  /** The start of a line whose terminator has not arrived yet. */
  private partialLine = '';
  /** The previous chunk ended with CR, so a LF opening the next chunk is the second half of that CRLF. */
  private skipLeadingLineFeed = false;
  /** A BOM is only skipped at the very start of the stream, so the check is done once. */
  private startChecked = false;
  /** Null until the current event has a `data` field; the spec's "data buffer is empty" test. */
  private data: string | null = null;
  private eventType: string | null = null;
  private lastEventId: string | null = null;
  /** Whether a field line of an event not yet ended by a blank line has been read. */
  private eventOpen = false;
  private ended = false;

  /**
   * True between events: no line begun, no field of an unfinished event read, the stream
   * start seen. Only then may a caller read whole events off a chunk itself (a decoder's
   * fast lane for its commonest event) and hand the parser the rest.
   */
  idle(): boolean {
    return (
      this.startChecked &&
      !this.eventOpen &&
      !this.skipLeadingLineFeed &&
      this.partialLine.length === 0 &&
      this.data === null
    );
  }

  /** Characters held for an event not yet ended: its unterminated line and its data so far. */
  buffered(): number {
    return this.partialLine.length + (this.data === null ? 0 : this.data.length);
  }

  /** Feeds the next piece of the stream; returns the events it completed, in order. */
  push(chunk: string): SseEvent[] {
    if (this.ended) throw new Error('SseParser.push called after end()');
    const events: SseEvent[] = [];
    if (chunk.length === 0) return events;

    let position = 0;
    if (!this.startChecked) {
      this.startChecked = true;
      if (chunk.charCodeAt(0) === BYTE_ORDER_MARK) position = 1;
    }
    if (this.skipLeadingLineFeed) {
      this.skipLeadingLineFeed = false;
      if (chunk.charCodeAt(position) === LINE_FEED) position++;
    }

    // Both terminators are searched with indexOf and each search is reused until the scan
    // passes it, so a chunk is scanned a constant number of times however many lines it holds.
    let nextLineFeed = chunk.indexOf('\n', position);
    let nextCarriageReturn = chunk.indexOf('\r', position);
    while (nextLineFeed !== -1 || nextCarriageReturn !== -1) {
      let lineEnd: number;
      let nextPosition: number;
      if (nextCarriageReturn !== -1 && (nextLineFeed === -1 || nextCarriageReturn < nextLineFeed)) {
        lineEnd = nextCarriageReturn;
        nextPosition = lineEnd + 1;
        if (nextPosition === chunk.length) {
          this.skipLeadingLineFeed = true;
        } else if (chunk.charCodeAt(nextPosition) === LINE_FEED) {
          nextPosition++;
        }
      } else {
        lineEnd = nextLineFeed;
        nextPosition = lineEnd + 1;
      }

      let line = chunk.slice(position, lineEnd);
      if (this.partialLine.length > 0) {
        line = this.partialLine + line;
        this.partialLine = '';
      }
      this.processLine(line, events);

      position = nextPosition;
      if (nextLineFeed !== -1 && nextLineFeed < position) nextLineFeed = chunk.indexOf('\n', position);
      if (nextCarriageReturn !== -1 && nextCarriageReturn < position) {
        nextCarriageReturn = chunk.indexOf('\r', position);
      }
    }

    if (position < chunk.length) {
      this.partialLine += position === 0 ? chunk : chunk.slice(position);
    }
    return events;
  }

  /**
   * Ends the stream. The spec discards an event that no blank line ended, so nothing is
   * dispatched here; `events` is returned so callers drain `end()` exactly like `push()`,
   * and `incomplete` says whether such an event (or an unterminated line) was dropped,
   * which is how a caller tells a stream cut mid-event from one that ended cleanly.
   */
  end(): { events: SseEvent[]; incomplete: boolean } {
    this.ended = true;
    const incomplete = this.partialLine.length > 0 || this.eventOpen;
    this.partialLine = '';
    this.data = null;
    this.eventType = null;
    this.eventOpen = false;
    return { events: [], incomplete };
  }

  private processLine(line: string, events: SseEvent[]): void {
    if (line.length === 0) {
      this.dispatch(events);
      return;
    }
    if (line.charCodeAt(0) === COLON) return; // a comment, which is also how keep-alives are sent

    this.eventOpen = true;
    const colon = line.indexOf(':');
    let field: string;
    let value: string;
    if (colon === -1) {
      field = line;
      value = '';
    } else {
      field = line.slice(0, colon);
      const valueStart = line.charCodeAt(colon + 1) === SPACE ? colon + 2 : colon + 1;
      value = line.slice(valueStart);
    }

    switch (field) {
      case 'data':
        this.data = this.data === null ? value : `${this.data}\n${value}`;
        break;
      case 'event':
        this.eventType = value;
        break;
      case 'id':
        // The spec ignores an id containing NUL, so a corrupt id cannot replace a good one.
        if (!value.includes('\0')) this.lastEventId = value;
        break;
      default:
        // `retry` only tunes a browser's reconnection delay, and the spec ignores unknown fields.
        break;
    }
  }

  private dispatch(events: SseEvent[]): void {
    this.eventOpen = false;
    const data = this.data;
    const eventType = this.eventType;
    this.data = null;
    this.eventType = null;
    if (data === null) return;
    events.push({
      // An empty event type or id means "not set" in the spec (the browser's default type applies).
      event: eventType === null || eventType.length === 0 ? null : eventType,
      data,
      id: this.lastEventId === null || this.lastEventId.length === 0 ? null : this.lastEventId,
    });
  }
}

/** Whether the event is the `data: [DONE]` sentinel OpenAI-style streams end with (whitespace around it allowed). */
export function isDone(event: SseEvent): boolean {
  return event.data === '[DONE]' || (event.data.length < 16 && event.data.trim() === '[DONE]');
}

export interface Utf8ChunksOptions {
  /**
   * Throw a TypeError on bytes that are not UTF-8 (the default), rather than replacing
   * them with U+FFFD. A vendor that sends invalid UTF-8 is sending something other than
   * its wire format, and replacement would hide that.
   */
  fatal?: boolean;
}

/**
 * Turns a byte stream into text. A multi-byte character may be split across chunks,
 * so the decoder keeps the unfinished bytes until the rest arrives. A BOM at the very
 * start is dropped.
 */
export class Utf8Chunks {
  /** The global decoder's instance type; with no DOM lib, `TextDecoder` names only the value. */
  private readonly decoder: InstanceType<typeof TextDecoder>;

  constructor(options: Utf8ChunksOptions = {}) {
    this.decoder = new TextDecoder('utf-8', { fatal: options.fatal ?? true });
  }

  /** The text completed by these bytes; bytes of an unfinished character are held back. */
  push(bytes: Uint8Array): string {
    return this.decoder.decode(bytes, { stream: true });
  }

  /** Ends the stream; with `fatal`, throws if it stopped inside a multi-byte character. */
  end(): string {
    return this.decoder.decode();
  }
}

/** What {@link scanTemplateRun} read. */
export interface TemplateRun {
  /** Where the run ends: the byte after its last event's blank line (`start` where it read none). */
  end: number;
  /** The texts of its events, in order and joined, as JSON string content: escapes are not read. */
  text: string;
  /** Whether `text` holds an escape. */
  escaped: boolean;
}

/**
 * Reads, straight off the bytes from `start`, a run of events that all follow one
 * template: the bytes `lead`, a JSON string's content (no quote, backslash or control
 * character but in a valid escape; UTF-8 characters whole), then the bytes `tail`,
 * which must begin with the string's closing quote and end with the blank line. The run
 * stops before the first event that differs or is cut by the end of `bytes`. Null where
 * this thread has no WebAssembly (the caller then reads the text as before).
 *
 * This is the joined fast lane of a long completion, where nearly every event is such a
 * text delta: a small WebAssembly function compares each event's fixed bytes 16 at a
 * time and copies its text out, so the bytes of those events are never decoded to a
 * string or matched by a regular expression, the two costs that remained.
 */
export function scanTemplateRun(
  bytes: Uint8Array,
  start: number,
  lead: Uint8Array,
  tail: Uint8Array,
): TemplateRun | null {
  const lane = templateLane();
  if (lane === null || lead.length === 0 || tail.length === 0) return null;
  // No event of the template begins here (a stream of calls, say): no need to copy the chunk.
  const view = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.length - start < lead.length || view.compare(lead, 0, lead.length, start, start + lead.length) !== 0) {
    return { end: start, text: '', escaped: false };
  }
  // A chunk is read a megabyte at a time at most, so the scanner's memory stays small; an
  // event the window cuts is left to the caller, like one the chunk cuts.
  const length = Math.min(bytes.length - start, WINDOW);
  // The lead, the tail and the lead again (a tail and the next lead are compared at once),
  // the input and the texts, each followed by room for a block read or written past its
  // end (the scanner stores 16 bytes at a time and keeps those it needs).
  const inputAt = 2 * lead.length + tail.length + BLOCK;
  const outputAt = inputAt + length + BLOCK;
  const memory = laneMemory(lane, outputAt + length + 2 * BLOCK);
  memory.set(lead, 0);
  memory.set(tail, lead.length);
  memory.set(lead, lead.length + tail.length);
  memory.set(start === 0 && length === bytes.length ? bytes : bytes.subarray(start, start + length), inputAt);
  const end = lane.scan(inputAt, inputAt + length, 0, lead.length, tail.length, outputAt) - inputAt;
  const written = lane.written.value;
  const flags = lane.flags.value;
  if (written === 0) return { end: start + end, text: '', escaped: false };
  let text: string;
  if ((flags & NON_ASCII) === 0) text = memory.toString('latin1', outputAt, outputAt + written);
  else {
    // The scanner checks only that each character has its bytes; a byte no character may
    // hold, an overlong form or a surrogate leaves the whole run to the decoder, as before.
    const utf8 = memory.subarray(outputAt, outputAt + written);
    if (!isUtf8(utf8)) return { end: start, text: '', escaped: false };
    text = utf8.toString('utf8');
  }
  return { end: start + end, text, escaped: (flags & ESCAPED) !== 0 };
}

const BLOCK = 16;
const WINDOW = 1 << 20;
const ESCAPED = 1;
const NON_ASCII = 2;

interface TemplateLane {
  memory: { buffer: ArrayBuffer; grow(pages: number): number };
  scan(p: number, end: number, lead: number, leadLength: number, tailLength: number, out: number): number;
  written: { value: number };
  flags: { value: number };
}

interface WebAssemblyApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { exports: unknown };
}

/** The scanner, compiled once per thread; null where WebAssembly (or its SIMD) is not there. */
let lane: TemplateLane | null | undefined;
/** A view of the scanner's memory, renewed when the memory grows. */
let laneView: Buffer | null = null;

function templateLane(): TemplateLane | null {
  if (lane !== undefined) return lane;
  lane = null;
  const api = (globalThis as { WebAssembly?: WebAssemblyApi }).WebAssembly;
  if (api === undefined) return lane;
  try {
    const instance = new api.Instance(new api.Module(Buffer.from(TEMPLATE_LANE, 'base64')));
    lane = instance.exports as TemplateLane;
  } catch {
    // No SIMD on this machine (or WebAssembly refused): the string lane reads these events.
  }
  return lane;
}

function laneMemory(scanner: TemplateLane, size: number): Buffer {
  if (laneView === null || laneView.buffer !== scanner.memory.buffer || laneView.length < size) {
    const have = scanner.memory.buffer.byteLength;
    if (have < size) scanner.memory.grow(Math.ceil((size - have) / 65536));
    laneView = Buffer.from(scanner.memory.buffer);
  }
  return laneView;
}
