/**
 * Anthropic's Messages wire: the transcript as its content blocks (a cache breakpoint at
 * the end of the system block), its named events decoded into {@link StreamPart}s by the
 * rules of docs/guides/providers.md, and its model catalogue.
 */
import { shownImages } from '../images.js';
import type { TranscriptEntry } from '../provider.js';
import type { WebData } from '../web/web.js';
import { type PlainCheck, PlainText } from './fast-lane.js';
import type { SseEvent } from './sse.js';
import { type CallUsage, ProviderError, type StreamPart } from './types.js';
import {
  argumentsOf,
  count,
  isObject,
  type Json,
  notAnAnswer,
  num,
  parseArguments,
  parseJson,
  uniqueId,
  vendorError,
} from './wire-decode.js';
import { type ArrayFill, bodyWithArrays, entryJson, listing, streamingPost, toolText } from './wire-request.js';
import type { Wire, WireConfig, WireDecoder } from './wires.js';

const ANTHROPIC_TEXT = '"delta":{"type":"text_delta","text":"';
// Read only for an event named content_block_delta; the payload's own type wins where it has one.
const anthropicPlain: PlainCheck = (payload, text) => {
  if (!isObject(payload)) return false;
  if (typeof payload.type === 'string' && payload.type !== 'content_block_delta') return false;
  return isObject(payload.delta) && payload.delta.type === 'text_delta' && payload.delta.text === text;
};

/** Each transcript entry's content blocks, and each tool's definition, in this wire's JSON (see entryJson). */
const blockJson = new WeakMap<object, string>();
const toolJson = new WeakMap<object, string>();

/** An entry's content blocks as JSON, joined by commas, and the role of the message they belong in. */
function entryBlocks(
  entry: TranscriptEntry,
  index: number,
  shown: Set<TranscriptEntry>,
  config: WireConfig,
  marked?: number,
): {
  role: 'user' | 'assistant';
  blocks: string;
} {
  if (entry.role === 'user') {
    // The end of the prefix a fold froze: a breakpoint there, as on the system block.
    if (index === marked) {
      return {
        role: 'user',
        blocks: JSON.stringify({ type: 'text', text: entry.text, cache_control: { type: 'ephemeral' } }),
      };
    }
    return { role: 'user', blocks: entryJson(blockJson, entry, () => ({ type: 'text', text: entry.text })) };
  }
  if (entry.role === 'tool') {
    const block = (): Json => {
      const text = toolText(entry, shown, config.images);
      return {
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
      };
    };
    // Whether an entry's images are shown depends on the entries after it: made each time.
    const own = !entry.images || entry.images.length === 0;
    return { role: 'user', blocks: own ? entryJson(blockJson, entry, block) : JSON.stringify(block()) };
  }
  // An assistant's blocks are one comma-joined text: JSON of an array, without its brackets.
  const blocks = entryJson(blockJson, entry, () => {
    const list: Json[] = [];
    if (entry.text !== '') list.push({ type: 'text', text: entry.text });
    for (const call of entry.toolCalls) list.push({ type: 'tool_use', id: call.id, name: call.name, input: call.args });
    if (entry.text === '' && entry.toolCalls.length === 0) list.push({ type: 'text', text: '' });
    return list;
  });
  return { role: 'assistant', blocks: blocks.slice(1, -1) };
}

/** The transcript as messages, each as its JSON: consecutive blocks of one role are one message. */
function anthropicMessages(transcript: readonly TranscriptEntry[], config: WireConfig, marked?: number): string[] {
  const messages: { role: 'user' | 'assistant'; blocks: string[] }[] = [];
  const shown = config.images ? shownImages(transcript) : new Set<TranscriptEntry>();
  for (const [index, entry] of transcript.entries()) {
    // An answer with nothing in it (a turn the vendor paused before any text): Anthropic takes
    // no empty text block, and the user's turns on either side of it make one message.
    if (entry.role === 'assistant' && entry.text === '' && entry.toolCalls.length === 0) continue;
    const { role, blocks } = entryBlocks(entry, index, shown, config, marked);
    const last = messages[messages.length - 1];
    if (last && last.role === role) last.blocks.push(blocks);
    else messages.push({ role, blocks: [blocks] });
  }
  return messages.map(({ role, blocks }) => `{"role":${JSON.stringify(role)},"content":[${blocks.join(',')}]}`);
}

/** The beta header Anthropic's fetch tool needs, and the tools' versions. */
const WEB_FETCH_BETA = 'web-fetch-2025-09-10';

/** The contract's web settings as Anthropic's server tools: search, fetch, or both. */
function webTools(web: WebData): string[] {
  const limits = {
    ...(web.maxUses === undefined ? {} : { max_uses: web.maxUses }),
    ...(web.allowedHosts ? { allowed_domains: web.allowedHosts } : {}),
    ...(web.blockedHosts ? { blocked_domains: web.blockedHosts } : {}),
  };
  return [
    ...(web.search ? [JSON.stringify({ type: 'web_search_20250305', name: 'web_search', ...limits })] : []),
    ...(web.fetch ? [JSON.stringify({ type: 'web_fetch_20250910', name: 'web_fetch', ...limits })] : []),
  ];
}

const text = (value: unknown): string | null => (typeof value === 'string' && value !== '' ? value : null);

