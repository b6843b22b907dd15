import { describe, expect, it } from 'vitest';
import { parseDuration, parseRateLimits, parseRetryAfter } from '../src/runtime/providers/rate-limits.js';

/** A fixed arrival time, so timestamp resets have exact expected values. */
const now = Date.parse('2025-01-01T00:00:00Z');

describe('parseRateLimits, OpenAI-style headers', () => {
  it('reads both windows and keeps the headers verbatim in order', () => {
    const headers = {
      'content-type': 'text/event-stream',
      'x-ratelimit-limit-requests': '10000',
      'x-ratelimit-limit-tokens': '2000000',
      'x-ratelimit-remaining-requests': '9999',
      'x-ratelimit-remaining-tokens': '1999985',
      'x-ratelimit-reset-requests': '6ms',
      'x-ratelimit-reset-tokens': '1m30.5s',
      'openai-processing-ms': '120',
    };
    expect(parseRateLimits(headers, now)).toEqual({
      requests: { limit: 10000, remaining: 9999, resetMs: 6 },
      tokens: { limit: 2_000_000, remaining: 1_999_985, resetMs: 90_500 },
      raw: [
        ['x-ratelimit-limit-requests', '10000'],
        ['x-ratelimit-limit-tokens', '2000000'],
        ['x-ratelimit-remaining-requests', '9999'],
        ['x-ratelimit-remaining-tokens', '1999985'],
        ['x-ratelimit-reset-requests', '6ms'],
        ['x-ratelimit-reset-tokens', '1m30.5s'],
      ],
    });
  });

  it('matches header names in any case', () => {
    const limits = parseRateLimits(
      [
        ['X-RateLimit-Limit-Requests', '60'],
        ['X-RATELIMIT-REMAINING-REQUESTS', '59'],
        ['x-ratelimit-reset-requests', '1s'],
      ],
      now,
    );
    expect(limits.requests).toEqual({ limit: 60, remaining: 59, resetMs: 1000 });
    expect(limits.tokens).toBeNull();
    expect(limits.raw).toEqual([
      ['X-RateLimit-Limit-Requests', '60'],
      ['X-RATELIMIT-REMAINING-REQUESTS', '59'],
      ['x-ratelimit-reset-requests', '1s'],
    ]);
  });

  it('reads a fetch Headers object', () => {
    const headers = new Headers({ 'x-ratelimit-remaining-tokens': '42', 'retry-after': '2' });
    const limits = parseRateLimits(headers, now);
    expect(limits.tokens).toEqual({ limit: null, remaining: 42, resetMs: null });
    expect(limits.requests).toBeNull();
    expect(limits.raw).toEqual([
      ['retry-after', '2'],
      ['x-ratelimit-remaining-tokens', '42'],
    ]);
  });

  it.each([
    ['1s', 1000],
    ['6m0s', 360_000],
    ['20ms', 20],
    ['1h2m3.5s', 3_723_500],
    ['0s', 0],
    ['2h', 7_200_000],
    ['59.999s', 59_999],
    ['1m', 60_000],
    ['1500us', 2],
    ['3000000ns', 3],
    ['12', 12_000],
    ['0.25', 250],
    [' 7s ', 7000],
  ])('reads the reset duration %j as %d ms', (reset, expected) => {
    expect(parseDuration(reset)).toBe(expected);
    expect(parseRateLimits({ 'x-ratelimit-reset-tokens': reset }, now).tokens).toEqual({
      limit: null,
      remaining: null,
      resetMs: expected,
    });
  });

  it.each(['', 'soon', '1x', '-1s', 's', '1s2', '1 s', '.5s', '1.s', '1d', '5m garbage'])(
    'gives null for the unreadable reset %j',
    (reset) => {
      expect(parseDuration(reset)).toBeNull();
      expect(parseRateLimits({ 'x-ratelimit-reset-requests': reset }, now).requests).toEqual({
        limit: null,
        remaining: null,
        resetMs: null,
      });
    },
  );

  it('gives null for a count that is not a number, keeping the other fields', () => {
    const limits = parseRateLimits(
      {
        'x-ratelimit-limit-requests': 'lots',
        'x-ratelimit-remaining-requests': '',
        'x-ratelimit-reset-requests': '2s',
        'x-ratelimit-limit-tokens': '0x10',
        'x-ratelimit-remaining-tokens': '-3',
      },
      now,
    );
    expect(limits.requests).toEqual({ limit: null, remaining: null, resetMs: 2000 });
    expect(limits.tokens).toEqual({ limit: null, remaining: null, resetMs: null });
  });
});

