/**
 * What a vendor's response headers say about its rate limits and when to retry. Two
 * header families are read: OpenAI's (`x-ratelimit-*-requests|tokens`, resets as Go-style
 * durations) and Anthropic's (`anthropic-ratelimit-requests|tokens-*`, resets as RFC 3339
 * timestamps). A header that is missing or unreadable becomes null rather than a guess, and
 * every rate-limit header is also kept verbatim in `raw`, so nothing a vendor adds is lost.
 */
import type { RateLimits, RateLimitWindow } from './types.js';

/** Response headers as a fetch `Headers`, a list of pairs, or Node's `IncomingHttpHeaders`. */
export type HeaderSource = Iterable<[string, string]> | Record<string, string | string[] | undefined>;

/** The headers as `[name, value]` pairs, in the order received; an array value gives one pair per element. */
function headerEntries(headers: HeaderSource): [string, string][] {
  const entries: [string, string][] = [];
  if (isIterable(headers)) {
    for (const [name, value] of headers) entries.push([name, value]);
    return entries;
  }
  for (const name of Object.keys(headers)) {
    const value = headers[name];
    if (value === undefined) continue;
    if (Array.isArray(value)) {
      for (const item of value) entries.push([name, item]);
    } else {
      entries.push([name, value]);
    }
  }
  return entries;
}

function isIterable(headers: HeaderSource): headers is Iterable<[string, string]> {
  return typeof (headers as Partial<Iterable<[string, string]>>)[Symbol.iterator] === 'function';
}

/** Header values by lowercase name. The first occurrence wins, as duplicates of these headers carry no meaning. */
function headerLookup(entries: [string, string][]): Map<string, string> {
  const lookup = new Map<string, string>();
  for (const [name, value] of entries) {
    const key = name.toLowerCase();
    if (!lookup.has(key)) lookup.set(key, value);
  }
  return lookup;
}

function isRateLimitHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return (
    lower.includes('ratelimit') || lower.includes('rate-limit') || lower === 'retry-after' || lower === 'retry-after-ms'
  );
}

const DECIMAL = /^\d+(?:\.\d+)?$/;

/** A non-negative decimal number, or null. Stricter than `Number()`, which reads '' as 0 and '0x10' as 16. */
function parseDecimal(value: string | undefined): number | null {
  if (value === undefined) return null;
  const trimmed = value.trim();
  return DECIMAL.test(trimmed) ? Number(trimmed) : null;
}

const MILLISECONDS_PER_UNIT: Record<string, number> = {
  h: 3_600_000,
  m: 60_000,
  s: 1000,
  ms: 1,
  us: 0.001,
  µs: 0.001,
  μs: 0.001,
  ns: 0.000001,
};

/** `ms` comes before `m` in the alternation so `20ms` is read as milliseconds, not minutes. */
const DURATION_PART = /(\d+(?:\.\d+)?)(ms|us|µs|μs|ns|h|m|s)/y;

/**
 * A Go-style duration (`1s`, `6m0s`, `20ms`, `1h2m3.5s`) or a plain number of seconds,
 * in whole milliseconds; null when it is neither.
 */
export function parseDuration(value: string): number | null {
  const text = value.trim();
  if (text.length === 0) return null;
  const seconds = parseDecimal(text);
  if (seconds !== null) return Math.round(seconds * 1000);

  DURATION_PART.lastIndex = 0;
  let total = 0;
  while (DURATION_PART.lastIndex < text.length) {
    const match = DURATION_PART.exec(text);
    if (match === null) return null;
    total += Number(match[1]) * MILLISECONDS_PER_UNIT[match[2]!]!;
  }
  return Math.round(total);
}

const RFC_3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/;

/** Milliseconds from `now` until an RFC 3339 timestamp, never negative; null when the value is not one. */
function millisecondsUntilTimestamp(value: string, now: number): number | null {
  const text = value.trim();
  if (!RFC_3339.test(text)) return null;
  // Date.parse wants the ISO spelling; RFC 3339 also allows a space or lowercase t/z.
  const time = Date.parse(`${text.slice(0, 10)}T${text.slice(11).toUpperCase()}`);
  if (Number.isNaN(time)) return null;
  return Math.max(0, time - now);
}

/** A window from its three headers, or null when none of them was sent. */
function rateLimitWindow(
  limit: string | undefined,
  remaining: string | undefined,
  reset: string | undefined,
  readReset: (value: string) => number | null,
): RateLimitWindow | null {
  if (limit === undefined && remaining === undefined && reset === undefined) return null;
  return {
    limit: parseDecimal(limit),
    remaining: parseDecimal(remaining),
    resetMs: reset === undefined ? null : readReset(reset),
  };
}

/**
 * One window from whichever family sent it. The OpenAI family is read when any of its
 * headers is present, else the Anthropic one: fields of two vendors are never mixed.
 */
