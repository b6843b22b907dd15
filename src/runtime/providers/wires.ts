/**
 * The vendors' own wire formats. Each wire maps our transcript onto the vendor's
 * block types and decodes the vendor's stream into {@link StreamPart}s. The decoders
 * read events with narrow hand-written checks rather than a schema library: they sit
 * on the hottest path there is (every streamed event of every agent) and in every
 * agent thread, whose start cost counts (docs/ARCHITECTURE.md).
 */
import { imagesNotShown, shownImages } from '../images.js';
import { keptOfSent, type ModelRequest, type ToolCall, type TranscriptEntry } from '../provider.js';
import { scrubText } from '../secrets.js';
import type { WireRequest } from './http.js';
import type { SseEvent } from './sse.js';
import { isDone, scanTemplateRun } from './sse.js';
import { type CallUsage, type ModelInfo, ProviderError, type StreamPart } from './types.js';

export interface WireConfig {
  /** The provider's name in errors and the trace. */
  name: string;
  baseUrl: string;
  model: string;
  /** Auth and vendor headers, already resolved. */
  headers: Record<string, string>;
  maxTokens: number | null;
  /** Send `prompt_cache_key` in the body (the vendors that read it). */
  promptCacheKey: boolean;
  /** Mark the system block as a cache breakpoint (OpenRouter's marker on the OpenAI shape). */
  systemCacheMarker: boolean;
  /** Extra top-level body fields (OpenRouter's `usage: { include: true }`). */
  extraBody: Record<string, unknown>;
  /** Send the images tools attach (the latest ones); false for a model that takes text only. */
  images: boolean;
}

export interface WireDecoder {
  /**
   * Optional fast lane: reads plain text events straight off a chunk while the SSE
   * parser is between events, calling `onText` for each; returns the characters read.
   * With `joined`, the texts of a run of such events come as one call, their concatenation.
   */
  scan?(text: string, onText: (text: string) => void, joined?: boolean): number;
  /**
   * Optional byte lane, the joined fast lane before decoding: reads the plain text events
   * from `start` of a chunk's bytes (where the SSE parser is between events), giving
   * `onText` their texts joined; returns the byte where it stopped (`start` if it read
   * none), or -1 while it cannot read any (no plain event seen yet).
   */
  scanBytes?(bytes: Uint8Array, start: number, onText: (text: string) => void): number;
  /**
   * The vendor's terminator has arrived (`data: [DONE]`, `message_stop`): the answer is
   * complete, nothing after it is read, and the caller stops reading the body.
   */
  readonly finished: boolean;
  /** The parts one event carries. Throws a ProviderError for an undecodable event or a vendor-reported error. */
  event(event: SseEvent): StreamPart[];
  /** The closing parts; throws `truncated` when the vendor never said it was done. */
  finish(incomplete: boolean): StreamPart[];
  /** The parts of a whole, non-streamed answer (a server that ignored `stream`). */
  whole(body: unknown): StreamPart[];
}

export interface Wire {
  vendor: 'openai' | 'anthropic';
  request(request: ModelRequest, config: WireConfig): WireRequest;
  decoder(config: WireConfig): WireDecoder;
  models(config: WireConfig): WireRequest;
  parseModels(body: unknown): ModelInfo[];
}

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function num(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}

function parseJson(data: string, provider: string): unknown {
  try {
    return JSON.parse(data);
  } catch (cause) {
    throw new ProviderError({
      kind: 'undecodable',
      provider,
      message: `${provider}: the stream carried an event that is not JSON: ${JSON.stringify(scrubText(data).slice(0, 120))}`,
      cause,
    });
  }
}

/**
 * A tool call's arguments. Arguments that are not a JSON object are the model's
 * mistake, not the wire's: the call is kept, marked invalid (args `{}`), so the run
 * tells the model what was wrong and goes on, instead of failing the model call.
 */
function parseArguments(
  text: string,
  name: string,
): { args: Record<string, unknown>; invalid?: { reason: string; sent: string } } {
  if (text.trim() === '') return { args: {} };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { args: {}, invalid: invalidArguments(name, `not JSON (${(error as Error).message})`, text) };
  }
  return argumentsOf(value, name, text);
}

/** Arguments already decoded (Anthropic's `input`): an object, or the call marked invalid. */
function argumentsOf(
  value: unknown,
  name: string,
  text: string,
): { args: Record<string, unknown>; invalid?: { reason: string; sent: string } } {
  if (isObject(value)) return { args: value };
  const what = value === null ? 'null' : Array.isArray(value) ? 'an array' : `a ${typeof value}`;
  return { args: {}, invalid: invalidArguments(name, `JSON ${what}, not an object`, text) };
}

function invalidArguments(name: string, what: string, text: string): { reason: string; sent: string } {
  return {
    reason: `the arguments to ${keptOfSent(name)} are ${what}, so it was not run; the arguments must be a JSON object whose keys are its parameters. Send the call again.`,
    sent: keptOfSent(text),
  };
}

