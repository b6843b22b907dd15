/**
 * A scripted model for tests, demos and benchmarks: a {@link Provider} whose answers
 * come from a function of the request, so a whole tree of agents (each with its own
 * address and transcript) can be driven deterministically without a key.
 *
 * Providers cannot cross a thread, so a script lives in a module the actor imports:
 *
 * @example
 * // my-script.js
 * import { scriptedProvider } from 'io-harness/testing';
 * export default () => scriptedProvider((request) =>
 *   request.transcript.length === 1 ? { text: 'done' } : { text: 'still done' });
 *
 * // the embedder
 * supervisor.run({ task: 'x', provider: { kind: 'module', module: '/abs/my-script.js' } });
 */
import type { Completion, ModelRequest, Provider, ToolCall, Usage } from '../runtime/provider.js';

export interface ScriptedReply {
  text?: string;
  toolCalls?: { name: string; args?: Record<string, unknown> }[];
  usage?: Partial<Usage>;
}

export type Script = (request: ModelRequest) => ScriptedReply | Promise<ScriptedReply>;

export interface ScriptedOptions {
  /** Each call waits this long first, like a model thinking. */
  latencyMs?: number;
  name?: string;
}

/** Counts tokens the way the scripted model charges them: one per four characters, at least one. */
export function scriptedTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

/** A scripted provider keeps its script, so the same script can also be served over HTTP ({@link serveScript}). */
export interface ScriptedProvider extends Provider {
  readonly script: Script;
  readonly options: ScriptedOptions;
}

export function scriptedProvider(script: Script, options: ScriptedOptions = {}): ScriptedProvider {
  return {
    script,
    options,
    name: options.name ?? 'scripted',
    async complete(request: ModelRequest, signal?: AbortSignal): Promise<Completion> {
      if (options.latencyMs && options.latencyMs > 0) {
        await new Promise<void>((resolve, reject) => {
          const onAbort = () => {
            clearTimeout(timer);
            reject(new Error('aborted'));
          };
          const timer = setTimeout(() => {
            signal?.removeEventListener('abort', onAbort);
            resolve();
          }, options.latencyMs);
          signal?.addEventListener('abort', onAbort, { once: true });
        });
      }
      const reply = await script(request);
      const toolCalls: ToolCall[] = (reply.toolCalls ?? []).map((call, index) => ({
        id: `call_${request.metadata.seq}_${index}`,
        name: call.name,
        args: call.args ?? {},
      }));
      const prompt = request.transcript.reduce(
        (sum, entry) => sum + ('text' in entry ? entry.text.length : entry.content.length),
        0,
      );
      const text = reply.text ?? '';
      const usage: Usage = {
        inputTokens: reply.usage?.inputTokens ?? Math.max(1, Math.ceil((request.system.length + prompt) / 4)),
        outputTokens: reply.usage?.outputTokens ?? scriptedTokens(text + JSON.stringify(toolCalls)),
      };
      return { text, toolCalls, usage, model: options.name ?? 'scripted' };
    },
  };
}

/** The tool results the transcript holds so far, newest last. */
export function toolResults(request: ModelRequest): { name: string; content: string; isError: boolean }[] {
  return request.transcript.flatMap((entry) =>
    entry.role === 'tool' ? [{ name: entry.name, content: entry.content, isError: entry.isError }] : [],
  );
}

/** How many assistant turns the transcript holds: the step the agent is on, from zero. */
export function turn(request: ModelRequest): number {
  return request.transcript.filter((entry) => entry.role === 'assistant').length;
}