describe('parseRateLimits, Anthropic-style headers', () => {
  it('reads both windows with resets measured from now', () => {
    const headers = {
      'anthropic-ratelimit-requests-limit': '50',
      'anthropic-ratelimit-requests-remaining': '49',
      'anthropic-ratelimit-requests-reset': '2025-01-01T00:00:01Z',
      'anthropic-ratelimit-tokens-limit': '40000',
      'anthropic-ratelimit-tokens-remaining': '39000',
      'anthropic-ratelimit-tokens-reset': '2025-01-01T00:00:30.250Z',
      'request-id': 'req_1',
    };
    expect(parseRateLimits(headers, now)).toEqual({
      requests: { limit: 50, remaining: 49, resetMs: 1000 },
      tokens: { limit: 40000, remaining: 39000, resetMs: 30_250 },
      raw: [
        ['anthropic-ratelimit-requests-limit', '50'],
        ['anthropic-ratelimit-requests-remaining', '49'],
        ['anthropic-ratelimit-requests-reset', '2025-01-01T00:00:01Z'],
        ['anthropic-ratelimit-tokens-limit', '40000'],
        ['anthropic-ratelimit-tokens-remaining', '39000'],
        ['anthropic-ratelimit-tokens-reset', '2025-01-01T00:00:30.250Z'],
      ],
    });
  });

  it.each([
    ['2025-01-01T00:00:30Z', 30_000],
    ['2025-01-01T01:00:30+01:00', 30_000],
    ['2024-12-31T23:00:30-01:00', 30_000],
    ['2025-01-01t00:00:30z', 30_000],
    ['2025-01-01 00:00:30Z', 30_000],
    ['2025-01-01T00:00:00.5Z', 500],
    ['2025-01-01T00:00:00.123456Z', 123],
    ['2025-01-01T00:00:00Z', 0],
    ['2024-12-31T23:59:00Z', 0],
  ])('reads the reset %j as %d ms from now', (reset, expected) => {
    expect(parseRateLimits({ 'anthropic-ratelimit-requests-reset': reset }, now).requests?.resetMs).toBe(expected);
  });

  it.each(['30', '2025-01-01', '2025-01-01T00:00:30', 'tomorrow', '2025-13-01T00:00:00Z', ''])(
    'gives null for the unreadable reset %j',
    (reset) => {
      expect(parseRateLimits({ 'anthropic-ratelimit-tokens-reset': reset }, now).tokens).toEqual({
        limit: null,
        remaining: null,
        resetMs: null,
      });
    },
  );

  it('does not build the tokens window from input and output token headers', () => {
    const headers: [string, string][] = [
      ['anthropic-ratelimit-input-tokens-limit', '30000'],
      ['anthropic-ratelimit-input-tokens-remaining', '29000'],
      ['anthropic-ratelimit-input-tokens-reset', '2025-01-01T00:00:05Z'],
      ['anthropic-ratelimit-output-tokens-limit', '8000'],
      ['anthropic-ratelimit-output-tokens-remaining', '7990'],
      ['anthropic-ratelimit-output-tokens-reset', '2025-01-01T00:00:02Z'],
      ['anthropic-ratelimit-requests-remaining', '4'],
    ];
    const limits = parseRateLimits(headers, now);
    expect(limits.tokens).toBeNull();
    expect(limits.requests).toEqual({ limit: null, remaining: 4, resetMs: null });
    expect(limits.raw).toEqual(headers);
  });

  it('uses the system clock when no time is given', () => {
    const inOneMinute = new Date(Date.now() + 60_000).toISOString();
    const resetMs = parseRateLimits({ 'anthropic-ratelimit-requests-reset': inOneMinute }).requests?.resetMs;
    expect(resetMs).toBeGreaterThan(50_000);
    expect(resetMs).toBeLessThanOrEqual(60_000);
  });
});