function windowFromEither(
  lookup: Map<string, string>,
  kind: 'requests' | 'tokens',
  now: number,
): RateLimitWindow | null {
  const openAi = rateLimitWindow(
    lookup.get(`x-ratelimit-limit-${kind}`),
    lookup.get(`x-ratelimit-remaining-${kind}`),
    lookup.get(`x-ratelimit-reset-${kind}`),
    parseDuration,
  );
  if (openAi !== null) return openAi;
  // Only `-tokens-*` fills `tokens`: Anthropic's separate input/output token windows stay in `raw`.
  return rateLimitWindow(
    lookup.get(`anthropic-ratelimit-${kind}-limit`),
    lookup.get(`anthropic-ratelimit-${kind}-remaining`),
    lookup.get(`anthropic-ratelimit-${kind}-reset`),
    (value) => millisecondsUntilTimestamp(value, now),
  );
}

/** The rate limits a response reports. `now` is the time the response arrived, for timestamp resets. */
export function parseRateLimits(headers: HeaderSource, now: number = Date.now()): RateLimits {
  const entries = headerEntries(headers);
  const lookup = headerLookup(entries);
  return {
    requests: windowFromEither(lookup, 'requests', now),
    tokens: windowFromEither(lookup, 'tokens', now),
    raw: entries.filter(([name]) => isRateLimitHeader(name)).map(([name, value]): [string, string] => [name, value]),
  };
}

/**
 * How long the vendor asks the caller to wait, in milliseconds, never negative.
 * `retry-after-ms` wins when it is readable; otherwise `retry-after` is read as seconds
 * (possibly fractional) or as an HTTP date. Null when neither is present and readable.
 */
export function parseRetryAfter(headers: HeaderSource, now: number = Date.now()): number | null {
  const lookup = headerLookup(headerEntries(headers));
  const milliseconds = parseDecimal(lookup.get('retry-after-ms'));
  if (milliseconds !== null) return Math.round(milliseconds);

  const retryAfter = lookup.get('retry-after');
  if (retryAfter === undefined) return null;
  const seconds = parseDecimal(retryAfter);
  if (seconds !== null) return Math.round(seconds * 1000);
  const date = parseHttpDate(retryAfter, now);
  return date === null ? null : Math.max(0, date - now);
}

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const MONTH = '(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)';
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';
/** `Sun, 06 Nov 1994 08:49:37 GMT`, the form senders must use. */
const IMF_FIXDATE = new RegExp(`^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`, 'i');
/** `Sunday, 06-Nov-94 08:49:37 GMT`, obsolete but still to be accepted (RFC 9110 §5.6.7). */
const RFC_850 = new RegExp(
  `^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`,
  'i',
);
/** `Sun Nov  6 08:49:37 1994`, C's asctime, obsolete but still to be accepted. */
const ASCTIME = new RegExp(`^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) ${MONTH} ( \\d|\\d{2}) ${TIME} (\\d{4})$`, 'i');

/**
 * An HTTP date in any of its three forms, as epoch milliseconds; null otherwise.
 * Parsed by pattern rather than `Date.parse`, which accepts almost any text as some date.
 * `now` places the two-digit years of the obsolete RFC 850 form.
 */
function parseHttpDate(value: string, now: number): number | null {
  const text = value.trim();
  let match = IMF_FIXDATE.exec(text);
  if (match !== null) {
    return utcTime(Number(match[3]), match[2]!, Number(match[1]), match[4]!, match[5]!, match[6]!);
  }
  match = RFC_850.exec(text);
  if (match !== null) {
    // RFC 9110: a two-digit year more than 50 years ahead is the most recent past year with those digits.
    const currentYear = new Date(now).getUTCFullYear();
    let year = Math.floor(currentYear / 100) * 100 + Number(match[3]);
    if (year > currentYear + 50) year -= 100;
    return utcTime(year, match[2]!, Number(match[1]), match[4]!, match[5]!, match[6]!);
  }
  match = ASCTIME.exec(text);
  if (match !== null) {
    return utcTime(Number(match[6]), match[1]!, Number(match[2]!.trim()), match[3]!, match[4]!, match[5]!);
  }
  return null;
}

/** Epoch milliseconds of a UTC date and time, or null when a field is out of range (such as 31 Feb). */
function utcTime(
  year: number,
  monthName: string,
  day: number,
  hours: string,
  minutes: string,
  seconds: string,
): number | null {
  const month = MONTHS.indexOf(monthName.toLowerCase());
  const hour = Number(hours);
  const minute = Number(minutes);
  const second = Number(seconds);
  // 60 is a leap second, which HTTP allows and Date.UTC carries into the next minute.
  if (hour > 23 || minute > 59 || second > 60) return null;
  const midnight = Date.UTC(year, month, day);
  if (new Date(midnight).getUTCDate() !== day) return null;
  return midnight + ((hour * 60 + minute) * 60 + second) * 1000;
}
