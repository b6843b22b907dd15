/** Driving the runtime over real HTTP: the scripted model server, answering per agent. */
import { createServer } from 'node:net';
import type { HttpProviderSpec } from '../../dist/index.js';
import { assistantTurns, type ModelScript, type ScriptedAnswer, systemText } from '../../dist/testing/index.js';

/** An OpenAI-wire spec for a scripted server at `url`, with a placeholder key and quick retries. */
export function openAiAt(url: string, extra: Partial<HttpProviderSpec> = {}): HttpProviderSpec {
  return {
    kind: 'openai',
    model: 'gpt-scripted',
    baseUrl: `${url}/v1`,
    apiKey: 'test-key',
    retry: { baseDelayMs: 1 },
    ...extra,
  };
}

/** The address of the agent a request comes from: its header where the spec sends it, else read off the system prompt. */
export function agentOf(call: Parameters<ModelScript>[0]): string {
  return call.agent ?? /You are agent "([^"]+)"/.exec(systemText(call))?.[1] ?? '?';
}

/** Each agent answers from its own list, one answer per turn; the last repeats. `*` is for everyone else. */
export function programs(table: Record<string, ScriptedAnswer[]>): ModelScript {
  return (call) => {
    const list = table[agentOf(call)] ?? table['*'] ?? [{ text: 'done' }];
    return list[Math.min(assistantTurns(call), list.length - 1)] as ScriptedAnswer;
  };
}

/** A loopback port nothing listens on. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (typeof address !== 'object' || address === null) throw new Error('no port');
  return address.port;
}

/** A wire's configuration for a provider built by hand (no spec, no key): the OpenAI wire's by default. */
export const wireConfig = {
  name: 'openai',
  baseUrl: 'http://127.0.0.1:9/v1',
  model: 'm',
  headers: {},
  maxTokens: null,
  promptCacheKey: false,
  systemCacheMarker: false,
  extraBody: {},
  images: true,
  web: null,
};

/** A transport that answers every request 200 with these headers and these chunks, no socket at all. */
export function stubTransport(headers: [string, string][], chunks: () => Iterable<Uint8Array>) {
  return {
    async send() {
      return {
        status: 200,
        headers,
        body: (async function* () {
          yield* chunks();
        })(),
      };
    },
  };
}
