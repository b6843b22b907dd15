/**
 * OpenAI's Chat Completions wire (and every compatible server's): the transcript as its
 * messages, its chunks decoded into {@link StreamPart}s by the rules of
 * docs/guides/providers.md, and its model catalogue. The decoder reads events with narrow
 * hand-written checks (see ./wires.ts).
 */

import { ErrorCode, HarnessError } from '../../errors.js';
import { shownImages } from '../images.js';
import type { ModelRequest, TranscriptEntry } from '../provider.js';
import type { WebData } from '../web/web.js';
import { type PlainCheck, PlainText } from './fast-lane.js';
import type { SseEvent } from './sse.js';
import { isDone } from './sse.js';
import { type CallUsage, ProviderError, type StreamPart } from './types.js';
import {
  completeArguments,
  count,
  isObject,
  type Json,
  notAnAnswer,
  parseArguments,
  parseJson,
  uniqueId,
  vendorError,
} from './wire-decode.js';
import { type ArrayFill, bodyWithArrays, entryJson, listing, streamingPost, toolText } from './wire-request.js';
import type { Wire, WireConfig, WireDecoder } from './wires.js';

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

/** Each transcript entry's message, and each tool's definition, in this wire's JSON (see entryJson). */
const messageJson = new WeakMap<object, string>();
const toolJson = new WeakMap<object, string>();

