/**
 * Building provider specs. A spec is data: it crosses into every agent's thread and
 * (without its key) into the store. `fromEnv()` reads the documented variables now,
 * in the caller's thread, so a missing key or a bad URL is an error at the call site
 * rather than a failed run later; the spec then names the key's variable, not the key.
 */
import { InvalidArgumentError } from '../../errors.js';
import {
  type AiSdkProviderSpec,
  type FallbackProviderSpec,
  type HostProviderSpec,
  type HttpProviderSpec,
  isHttpSpec,
  type ProviderSpec,
  type RetryOptions,
} from '../provider.js';
import { maskedUrl, strayWhitespace } from '../secrets.js';
import { checkIdleTimeout } from './idle.js';
import { findPreset, PRESETS, type Preset } from './presets.js';

export interface CommonOptions {
  maxTokens?: number;
  retry?: RetryOptions;
  /** How long an answer may go without an event (comments do not count) before it is a `stalled` failure. Default 300 000 ms. */
  idleTimeoutMs?: number;
  headers?: Record<string, string>;
  transport?: HttpProviderSpec['transport'];
  name?: string;
  /** False for a model that takes text only: images tools attach are left out of its requests. Default true. */
  images?: boolean;
  /** A header to send the asking agent's address in with each request (see HttpProviderSpec.agentHeader). */
  agentHeader?: string;
}

export interface VendorOptions extends CommonOptions {
  model: string;
  /** The key; kept in memory only. Or name a variable with apiKeyEnv. */
  apiKey?: string;
  apiKeyEnv?: string;
  baseUrl?: string;
}

function checkUrl(url: string, where: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new InvalidArgumentError(
      `${where}: ${JSON.stringify(url)} is not a URL; give the endpoint's base, such as https://api.example.com/v1.`,
    );
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new InvalidArgumentError(`${where}: ${JSON.stringify(maskedUrl(url))} is not an http(s) URL.`);
  }
  return url.replace(/\/+$/, '');
}

function checkModel(model: unknown, where: string, variable?: string): string {
  if (typeof model !== 'string' || model.trim() === '') {
    throw new InvalidArgumentError(
      `${where}: no model given${variable ? `; set ${variable} or pass { model }` : '; pass { model }'}.`,
    );
  }
  return model;
}

/**
 * A key given in code, checked as the provider is created: one with a stray space or line
 * break (a copy from a file or a terminal) is refused here rather than at the vendor's 401.
 */
function checkKey(key: unknown, where: string): string {
  if (typeof key !== 'string' || key === '')
    throw new InvalidArgumentError(`${where}: apiKey is the vendor's key, a non-empty string.`);
  if (strayWhitespace(key))
    throw new InvalidArgumentError(
      `${where}: apiKey has a stray space or line break at its start or end (or inside it), which no vendor accepts; trim it (a key read from a file often ends in a newline).`,
    );
  return key;
}

function common(options: CommonOptions): Partial<HttpProviderSpec> {
  const out: Partial<HttpProviderSpec> = {};
  if (options.maxTokens !== undefined) out.maxTokens = options.maxTokens;
  if (options.retry !== undefined) out.retry = options.retry;
  if (options.idleTimeoutMs !== undefined) out.idleTimeoutMs = checkIdleTimeout(options.idleTimeoutMs, 'idleTimeoutMs');
  if (options.headers !== undefined) out.headers = options.headers;
  if (options.transport !== undefined) out.transport = options.transport;
  if (options.name !== undefined) out.name = options.name;
  if (options.agentHeader !== undefined) out.agentHeader = options.agentHeader;
  if (options.images !== undefined) {
    if (typeof options.images !== 'boolean')
      throw new InvalidArgumentError(`images must be true or false, got ${JSON.stringify(options.images)}.`);
    out.images = options.images;
  }
  return out;
}

function requireEnv(variable: string, where: string): string {
  const value = process.env[variable];
  if (!value)
    throw new InvalidArgumentError(
      `${where}: the environment variable ${variable} is not set; export ${variable}=... or pass the value directly.`,
    );
  return value;
}

