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

function affinity(request: ModelRequest): Record<string, string> {
  return request.options?.cacheKey ? { 'x-session-affinity': request.options.cacheKey } : {};
}

/** A streamed completion request: the vendor's JSON body, the auth headers, the session's affinity. */
export function streamingPost(config: WireConfig, path: string, request: ModelRequest, body: Json): WireRequest {
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
export function listing(config: WireConfig, path: string): WireRequest {
  return {
    method: 'GET',
    url: joinUrl(config.baseUrl, path),
    headers: { ...config.headers, accept: 'application/json', 'accept-encoding': 'identity' },
  };
}