describe('parseRateLimits, windows and raw headers', () => {
  it('gives null windows and no raw headers when none are sent', () => {
    expect(parseRateLimits({ 'content-type': 'application/json' }, now)).toEqual({
      requests: null,
      tokens: null,
      raw: [],
    });
    expect(parseRateLimits([], now)).toEqual({ requests: null, tokens: null, raw: [] });
  });

  it('reads one family per window and never mixes the two', () => {
    const limits = parseRateLimits(
      {
        'x-ratelimit-remaining-requests': '7',
        'anthropic-ratelimit-requests-limit': '50',
        'anthropic-ratelimit-tokens-limit': '900',
      },
      now,
    );
    expect(limits.requests).toEqual({ limit: null, remaining: 7, resetMs: null });
    expect(limits.tokens).toEqual({ limit: 900, remaining: null, resetMs: null });
  });

  it('keeps unknown rate-limit headers verbatim, in the order received', () => {
    const headers: [string, string][] = [
      ['Date', 'Wed, 01 Jan 2025 00:00:00 GMT'],
      ['X-RateLimit-Limit-Requests', '100'],
      ['x-ratelimit-limit-project-tokens', '  5 000 000 '],
      ['Retry-After', '3'],
      ['content-type', 'application/json'],
      ['X-Rate-Limit-Custom', 'bucket=a; weird'],
      ['retry-after-ms', '2500'],
      ['ratelimit-policy', '100;w=60'],
      ['x-retry-after-hint', '9'],
      ['x-ratelimit-limit-requests', '200'],
    ];
    const limits = parseRateLimits(headers, now);
    expect(limits.raw).toEqual([
      ['X-RateLimit-Limit-Requests', '100'],
      ['x-ratelimit-limit-project-tokens', '  5 000 000 '],
      ['Retry-After', '3'],
      ['X-Rate-Limit-Custom', 'bucket=a; weird'],
      ['retry-after-ms', '2500'],
      ['ratelimit-policy', '100;w=60'],
      ['x-ratelimit-limit-requests', '200'],
    ]);
    // The first of two same-named headers is the one read.
    expect(limits.requests).toEqual({ limit: 100, remaining: null, resetMs: null });
  });

  it('keeps object key order and gives one raw entry per array element', () => {
    const limits = parseRateLimits(
      {
        'x-ratelimit-custom': ['a', 'b'],
        'x-ignored': undefined,
        'x-ratelimit-skipped': undefined,
        'retry-after': '1',
        'anthropic-ratelimit-unified-status': 'allowed',
      },
      now,
    );
    expect(limits.raw).toEqual([
      ['x-ratelimit-custom', 'a'],
      ['x-ratelimit-custom', 'b'],
      ['retry-after', '1'],
      ['anthropic-ratelimit-unified-status', 'allowed'],
    ]);
  });

  it('returns raw pairs the caller can change without touching the input', () => {
    const pair: [string, string] = ['x-ratelimit-limit-requests', '1'];
    const limits = parseRateLimits([pair], now);
    limits.raw[0]![1] = 'changed';
    expect(pair).toEqual(['x-ratelimit-limit-requests', '1']);
  });
});

describe('parseRetryAfter', () => {
  it.each([
    { name: 'whole seconds', headers: { 'retry-after': '120' }, expected: 120_000 },
    { name: 'fractional seconds', headers: { 'retry-after': '1.5' }, expected: 1500 },
    { name: 'zero seconds', headers: { 'retry-after': '0' }, expected: 0 },
    { name: 'milliseconds', headers: { 'retry-after-ms': '2500' }, expected: 2500 },
    { name: 'milliseconds over seconds', headers: { 'retry-after': '10', 'retry-after-ms': '250' }, expected: 250 },
    {
      name: 'seconds when the milliseconds header is unreadable',
      headers: { 'retry-after-ms': 'soon', 'retry-after': '4' },
      expected: 4000,
    },
    { name: 'an IMF-fixdate', headers: { 'retry-after': 'Wed, 01 Jan 2025 00:00:30 GMT' }, expected: 30_000 },
    {
      name: 'an RFC 850 date',
      headers: { 'retry-after': 'Wednesday, 01-Jan-25 00:01:00 GMT' },
      expected: 60_000,
    },
    { name: 'an asctime date', headers: { 'retry-after': 'Wed Jan  1 00:00:05 2025' }, expected: 5000 },
    { name: 'a date in the past, as 0', headers: { 'retry-after': 'Tue, 31 Dec 2024 23:59:00 GMT' }, expected: 0 },
    { name: 'a mixed-case name', headers: { 'Retry-After': '3' }, expected: 3000 },
    { name: 'nothing when absent', headers: { 'content-type': 'text/plain' }, expected: null },
    { name: 'nothing for a negative number', headers: { 'retry-after': '-5' }, expected: null },
    { name: 'nothing for text', headers: { 'retry-after': 'later' }, expected: null },
    { name: 'nothing for an empty value', headers: { 'retry-after': '' }, expected: null },
    { name: 'nothing for a non-GMT date', headers: { 'retry-after': 'Wed, 01 Jan 2025 00:00:30 PST' }, expected: null },
    {
      name: 'nothing for an impossible date',
      headers: { 'retry-after': 'Fri, 31 Feb 2025 00:00:00 GMT' },
      expected: null,
    },
    { name: 'nothing for an ISO timestamp', headers: { 'retry-after': '2025-01-01T00:00:30Z' }, expected: null },
    {
      name: 'nothing for two unreadable headers',
      headers: { 'retry-after-ms': 'x', 'retry-after': 'y' },
      expected: null,
    },
  ])('reads $name', ({ headers, expected }) => {
    expect(parseRetryAfter(headers, now)).toBe(expected);
  });

  it('reads a fetch Headers object', () => {
    expect(parseRetryAfter(new Headers({ 'Retry-After': '7' }), now)).toBe(7000);
  });

  it('places RFC 850 two-digit years within 50 years of now', () => {
    const in2090 = Date.parse('2090-01-01T00:00:00Z');
    expect(parseRetryAfter({ 'retry-after': 'Sunday, 01-Jan-90 00:00:10 GMT' }, in2090)).toBe(10_000);
    // From 2025, '90' is 1990, not 2090, so the date is long past.
    expect(parseRetryAfter({ 'retry-after': 'Monday, 01-Jan-90 00:00:10 GMT' }, now)).toBe(0);
  });
});
