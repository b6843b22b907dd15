/**
 * The fast lane of the streams: the plain text events that are almost every event of a
 * long completion, read without JSON.parse by a template each wire proves on its first
 * plain event, then off a chunk's text or bytes while the SSE parser is between events.
 */
import { scanTemplateRun } from './sse.js';

/**
 * Reads plain text-delta events without JSON.parse. Almost every event of a long
 * completion is one, and parsing each is most of what streaming costs. The first plain
 * event of a stream is checked field by field: `marker` ends with the opening quote of
 * its text, the text's object must close right after the text, and none of `absent`
 * may follow it. Its bytes before and after the text then become a template: a later
 * event identical but for a quote-free text is the same JSON with another text, read by
 * two comparisons. Anything else returns null and is parsed whole.
 */
export class PlainText {
  readonly #marker: string;
  readonly #plain: PlainCheck;
  /** The template: what comes before and after the text of a plain event ('' until learned). */
  #prefix = '';
  #suffix = '';
  /** The fast lane's patterns for each framing (`head`), built from the template. */
  readonly #patterns = new Map<string, FastLane>();
  /** The template as bytes for the byte lane: for `head`, its lead and its tail. */
  #bytes: { head: string; lead: Uint8Array; tail: Uint8Array } | null = null;
  /** Events read by the template so far: the lane's patterns are compiled only for a stream that has many. */
  #matched = 0;

  constructor(marker: string, plain: PlainCheck) {
    this.#marker = marker;
    this.#plain = plain;
  }

  read(data: string): string | null {
    const prefix = this.#prefix;
    const suffix = this.#suffix;
    // slice-and-compare, not startsWith/endsWith: with a search string that is not a
    // constant, V8's startsWith is several times slower here, and this runs per event.
    const end = data.length - suffix.length;
    if (
      prefix.length > 0 &&
      end >= prefix.length &&
      data.slice(0, prefix.length) === prefix &&
      data.slice(end) === suffix
    ) {
      const raw = data.slice(prefix.length, end);
      if (raw.indexOf('"') < 0 && !hasControl(raw)) {
        this.#matched++;
        return jsonStringText(raw);
      }
    }
    return this.#learn(data);
  }