/**
 * The HTTP status each vendor's error types stand for (Anthropic documents one per type;
 * OpenAI's `type` and `code` strings name the same classes), so an error sent inside a
 * 200 or mid-stream is retried exactly when the same error as a status would be.
 */
const ERROR_STATUS: Record<string, number> = {
  invalid_request_error: 400,
  context_length_exceeded: 400,
  authentication_error: 401,
  invalid_api_key: 401,
  permission_error: 403,
  not_found_error: 404,
  model_not_found: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  rate_limit_exceeded: 429,
  api_error: 500,
  server_error: 500,
  overloaded_error: 529,
};

function vendorError(provider: string, error: unknown, statusHint: number | null): ProviderError {
  const message = isObject(error) && typeof error.message === 'string' ? error.message : JSON.stringify(error);
  const named = (value: unknown) => (typeof value === 'string' ? ERROR_STATUS[value] : undefined);
  const code = !isObject(error)
    ? statusHint
    : typeof error.code === 'number'
      ? error.code
      : typeof error.status === 'number'
        ? error.status
        : (named(error.code) ?? named(error.type) ?? statusHint);
  return new ProviderError({
    kind: 'http',
    provider,
    statusCode: code,
    message: `${provider}: the vendor reported an error mid-stream: ${message}`,
    responseBody: JSON.stringify(error),
  });
}

/**
 * `id`, or where this answer already gave it out `id_<n>` for the first free n from
 * `from`, noted as taken: ids answer results, so two calls of one answer never share one.
 */
function uniqueId(used: Set<string>, id: string, from: number): string {
  let unique = id;
  for (let suffix = from; used.has(unique); suffix++) unique = `${id}_${suffix}`;
  used.add(unique);
  return unique;
}

/** A whole JSON answer without the field every completion of its wire has. */
function notAnAnswer(provider: string, body: Json, field: string): ProviderError {
  return new ProviderError({
    kind: 'undecodable',
    provider,
    message: `${provider}: the answer is JSON but not a completion (it has no ${field}): ${scrubText(JSON.stringify(body)).slice(0, 200)}`,
  });
}

/** `base` and `path` joined, the path going before the base's query (`https://h/v1?api-version=1`). */
function joinUrl(base: string, path: string): string {
  const query = base.indexOf('?');
  const [head, tail] = query < 0 ? [base, ''] : [base.slice(0, query), base.slice(query)];
  return `${head.replace(/\/+$/, '')}${path}${tail}`;
}

/**
 * Reads plain text-delta events without JSON.parse. Almost every event of a long
 * completion is one, and parsing each is most of what streaming costs. The first plain
 * event of a stream is checked field by field: `marker` ends with the opening quote of
 * its text, the text's object must close right after the text, and none of `absent`
 * may follow it. Its bytes before and after the text then become a template: a later
 * event identical but for a quote-free text is the same JSON with another text, read by
 * two comparisons. Anything else returns null and is parsed whole.
 */
