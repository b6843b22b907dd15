/**
 * Reading what a vendor sends, the same on both wires: events that must be JSON, a tool
 * call's arguments (kept and marked invalid when they are not an object), an error the
 * vendor reports inside a body or a stream (classed by the status it stands for), ids
 * unique within an answer, and the calls of a finished answer.
 */
import { keptOfSent, type ToolCall } from '../provider.js';
import { scrubText } from '../secrets.js';
import { ProviderError, type StreamPart } from './types.js';

export type Json = Record<string, unknown>;

export function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function num(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}

/** A count a vendor reports (tokens, searches): a whole number from 0, else 0, so no fraction or negative reaches the trace. */
export function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.floor(value) : 0;
}

export function parseJson(data: string, provider: string): unknown {
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
export function parseArguments(
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
export function argumentsOf(
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

export function vendorError(provider: string, error: unknown, statusHint: number | null): ProviderError {
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
export function uniqueId(used: Set<string>, id: string, from: number): string {
  let unique = id;
  for (let suffix = from; used.has(unique); suffix++) unique = `${id}_${suffix}`;
  used.add(unique);
  return unique;
}

/** A whole JSON answer without the field every completion of its wire has. */
export function notAnAnswer(provider: string, body: Json, field: string): ProviderError {
  return new ProviderError({
    kind: 'undecodable',
    provider,
    message: `${provider}: the answer is JSON but not a completion (it has no ${field}): ${scrubText(JSON.stringify(body)).slice(0, 200)}`,
  });
}

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
export function completeArguments(text: string): Record<string, unknown> | null {
  if (text.trim() === '') return null;
  try {
    const value: unknown = JSON.parse(text);
    return isObject(value) ? value : null;
  } catch {
    return null;
  }
}
