/**
 * Serving a {@link Script} over the vendors' wires: the scripted model server answers
 * each HTTP request by rebuilding the request the runtime made (system prompt,
 * transcript, tools) from the wire body and asking the script. One script can then
 * drive a tree in-thread (`scriptedProvider`) or over real HTTP, unchanged.
 */
import type { ImageAttachment } from '../runtime/images.js';
import type { ModelRequest, ToolCall, TranscriptEntry } from '../runtime/provider.js';
import { IMAGES_OF } from '../runtime/providers/wires.js';
import {
  contentText,
  type ScriptedAnswer,
  type ScriptedCall,
  ScriptedModelServer,
  systemText,
  toolResults,
} from './model-server.js';
import type { Script, ScriptedOptions } from './scripted.js';

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function parseArgs(text: unknown): Record<string, unknown> {
  if (isObject(text)) return text;
  try {
    const value = JSON.parse(String(text ?? '{}'));
    return isObject(value) ? value : {};
  } catch {
    return {};
  }
}

/** The transcript a wire request carries, in the runtime's own terms. */
export function transcriptOf(call: ScriptedCall): TranscriptEntry[] {
  const body = isObject(call.body) ? call.body : {};
  const messages = Array.isArray(body.messages) ? body.messages.filter(isObject) : [];
  const names = new Map(
    toolResults(call).flatMap((result) => (result.name ? [[result.callId, result.name] as const] : [])),
  );
  const transcript: TranscriptEntry[] = [];
  for (const message of messages) {
    if (call.wire === 'openai') {
      if (message.role === 'user' && imagesMessage(message.content, transcript)) continue;
      if (message.role === 'user') transcript.push({ role: 'user', text: contentText(message.content) });
      else if (message.role === 'assistant') {
        const toolCalls: ToolCall[] = (Array.isArray(message.tool_calls) ? message.tool_calls : [])
          .filter(isObject)
          .map((item) => {
            const fn = isObject(item.function) ? item.function : {};
            return { id: String(item.id), name: String(fn.name), args: parseArgs(fn.arguments) };
          });
        transcript.push({ role: 'assistant', text: contentText(message.content), toolCalls });
      } else if (message.role === 'tool') {
        const callId = String(message.tool_call_id);
        transcript.push({
          role: 'tool',
          callId,
          name: names.get(callId) ?? '',
          content: contentText(message.content),
          isError: false,
        });
      }
      continue;
    }
    const blocks =
      typeof message.content === 'string'
        ? [{ type: 'text', text: message.content }]
        : Array.isArray(message.content)
          ? message.content.filter(isObject)
          : [];
    if (message.role === 'assistant') {
      const text = blocks
        .filter((block) => block.type === 'text')
        .map((block) => String(block.text ?? ''))
        .join('');
      const toolCalls = blocks
        .filter((block) => block.type === 'tool_use')
        .map((block) => ({ id: String(block.id), name: String(block.name), args: parseArgs(block.input) }));
      transcript.push({ role: 'assistant', text, toolCalls });
    } else {
      for (const block of blocks) {
        if (block.type === 'text') transcript.push({ role: 'user', text: String(block.text ?? '') });
        if (block.type === 'tool_result') {
          const callId = String(block.tool_use_id);
          const images = (Array.isArray(block.content) ? block.content.filter(isObject) : [])
            .filter((part) => part.type === 'image' && isObject(part.source))
            .map((part) => {
              const source = part.source as Json;
              return { mimeType: String(source.media_type), data: String(source.data) } as ImageAttachment;
            });
          transcript.push({
            role: 'tool',
            callId,
            name: names.get(callId) ?? '',
            content: contentText(block.content),
            isError: block.is_error === true,
            ...(images.length > 0 ? { images } : {}),
          });
        }
      }
    }
  }
  return transcript;
}

/**
 * The OpenAI wire's user message of images after a run of tool answers: each group, named
 * by its call, goes back onto that call's tool entry. False for any other user message.
 */
function imagesMessage(content: unknown, transcript: TranscriptEntry[]): boolean {
  const parts = Array.isArray(content) ? content.filter(isObject) : [];
  const first = parts[0];
  if (first?.type !== 'text' || !String(first.text).startsWith(IMAGES_OF)) return false;
  let entry: Extract<TranscriptEntry, { role: 'tool' }> | undefined;
  for (const part of parts) {
    if (part.type === 'text') {
      const callId = String(part.text)
        .slice(IMAGES_OF.length + 1)
        .split(' ')[0];
      entry = transcript.find(
        (item): item is Extract<TranscriptEntry, { role: 'tool' }> => item.role === 'tool' && item.callId === callId,
      );
    } else if (part.type === 'image_url' && entry && isObject(part.image_url)) {
      const found = /^data:([^;]+);base64,(.*)$/s.exec(String(part.image_url.url));
      if (found)
        entry.images = [
          ...(entry.images ?? []),
          { mimeType: found[1] as ImageAttachment['mimeType'], data: found[2] as string },
        ];
    }
  }
  return true;
}

/** The request the runtime made, rebuilt from the wire (metadata: what the system prompt says of the agent). */
export function requestOf(call: ScriptedCall): ModelRequest {
  const system = systemText(call);
  const transcript = transcriptOf(call);
  const address = /You are agent "([^"]+)"/.exec(system)?.[1] ?? 'unknown';
  const body = isObject(call.body) ? call.body : {};
  const tools = (Array.isArray(body.tools) ? body.tools.filter(isObject) : []).map((tool) => {
    const fn = isObject(tool.function) ? tool.function : tool;
    return {
      name: String(fn.name),
      description: String(fn.description ?? ''),
      parameters: (fn.parameters ?? fn.input_schema ?? {}) as Json,
    };
  });
  return {
    system,
    transcript,
    tools,
    metadata: {
      runId: '',
      rootId: '',
      address,
      parentAddress: null,
      depth: 0,
      seq: transcript.filter((entry) => entry.role === 'assistant').length + 1,
    },
  };
}

/** Starts a scripted model server that answers every request with `script`. */
export function serveScript(script: Script, options: ScriptedOptions = {}): Promise<ScriptedModelServer> {
  return ScriptedModelServer.start(async (call): Promise<ScriptedAnswer> => {
    const reply = await script(requestOf(call));
    const answer: ScriptedAnswer = {
      ...(reply.text !== undefined ? { text: reply.text } : {}),
      ...(reply.toolCalls
        ? { toolCalls: reply.toolCalls.map((toolCall) => ({ name: toolCall.name, args: toolCall.args ?? {} })) }
        : {}),
      ...(reply.usage ? { usage: reply.usage } : {}),
      ...(options.latencyMs ? { latencyMs: options.latencyMs } : {}),
    };
    return answer;
  });
}