function vendor(kind: 'openai' | 'anthropic' | 'openrouter', label: string, prefix: string) {
  return {
    /** A spec from explicit options. */
    create(options: VendorOptions): HttpProviderSpec {
      const where = `${label}.create`;
      const spec: HttpProviderSpec = { kind, model: checkModel(options?.model, where), ...common(options) };
      if (options.apiKey !== undefined) spec.apiKey = checkKey(options.apiKey, where);
      if (options.apiKeyEnv !== undefined) spec.apiKeyEnv = options.apiKeyEnv;
      if (options.apiKey === undefined && options.apiKeyEnv === undefined) spec.apiKeyEnv = `${prefix}_API_KEY`;
      if (options.baseUrl !== undefined) spec.baseUrl = checkUrl(options.baseUrl, where);
      return spec;
    },
    /**
     * A spec from the environment: `${prefix}_API_KEY` (required), `${prefix}_MODEL`
     * (unless a model is passed) and `${prefix}_BASE_URL` (optional).
     */
    fromEnv(options: Partial<VendorOptions> = {}): HttpProviderSpec {
      const where = `${label}.fromEnv`;
      requireEnv(`${prefix}_API_KEY`, where);
      const model = checkModel(options.model ?? process.env[`${prefix}_MODEL`], where, `${prefix}_MODEL`);
      const spec: HttpProviderSpec = { kind, model, apiKeyEnv: `${prefix}_API_KEY`, ...common(options) };
      const base = options.baseUrl ?? process.env[`${prefix}_BASE_URL`];
      if (base) spec.baseUrl = checkUrl(base, where);
      return spec;
    },
  };
}

/** OpenAI's chat completions. Variables: OPENAI_API_KEY, OPENAI_MODEL, OPENAI_BASE_URL. */
export const OpenAI = vendor('openai', 'OpenAI', 'OPENAI');
/** Anthropic's Messages API. Variables: ANTHROPIC_API_KEY, ANTHROPIC_MODEL, ANTHROPIC_BASE_URL. */
export const Anthropic = vendor('anthropic', 'Anthropic', 'ANTHROPIC');
/** OpenRouter (the OpenAI shape plus its headers and cache marker). Variables: OPENROUTER_API_KEY, OPENROUTER_MODEL, OPENROUTER_BASE_URL. */
export const OpenRouter = vendor('openrouter', 'OpenRouter', 'OPENROUTER');

export interface CompatibleOptions extends CommonOptions {
  baseUrl: string;
  model: string;
  /** How the key is sent. Default bearer. */
  auth?: 'bearer' | 'x-api-key' | 'none' | { header: string };
  apiKey?: string;
  apiKeyEnv?: string;
}

function presetOrThrow(name: string, where: string): Preset {
  const preset = findPreset(String(name));
  if (!preset) {
    throw new InvalidArgumentError(
      `${where}: there is no preset ${JSON.stringify(name)}; the presets are ${PRESETS.map((p) => p.name).join(', ')}.`,
    );
  }
  return preset;
}

