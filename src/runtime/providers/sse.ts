/**
 * An incremental Server-Sent Events parser, following the WHATWG EventSource rules
 * (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation).
 * Vendors stream completions as SSE and the network cuts the body wherever it likes, so
 * the parser keeps no assumption about where a chunk ends: a line, a field, or the two
 * characters of a CRLF may straddle any boundary. It knows nothing about vendor payloads;
 * `[DONE]` and JSON are the caller's to read.
 */

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

/** Whether the event is the `data: [DONE]` sentinel OpenAI-style streams end with. */
export function isDone(event: SseEvent): boolean {
  return event.data === '[DONE]';
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
