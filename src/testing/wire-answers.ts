/**
 * A scripted answer in each vendor's wire: the completion with every default filled in,
 * then streamed as the vendor streams it (OpenAI's chunks, Anthropic's named events) or
 * sent whole, and the error bodies each vendor sends with a status.
 */
import type { ScriptedCall, ScriptedCompletion, ScriptedWeb } from './model-server.js';
import { record, type Wire } from './wire-requests.js';

interface ResolvedToolCall {
  id: string;
  name: string;
  args: Record<string, unknown>;
  argumentsJson: string;
}

interface ResolvedUsage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  reasoningTokens: number;
}

/** A completion with every default filled in: what both wire encoders work from. */
export interface ResolvedCompletion {
  model: string;
  text: string;
  toolCalls: ResolvedToolCall[];
  usage: ResolvedUsage;
  web: ScriptedWeb | null;
  finishReason: string | null;
}

/**
 * Fills in what the script left out. Ids and token counts are functions of the call
 * alone, so a test can predict them: tool call n of call i is `call_i_n` (OpenAI) or
 * `toolu_i_n` (Anthropic); input tokens are a quarter of the raw body length; output
 * tokens a quarter of the text plus the JSON of `[{name, args}, ...]` when there are
 * tool calls; cache and reasoning counts 0.
 */
export function resolveCompletion(call: ScriptedCall, answer: ScriptedCompletion): ResolvedCompletion {
  const prefix = call.wire === 'openai' ? 'call' : 'toolu';
  const toolCalls = (answer.toolCalls ?? []).map((toolCall, position) => ({
    id: toolCall.id ?? `${prefix}_${call.index}_${position}`,
    name: toolCall.name,
    args: toolCall.args,
    argumentsJson: toolCall.rawArguments ?? JSON.stringify(toolCall.args),
  }));
  const text = answer.text ?? '';
  const callsJson =
    toolCalls.length > 0
      ? JSON.stringify(toolCalls.map((toolCall) => ({ name: toolCall.name, args: toolCall.args })))
      : '';
  const usage = answer.usage ?? {};
  const model = record(call.body).model;
  return {
    model: typeof model === 'string' ? model : 'scripted-model',
    text,
    toolCalls,
    usage: {
      inputTokens: usage.inputTokens ?? Math.ceil(call.raw.length / 4),
      outputTokens: usage.outputTokens ?? Math.ceil((text.length + callsJson.length) / 4),
      cacheReadTokens: usage.cacheReadTokens ?? 0,
      cacheWriteTokens: usage.cacheWriteTokens ?? 0,
      reasoningTokens: usage.reasoningTokens ?? 0,
    },
    web: answer.web ?? null,
    finishReason: answer.finishReason ?? null,
  };
}

/** OpenAI's annotations for the answer's citations (OpenRouter adds the cited passage as `content`). */
function urlCitations(completion: ResolvedCompletion) {
  return (completion.web?.citations ?? []).map((citation) => ({
    type: 'url_citation',
    url_citation: {
      url: citation.url,
      title: citation.title,
      content: citation.citedText,
      start_index: 0,
      end_index: completion.text.length,
    },
  }));
}

/** The usage's count of the vendor's own tool runs, when the answer had any. */
function serverToolUse(web: ScriptedWeb | null, wire: Wire) {
  if (web === null || (web.searches === undefined && web.fetches === undefined)) return {};
  return {
    server_tool_use: {
      web_search_requests: web.searches?.length ?? 0,
      ...(wire === 'anthropic' ? { web_fetch_requests: web.fetches?.length ?? 0 } : {}),
    },
  };
}

