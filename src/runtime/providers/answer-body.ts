/**
 * Reading an answer's body as it arrives: its kind decided by its media type or its first
 * byte, a whole JSON answer read within bounds, an event stream read chunk by chunk
 * through the wire's decoder (its plain text events through the fast lanes, the rest
 * through the SSE parser), and the idle deadline that ends an answer gone quiet.
 */
import { isAscii } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import { StringDecoder } from 'node:string_decoder';
import { bodyError, type CancelSignal, readText } from './http.js';
import { SseParser } from './sse.js';
import { ProviderError, type StreamPart } from './types.js';
import type { WireDecoder } from './wires.js';

/** The blank line that ends an event (LF framing, which is what vendors send). */
const BLANK_LINE = Buffer.from('\n\n');

/** The largest whole JSON answer read (a server that ignored `stream`). */
const WHOLE_BODY_LIMIT = 16 * 1024 * 1024;
/** The longest single event: past it a body is not an event stream this client will hold in memory. */
const MAX_EVENT_CHARS = 64 * 1024 * 1024;
/**
 * The most an event stream may send: far past any model's output limit, so only a server
 * that never ends (text deltas forever, which the idle deadline cannot see) reaches it.
 */
const MAX_STREAM_BYTES = 256 * 1024 * 1024;

/**
 * The idle deadline of one call. `moved()` is called when the answer produces something
 * (its headers, an event, a chunk of a whole body); one timer, re-armed only when it
 * fires early, checks the time since, so a busy stream costs a clock read per chunk.
 */
export class IdleWatch {
  readonly #ms: number;
  readonly #onIdle: () => void;
  #last = performance.now();
  #timer: NodeJS.Timeout | null;
  fired = false;

  constructor(ms: number, onIdle: () => void) {
    this.#ms = ms;
    this.#onIdle = onIdle;
    this.#timer = setTimeout(this.#check, ms);
  }

  moved(): void {
    this.#last = performance.now();
  }

  #check = (): void => {
    const quiet = performance.now() - this.#last;
    if (quiet >= this.#ms - 1) {
      this.#timer = null;
      this.fired = true;
      this.#onIdle();
    } else {
      this.#timer = setTimeout(this.#check, this.#ms - quiet);
    }
  };

  stop(): void {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
  }
}

/** The body's next chunk; a failure to read it is the vendor's (a cut stream) or the caller's (a cancel). */
async function nextChunk(
  chunks: AsyncIterator<Uint8Array>,
  provider: string,
  signal: CancelSignal,
): Promise<IteratorResult<Uint8Array>> {
  try {
    return await chunks.next();
  } catch (error) {
    throw bodyError(error, provider, signal);
  }
}

/** Stops reading a body: the transport drains what is left for a moment, then closes the connection. */
async function closeIterator(chunks: AsyncIterator<Uint8Array>): Promise<void> {
  await Promise.resolve(chunks.return?.()).catch(() => undefined);
}

export async function closeBody(body: AsyncIterable<Uint8Array>): Promise<void> {
  await closeIterator(body[Symbol.asyncIterator]());
}

const WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);
/** The first bytes of an event stream's lines: `:` (a comment), and d, e, i, r (data, event, id, retry). */
const SSE_OPENERS = new Set([0x3a, 0x64, 0x65, 0x69, 0x72]);

/**
 * Reads the body up to its first byte that is not whitespace: `{` or `[` means a whole
 * JSON answer, anything else an event stream. The bytes read are handed back in front of
 * the rest, so the caller reads the body from its start.
 */
export async function sniff(
  chunks: AsyncIterator<Uint8Array>,
  provider: string,
  signal: CancelSignal,
): Promise<{ json: boolean; events: boolean; chunks: AsyncIterator<Uint8Array> }> {
  const held: Uint8Array[] = [];
  let first: number | null = null;
  let seen = Buffer.alloc(0);
  while (first === null) {
    const next = await nextChunk(chunks, provider, signal);
    if (next.done) break;
    held.push(next.value);
    // Only the start is looked at, so what is kept to look at stays small.
    seen = Buffer.concat([seen, next.value.subarray(0, 64)]);
    // A UTF-8 byte order mark (which the network may cut anywhere) is not the first byte.
    let from = 0;
    if (seen[0] === 0xef) {
      if (seen.length < 3) continue;
      if (seen[1] === 0xbb && seen[2] === 0xbf) from = 3;
    }
    const at = seen.subarray(from).findIndex((byte) => !WHITESPACE.has(byte));
    if (at >= 0) first = seen[from + at] as number;
    else seen = seen.subarray(0, from);
  }
  return {
    json: first === 0x7b || first === 0x5b,
    // A comment or a field name opens the body: it is an event stream, whatever it was labelled.
    events: first !== null && SSE_OPENERS.has(first),
    chunks: {
      next: () =>
        held.length > 0 ? Promise.resolve({ value: held.shift() as Uint8Array, done: false }) : chunks.next(),
      return: () => chunks.return?.() ?? Promise.resolve({ value: undefined, done: true }),
    },
  };
}