class PlainText {
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
type PlainCheck = (event: unknown, text: string) => boolean;

/** The text put in a candidate template's gap to prove what the gap is. */
const PROBE = 'io-harness template probe';

const OPENAI_TEXT = '"delta":{"content":"';
// A mid-stream error carries a finish reason (OpenRouter: "error") or no text delta at all.
const openAiPlain: PlainCheck = (chunk, text) => {
  if (!isObject(chunk) || (chunk.error !== undefined && chunk.error !== null) || isObject(chunk.usage)) return false;
  // One choice, choice 0: an event with several is read whole, where choice 0 is found by its index.
  const choice = Array.isArray(chunk.choices) && chunk.choices.length === 1 ? chunk.choices[0] : undefined;
  if (!isObject(choice) || (choice.index !== undefined && choice.index !== 0)) return false;
  if (typeof choice.finish_reason === 'string' || !isObject(choice.delta)) return false;
  const delta = choice.delta;
  return delta.content === text && !(Array.isArray(delta.tool_calls) && delta.tool_calls.length > 0);
};
const ANTHROPIC_TEXT = '"delta":{"type":"text_delta","text":"';
// Read only for an event named content_block_delta; the payload's own type wins where it has one.
const anthropicPlain: PlainCheck = (payload, text) => {
  if (!isObject(payload)) return false;
  if (typeof payload.type === 'string' && payload.type !== 'content_block_delta') return false;
  return isObject(payload.delta) && payload.delta.type === 'text_delta' && payload.delta.text === text;
};

// ---------------------------------------------------------------- OpenAI chat completions

function openAiMessages(request: ModelRequest, config: WireConfig): Json[] {
  const system: Json = config.systemCacheMarker
    ? { role: 'system', content: [{ type: 'text', text: request.system, cache_control: { type: 'ephemeral' } }] }
    : { role: 'system', content: request.system };
  const messages: Json[] = [system];
  const shown = config.images ? shownImages(request.transcript) : new Set<TranscriptEntry>();
  // Chat Completions takes images in user messages only, and a tool call's answer must come
  // straight after the call: a run of tool answers is followed by one user message holding
  // their images, each group introduced by the call it belongs to.
  let images: Json[] = [];
  const flush = () => {
    if (images.length > 0) messages.push({ role: 'user', content: images });
    images = [];
  };
  const marked = config.systemCacheMarker ? request.options?.cacheBreakpoint : undefined;
  for (const [index, entry] of request.transcript.entries()) {
    if (entry.role !== 'tool') flush();
    if (entry.role === 'user' && index === marked)
      // The end of the prefix a fold froze: a breakpoint there, as on the system block.
      messages.push({
        role: 'user',
        content: [{ type: 'text', text: entry.text, cache_control: { type: 'ephemeral' } }],
      });
    else if (entry.role === 'user') messages.push({ role: 'user', content: entry.text });
    else if (entry.role === 'assistant') {
      const message: Json = { role: 'assistant', content: entry.text === '' ? null : entry.text };
      if (entry.toolCalls.length > 0) {
        message.tool_calls = entry.toolCalls.map((call) => ({
          id: call.id,
          type: 'function',
          function: { name: call.name, arguments: JSON.stringify(call.args) },
        }));
      }
      messages.push(message);
    } else {
      messages.push({ role: 'tool', tool_call_id: entry.callId, content: toolText(entry, shown, config.images) });
      if (entry.images && shown.has(entry)) {
        images.push({ type: 'text', text: `${IMAGES_OF} ${entry.callId} (${entry.name}):` });
        for (const image of entry.images)
          images.push({ type: 'image_url', image_url: { url: `data:${image.mimeType};base64,${image.data}` } });
      }
    }
  }
  flush();
  return messages;
}

/** How the user message of images introduces each call's: what the scripted model server reads back. */
export const IMAGES_OF = 'Images returned by the tool call';

/** A tool entry's text, saying so when its images are left out of this request. */
function toolText(
  entry: Extract<TranscriptEntry, { role: 'tool' }>,
  shown: Set<TranscriptEntry>,
  images: boolean,
): string {
  if (!entry.images || entry.images.length === 0 || shown.has(entry)) return entry.content;
  return `${entry.content}\n${imagesNotShown(entry.images.length, images)}`;
}

function openAiUsage(usage: Json): CallUsage {
  const prompt = isObject(usage.prompt_tokens_details) ? usage.prompt_tokens_details : {};
  const completion = isObject(usage.completion_tokens_details) ? usage.completion_tokens_details : {};
  return {
    inputTokens: num(usage.prompt_tokens),
    outputTokens: num(usage.completion_tokens),
    cacheReadTokens: num(prompt.cached_tokens),
    cacheWriteTokens: num(prompt.cache_write_tokens ?? usage.cache_creation_input_tokens),
    reasoningTokens: num(completion.reasoning_tokens),
  };
}

/**
 * A chunk's `function.arguments` as text: the wire's string, or (from servers that send
 * the arguments decoded) an object's JSON; anything else carries none.
 */
function argumentText(value: unknown): string {
  if (typeof value === 'string') return value;
  return isObject(value) ? JSON.stringify(value) : '';
}

/** A call of an OpenAI-shaped stream as its chunks arrive; `started` once its start was emitted (it has a name). */
interface OpenAiCall {
  id: string;
  name: string;
  args: string;
  started: boolean;
}

/** The choice a completion is read from: the one with index 0 (the only one unless `n` was set), else the first. */
function primaryChoice(choices: unknown): Json | null {
  if (!Array.isArray(choices)) return null;
  let first: Json | null = null;
  for (const choice of choices) {
    if (!isObject(choice)) continue;
    if (choice.index === 0) return choice;
    if (choice.index === undefined || choice.index === null) first ??= choice;
  }
  return first;
}

class OpenAiDecoder implements WireDecoder {
  readonly #provider: string;
  readonly #plain = new PlainText(OPENAI_TEXT, openAiPlain);

  scan(text: string, onText: (text: string) => void, joined?: boolean): number {
    return this.#plain.scan(text, 'data: ', onText, joined);
  }
  scanBytes(bytes: Uint8Array, start: number, onText: (text: string) => void): number {
    return this.#plain.scanBytes(bytes, start, 'data: ', onText);
  }
  readonly #calls = new Map<number, OpenAiCall>();
  /** The position the last tool-call chunk went to. */
  #last: number | null = null;
  /** The server's index for a call, where it reused one: ours. */
  readonly #alias = new Map<number, number>();
  /** Calls ended as soon as the next began, with the arguments they were ended with. */
  readonly #ended = new Map<number, string>();
  /** Ids given out in this answer, and the position of each id the server sent. */
  readonly #usedIds = new Set<string>();
  readonly #byServerId = new Map<string, number>();
  /** `data: [DONE]` arrived: the answer is complete and nothing after it is read. */
  #done = false;
  /**
   * A `usage` object arrived with or after the finish reason: the request's own total,
   * which `include_usage` sends last. One before it is a running count, not the end.
   */
  #usageSeen = false;
  #finishReason: string | null = null;