  /**
   * Reads, straight off a chunk of the stream, the plain events at its start: each
   * exactly `head` (the SSE lines before the data, then the template's prefix), a text
   * with no quote or control character (escapes are fine), the suffix, and the blank
   * line. Returns how many characters it read; the SSE parser takes the rest. Events
   * framed any other way (CRLF, comments, other fields) simply end the fast lane.
   *
   * With `joined`, `onText` gets the run's texts as one string, read by a native replace
   * of each event by its text: no object and no call per event.
   */
  scan(text: string, head: string, onText: (text: string) => void, joined = false): number {
    // A template carries the completion's id, so its patterns serve one stream: compiling
    // them costs more than a short answer's few events, read one by one, ever would.
    if (this.#prefix.length === 0 || this.#matched < LANE_AFTER_EVENTS) return 0;
    let patterns = this.#patterns.get(head);
    if (!patterns) {
      patterns = fastLanePatterns(head + this.#prefix, this.#suffix);
      this.#patterns.set(head, patterns);
    }
    const { run, each } = patterns;
    if (joined) return this.#joined(text, run, each, onText);
    each.lastIndex = 0;
    let position = 0;
    for (let match = each.exec(text); match !== null; match = each.exec(text)) {
      const value = match[1] as string;
      if (value !== '') onText(unescaped(value));
      position = each.lastIndex;
    }
    return position;
  }

  /**
   * The joined fast lane: one pass finds where the run ends, a second replaces each of its
   * events by its text. Only the run is handed to replace, so what follows it is never
   * copied, however often a stream breaks its runs.
   */
  #joined(text: string, run: RegExp, each: RegExp, onText: (text: string) => void): number {
    // Always matches (a run may be empty); lastIndex is then where the run ends.
    run.lastIndex = 0;
    run.test(text);
    const end = run.lastIndex;
    if (end === 0) return 0;
    const texts = (end === text.length ? text : text.slice(0, end)).replace(each, '$1');
    if (texts !== '') onText(unescaped(texts));
    return end;
  }

  /** The byte lane ({@link WireDecoder.scanBytes}): the template's events, read before decoding. */
  scanBytes(bytes: Uint8Array, start: number, head: string, onText: (text: string) => void): number {
    if (this.#prefix.length === 0) return -1;
    let template = this.#bytes;
    if (template === null || template.head !== head) {
      template = { head, lead: Buffer.from(head + this.#prefix), tail: Buffer.from(`${this.#suffix}\n\n`) };
      this.#bytes = template;
    }
    const run = scanTemplateRun(bytes, start, template.lead, template.tail);
    if (run === null) return -1;
    if (run.text !== '') onText(run.escaped ? (JSON.parse(`"${run.text}"`) as string) : run.text);
    return run.end;
  }

  #learn(data: string): string | null {
    const at = data.indexOf(this.#marker);
    if (at < 0 || data.charCodeAt(0) !== 123 || data.charCodeAt(data.length - 1) !== 125) return null;
    const start = at + this.#marker.length;
    let quote = data.indexOf('"', start);
    for (;;) {
      if (quote < 0) return null;
      let backslashes = 0;
      while (data.charCodeAt(quote - 1 - backslashes) === 92) backslashes++;
      if (backslashes % 2 === 0) break;
      quote = data.indexOf('"', quote + 1);
    }
    if (data.charCodeAt(quote + 1) !== 125) return null;
    if (hasControl(data.slice(start, quote))) return null;
    const prefix = data.slice(0, start);
    const suffix = data.slice(quote);
    if (prefix !== this.#prefix || suffix !== this.#suffix) {
      // A new template is proved, not guessed: the event with a probe in place of its text
      // must parse to a plain text delta whose text is the probe. That holds the template's
      // gap to be the text itself, and the rest to say nothing else (no finish reason, no
      // usage, no error, no call), however the vendor spaces or orders its JSON; every event
      // that matches the template then means what the probe means, with its own text.
      let probe: unknown;
      try {
        probe = JSON.parse(`${prefix}${PROBE}${suffix}`);
      } catch {
        return null;
      }
      if (!this.#plain(probe, PROBE)) return null;
      this.#patterns.clear();
      this.#bytes = null;
      this.#prefix = prefix;
      this.#suffix = suffix;
    }
    return jsonStringText(data.slice(start, quote));
  }
}

/** Whether a text holds a raw control character: JSON forbids one inside a string, so the full parse must see it. */
function hasControl(text: string): boolean {
  for (let index = 0; index < text.length; index++) if (text.charCodeAt(index) < 0x20) return true;
  return false;
}

/**
 * The fast lane's two patterns for one event template, both sticky so each match must
 * start exactly where the last one ended. `each` is one plain event, capturing its text
 * (global too, so replace walks every event of a run); `run` is any number of them.
 */
/** The template must have read this many events of a stream before the fast lane's patterns are compiled for it. */
const LANE_AFTER_EVENTS = 8;

interface FastLane {
  each: RegExp;
  run: RegExp;
}

/**
 * Compiled fast-lane patterns, shared by every stream of this thread: one vendor's events
 * look alike from one completion to the next, so a pattern is compiled once, not per call.
 */
const patternCache = new Map<string, FastLane>();
const PATTERN_CACHE_SIZE = 64;

function fastLanePatterns(lead: string, suffix: string): FastLane {
  const key = `${lead}\u0000${suffix}`;
  const cached = patternCache.get(key);
  // One pair serves every stream: a scan sets lastIndex and runs to its end synchronously.
  if (cached) return cached;
  // The text is a JSON string's content: no quote, backslash or control character (a line
  // break among them) but in a valid escape. Written as an unrolled loop, which irregexp
  // runs without a backtrack point per character.
  const event = (text: string) => `${escapeRegExp(lead)}${text}${escapeRegExp(suffix)}\\n\\n`;
  const plain = '[^"\\\\\\u0000-\\u001f]*';
  const text = `${plain}(?:\\\\(?:["\\\\/bfnrt]|u[0-9a-fA-F]{4})${plain})*`;
  const lane = { each: new RegExp(event(`(${text})`), 'gy'), run: new RegExp(`(?:${event(text)})*`, 'y') };
  if (patternCache.size >= PATTERN_CACHE_SIZE) patternCache.delete(patternCache.keys().next().value as string);
  patternCache.set(key, lane);
  return lane;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The text of a JSON string's content that the fast lane's pattern has checked is well formed. */
function unescaped(raw: string): string {
  return raw.indexOf('\\') < 0 ? raw : (JSON.parse(`"${raw}"`) as string);
}

function jsonStringText(raw: string): string | null {
  if (raw.indexOf('\\') < 0) return raw;
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return null;
  }
}

/**
 * Whether a parsed event is a plain text delta carrying `text` and nothing else: what the
 * decoder's full parse would read as that one text delta, changing nothing more.
 */
export type PlainCheck = (event: unknown, text: string) => boolean;

/** The text put in a candidate template's gap to prove what the gap is. */
const PROBE = 'io-harness template probe';