/** Anthropic's blocks for what its web tools did: each run's `server_tool_use`, then its result. */
function anthropicWebBlocks(call: ScriptedCall, web: ScriptedWeb | null): Record<string, unknown>[] {
  const blocks: Record<string, unknown>[] = [];
  for (const [n, search] of (web?.searches ?? []).entries()) {
    const id = `srvtoolu_${call.index}_s${n}`;
    blocks.push({ type: 'server_tool_use', id, name: 'web_search', input: { query: search.query } });
    blocks.push({
      type: 'web_search_tool_result',
      tool_use_id: id,
      content: search.results.map((result) => ({
        type: 'web_search_result',
        url: result.url,
        title: result.title,
        encrypted_content: Buffer.from(result.url).toString('base64'),
        page_age: null,
      })),
    });
  }
  for (const [n, fetch] of (web?.fetches ?? []).entries()) {
    const id = `srvtoolu_${call.index}_f${n}`;
    blocks.push({ type: 'server_tool_use', id, name: 'web_fetch', input: { url: fetch.url } });
    blocks.push({
      type: 'web_fetch_tool_result',
      tool_use_id: id,
      content: {
        type: 'web_fetch_result',
        url: fetch.url,
        content: {
          type: 'document',
          source: { type: 'text', media_type: 'text/plain', data: fetch.text ?? '' },
          ...(fetch.title === undefined ? {} : { title: fetch.title }),
        },
        retrieved_at: '2026-01-01T00:00:00Z',
      },
    });
  }
  return blocks;
}

function anthropicCitations(web: ScriptedWeb | null) {
  return (web?.citations ?? []).map((citation) => ({
    type: 'web_search_result_location',
    url: citation.url,
    title: citation.title,
    cited_text: citation.citedText,
    encrypted_index: Buffer.from(citation.url).toString('base64'),
  }));
}

export function encodeEvents(wire: Wire, call: ScriptedCall, completion: ResolvedCompletion): string[] {
  return wire === 'openai' ? openAiEvents(call, completion) : anthropicEvents(call, completion);
}

export function encodeMessage(wire: Wire, call: ScriptedCall, completion: ResolvedCompletion): unknown {
  return wire === 'openai' ? openAiMessage(call, completion) : anthropicMessage(call, completion);
}

