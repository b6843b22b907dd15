/**
 * The vendors' own wire formats. Each wire maps our transcript onto the vendor's
 * block types and decodes the vendor's stream into {@link StreamPart}s. The decoders
 * read events with narrow hand-written checks rather than a schema library: they sit
 * on the hottest path there is (every streamed event of every agent) and in every
 * agent thread, whose start cost counts (docs/ARCHITECTURE.md).
 *
 * Each wire is a module of its own (./openai-wire.ts, ./anthropic-wire.ts); what both
 * read and send the same way is in ./wire-decode.ts and ./wire-request.ts, and the fast
 * lane for plain text events in ./fast-lane.ts.
 */
import type { ModelRequest } from '../provider.js';
import type { WireRequest } from './http.js';
import type { SseEvent } from './sse.js';
import type { ModelInfo, StreamPart } from './types.js';

export { ANTHROPIC_VERSION, anthropicWire } from './anthropic-wire.js';
export { IMAGES_OF, openAiWire } from './openai-wire.js';
export { toolCallsOf } from './wire-decode.js';

export interface WireConfig {
  /** The provider's name in errors and the trace. */
  name: string;
  baseUrl: string;
  model: string;
  /** Auth and vendor headers, already resolved. */
  headers: Record<string, string>;
  /** Where the key came from, as a refusal names it (`the environment variable OPENAI_API_KEY`); null with no key. */
  keySource?: string | null;
  maxTokens: number | null;
  /** Send `prompt_cache_key` in the body (the vendors that read it). */
  promptCacheKey: boolean;
  /** Mark the system block as a cache breakpoint (OpenRouter's marker on the OpenAI shape). */
  systemCacheMarker: boolean;
  /** Extra top-level body fields (OpenRouter's `usage: { include: true }`). */
  extraBody: Record<string, unknown>;
  /** The header the asking agent's address is sent in, or null (see HttpProviderSpec.agentHeader). */
  agentHeader?: string | null;
  /** Send the images tools attach (the latest ones); false for a model that takes text only. */
  images: boolean;
  /** Whose server-side web tools this endpoint speaks (`withWeb`), or null where a run cannot ask for them (see runtime/web/web.ts). */
  web: 'openrouter' | 'anthropic' | null;
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