  constructor(provider: string) {
    this.#provider = provider;
  }

  get finished(): boolean {
    return this.#done;
  }

  /** A position no call has yet. */
  #next(): number {
    let index = this.#calls.size;
    while (this.#calls.has(index)) index++;
    return index;
  }

  event(event: SseEvent): StreamPart[] {
    if (this.#done) return [];
    if (isDone(event)) {
      this.#done = true;
      return [];
    }
    if (event.event !== 'error') {
      const fast = this.#plain.read(event.data);
      if (fast !== null) return fast === '' ? [] : [{ type: 'text-delta', text: fast }];
    }
    const chunk = parseJson(event.data, this.#provider);
    if (!isObject(chunk)) return [];
    if (chunk.error !== undefined && chunk.error !== null) throw vendorError(this.#provider, chunk.error, 500);
    // A server that names its error event (`event: error`) may send the error bare.
    if (event.event === 'error') throw vendorError(this.#provider, chunk, 500);
    const parts: StreamPart[] = [];
    const choice = primaryChoice(chunk.choices);
    if (choice !== null) {
      const delta = isObject(choice.delta) ? choice.delta : {};
      if (typeof delta.content === 'string' && delta.content !== '')
        parts.push({ type: 'text-delta', text: delta.content });
      if (Array.isArray(delta.tool_calls)) {
        for (const item of delta.tool_calls) if (isObject(item)) this.#toolCallChunk(item, parts);
      }
      // Some compatible servers send an empty finish reason on every chunk until the last.
      if (typeof choice.finish_reason === 'string' && choice.finish_reason !== '')
        this.#finishReason = choice.finish_reason;
    }
    if (isObject(chunk.usage)) {
      if (this.#finishReason !== null) this.#usageSeen = true;
      parts.push({ type: 'usage', usage: openAiUsage(chunk.usage) });
    }
    return parts;
  }

  /**
   * One entry of `delta.tool_calls`, by the rule in docs/guides/providers.md: the index
   * keys the call; at a taken index only a non-empty id other than that call's starts a
   * new one (an empty, absent or repeated id continues it); with no index, a known id
   * names its call, a new id starts one, and no id continues the last. `type` is not
   * read; the first non-empty name names the call; arguments are appended.
   */
  #toolCallChunk(item: Json, parts: StreamPart[]): void {
    const fn = isObject(item.function) ? item.function : {};
    const id = typeof item.id === 'string' && item.id !== '' ? item.id : null;
    const serverIndex =
      typeof item.index === 'number' && Number.isInteger(item.index) && item.index >= 0 ? item.index : null;
    let position: number | null;
    if (serverIndex !== null) {
      const at = this.#alias.get(serverIndex) ?? serverIndex;
      const found = this.#calls.get(at);
      position = found !== undefined && (id === null || id === found.id) ? at : null;
      if (found === undefined) position = this.#start(at, id, serverIndex, parts);
    } else if (id !== null) {
      position = null;
      position = this.#byServerId.get(id) ?? null;
    } else {
      position = this.#last;
    }
    position ??= this.#start(this.#next(), id, serverIndex, parts);
    const call = this.#calls.get(position) as OpenAiCall;
    this.#last = position;
    const name = typeof fn.name === 'string' ? fn.name : '';
    if (call.name === '' && name !== '') call.name = name;
    const text = argumentText(fn.arguments);
    if (text !== '') {
      call.args += text;
      if (call.started) parts.push({ type: 'tool-call-delta', index: position, argumentsDelta: text });
    }
    if (!call.started && call.name !== '') this.#announce(position, call, parts);
  }

  /** A new call at `position`. The one before it is finished now, since calls stream one after another. */
  #start(position: number, id: string | null, serverIndex: number | null, parts: StreamPart[]): number {
    // Ended now, a caller can start a read-only call early. Should more of its arguments
    // still come, it is ended again at the close, and that end stands.
    const previous = this.#last === null ? undefined : this.#calls.get(this.#last);
    if (previous !== undefined && this.#last !== null && !this.#ended.has(this.#last)) {
      const args = completeArguments(previous.args);
      if (args && previous.started) {
        this.#ended.set(this.#last, previous.args);
        parts.push({ type: 'tool-call-end', index: this.#last, id: previous.id, name: previous.name, args });
      }
    }
    const callId = uniqueId(this.#usedIds, id ?? `call_${position}`, position);
    if (id !== null) this.#byServerId.set(id, position);
    this.#calls.set(position, { id: callId, name: '', args: '', started: false });
    if (serverIndex !== null) this.#alias.set(serverIndex, position);
    return position;
  }

  /** The call's start, once it has a name, with the arguments that came before it. */
  #announce(position: number, call: OpenAiCall, parts: StreamPart[]): void {
    call.started = true;
    parts.push({ type: 'tool-call-start', index: position, id: call.id, name: call.name });
    if (call.args !== '') parts.push({ type: 'tool-call-delta', index: position, argumentsDelta: call.args });
  }

  /**
   * The stream ended. `[DONE]` says the answer is complete. Without it, a stream cut
   * mid-event, one with no finish reason, and one that stopped after its finish reason
   * but before the usage the request asked for are all cut streams; one with both a
   * finish reason and its usage lacks only the sentinel, which some servers never send.
   */
  finish(incomplete: boolean): StreamPart[] {
    if (!this.#done && (incomplete || this.#finishReason === null || !this.#usageSeen)) {
      const missing =
        incomplete || this.#finishReason === null
          ? `no finish reason${incomplete ? ', an event cut in half' : ''}`
          : 'a finish reason but no usage, which the request asked for, and no [DONE]';
      throw new ProviderError({
        kind: 'truncated',
        provider: this.#provider,
        message: `${this.#provider}: the stream ended before the completion did (${missing}).`,
      });
    }
    return this.#closing();
  }

  #closing(): StreamPart[] {
    const parts: StreamPart[] = [];
    for (const [index, call] of [...this.#calls.entries()].sort((a, b) => a[0] - b[0])) {
      if (!call.started) this.#announce(index, call, parts);
      if (this.#ended.get(index) === call.args) continue;
      parts.push({
        type: 'tool-call-end',
        index,
        id: call.id,
        name: call.name,
        ...parseArguments(call.args, call.name),
      });
    }
    parts.push({ type: 'end', finishReason: this.#finishReason });
    return parts;
  }

  whole(body: unknown): StreamPart[] {
    if (!isObject(body))
      throw new ProviderError({
        kind: 'undecodable',
        provider: this.#provider,
        message: `${this.#provider}: the answer is not a JSON object`,
      });
    if (body.error !== undefined && body.error !== null) throw vendorError(this.#provider, body.error, 500);
    if (!Array.isArray(body.choices)) throw notAnAnswer(this.#provider, body, 'choices');
    const parts: StreamPart[] = [];
    const choice = primaryChoice(body.choices) ?? {};
    const message = isObject(choice.message) ? choice.message : {};
    if (typeof message.content === 'string' && message.content !== '')
      parts.push({ type: 'text-delta', text: message.content });
    if (Array.isArray(message.tool_calls)) {
      for (const [index, item] of message.tool_calls.entries()) {
        if (!isObject(item)) continue;
        const fn = isObject(item.function) ? item.function : {};
        // A whole call is one chunk at its place in the list, so ids and names are read as a stream's are.
        this.#toolCallChunk({ index, id: item.id, function: { name: fn.name, arguments: fn.arguments } }, parts);
      }
    }
    this.#finishReason =
      typeof choice.finish_reason === 'string' && choice.finish_reason !== '' ? choice.finish_reason : 'stop';
    if (isObject(body.usage)) parts.push({ type: 'usage', usage: openAiUsage(body.usage) });
    this.#done = true;
    return [...parts, ...this.#closing()];
  }
}

export const openAiWire: Wire = {
  vendor: 'openai',
  request(request, config) {
    const body: Json = {
      model: config.model,
      messages: openAiMessages(request, config),
      stream: true,
      stream_options: { include_usage: true },
    };
    if (request.tools.length > 0) {
      body.tools = request.tools.map((tool) => ({
        type: 'function',
        function: { name: tool.name, description: tool.description, parameters: tool.parameters },
      }));
    }
    if (config.maxTokens !== null) body.max_tokens = config.maxTokens;
    if (config.promptCacheKey && request.options?.cacheKey) body.prompt_cache_key = request.options.cacheKey;
    // The demanded shape of the answer; the runtime checks it either way. (Anthropic has no counterpart.)
    const format = request.options?.responseFormat;
    if (format) {
      body.response_format = {
        type: 'json_schema',
        json_schema: { name: format.name, schema: format.schema as Json, strict: false },
      };
    }
    Object.assign(body, config.extraBody);
    return streamingPost(config, '/chat/completions', request, body);
  },
  decoder: (config) => new OpenAiDecoder(config.name),
  models: (config) => listing(config, '/models'),
  parseModels(body) {
    const data = isObject(body) && Array.isArray(body.data) ? body.data : [];
    return data.filter(isObject).map((model) => {
      const pricing = isObject(model.pricing) ? model.pricing : null;
      const perMillion = (value: unknown) => {
        const n = typeof value === 'string' ? Number(value) : typeof value === 'number' ? value : Number.NaN;
        return Number.isFinite(n) ? n * 1_000_000 : null;
      };
      const window = model.context_length ?? model.context_window ?? model.max_model_len ?? null;
      return {
        id: String(model.id),
        contextWindow: typeof window === 'number' ? window : null,
        price: pricing ? { input: perMillion(pricing.prompt), output: perMillion(pricing.completion) } : null,
      };
    });
  },
};

function affinity(request: ModelRequest): Record<string, string> {
  return request.options?.cacheKey ? { 'x-session-affinity': request.options.cacheKey } : {};
}

/** A streamed completion request: the vendor's JSON body, the auth headers, the session's affinity. */
function streamingPost(config: WireConfig, path: string, request: ModelRequest, body: Json): WireRequest {
  return {
    method: 'POST',
    url: joinUrl(config.baseUrl, path),
    headers: {
      ...config.headers,
      'content-type': 'application/json',
      accept: 'text/event-stream',
      // Uncoded, please: a coded answer is still read (gzip, deflate, br), but costs a decoder per chunk.
      'accept-encoding': 'identity',
      ...affinity(request),
    },
    body: JSON.stringify(body),
  };
}

/** The model catalogue request. */
function listing(config: WireConfig, path: string): WireRequest {
  return {
    method: 'GET',
    url: joinUrl(config.baseUrl, path),
    headers: { ...config.headers, accept: 'application/json', 'accept-encoding': 'identity' },
  };
}

// ---------------------------------------------------------------- Anthropic Messages

type AnthropicBlock = Json;

function anthropicMessages(transcript: readonly TranscriptEntry[], config: WireConfig, marked?: number): Json[] {
  const messages: { role: 'user' | 'assistant'; content: AnthropicBlock[] }[] = [];
  const push = (role: 'user' | 'assistant', block: AnthropicBlock) => {
    const last = messages[messages.length - 1];
    if (last && last.role === role) last.content.push(block);
    else messages.push({ role, content: [block] });
  };
  const shown = config.images ? shownImages(transcript) : new Set<TranscriptEntry>();
  for (const [index, entry] of transcript.entries()) {
    if (entry.role === 'user')
      push('user', {
        type: 'text',
        text: entry.text,
        // The end of the prefix a fold froze: a breakpoint there, as on the system block.
        ...(index === marked ? { cache_control: { type: 'ephemeral' } } : {}),
      });
    else if (entry.role === 'tool') {
      const text = toolText(entry, shown, config.images);
      push('user', {
        type: 'tool_result',
        tool_use_id: entry.callId,
        content:
          entry.images && shown.has(entry)
            ? [
                ...(text === '' ? [] : [{ type: 'text', text }]),
                ...entry.images.map((image) => ({
                  type: 'image',
                  source: { type: 'base64', media_type: image.mimeType, data: image.data },
                })),
              ]
            : text,
        ...(entry.isError ? { is_error: true } : {}),
      });
    } else {
      if (entry.text !== '') push('assistant', { type: 'text', text: entry.text });
      for (const call of entry.toolCalls)
        push('assistant', { type: 'tool_use', id: call.id, name: call.name, input: call.args });
      if (entry.text === '' && entry.toolCalls.length === 0) push('assistant', { type: 'text', text: '' });
    }
  }
  return messages;
}

/** A content block of an Anthropic stream; `input` is a tool_use block's input as its start sent it. */
interface AnthropicBlockState {
  kind: 'text' | 'tool' | 'other';
  id: string;
  name: string;
  args: string;
  input: unknown;
  ordinal: number;
}

class AnthropicDecoder implements WireDecoder {
  readonly #provider: string;
  readonly #plain = new PlainText(ANTHROPIC_TEXT, anthropicPlain);

  scan(text: string, onText: (text: string) => void, joined?: boolean): number {
    return this.#plain.scan(text, 'event: content_block_delta\ndata: ', onText, joined);
  }
  scanBytes(bytes: Uint8Array, start: number, onText: (text: string) => void): number {
    return this.#plain.scanBytes(bytes, start, 'event: content_block_delta\ndata: ', onText);
  }
  readonly #blocks = new Map<number, AnthropicBlockState>();
  #tools = 0;
  /** Some usage arrived (message_start's, message_delta's): else the answer's usage is unknown. */
  #usageSeen = false;
  readonly #usedIds = new Set<string>();
  #usage: CallUsage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0 };
  #stopReason: string | null = null;
  #stopped = false;

  constructor(provider: string) {
    this.#provider = provider;
  }

  #plainInput = 0;

  get finished(): boolean {
    return this.#stopped;
  }

  /** Merges what an event says of the prompt: a field it leaves out (or null) keeps its value. */
  #input(usage: Json): void {
    this.#usageSeen = true;
    if (typeof usage.input_tokens === 'number') this.#plainInput = usage.input_tokens;
    if (typeof usage.cache_read_input_tokens === 'number') this.#usage.cacheReadTokens = usage.cache_read_input_tokens;
    if (typeof usage.cache_creation_input_tokens === 'number')
      this.#usage.cacheWriteTokens = usage.cache_creation_input_tokens;
    // Anthropic counts cached prompt tokens apart from input_tokens; ours include them.
    this.#usage.inputTokens = this.#plainInput + this.#usage.cacheReadTokens + this.#usage.cacheWriteTokens;
  }

  event(event: SseEvent): StreamPart[] {
    if (this.#stopped) return [];
    if (event.event === 'content_block_delta') {
      const fast = this.#plain.read(event.data);
      if (fast !== null) return fast === '' ? [] : [{ type: 'text-delta', text: fast }];
    }
    const payload = parseJson(event.data, this.#provider);
    if (!isObject(payload)) return [];
    const type = typeof payload.type === 'string' ? payload.type : event.event;
    switch (type) {
      case 'message_start': {
        const message = isObject(payload.message) ? payload.message : {};
        if (isObject(message.usage)) {
          this.#input(message.usage);
          this.#usage.outputTokens = num(message.usage.output_tokens);
        }
        return [];
      }
      case 'content_block_start': {
        const index = num(payload.index);
        const block = isObject(payload.content_block) ? payload.content_block : {};
        if (block.type === 'tool_use') {
          // A tool block still open at this index was never stopped: it ends here, with what
          // it had, and the new block is a call of its own.
          const open = this.#blocks.get(index);
          const ended = open?.kind === 'tool' ? [this.#toolEnd(open)] : [];
          const entry = this.#toolBlock(block, index, 'tool');
          this.#blocks.set(index, entry);
          return [...ended, { type: 'tool-call-start', index: entry.ordinal, id: entry.id, name: entry.name }];
        }
        this.#blocks.set(index, {
          kind: block.type === 'text' ? 'text' : 'other',
          id: '',
          name: '',
          args: '',
          input: undefined,
          ordinal: -1,
        });
        if (block.type === 'text' && typeof block.text === 'string' && block.text !== '')
          return [{ type: 'text-delta', text: block.text }];
        return [];
      }
      case 'content_block_delta': {
        const block = this.#blocks.get(num(payload.index));
        const delta = isObject(payload.delta) ? payload.delta : {};
        if (delta.type === 'text_delta' && typeof delta.text === 'string')
          return [{ type: 'text-delta', text: delta.text }];
        if (delta.type === 'input_json_delta' && typeof delta.partial_json === 'string' && block?.kind === 'tool') {
          block.args += delta.partial_json;
          return delta.partial_json === ''
            ? []
            : [{ type: 'tool-call-delta', index: block.ordinal, argumentsDelta: delta.partial_json }];
        }
        return [];
      }
      case 'content_block_stop': {
        const index = num(payload.index);
        const block = this.#blocks.get(index);
        if (block?.kind !== 'tool') return [];
        // Ended once: a block stopped twice is not a second call.
        this.#blocks.set(index, { ...block, kind: 'other' });
        return [this.#toolEnd(block)];
      }
      case 'message_delta': {
        const delta = isObject(payload.delta) ? payload.delta : {};
        if (typeof delta.stop_reason === 'string') this.#stopReason = delta.stop_reason;
        if (isObject(payload.usage)) {
          if (payload.usage.output_tokens !== undefined) this.#usage.outputTokens = num(payload.usage.output_tokens);
          this.#input(payload.usage);
        }
        return [];
      }
      case 'message_stop': {
        this.#stopped = true;
        // A tool block the vendor never stopped still ends, with what it had.
        const parts: StreamPart[] = [];
        for (const [index, block] of this.#blocks) {
          if (block.kind !== 'tool') continue;
          this.#blocks.set(index, { ...block, kind: 'other' });
          parts.push(this.#toolEnd(block));
        }
        if (this.#usageSeen) parts.push({ type: 'usage', usage: { ...this.#usage } });
        return parts;
      }
      case 'error': {
        const error = isObject(payload.error) ? payload.error : {};
        // The error's type names its status (overloaded_error is Anthropic's 529).
        throw vendorError(this.#provider, { type: error.type, message: error.message ?? error.type }, 500);
      }
      default:
        return [];
    }
  }

  /** A `tool_use` block's state: its id (unique in the answer), its name, and any `input` sent whole. */
  #toolBlock(block: Record<string, unknown>, index: number, kind: 'tool' | 'other'): AnthropicBlockState {
    return {
      kind,
      id: this.#uniqueId(typeof block.id === 'string' && block.id !== '' ? block.id : `toolu_${index}`),
      name: typeof block.name === 'string' ? block.name : '',
      args: '',
      input: block.input,
      ordinal: this.#tools++,
    };
  }

  /**
   * A tool block's arguments, by the rule in docs/guides/providers.md: `input` sent whole
   * in content_block_start stands alone when no `input_json_delta` follows (`{}` and
   * none mean no arguments); the deltas' JSON stands alone when the start's input was
   * empty; when both come, the start's object and the deltas' object are merged, the
   * deltas' keys winning, so deltas that repeat the whole input give that input.
   */
  #toolEnd(block: AnthropicBlockState): StreamPart {
    const base = { type: 'tool-call-end' as const, index: block.ordinal, id: block.id, name: block.name };
    const given = block.input;
    const givenEmpty = given === undefined || given === null || (isObject(given) && Object.keys(given).length === 0);
    if (block.args.trim() === '') {
      if (givenEmpty) return { ...base, args: {} };
      return { ...base, ...argumentsOf(given, block.name, JSON.stringify(given) ?? '') };
    }
    const streamed = parseArguments(block.args, block.name);
    if (givenEmpty || streamed.invalid !== undefined || !isObject(given)) return { ...base, ...streamed };
    return { ...base, args: { ...given, ...streamed.args } };
  }

  #uniqueId(id: string): string {
    return uniqueId(this.#usedIds, id, this.#tools);
  }

  finish(incomplete: boolean): StreamPart[] {
    if (!this.#stopped) {
      throw new ProviderError({
        kind: 'truncated',
        provider: this.#provider,
        message: `${this.#provider}: the stream ended before message_stop${incomplete ? ' (an event cut in half)' : ''}.`,
      });
    }
    return [{ type: 'end', finishReason: this.#stopReason }];
  }

  whole(body: unknown): StreamPart[] {
    if (!isObject(body))
      throw new ProviderError({
        kind: 'undecodable',
        provider: this.#provider,
        message: `${this.#provider}: the answer is not a JSON object`,
      });
    if (body.type === 'error') throw vendorError(this.#provider, body.error, 500);
    if (!Array.isArray(body.content)) throw notAnAnswer(this.#provider, body, 'content');
    const parts: StreamPart[] = [];
    const content = Array.isArray(body.content) ? body.content : [];
    for (const [position, block] of content.entries()) {
      if (!isObject(block)) continue;
      if (block.type === 'text' && typeof block.text === 'string') parts.push({ type: 'text-delta', text: block.text });
      if (block.type === 'tool_use') {
        const entry = this.#toolBlock(block, position, 'other');
        this.#blocks.set(position, entry);
        parts.push({ type: 'tool-call-start', index: entry.ordinal, id: entry.id, name: entry.name });
        parts.push(this.#toolEnd(entry));
      }
    }
    if (isObject(body.usage)) {
      this.#input(body.usage);
      this.#usage.outputTokens = num(body.usage.output_tokens);
      parts.push({ type: 'usage', usage: { ...this.#usage } });
    }
    this.#stopped = true;
    parts.push({ type: 'end', finishReason: typeof body.stop_reason === 'string' ? body.stop_reason : null });
    return parts;
  }
}

export const ANTHROPIC_VERSION = '2023-06-01';

export const anthropicWire: Wire = {
  vendor: 'anthropic',
  request(request, config) {
    const body: Json = {
      model: config.model,
      max_tokens: config.maxTokens ?? 4096,
      // One breakpoint at the end of the system block: tools (which come first) and instructions are cached together.
      system: [{ type: 'text', text: request.system, cache_control: { type: 'ephemeral' } }],
      messages: anthropicMessages(request.transcript, config, request.options?.cacheBreakpoint),
      stream: true,
    };
    if (request.tools.length > 0) {
      body.tools = request.tools.map((tool) => ({
        name: tool.name,
        description: tool.description,
        input_schema: tool.parameters,
      }));
    }
    Object.assign(body, config.extraBody);
    return streamingPost(config, '/v1/messages', request, body);
  },
  decoder: (config) => new AnthropicDecoder(config.name),
  models: (config) => listing(config, '/v1/models'),
  parseModels(body) {
    const data = isObject(body) && Array.isArray(body.data) ? body.data : [];
    return data.filter(isObject).map((model) => ({ id: String(model.id), contextWindow: null, price: null }));
  },
};

/** Tool calls of a finished stream, in the order the model made them. */
/** The calls of a completion, by index; where a call was ended twice, the later end stands. */
export function toolCallsOf(ends: Extract<StreamPart, { type: 'tool-call-end' }>[]): ToolCall[] {
  const last = new Map<number, Extract<StreamPart, { type: 'tool-call-end' }>>();
  for (const end of ends) last.set(end.index, end);
  return [...last.values()]
    .sort((a, b) => a.index - b.index)
    .map((end) => ({ id: end.id, name: end.name, args: end.args, ...(end.invalid ? { invalid: end.invalid } : {}) }));
}

/** Arguments that already parse as a JSON object, or null: a call is only ended early when they do. */
function completeArguments(text: string): Record<string, unknown> | null {
  if (text.trim() === '') return null;
  try {
    const value: unknown = JSON.parse(text);
    return isObject(value) ? value : null;
  } catch {
    return null;
  }
}