/** Any OpenAI-compatible endpoint: from a base URL, an auth style, a key and a model, or from a named preset. */
export const Compatible = {
  presets: PRESETS,

  create(options: CompatibleOptions): HttpProviderSpec {
    const where = 'Compatible.create';
    const spec: HttpProviderSpec = {
      kind: 'compatible',
      baseUrl: checkUrl(options?.baseUrl, where),
      model: checkModel(options.model, where),
      auth: options.auth ?? (options.apiKey || options.apiKeyEnv ? 'bearer' : 'none'),
      ...common(options),
    };
    if (options.apiKey !== undefined) spec.apiKey = checkKey(options.apiKey, where);
    if (options.apiKeyEnv !== undefined) spec.apiKeyEnv = options.apiKeyEnv;
    return spec;
  },

  /** A named preset with explicit options (the model at least). */
  preset(name: string, options: Partial<CompatibleOptions> & { model: string }): HttpProviderSpec {
    const where = `Compatible.preset(${JSON.stringify(name)})`;
    const preset = presetOrThrow(name, where);
    const spec: HttpProviderSpec = {
      kind: 'compatible',
      preset: preset.name,
      baseUrl: checkUrl(options.baseUrl ?? preset.baseUrl, where),
      model: checkModel(options.model, where),
      auth: options.auth ?? (preset.local && !options.apiKey && !options.apiKeyEnv ? 'none' : 'bearer'),
      ...common(options),
    };
    if (options.apiKey !== undefined) spec.apiKey = checkKey(options.apiKey, where);
    if (options.apiKeyEnv !== undefined) spec.apiKeyEnv = options.apiKeyEnv;
    else if (!preset.local && options.apiKey === undefined) spec.apiKeyEnv = `${preset.envPrefix}_API_KEY`;
    return spec;
  },

  /**
   * A named preset from the environment: `<PREFIX>_API_KEY` (required except for local
   * runtimes), `<PREFIX>_MODEL`, `<PREFIX>_BASE_URL`. The prefixes are in `Compatible.presets`.
   */
  fromEnv(name: string, options: Partial<CompatibleOptions> = {}): HttpProviderSpec {
    const where = `Compatible.fromEnv(${JSON.stringify(name)})`;
    const preset = presetOrThrow(name, where);
    if (!preset.local) requireEnv(`${preset.envPrefix}_API_KEY`, where);
    const model = checkModel(
      options.model ?? process.env[`${preset.envPrefix}_MODEL`],
      where,
      `${preset.envPrefix}_MODEL`,
    );
    const baseUrl = options.baseUrl ?? process.env[`${preset.envPrefix}_BASE_URL`] ?? preset.baseUrl;
    const keyed = !preset.local || Boolean(process.env[`${preset.envPrefix}_API_KEY`]);
    const spec: HttpProviderSpec = {
      kind: 'compatible',
      preset: preset.name,
      baseUrl: checkUrl(baseUrl, where),
      model,
      auth: keyed ? 'bearer' : 'none',
      ...common(options),
    };
    if (keyed) spec.apiKeyEnv = `${preset.envPrefix}_API_KEY`;
    return spec;
  },
};

/** What `aiSdk()` takes: the package, its export, the model, and the factory's settings. */
export type AiSdkOptions = Omit<AiSdkProviderSpec, 'kind' | 'apiKeyRedacted'>;

/**
 * Any AI SDK language model, from its provider package: `aiSdk({ package: '@ai-sdk/google',
 * factory: 'google', model: 'gemini-2.5-pro' })`, or with a factory and its settings:
 * `aiSdk({ package: '@ai-sdk/openai-compatible', factory: 'createOpenAICompatible',
 * options: { name: 'local', baseURL: 'http://localhost:8080/v1' }, model: 'qwen3' })`.
 * The package is the project's to install; the spec crosses into each agent's thread,
 * which imports it there.
 */
export function aiSdk(options: AiSdkOptions): AiSdkProviderSpec {
  return checkAiSdkSpec({ ...options, kind: 'ai-sdk' }, 'aiSdk');
}

function checkAiSdkSpec(given: AiSdkProviderSpec, where: string): AiSdkProviderSpec {
  for (const field of ['package', 'factory'] as const)
    if (typeof given[field] !== 'string' || given[field].trim() === '')
      throw new InvalidArgumentError(
        `${where}: ${field} is required: the provider package (package: '@ai-sdk/google') and its export (factory: 'google' or 'createGoogleGenerativeAI').`,
      );
  checkModel(given.model, where);
  if (given.options !== undefined) {
    if (given.options === null || Array.isArray(given.options) || !isPlainJson(given.options))
      throw new InvalidArgumentError(
        `${where}: options must be plain JSON (the spec crosses into each agent's thread and, without its key, into the store); a function such as fetch cannot. Wrap such a provider in a host model instead.`,
      );
  }
  if (given.apiKey !== undefined) checkKey(given.apiKey, where);
  if (
    given.apiKeyEnv !== undefined &&
    (typeof given.apiKeyEnv !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(given.apiKeyEnv))
  )
    throw new InvalidArgumentError(
      `${where}: apiKeyEnv must name an environment variable, got ${JSON.stringify(given.apiKeyEnv)}.`,
    );
  if (given.idleTimeoutMs !== undefined) checkIdleTimeout(given.idleTimeoutMs, `${where}: idleTimeoutMs`);
  if (given.images !== undefined && typeof given.images !== 'boolean')
    throw new InvalidArgumentError(`${where}: images must be true or false, got ${JSON.stringify(given.images)}.`);
  return given;
}

