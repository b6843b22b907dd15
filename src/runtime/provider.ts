/**
 * The model seam. An agent actor talks to a model only through {@link Provider}.
 * A provider never crosses a thread: the supervisor hands the actor a serialisable
 * {@link ProviderSpec} and the actor rebuilds the provider inside its own worker.
 */
import { pathToFileURL } from 'node:url';
import { ErrorCode, HarnessError } from '../errors.js';

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

export interface ToolCall {
  /** Unique within the completion; results answer it by this id. */
  id: string;
  name: string;
  /** Parsed JSON arguments. */
  args: Record<string, unknown>;
}

/** One turn of the ordered transcript a request carries. */
export type TranscriptEntry =
  | { role: 'user'; text: string }
  | { role: 'assistant'; text: string; toolCalls: ToolCall[] }
  | { role: 'tool'; callId: string; name: string; content: string; isError: boolean };

export interface ToolDefinition {
  name: string;
  description: string;
  /** JSON Schema of the arguments object. */
  parameters: Record<string, unknown>;
}

export interface Usage {
  inputTokens: number;
  outputTokens: number;
}

/** What the runtime knows about the agent making the call; real wires ignore it. */
export interface RequestMetadata {
  runId: string;
  rootId: string;
  address: string;
  parentAddress: string | null;
  depth: number;
  seq: number;
}

export interface ModelRequest {
  system: string;
  transcript: readonly TranscriptEntry[];
  tools: readonly ToolDefinition[];
  metadata: RequestMetadata;
}

export interface Completion {
  text: string;
  toolCalls: ToolCall[];
  usage: Usage;
  model: string;
}

export interface Provider {
  readonly name: string;
  complete(request: ModelRequest, signal?: AbortSignal): Promise<Completion>;
}

/**
 * A provider described as data. `module` names an ES module (a path or a URL) whose
 * export (`export`, default `"default"`) is a factory `(options) => Provider`; the
 * actor imports it inside its worker thread.
 */
export type ProviderSpec = {
  kind: 'module';
  module: string;
  export?: string;
  options?: JsonValue;
};

type ProviderFactory = (options: JsonValue | undefined) => Provider | Promise<Provider>;

const cache = new Map<string, Promise<Provider>>();

/** Rebuilds a provider from its spec; cached per thread by the spec's JSON. */
export function loadProvider(spec: ProviderSpec): Promise<Provider> {
  const key = JSON.stringify(spec);
  let pending = cache.get(key);
  if (!pending) {
    pending = build(spec);
    cache.set(key, pending);
    pending.catch(() => cache.delete(key));
  }
  return pending;
}

async function build(spec: ProviderSpec): Promise<Provider> {
  if (spec.kind !== 'module') {
    throw new HarnessError(
      ErrorCode.ProviderLoadFailed,
      `unknown provider spec kind ${JSON.stringify(spec.kind)}; use "module".`,
    );
  }
  const url = /^[a-z]+:/i.test(spec.module) ? spec.module : pathToFileURL(spec.module).href;
  let mod: Record<string, unknown>;
  try {
    mod = (await import(url)) as Record<string, unknown>;
  } catch (cause) {
    throw new HarnessError(
      ErrorCode.ProviderLoadFailed,
      `cannot import provider module ${spec.module}: ${(cause as Error).message}`,
      {
        cause,
      },
    );
  }
  const exportName = spec.export ?? 'default';
  const factory = mod[exportName];
  if (typeof factory !== 'function') {
    throw new HarnessError(
      ErrorCode.ProviderLoadFailed,
      `provider module ${spec.module} has no function export ${JSON.stringify(exportName)}; export a factory (options) => Provider.`,
    );
  }
  const provider = await (factory as ProviderFactory)(spec.options);
  if (!provider || typeof provider.complete !== 'function') {
    throw new HarnessError(
      ErrorCode.ProviderLoadFailed,
      `the factory ${exportName} in ${spec.module} did not return a Provider.`,
    );
  }
  return provider;
}
