/**
 * A request as the scripted model server reads it, in either vendor's wire: what it says
 * (the system prompt, the user's last words, the tool results, the step it is on) for a
 * script to decide on, and the shape checks a vendor would answer 400 to.
 */
import type { ScriptedCall } from './model-server.js';

/** The wire a request came in on. */
export type Wire = ScriptedCall['wire'];

/** The system prompt of a request, from either wire; several system parts are joined with newlines. */
export function systemText(call: ScriptedCall): string {
  const body = record(call.body);
  if (call.wire === 'anthropic') return contentText(body.system);
  return messages(call)
    .filter((message) => message.role === 'system' || message.role === 'developer')
    .map((message) => contentText(message.content))
    .join('\n');
}

/**
 * The text of the newest user message that has any. On the Anthropic wire a user
 * message carrying only tool results is skipped, so both wires agree on what the user
 * last said. Empty when there is none.
 */
export function lastUserText(call: ScriptedCall): string {
  const users = messages(call).filter((message) => message.role === 'user');
  for (const message of users.reverse()) {
    if (call.wire === 'openai') return contentText(message.content);
    if (typeof message.content === 'string') return message.content;
    const blocks = list(message.content).map(record);
    if (blocks.some((block) => block.type === 'text')) return contentText(blocks);
  }
  return '';
}

/**
 * Every tool result the request carries, oldest first, with the name of the tool call
 * it answers where the request still holds that call. OpenAI's wire has no error flag,
 * so `isError` is always false there.
 */
export function toolResults(
  call: ScriptedCall,
): { name?: string; callId: string; content: string; isError: boolean }[] {
  const names = new Map<string, string>();
  const results: { name?: string; callId: string; content: string; isError: boolean }[] = [];
  const add = (callId: string, content: string, isError: boolean) => {
    const name = names.get(callId);
    results.push(name === undefined ? { callId, content, isError } : { name, callId, content, isError });
  };
  for (const message of messages(call)) {
    if (call.wire === 'openai') {
      for (const toolCall of list(message.tool_calls).map(record)) {
        const name = record(toolCall.function).name;
        if (typeof toolCall.id === 'string' && typeof name === 'string') names.set(toolCall.id, name);
      }
      if (message.role === 'tool') add(text(message.tool_call_id), contentText(message.content), false);
      continue;
    }
    for (const block of list(message.content).map(record)) {
      if (block.type === 'tool_use' && typeof block.id === 'string' && typeof block.name === 'string') {
        names.set(block.id, block.name);
      }
      if (block.type === 'tool_result')
        add(text(block.tool_use_id), contentText(block.content), block.is_error === true);
    }
  }
  return results;
}

/** How many assistant messages the request carries: the step an agent is on, from zero. */
export function assistantTurns(call: ScriptedCall): number {
  return messages(call).filter((message) => message.role === 'assistant').length;
}

function messages(call: ScriptedCall): Record<string, unknown>[] {
  return list(record(call.body).messages).map(record);
}

/** Reads untrusted JSON without trusting it: anything that is not an object reads as an empty one. */
export function record(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

function list(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

/** The text of a content field in either wire: a string, or a list of parts whose text parts are joined with newlines. */
/** The text of a message's content, a string or text parts. */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  return list(content)
    .map(record)
    .filter((part) => part.type === 'text' && typeof part.text === 'string')
    .map((part) => part.text as string)
    .join('\n');
}

/** The shape checks a vendor would reject a request for, so a provider bug shows up as the 400 the vendor would send. */
export function invalidRequest(wire: Wire, body: unknown): string | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return 'request body must be a JSON object';
  const fields = body as Record<string, unknown>;
  if (typeof fields.model !== 'string') return 'model: a string is required';
  if (!Array.isArray(fields.messages)) return 'messages: an array is required';
  if (fields.messages.some((message) => typeof record(message).role !== 'string')) {
    return 'messages: every message needs a role';
  }
  if (wire === 'anthropic' && typeof fields.max_tokens !== 'number') return 'max_tokens: a number is required';
  if (fields.stream !== undefined && typeof fields.stream !== 'boolean') return 'stream: must be a boolean';
  return wire === 'openai' ? invalidOpenAiMessages(fields.messages) : invalidAnthropicMessages(fields.messages);
}

const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

/** Chat Completions' rules for tool answers and images, as its 400s state them. */
function invalidOpenAiMessages(messages: unknown[]): string | null {
  for (const [index, item] of messages.entries()) {
    const message = record(item);
    const parts = Array.isArray(message.content) ? message.content.map(record) : [];
    if (message.role === 'tool' && parts.some((part) => part.type !== 'text'))
      return `messages[${index}].content: a tool message takes text parts only`;
    for (const part of parts) {
      if (part.type !== 'image_url') continue;
      const url = String(record(part.image_url).url ?? '');
      const data = /^data:([^;,]+);base64,/.exec(url);
      if (data ? !IMAGE_TYPES.has(data[1] as string) : !/^https?:\/\//.test(url))
        return `messages[${index}].content: image_url must be a URL or a data URL of PNG, JPEG, GIF or WebP`;
    }
    const calls = list(message.tool_calls).map(record);
    if (message.role !== 'assistant' || calls.length === 0) continue;
    const answered = new Set<unknown>();
    for (let next = index + 1; next < messages.length && record(messages[next]).role === 'tool'; next++)
      answered.add(record(messages[next]).tool_call_id);
    if (calls.some((call) => !answered.has(call.id)))
      return `messages[${index}]: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'`;
  }
  return null;
}

/** The Messages API's rules for images and tool results. */
function invalidAnthropicMessages(messages: unknown[]): string | null {
  for (const [index, item] of messages.entries()) {
    const blocks = list(record(item).content).map(record);
    for (const block of blocks) {
      const inner = block.type !== 'tool_result' ? [block] : list(block.content).map(record);
      for (const part of inner) {
        if (block.type === 'tool_result' && part.type !== 'text' && part.type !== 'image')
          return `messages.${index}.content: a tool_result holds text and image blocks only`;
        if (part.type !== 'image') continue;
        const source = record(part.source);
        if (source.type !== 'base64' || !IMAGE_TYPES.has(String(source.media_type)) || typeof source.data !== 'string')
          return `messages.${index}.content: an image's source must be base64 of image/jpeg, image/png, image/gif or image/webp`;
      }
    }
  }
  return null;
}