/** Whether a value is JSON as it stands: strings, finite numbers, booleans, null, arrays and plain objects of them. */
function isPlainJson(value: unknown, depth = 0): boolean {
  if (depth > 32) return false;
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  if (Array.isArray(value)) return value.every((item) => isPlainJson(item, depth + 1));
  if (typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return false;
  return Object.values(value).every((item) => isPlainJson(item, depth + 1));
}

/**
 * A model served by the embedder's own code, by the name it is given under in
 * `models: { [name]: (request, signal) => answer }` (on Supervisor.start, run, resume).
 */
export function hostModel(name: string): HostProviderSpec {
  return checkProviderSpec({ kind: 'host', name }, 'hostModel') as HostProviderSpec;
}

/** Providers tried in order; the next answers when the one before cannot. */
export function withFallback(
  providers: ProviderSpec[],
  options: { refuseIfPrimaryUnreachable?: boolean } = {},
): FallbackProviderSpec {
  if (!Array.isArray(providers) || providers.length === 0) {
    throw new InvalidArgumentError('withFallback needs at least one provider spec, the primary first.');
  }
  return {
    kind: 'fallback',
    providers,
    ...(options.refuseIfPrimaryUnreachable ? { refuseIfPrimaryUnreachable: true } : {}),
  };
}

/** Checks a spec's shape where it is handed in, so a bad one fails at the call, not in a thread. */
export function checkProviderSpec(spec: unknown, where: string): ProviderSpec {
  const kind = (spec as { kind?: unknown } | null)?.kind;
  if (kind === 'module') {
    if (typeof (spec as { module?: unknown }).module !== 'string') {
      throw new InvalidArgumentError(`${where}: a module provider needs { module: "/abs/path/provider.js" }.`);
    }
    return spec as ProviderSpec;
  }
  if (kind === 'host') {
    const name = (spec as { name?: unknown }).name;
    if (typeof name !== 'string' || name.trim() === '') {
      throw new InvalidArgumentError(
        `${where}: a host model needs { kind: "host", name }, the name it is given under in models: { [name]: (request) => answer }.`,
      );
    }
    return spec as ProviderSpec;
  }
  if (kind === 'ai-sdk') return checkAiSdkSpec(spec as AiSdkProviderSpec, where);
  if (kind === 'fallback') {
    const inner = (spec as { providers?: unknown }).providers;
    if (!Array.isArray(inner) || inner.length === 0)
      throw new InvalidArgumentError(`${where}: a fallback needs a non-empty providers list.`);
    for (const [index, item] of inner.entries()) checkProviderSpec(item, `${where} (fallback provider ${index})`);
    return spec as ProviderSpec;
  }
  if (kind === 'openai' || kind === 'anthropic' || kind === 'openrouter' || kind === 'compatible') {
    const http = spec as HttpProviderSpec;
    checkModel(http.model, where);
    if (http.baseUrl !== undefined) checkUrl(http.baseUrl, where);
    if (
      http.agentHeader !== undefined &&
      (typeof http.agentHeader !== 'string' || !/^[A-Za-z0-9-]+$/.test(http.agentHeader))
    )
      throw new InvalidArgumentError(
        `${where}: agentHeader names the header the agent's address is sent in (letters, digits and "-", such as "x-agent"), got ${JSON.stringify(http.agentHeader)}.`,
      );
    if (kind === 'compatible' && http.baseUrl === undefined && !(http.preset && findPreset(http.preset))) {
      throw new InvalidArgumentError(`${where}: a compatible provider needs a baseUrl or a known preset.`);
    }
    return http;
  }
  throw new InvalidArgumentError(
    `${where}: a provider must be a spec such as OpenAI.fromEnv(), Anthropic.create({...}), Compatible.preset(...), aiSdk({...}), { kind: "module", module } or { kind: "host", name }; a provider object cannot cross into a worker thread.`,
  );
}

/** The models a provider can run, with context windows and prices where the vendor publishes them. */
export async function listModels(spec: HttpProviderSpec): Promise<import('./types.js').ModelInfo[]> {
  const checked = checkProviderSpec(spec, 'listModels');
  if (!isHttpSpec(checked)) throw new InvalidArgumentError('listModels takes one HTTP provider spec.');
  const { buildHttpProvider } = await import('./from-spec.js');
  return (await buildHttpProvider(checked)).models();
}