/**
 * A whole JSON answer (a server that ignored `stream`), parsed. It was generated before it
 * was sent, so all of it must arrive within one idle deadline of the headers: bytes
 * trickled (whitespace, say) do not keep it open.
 */
export async function readWholeAnswer(chunks: AsyncIterator<Uint8Array>, provider: string): Promise<unknown> {
  const read = await readText({ [Symbol.asyncIterator]: () => chunks }, WHOLE_BODY_LIMIT, provider);
  // RFC 8259 lets a parser ignore a byte order mark; JSON.parse does not.
  const text = read.charCodeAt(0) === 0xfeff ? read.slice(1) : read;
  if (text.length >= WHOLE_BODY_LIMIT) {
    throw new ProviderError({
      kind: 'undecodable',
      provider,
      message: `${provider}: the answer is larger than ${WHOLE_BODY_LIMIT} bytes of JSON`,
    });
  }
  try {
    return JSON.parse(text);
  } catch (cause) {
    throw new ProviderError({
      kind: 'undecodable',
      provider,
      message: `${provider}: the answer is not JSON`,
      cause,
    });
  }
}

/** What reading an event stream needs: the wire's decoder, where its parts and texts go, and how the answer is watched. */
export interface EventStreamOptions {
  provider: string;
  decoder: WireDecoder;
  emit: (parts: StreamPart[]) => void;
  onText: (text: string) => void;
  /** A completion gathered whole: the texts of a run of plain events come joined, read off the chunk's bytes. */
  joined: boolean;
  signal: CancelSignal;
  watch: IdleWatch;
  /** Whether the body is known to be an event stream: by its media type, or by how it opens. */
  evident: boolean;
  contentType: string | null;
}

/**
 * Reads an event stream to its end through the wire's decoder: to the vendor's terminator
 * (the rest of the body is not waited for), or to the body's end, when the decoder says
 * whether the answer was complete.
 */
export async function readEventStream(chunks: AsyncIterator<Uint8Array>, options: EventStreamOptions): Promise<void> {
  const { provider, decoder, emit, signal, watch } = options;
  const reader = new EventReader(options);
  let seen = 0;
  // Only a failure to read the body is the vendor's (a cut stream, a cancel); one thrown
  // while decoding is a ProviderError already, and one thrown by a caller's hook is the
  // caller's, which no retry would mend. Either way the request is given up.
  for (;;) {
    const next = await nextChunk(chunks, provider, signal);
    if (next.done) break;
    const chunk = next.value;
    try {
      reader.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    } catch (error) {
      await closeIterator(chunks);
      throw error;
    }
    if (reader.events !== seen) {
      seen = reader.events;
      watch.moved();
    }
    if (decoder.finished) {
      // The vendor said the answer is complete: the rest of the body is not waited for.
      await closeIterator(chunks);
      emit(decoder.finish(false));
      return;
    }
  }
  const incomplete = reader.end();
  // Bytes that were not events under a media type that did not say so: not this wire at
  // all (a sign-in page). No bytes at all is a cut stream, told as such below.
  if (!options.evident && reader.events === 0 && reader.received > 0) {
    const { contentType } = options;
    throw new ProviderError({
      kind: 'undecodable',
      provider,
      message: `${provider}: the answer (${contentType === null ? 'with no Content-Type' : `Content-Type ${JSON.stringify(contentType)}`}) is neither an event stream nor JSON.`,
    });
  }
  emit(decoder.finish(incomplete));
}

/**
 * An event stream's chunks decoded and read: runs of plain text events through the
 * decoder's fast lanes, the rest through the SSE parser, each event's parts emitted as
 * it is read. The hot path: no promise per part, only per network chunk.
 */