/** A citation Anthropic attached to text: a page, when it names one (a search result's or a fetched page's). */
function citationPart(citation: unknown): StreamPart[] {
  if (!isObject(citation)) return [];
  const url = text(citation.url);
  if (url === null) return [];
  return [
    {
      type: 'web-source',
      source: { kind: 'citation', url, title: text(citation.title), citedText: text(citation.cited_text) },
    },
  ];
}

/** The pages a server tool's result block names: what a search found, or the page a fetch read. */
function resultParts(block: Json): StreamPart[] {
  if (block.type === 'web_search_tool_result' && Array.isArray(block.content)) {
    return block.content.flatMap((item): StreamPart[] => {
      const url = isObject(item) ? text(item.url) : null;
      return isObject(item) && url !== null
        ? [{ type: 'web-source', source: { kind: 'result', url, title: text(item.title), citedText: null } }]
        : [];
    });
  }
  if (block.type === 'web_fetch_tool_result' && isObject(block.content)) {
    const url = text(block.content.url);
    const document = isObject(block.content.content) ? block.content.content : {};
    return url === null
      ? []
      : [{ type: 'web-source', source: { kind: 'fetched', url, title: text(document.title), citedText: null } }];
  }
  if (block.type === 'text' && Array.isArray(block.citations)) return block.citations.flatMap(citationPart);
  return [];
}

/** The searches and fetches a usage object reports (`server_tool_use`), if it reports any. */
function webUse(usage: Json): StreamPart[] {
  const used = isObject(usage.server_tool_use) ? usage.server_tool_use : null;
  return used === null
    ? []
    : [{ type: 'web-use', searches: count(used.web_search_requests), fetches: count(used.web_fetch_requests) }];
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
    if (typeof usage.input_tokens === 'number') this.#plainInput = count(usage.input_tokens);
    if (typeof usage.cache_read_input_tokens === 'number')
      this.#usage.cacheReadTokens = count(usage.cache_read_input_tokens);
    if (typeof usage.cache_creation_input_tokens === 'number')
      this.#usage.cacheWriteTokens = count(usage.cache_creation_input_tokens);
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
          this.#usage.outputTokens = count(message.usage.output_tokens);
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
        const sources = resultParts(block);
        if (block.type === 'text' && typeof block.text === 'string' && block.text !== '')
          return [{ type: 'text-delta', text: block.text }, ...sources];
        return sources;
      }
      case 'content_block_delta': {
        const block = this.#blocks.get(num(payload.index));
        const delta = isObject(payload.delta) ? payload.delta : {};
        if (delta.type === 'text_delta' && typeof delta.text === 'string')
          return [{ type: 'text-delta', text: delta.text }];
        if (delta.type === 'citations_delta') return citationPart(delta.citation);
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
          if (payload.usage.output_tokens !== undefined) this.#usage.outputTokens = count(payload.usage.output_tokens);
          this.#input(payload.usage);
          return webUse(payload.usage);
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
      for (const part of resultParts(block)) parts.push(part);
      if (block.type === 'tool_use') {
        const entry = this.#toolBlock(block, position, 'other');
        this.#blocks.set(position, entry);
        parts.push({ type: 'tool-call-start', index: entry.ordinal, id: entry.id, name: entry.name });
        parts.push(this.#toolEnd(entry));
      }
    }
    if (isObject(body.usage)) {
      this.#input(body.usage);
      this.#usage.outputTokens = count(body.usage.output_tokens);
      parts.push({ type: 'usage', usage: { ...this.#usage } }, ...webUse(body.usage));
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
    const messages: ArrayFill = {
      key: 'messages',
      hole: [],
      items: anthropicMessages(request.transcript, config, request.options?.cacheBreakpoint),
    };
    // The vendor's own web tools go after the run's (a run that asks for none sends what it always did).
    const web = request.options?.web;
    const tools: ArrayFill = {
      key: 'tools',
      hole: [],
      items: [
        ...request.tools.map((tool) =>
          entryJson(toolJson, tool, () => ({
            name: tool.name,
            description: tool.description,
            input_schema: tool.parameters,
          })),
        ),
        ...(web ? webTools(web) : []),
      ],
    };
    const body: Json = {
      model: config.model,
      max_tokens: config.maxTokens ?? 4096,
      // One breakpoint at the end of the system block: tools (which come first) and instructions are cached together.
      system: [{ type: 'text', text: request.system, cache_control: { type: 'ephemeral' } }],
      messages: messages.hole,
      stream: true,
    };
    if (tools.items.length > 0) body.tools = tools.hole;
    Object.assign(body, config.extraBody);
    const post = streamingPost(config, '/v1/messages', request, bodyWithArrays(body, [messages, tools]));
    if (web?.fetch) {
      const beta = post.headers['anthropic-beta'];
      post.headers['anthropic-beta'] = beta ? `${beta},${WEB_FETCH_BETA}` : WEB_FETCH_BETA;
    }
    return post;
  },
  decoder: (config) => new AnthropicDecoder(config.name),
  models: (config) => listing(config, '/v1/models'),
  parseModels(body) {
    const data = isObject(body) && Array.isArray(body.data) ? body.data : [];
    return data.filter(isObject).map((model) => ({ id: String(model.id), contextWindow: null, price: null }));
  },
};
