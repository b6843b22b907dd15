/**
 * A request in a vendor's wire, the parts both wires share: the URL joined under the
 * base's query, the streamed completion POST with its headers and the session's
 * affinity, the model catalogue GET, and a tool result's text when its images are left out.
 */
import { imagesNotShown } from '../images.js';
import type { ModelRequest, TranscriptEntry } from '../provider.js';
import type { WireRequest } from './http.js';
import type { Json } from './wire-decode.js';
import type { WireConfig } from './wires.js';

/** `base` and `path` joined, the path going before the base's query (`https://h/v1?api-version=1`). */
function joinUrl(base: string, path: string): string {
  const query = base.indexOf('?');
  const [head, tail] = query < 0 ? [base, ''] : [base.slice(0, query), base.slice(query)];
  return `${head.replace(/\/+$/, '')}${path}${tail}`;
}

/** A tool entry's text, saying so when its images are left out of this request. */
export function toolText(
  entry: Extract<TranscriptEntry, { role: 'tool' }>,
  shown: Set<TranscriptEntry>,
  images: boolean,
): string {
  if (!entry.images || entry.images.length === 0 || shown.has(entry)) return entry.content;
  return `${entry.content}\n${imagesNotShown(entry.images.length, images)}`;
}

function affinity(request: ModelRequest, config: WireConfig): Record<string, string> {
  const headers: Record<string, string> = request.options?.cacheKey
    ? { 'x-session-affinity': request.options.cacheKey }
    : {};
  if (config.agentHeader) headers[config.agentHeader] = request.metadata.address;
  return headers;
}

/**
 * The JSON of a wire's message for `entry`, made once: an entry is never changed once it is
 * in a transcript, so a run's request serialises only what the last step added (a wire
 * keeps one cache; an entry whose message depends on more than itself is not cached).
 */
export function entryJson(cache: WeakMap<object, string>, entry: object, message: () => Json | Json[]): string {
  let text = cache.get(entry);
  if (text === undefined) {
    text = JSON.stringify(message());
    cache.set(entry, text);
  }
  return text;
}

/** An array of a request body given as the JSON of its items (see {@link bodyWithArrays}). */
export interface ArrayFill {
  key: string;
  /** The empty array the body holds under `key` while it is serialised. */
  hole: Json[];
  items: readonly string[];
}

/**
 * A request body's JSON with some of its arrays given as the JSON of their items: the body
 * holds an empty array of its own under each key, is serialised, and each `"key":[]` is
 * filled with its items. A key that no longer holds its empty array (an `extraBody`
 * replaced it) keeps what it holds. Inside a JSON string a quote is always escaped, so the
 * first `"key":[]` of the text is the key's own.
 */
export function bodyWithArrays(body: Json, fills: readonly ArrayFill[]): string {
  const text = JSON.stringify(body);
  const places = fills
    .filter((fill) => body[fill.key] === fill.hole && fill.hole.length === 0)
    .map((fill) => {
      const marker = `${JSON.stringify(fill.key)}:[]`;
      return { at: text.indexOf(marker) + marker.length - 1, items: fill.items };
    })
    .sort((a, b) => a.at - b.at);
  let out = '';
  let from = 0;
  for (const { at, items } of places) {
    out += `${text.slice(from, at)}${items.join(',')}`;
    from = at;
  }
  return out + text.slice(from);
}

/** A streamed completion request: the vendor's JSON body, the auth headers, the session's affinity. */
export function streamingPost(
  config: WireConfig,
  path: string,
  request: ModelRequest,
  body: Json | string,
): WireRequest {
  return {
    method: 'POST',
    url: joinUrl(config.baseUrl, path),
    headers: {
      ...config.headers,
      'content-type': 'application/json',
      accept: 'text/event-stream',
      // Uncoded, please: a coded answer is still read (gzip, deflate, br), but costs a decoder per chunk.
      'accept-encoding': 'identity',
      ...affinity(request, config),
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  };
}

/** The model catalogue request. */
export function listing(config: WireConfig, path: string): WireRequest {
  return {
    method: 'GET',
    url: joinUrl(config.baseUrl, path),
    headers: { ...config.headers, accept: 'application/json', 'accept-encoding': 'identity' },
  };
}