function openAiUsage(usage: ResolvedUsage) {
  return {
    prompt_tokens: usage.inputTokens,
    completion_tokens: usage.outputTokens,
    total_tokens: usage.inputTokens + usage.outputTokens,
    prompt_tokens_details: { cached_tokens: usage.cacheReadTokens, audio_tokens: 0 },
    completion_tokens_details: {
      reasoning_tokens: usage.reasoningTokens,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
}

/**
 * A Chat Completions stream as OpenAI sends it: a role chunk, content pieces word by
 * word, each tool call opened with its id and name and then its arguments in several
 * fragments, a finish chunk, and — only when the request asked with
 * `stream_options.include_usage`, as with OpenAI — a usage chunk with empty choices
 * (every earlier chunk then carries `usage: null`). Ends with `data: [DONE]`.
 */
function openAiEvents(call: ScriptedCall, completion: ResolvedCompletion): string[] {
  const includeUsage = record(record(call.body).stream_options).include_usage === true;
  const head = {
    id: `chatcmpl-scripted-${call.index}`,
    object: 'chat.completion.chunk',
    created: Math.floor(Date.now() / 1000),
    model: completion.model,
    system_fingerprint: 'fp_scripted',
  };
  const chunk = (delta: Record<string, unknown>, finishReason: string | null) =>
    data({
      ...head,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
      ...(includeUsage ? { usage: null } : {}),
    });
  const events = [chunk({ role: 'assistant', content: '', refusal: null }, null)];
  for (const piece of words(completion.text)) events.push(chunk({ content: piece }, null));
  const annotations = urlCitations(completion);
  if (annotations.length > 0) events.push(chunk({ annotations }, null));
  for (const [index, toolCall] of completion.toolCalls.entries()) {
    events.push(
      chunk(
        {
          tool_calls: [{ index, id: toolCall.id, type: 'function', function: { name: toolCall.name, arguments: '' } }],
        },
        null,
      ),
    );
    for (const fragment of fragments(toolCall.argumentsJson)) {
      events.push(chunk({ tool_calls: [{ index, function: { arguments: fragment } }] }, null));
    }
  }
  events.push(chunk({}, completion.finishReason ?? (completion.toolCalls.length > 0 ? 'tool_calls' : 'stop')));
  if (includeUsage)
    events.push(
      data({
        ...head,
        choices: [],
        usage: { ...openAiUsage(completion.usage), ...serverToolUse(completion.web, 'openai') },
      }),
    );
  events.push('data: [DONE]\n\n');
  return events;
}

function openAiMessage(call: ScriptedCall, completion: ResolvedCompletion) {
  const toolCalls = completion.toolCalls.map((toolCall) => ({
    id: toolCall.id,
    type: 'function',
    function: { name: toolCall.name, arguments: toolCall.argumentsJson },
  }));
  return {
    id: `chatcmpl-scripted-${call.index}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: completion.model,
    system_fingerprint: 'fp_scripted',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: completion.text === '' && toolCalls.length > 0 ? null : completion.text,
          refusal: null,
          ...(urlCitations(completion).length > 0 ? { annotations: urlCitations(completion) } : {}),
          ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
        },
        logprobs: null,
        finish_reason: completion.finishReason ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop'),
      },
    ],
    usage: { ...openAiUsage(completion.usage), ...serverToolUse(completion.web, 'openai') },
  };
}

/** Anthropic counts cache reads and writes apart from `input_tokens`; the script's `inputTokens` includes them. */
function anthropicUsage(usage: ResolvedUsage, outputTokens: number) {
  return {
    input_tokens: Math.max(0, usage.inputTokens - usage.cacheReadTokens - usage.cacheWriteTokens),
    cache_creation_input_tokens: usage.cacheWriteTokens,
    cache_read_input_tokens: usage.cacheReadTokens,
    output_tokens: outputTokens,
  };
}

function anthropicBlocks(call: ScriptedCall, completion: ResolvedCompletion) {
  const citations = anthropicCitations(completion.web);
  return [
    ...anthropicWebBlocks(call, completion.web),
    ...(completion.text === ''
      ? []
      : [{ type: 'text', text: completion.text, ...(citations.length > 0 ? { citations } : {}) }]),
    ...completion.toolCalls.map((toolCall) => ({
      type: 'tool_use',
      id: toolCall.id,
      name: toolCall.name,
      input: toolCall.argumentsJson === JSON.stringify(toolCall.args) ? toolCall.args : decoded(toolCall.argumentsJson),
    })),
  ];
}

/**
 * A Messages stream as Anthropic sends it: `message_start` (whose usage carries the
 * prompt counts and an output count of at most 1, as Anthropic's does — the final count
 * is in `message_delta`), then per block start, deltas and stop, with a `ping` after the
 * first block opens; tool input arrives as an empty `input_json_delta` followed by at
 * least two fragments. Then `message_delta` with the stop reason and `message_stop`.
 */
function anthropicEvents(call: ScriptedCall, completion: ResolvedCompletion): string[] {
  const stopReason = completion.finishReason ?? (completion.toolCalls.length > 0 ? 'tool_use' : 'end_turn');
  const events = [
    named('message_start', {
      type: 'message_start',
      message: {
        id: `msg_scripted_${call.index}`,
        type: 'message',
        role: 'assistant',
        model: completion.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: anthropicUsage(completion.usage, Math.min(1, completion.usage.outputTokens)),
      },
    }),
  ];
  const ping = named('ping', { type: 'ping' });
  let index = 0;
  for (const block of anthropicWebBlocks(call, completion.web)) {
    // A server tool's input streams as its call's does; its result block comes whole.
    const input = block.type === 'server_tool_use' ? JSON.stringify(block.input) : null;
    const start = input === null ? block : { ...block, input: {} };
    events.push(named('content_block_start', { type: 'content_block_start', index, content_block: start }));
    if (input !== null) events.push(blockDelta(index, { type: 'input_json_delta', partial_json: input }));
    events.push(named('content_block_stop', { type: 'content_block_stop', index }));
    index++;
  }
  if (completion.text !== '') {
    events.push(
      named('content_block_start', { type: 'content_block_start', index, content_block: { type: 'text', text: '' } }),
    );
    events.push(ping);
    for (const citation of anthropicCitations(completion.web))
      events.push(blockDelta(index, { type: 'citations_delta', citation }));
    for (const piece of words(completion.text)) {
      events.push(blockDelta(index, { type: 'text_delta', text: piece }));
    }
    events.push(named('content_block_stop', { type: 'content_block_stop', index }));
    index++;
  }
  for (const toolCall of completion.toolCalls) {
    events.push(
      named('content_block_start', {
        type: 'content_block_start',
        index,
        content_block: { type: 'tool_use', id: toolCall.id, name: toolCall.name, input: {} },
      }),
    );
    if (index === 0) events.push(ping);
    for (const fragment of ['', ...fragments(toolCall.argumentsJson)]) {
      events.push(blockDelta(index, { type: 'input_json_delta', partial_json: fragment }));
    }
    events.push(named('content_block_stop', { type: 'content_block_stop', index }));
    index++;
  }
  if (index === 0) events.push(ping);
  events.push(
    named('message_delta', {
      type: 'message_delta',
      delta: { stop_reason: stopReason, stop_sequence: null },
      usage: { output_tokens: completion.usage.outputTokens, ...serverToolUse(completion.web, 'anthropic') },
    }),
  );
  events.push(named('message_stop', { type: 'message_stop' }));
  return events;
}

function anthropicMessage(call: ScriptedCall, completion: ResolvedCompletion) {
  return {
    id: `msg_scripted_${call.index}`,
    type: 'message',
    role: 'assistant',
    model: completion.model,
    content: anthropicBlocks(call, completion),
    stop_reason: completion.finishReason ?? (completion.toolCalls.length > 0 ? 'tool_use' : 'end_turn'),
    stop_sequence: null,
    usage: {
      ...anthropicUsage(completion.usage, completion.usage.outputTokens),
      ...serverToolUse(completion.web, 'anthropic'),
    },
  };
}

/** The error body each vendor sends with an error status, so providers parse the shape they will meet in production. */
export function errorBody(wire: Wire, status: number, message: string): unknown {
  if (wire === 'anthropic') return { type: 'error', error: { type: anthropicErrorType(status), message } };
  const [type, code] = openAiErrorType(status);
  return { error: { message, type, param: null, code } };
}

function anthropicErrorType(status: number): string {
  switch (status) {
    case 400:
      return 'invalid_request_error';
    case 401:
      return 'authentication_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 529:
      return 'overloaded_error';
    default:
      return status >= 500 ? 'api_error' : 'invalid_request_error';
  }
}

function openAiErrorType(status: number): [string, string | null] {
  switch (status) {
    case 401:
      return ['invalid_request_error', 'invalid_api_key'];
    case 404:
      return ['invalid_request_error', 'model_not_found'];
    case 429:
      return ['requests', 'rate_limit_exceeded'];
    default:
      return status >= 500 ? ['server_error', null] : ['invalid_request_error', null];
  }
}

function data(payload: unknown): string {
  return `data: ${JSON.stringify(payload)}\n\n`;
}

/** One `content_block_delta` event of block `index`. */
function blockDelta(index: number, delta: Record<string, unknown>): string {
  return named('content_block_delta', { type: 'content_block_delta', index, delta });
}

function named(event: string, payload: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(payload)}\n\n`;
}

/** Splits text the way a model streams it: each piece a word with the whitespace before it. */

function words(text: string): string[] {
  return text.match(/\s*\S+|\s+$/g) ?? [];
}

/**
 * Splits tool-call arguments into at least two fragments (when there are two characters
 * to split), cutting on code points so no fragment holds half a surrogate pair.
 */
function fragments(json: string): string[] {
  // Huge arguments (a model sending megabytes) go in a few large pieces: millions of
  // twelve-character events would make the stream, not the runtime, the thing measured.
  if (json.length > 65536) {
    const pieces: string[] = [];
    const size = Math.ceil(json.length / 16);
    let start = 0;
    while (start < json.length) {
      let end = Math.min(json.length, start + size);
      // Never between the two halves of a surrogate pair.
      if (end < json.length && /[\uD800-\uDBFF]/.test(json[end - 1] ?? '')) end++;
      pieces.push(json.slice(start, end));
      start = end;
    }
    return pieces;
  }
  const points = Array.from(json);
  const size = Math.max(1, Math.min(12, Math.ceil(points.length / 2)));
  const pieces: string[] = [];
  for (let start = 0; start < points.length; start += size) pieces.push(points.slice(start, start + size).join(''));
  return pieces;
}

/** Raw arguments as a JSON value, or the text itself when it is not JSON. */
function decoded(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
