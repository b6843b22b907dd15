/**
 * Header values read as HTTP defines them (RFC 9110), not as substrings: a media type's
 * type, subtype and parameter names without case, its parameters parsed (a quoted value
 * may hold `;` or `=`), and a list header (Content-Encoding) split into its members.
 */

/** A media type as RFC 9110 §8.3.1 writes it: `type "/" subtype *( OWS ";" OWS parameter )`. */
export interface MediaType {
  /** Lowercased. */
  type: string;
  /** Lowercased. */
  subtype: string;
  /** Parameter names lowercased; values as sent, quotes and escapes removed. */
  parameters: Map<string, string>;
}

/** RFC 9110 `tchar`: the characters of a token. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** The media type a Content-Type value names, or null when it is not one. */
export function parseMediaType(value: string): MediaType | null {
  const text = value.trim();
  const end = text.indexOf(';');
  const essence = (end < 0 ? text : text.slice(0, end)).trim();
  const slash = essence.indexOf('/');
  if (slash < 0) return null;
  const type = essence.slice(0, slash);
  const subtype = essence.slice(slash + 1);
  if (!TOKEN.test(type) || !TOKEN.test(subtype)) return null;
  const parameters = new Map<string, string>();
  let position = end < 0 ? text.length : end;
  while (position < text.length) {
    // At a ';': skip it and the whitespace after it, then read `name=value` (or nothing).
    position++;
    while (position < text.length && (text[position] === ' ' || text[position] === '\t')) position++;
    const equals = text.indexOf('=', position);
    const nextSemicolon = text.indexOf(';', position);
    if (equals < 0 || (nextSemicolon >= 0 && nextSemicolon < equals)) {
      // An empty parameter (`;;`) or a name with no value: skipped, as the RFC's grammar allows.
      position = nextSemicolon < 0 ? text.length : nextSemicolon;
      continue;
    }
    const name = text.slice(position, equals).trim().toLowerCase();
    position = equals + 1;
    let parameterValue = '';
    if (text[position] === '"') {
      position++;
      while (position < text.length && text[position] !== '"') {
        if (text[position] === '\\' && position + 1 < text.length) position++;
        parameterValue += text[position];
        position++;
      }
      position++;
      const after = text.indexOf(';', position);
      position = after < 0 ? text.length : after;
    } else {
      const after = text.indexOf(';', position);
      parameterValue = text.slice(position, after < 0 ? text.length : after).trim();
      position = after < 0 ? text.length : after;
    }
    // The first occurrence of a parameter stands; a name that is not a token is not a parameter.
    if (TOKEN.test(name) && !parameters.has(name)) parameters.set(name, parameterValue);
  }
  return { type: type.toLowerCase(), subtype: subtype.toLowerCase(), parameters };
}

/** What a response body is, by its Content-Type. */
export type BodyKind = 'event-stream' | 'json' | 'unknown';

/**
 * `text/event-stream` is a stream of events; `application/json` and any `+json` type
 * (`application/problem+json`) a whole JSON body; anything else, or no Content-Type at
 * all, is unknown, and the caller looks at the body itself.
 */
export function bodyKind(contentType: string | null): BodyKind {
  if (contentType === null) return 'unknown';
  // The spellings vendors send, known without parsing: this runs once per model call.
  const common = COMMON.get(contentType);
  if (common !== undefined) return common;
  const media = parseMediaType(contentType);
  if (media === null) return 'unknown';
  if (media.type === 'text' && media.subtype === 'event-stream') return 'event-stream';
  if (media.type === 'application' && (media.subtype === 'json' || media.subtype.endsWith('+json'))) return 'json';
  return 'unknown';
}

const COMMON = new Map<string, BodyKind>([
  ['text/event-stream', 'event-stream'],
  ['text/event-stream; charset=utf-8', 'event-stream'],
  ['text/event-stream;charset=utf-8', 'event-stream'],
  ['application/json', 'json'],
  ['application/json; charset=utf-8', 'json'],
]);

/** The value of a header by name, compared without case; repeated headers give the first. */
export function headerValue(headers: readonly [string, string][], name: string): string | null {
  const wanted = name.toLowerCase();
  for (const [key, value] of headers) if (key.toLowerCase() === wanted) return value;
  return null;
}

/**
 * The content codings of a body, in the order they were applied (RFC 9110 §8.4), each
 * lowercased, `identity` left out. Repeated Content-Encoding headers are one list.
 */
export function contentCodings(headers: readonly [string, string][]): string[] {
  const codings: string[] = [];
  for (const [key, value] of headers) {
    if (key.toLowerCase() !== 'content-encoding') continue;
    for (const member of value.split(',')) {
      const coding = member.trim().toLowerCase();
      if (coding !== '' && coding !== 'identity') codings.push(coding);
    }
  }
  return codings;
}