/** The request's messages, each as its JSON: the system's, then the transcript's (with their images). */
function openAiMessages(request: ModelRequest, config: WireConfig): string[] {
  const system: Json = config.systemCacheMarker
    ? { role: 'system', content: [{ type: 'text', text: request.system, cache_control: { type: 'ephemeral' } }] }
    : { role: 'system', content: request.system };
  const messages: string[] = [JSON.stringify(system)];
  const shown = config.images ? shownImages(request.transcript) : new Set<TranscriptEntry>();
  // Chat Completions takes images in user messages only, and a tool call's answer must come
  // straight after the call: a run of tool answers is followed by one user message holding
  // their images, each group introduced by the call it belongs to.
  let images: Json[] = [];
  const flush = () => {
    if (images.length > 0) messages.push(JSON.stringify({ role: 'user', content: images }));
    images = [];
  };
  const marked = config.systemCacheMarker ? request.options?.cacheBreakpoint : undefined;
  for (const [index, entry] of request.transcript.entries()) {
    if (entry.role !== 'tool') flush();
    if (entry.role === 'user' && index === marked)
      // The end of the prefix a fold froze: a breakpoint there, as on the system block.
      messages.push(
        JSON.stringify({
          role: 'user',
          content: [{ type: 'text', text: entry.text, cache_control: { type: 'ephemeral' } }],
        }),
      );
    else if (entry.role === 'user')
      messages.push(entryJson(messageJson, entry, () => ({ role: 'user', content: entry.text })));
    else if (entry.role === 'assistant') {
      messages.push(
        entryJson(messageJson, entry, () => {
          const message: Json = { role: 'assistant', content: entry.text === '' ? null : entry.text };
          if (entry.toolCalls.length > 0) {
            message.tool_calls = entry.toolCalls.map((call) => ({
              id: call.id,
              type: 'function',
              function: { name: call.name, arguments: JSON.stringify(call.args) },
            }));
          }
          return message;
        }),
      );
    } else if (!entry.images || entry.images.length === 0) {
      messages.push(
        entryJson(messageJson, entry, () => ({ role: 'tool', tool_call_id: entry.callId, content: entry.content })),
      );
    } else {
      // Whether its images are shown depends on the entries after it: made each time.
      messages.push(
        JSON.stringify({ role: 'tool', tool_call_id: entry.callId, content: toolText(entry, shown, config.images) }),
      );
      if (shown.has(entry)) {
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

/**
 * The contract's web settings in this endpoint's terms: OpenRouter's `openrouter:web_search`
 * server tool with the hosts to keep to. What it cannot say, and every other endpoint of this
 * wire, was refused before the run started (runtime/web/web.ts); a provider built another way
 * (a module wrapping one) fails the call, as a refusal, not a retry.
 */
function webTool(web: WebData, config: WireConfig): string {
  if (config.web !== 'openrouter')
    throw new HarnessError(
      ErrorCode.ProviderFailed,
      `${config.name}: the run asks for the web (withWeb), and this endpoint has no web tool io-harness can ask for: use Anthropic or OpenRouter.`,
      { details: { kind: 'web-unsupported', provider: config.name, isRetryable: false } },
    );
  const parameters = {
    ...(web.allowedHosts ? { allowed_domains: web.allowedHosts } : {}),
    ...(web.blockedHosts ? { excluded_domains: web.blockedHosts } : {}),
  };
  return JSON.stringify({
    type: 'openrouter:web_search',
    ...(Object.keys(parameters).length > 0 ? { parameters } : {}),
  });
}

/** The pages an answer's `url_citation` annotations name (OpenRouter's web search, OpenAI's search models). */
function annotationParts(annotations: unknown): StreamPart[] {
  if (!Array.isArray(annotations)) return [];
  return annotations.flatMap((item): StreamPart[] => {
    const citation = isObject(item) && isObject(item.url_citation) ? item.url_citation : null;
    if (citation === null || typeof citation.url !== 'string' || citation.url === '') return [];
    const title = typeof citation.title === 'string' && citation.title !== '' ? citation.title : null;
    const quoted = typeof citation.content === 'string' && citation.content !== '' ? citation.content : null;
    return [{ type: 'web-source', source: { kind: 'citation', url: citation.url, title, citedText: quoted } }];
  });
}

/** The searches a usage object reports (OpenRouter's `server_tool_use`), if it reports any. */
function webUse(usage: Json): StreamPart[] {
  const used = isObject(usage.server_tool_use) ? usage.server_tool_use : null;
  return used === null ? [] : [{ type: 'web-use', searches: count(used.web_search_requests), fetches: 0 }];
}

function openAiUsage(usage: Json): CallUsage {
  const prompt = isObject(usage.prompt_tokens_details) ? usage.prompt_tokens_details : {};
  const completion = isObject(usage.completion_tokens_details) ? usage.completion_tokens_details : {};
  return {
    inputTokens: count(usage.prompt_tokens),
    outputTokens: count(usage.completion_tokens),
    cacheReadTokens: count(prompt.cached_tokens),
    cacheWriteTokens: count(prompt.cache_write_tokens ?? usage.cache_creation_input_tokens),
    reasoningTokens: count(completion.reasoning_tokens),
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
      for (const part of annotationParts(delta.annotations)) parts.push(part);
      if (Array.isArray(delta.tool_calls)) {
        for (const item of delta.tool_calls) if (isObject(item)) this.#toolCallChunk(item, parts);
      }
      // Some compatible servers send an empty finish reason on every chunk until the last.
      if (typeof choice.finish_reason === 'string' && choice.finish_reason !== '')
        this.#finishReason = choice.finish_reason;
    }
    if (isObject(chunk.usage)) {
      if (this.#finishReason !== null) this.#usageSeen = true;
      parts.push({ type: 'usage', usage: openAiUsage(chunk.usage) }, ...webUse(chunk.usage));
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
    for (const part of annotationParts(message.annotations)) parts.push(part);
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
    if (isObject(body.usage)) parts.push({ type: 'usage', usage: openAiUsage(body.usage) }, ...webUse(body.usage));
    this.#done = true;
    return [...parts, ...this.#closing()];
  }
}

export const openAiWire: Wire = {
  vendor: 'openai',
  request(request, config) {
    const messages: ArrayFill = { key: 'messages', hole: [], items: openAiMessages(request, config) };
    const web = request.options?.web ? webTool(request.options.web, config) : null;
    const tools: ArrayFill = {
      key: 'tools',
      hole: [],
      items: [
        ...request.tools.map((tool) =>
          entryJson(toolJson, tool, () => ({
            type: 'function',
            function: { name: tool.name, description: tool.description, parameters: tool.parameters },
          })),
        ),
        ...(web === null ? [] : [web]),
      ],
    };
    const body: Json = {
      model: config.model,
      messages: messages.hole,
      stream: true,
      stream_options: { include_usage: true },
    };
    if (tools.items.length > 0) body.tools = tools.hole;
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
    return streamingPost(config, '/chat/completions', request, bodyWithArrays(body, [messages, tools]));
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
