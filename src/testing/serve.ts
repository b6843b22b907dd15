/**
 * Serving a {@link Script} over the vendors' wires: the scripted model server answers
 * each HTTP request by rebuilding the request the runtime made (system prompt,
 * transcript, tools) from the wire body and asking the script. One script can then
 * drive a tree in-thread (`scriptedProvider`) or over real HTTP, unchanged.
 */
import type { ModelRequest, ToolCall, TranscriptEntry } from '../runtime/provider.js';
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
          transcript.push({
            role: 'tool',
            callId,
            name: names.get(callId) ?? '',
            content: contentText(block.content),
            isError: block.is_error === true,
          });
        }
      }
    }
  }
  return transcript;
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
