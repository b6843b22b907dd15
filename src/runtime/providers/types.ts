/**
 * The provider layer's shared vocabulary: what a streamed completion is made of, how a
 * failure is classified, and what a vendor says about its rate limits.
 */
import { ErrorCode, HarnessError, registerErrorClass } from '../../errors.js';
import { scrubText } from '../secrets.js';
import type { WebSource } from '../web/web.js';

/** Tokens of one model call. Cache and reasoning counts are 0 where the vendor does not report them. */
export interface CallUsage {
  inputTokens: number;
  outputTokens: number;
  /** Prompt tokens served from the vendor's cache (part of inputTokens). */
  cacheReadTokens: number;
  /** Prompt tokens written to the vendor's cache (part of inputTokens). */
  cacheWriteTokens: number;
  /** Output tokens spent on reasoning (part of outputTokens). */
  reasoningTokens: number;
}

/**
 * What a call is taken to have cost when the model reported nothing: a quarter of the
 * characters sent and of those received (text and the calls' JSON), the usual rough
 * measure of a token, so a model that never reports usage still draws on the budget.
 */
export function estimatedUsage(
  requestChars: number,
  text: string,
  calls: readonly { name: string; args: unknown }[],
): CallUsage {
  const callChars = calls.reduce((sum, call) => sum + call.name.length + JSON.stringify(call.args).length, 0);
  return {
    inputTokens: Math.ceil(requestChars / 4),
    outputTokens: Math.ceil((text.length + callChars) / 4),
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    reasoningTokens: 0,
  };
}

/** One part of a streamed completion, in the order the vendor sent it. */
export type StreamPart =
  | { type: 'text-delta'; text: string }
  | { type: 'tool-call-start'; index: number; id: string; name: string }
  | { type: 'tool-call-delta'; index: number; argumentsDelta: string }
  | {
      type: 'tool-call-end';
      index: number;
      id: string;
      name: string;
      args: Record<string, unknown>;
      /** The arguments were not a JSON object: why, and what was sent (see ToolCall.invalid). */
      invalid?: { reason: string; sent: string };
    }
  | { type: 'usage'; usage: CallUsage }
  /** A page the vendor's own web tools found, fetched or cited (see runtime/web/web.ts). */
  | { type: 'web-source'; source: WebSource }
  /** How many searches and fetches the vendor ran for this answer, as it reported them. */
  | { type: 'web-use'; searches: number; fetches: number }
  | { type: 'end'; finishReason: string | null };

/** One rate-limit window as the vendor reported it. */
export interface RateLimitWindow {
  limit: number | null;
  remaining: number | null;
  /** When the window resets, in milliseconds from the response (null when not given or not readable). */
  resetMs: number | null;
}

export interface RateLimits {
  requests: RateLimitWindow | null;
  tokens: RateLimitWindow | null;
  /** Every rate-limit related header (including retry-after), verbatim, in the order received. */
  raw: [string, string][];
}

/** What a model can run, where the vendor publishes it. Prices are per million tokens. */
export interface ModelInfo {
  id: string;
  contextWindow: number | null;
  price: { input: number | null; output: number | null } | null;
}

/** Why a model call failed, as a stable string. */
export type ProviderFailureKind =
  | 'http' // the vendor answered with an error status
  | 'connection' // no answer: refused, reset, DNS, timeout
  | 'truncated' // the stream ended before the vendor said it was done
  | 'stalled' // the stream went silent (no event) for longer than the provider's idle deadline
  | 'undecodable' // the vendor sent something that is not its wire format
  | 'aborted'; // the caller cancelled

export interface ProviderErrorInit {
  kind: ProviderFailureKind;
  provider: string;
  message: string;
  statusCode?: number | null;
  responseBody?: string | null;
  retryAfterMs?: number | null;
  rateLimits?: RateLimits | null;
  cause?: unknown;
}

/**
 * A failed model call. `isRetryable` is derived from what happened, never from the
 * message: 408, 409, 429 and 5xx, a connection that failed or was reset, a truncated
 * stream and a stalled one are worth another try; 400, 401, 403, 404 and an undecodable answer
 * are not.
 */
export class ProviderError extends HarnessError {
  readonly kind: ProviderFailureKind;
  readonly provider: string;
  readonly statusCode: number | null;
  readonly responseBody: string | null;
  readonly retryAfterMs: number | null;
  readonly rateLimits: RateLimits | null;
  readonly isRetryable: boolean;

  constructor(init: ProviderErrorInit) {
    const statusCode = init.statusCode ?? null;
    const retryable = isRetryable(init.kind, statusCode);
    super(ErrorCode.ProviderFailed, init.message, {
      cause: init.cause,
      details: {
        kind: init.kind,
        provider: init.provider,
        statusCode,
        isRetryable: retryable,
        retryAfterMs: init.retryAfterMs ?? null,
      },
    });
    this.name = 'ProviderError';
    this.kind = init.kind;
    this.provider = init.provider;
    this.statusCode = statusCode;
    // A vendor's body may echo the key it was sent: scrubbed like the message.
    this.responseBody = init.responseBody == null ? null : scrubText(init.responseBody);
    this.retryAfterMs = init.retryAfterMs ?? null;
    this.rateLimits = init.rateLimits ?? null;
    this.isRetryable = retryable;
  }
  override serializedFields(): Record<string, unknown> {
    return { responseBody: this.responseBody, rateLimits: this.rateLimits };
  }

  /**
   * `instanceof ProviderError` holds for one made by another copy of io-harness in the same
   * process too (a provider module importing the package, loaded by a runtime that runs
   * from a copy of its own: dist/ beside the bundle, or two installed versions): an
   * io-harness error of this code, with a kind. The runtime reads its kind, status and
   * retry advice whichever copy made it.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return (
      HarnessError.isInstance(value) &&
      value.code === ErrorCode.ProviderFailed &&
      typeof (value as { kind?: unknown }).kind === 'string'
    );
  }
}

registerErrorClass('ProviderError', (data, details) => {
  const fields = data.fields ?? {};
  const error = new ProviderError({
    kind: details.kind as ProviderFailureKind,
    provider: String(details.provider),
    message: data.message,
    statusCode: (details.statusCode as number | null) ?? null,
    retryAfterMs: (details.retryAfterMs as number | null) ?? null,
    responseBody: (fields.responseBody as string | null) ?? null,
    rateLimits: (fields.rateLimits as RateLimits | null) ?? null,
  });
  // What the client added to the details (the attempts a call took) crosses too.
  Object.assign(error.details, details);
  return error;
});

export function isRetryable(kind: ProviderFailureKind, statusCode: number | null): boolean {
  switch (kind) {
    case 'connection':
    case 'truncated':
    case 'stalled':
      return true;
    case 'undecodable':
    case 'aborted':
      return false;
    case 'http':
      return (
        statusCode === 408 || statusCode === 409 || statusCode === 429 || (statusCode !== null && statusCode >= 500)
      );
  }
}