class EventReader {
  readonly #provider: string;
  readonly #decoder: WireDecoder;
  readonly #emit: (parts: StreamPart[]) => void;
  readonly #joined: boolean;
  readonly #parser = new SseParser();
  // StringDecoder keeps a character split across chunks whole, at several times TextDecoder's speed.
  readonly #utf8 = new StringDecoder('utf8');
  // Whether the decoder holds no part of a character: then an all-ASCII chunk (most of them)
  // is its own text, copied as Latin-1 in about half the time UTF-8 decoding takes.
  #whole = true;
  /** Every event read (a ping, say, whatever its parts) is the stream moving; comments are not. */
  events = 0;
  /** The body's bytes read so far. */
  received = 0;
  readonly #counted: (text: string) => void;
  // A completion gathered whole reads the plain text events of a chunk off its bytes.
  readonly #scanBytes: WireDecoder['scanBytes'];
  // Before the lane knows the stream's plain event, the first events go to the parser one
  // by one, so the lane can start within the first chunk; after these many, a stream
  // without plain events goes to the parser a chunk at a time.
  #learning = 8;

  constructor(options: EventStreamOptions) {
    this.#provider = options.provider;
    this.#decoder = options.decoder;
    this.#emit = options.emit;
    this.#joined = options.joined;
    const { onText } = options;
    this.#counted = (text: string) => {
      this.events++;
      onText(text);
    };
    this.#scanBytes = options.joined ? options.decoder.scanBytes?.bind(options.decoder) : undefined;
  }

  #decode(bytes: Buffer): string {
    if (this.#whole && isAscii(bytes)) return bytes.toString('latin1');
    // The decoder holds back bytes only when the chunk ends inside a character.
    if (bytes.length > 0) this.#whole = (bytes[bytes.length - 1] as number) < 0x80;
    return this.#utf8.write(bytes);
  }

  /** One chunk of the body's bytes: its plain events off the bytes where the lane can, the rest decoded and read. */
  push(bytes: Buffer): void {
    const parser = this.#parser;
    const decoder = this.#decoder;
    const scanBytes = this.#scanBytes;
    let from = 0;
    if (scanBytes !== undefined && this.#whole) {
      for (;;) {
        if (parser.idle()) {
          const read = this.#whole ? scanBytes(bytes, from, this.#counted) : from;
          if (read >= 0) from = read;
          if (read >= 0 || this.#learning === 0) break;
          this.#learning--;
        }
        // The next event goes to the parser first: one begun in an earlier chunk, or one
        // the lane has yet to learn from.
        const cut = bytes.indexOf(BLANK_LINE, from);
        if (cut < 0) break;
        this.#text(this.#decode(bytes.subarray(from, cut + 2)));
        from = cut + 2;
        if (!parser.idle() || decoder.finished) break;
      }
    }
    if (from < bytes.length && !decoder.finished) this.#text(this.#decode(from === 0 ? bytes : bytes.subarray(from)));
    this.received += bytes.length;
    if (this.received > MAX_STREAM_BYTES) {
      throw new ProviderError({
        kind: 'undecodable',
        provider: this.#provider,
        message: `${this.#provider}: the stream sent more than ${MAX_STREAM_BYTES} bytes without ending; no completion is that long`,
      });
    }
    if (parser.buffered() > MAX_EVENT_CHARS) {
      throw new ProviderError({
        kind: 'undecodable',
        provider: this.#provider,
        message: `${this.#provider}: an event of the stream is longer than ${MAX_EVENT_CHARS} characters`,
      });
    }
  }

  /** One decoded chunk: runs of plain events through the fast lane, the rest through the parser. */
  #text(input: string): void {
    const parser = this.#parser;
    const decoder = this.#decoder;
    let text = input;
    for (;;) {
      // Past the terminator nothing is read, whatever the chunk still holds.
      if (decoder.finished) return;
      // The fast lane reads runs of plain text events; the parser takes whatever breaks a run.
      if (decoder.scan && parser.idle()) {
        const read = decoder.scan(text, this.#counted, this.#joined);
        if (read > 0) text = text.slice(read);
      }
      const cut = text.indexOf('\n\n');
      if (cut < 0 || !decoder.scan) {
        for (const event of parser.push(text)) {
          this.events++;
          this.#emit(decoder.event(event));
        }
        return;
      }
      // One event at a time through the parser, so the fast lane can resume after it.
      for (const event of parser.push(text.slice(0, cut + 2))) {
        this.events++;
        this.#emit(decoder.event(event));
      }
      text = text.slice(cut + 2);
      if (text.length === 0) return;
    }
  }

  /** The body has ended: what the decoder still held is read; whether the last event was cut in half. */
  end(): boolean {
    for (const event of this.#parser.push(this.#utf8.end())) this.#emit(this.#decoder.event(event));
    return this.#parser.end().incomplete;
  }
}
