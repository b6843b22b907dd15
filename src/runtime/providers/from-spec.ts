/**
 * An HTTP provider built from its spec, in the thread that uses it: the base URL (the
 * spec's, its preset's or the vendor's), the key (handed in, or read from the
 * environment here, never stored), the headers, the transport (the network, or a
 * recording to record to or replay from) and the idle deadline.
 */
import { ErrorCode, HarnessError } from '../../errors.js';
import type { HttpProviderSpec } from '../provider.js';
import { DEFAULT_KEY_ENV, holdSecrets, providerSecrets } from '../secrets.js';
import { HttpProvider } from './client.js';
import { recordingTransport, replayTransport, type Transport, undiciTransport } from './http.js';
import { checkIdleTimeout, DEFAULT_IDLE_TIMEOUT_MS } from './idle.js';
import { checkedKey } from './keys.js';
import { findPreset } from './presets.js';
import { anthropicWire, openAiWire, type WireConfig } from './wires.js';

const DEFAULT_BASE_URLS = {
  openai: 'https://api.openai.com/v1',
  anthropic: 'https://api.anthropic.com',
  openrouter: 'https://openrouter.ai/api/v1',
} as const;

/** Where a spec's key comes from, in words. */
function keySource(spec: HttpProviderSpec, envName: string | null): string {
  if (spec.apiKey) return 'the apiKey the provider was given';
  const variable = spec.apiKeyEnv ?? envName;
  return variable ? `the environment variable ${variable}` : 'nowhere';
}

function resolveKey(spec: HttpProviderSpec, envName: string | null, name: string): string | null {
  const key = resolveRawKey(spec, envName, name);
  return key === null ? null : checkedKey(key, keySource(spec, envName), name);
}

function resolveRawKey(spec: HttpProviderSpec, envName: string | null, name: string): string | null {
  if (spec.apiKey) return spec.apiKey;
  if (spec.apiKeyRedacted) {
    throw new HarnessError(
      ErrorCode.ProviderLoadFailed,
      `${name}: no API key: this run's key was handed in directly and keys are never stored with a run. ` +
        "Pass it again: supervisor.resume(rootId, { provider }) for the tree's model, or { reviewer } (and retryGate(store, runId, { reviewer })) for a review gate's.",
    );
  }
  const variable = spec.apiKeyEnv ?? envName;
  if (variable && process.env[variable]) return process.env[variable] as string;
  if (spec.auth === 'none') return null;
  throw new HarnessError(
    ErrorCode.ProviderLoadFailed,
    `${name}: no API key: ${variable ? `the environment variable ${variable} is not set` : 'none was given'}. ` +
      'Set it, or pass apiKey; keys are never stored with a run, so a resume in another process needs it again.',
  );
}

function headersFor(spec: HttpProviderSpec, key: string | null): Record<string, string> {
  const headers: Record<string, string> = { 'user-agent': 'io-harness' };
  const auth = spec.auth ?? (spec.kind === 'anthropic' ? 'x-api-key' : 'bearer');
  if (key !== null && auth !== 'none') {
    if (auth === 'bearer') headers.authorization = `Bearer ${key}`;
    else if (auth === 'x-api-key') headers['x-api-key'] = key;
    else headers[auth.header.toLowerCase()] = key;
  }
  if (spec.kind === 'anthropic') headers['anthropic-version'] = '2023-06-01';
  if (spec.kind === 'openrouter') {
    headers['http-referer'] = 'https://github.com/io-harness/io-harness';
    headers['x-title'] = 'io-harness';
  }
  for (const [name, value] of Object.entries(spec.headers ?? {})) headers[name.toLowerCase()] = value;
  return headers;
}

/** Builds the provider a spec describes, in this thread. */
export async function buildHttpProvider(spec: HttpProviderSpec): Promise<HttpProvider> {
  const preset = spec.kind === 'compatible' && spec.preset ? findPreset(spec.preset) : undefined;
  const name = spec.name ?? preset?.name ?? spec.kind;
  const baseUrl = spec.baseUrl ?? preset?.baseUrl ?? (spec.kind === 'compatible' ? null : DEFAULT_BASE_URLS[spec.kind]);
  if (!baseUrl) {
    throw new HarnessError(ErrorCode.ProviderLoadFailed, `${name}: a compatible provider needs a baseUrl or a preset.`);
  }
  const envName =
    spec.kind === 'compatible'
      ? preset && !preset.local
        ? `${preset.envPrefix}_API_KEY`
        : null
      : DEFAULT_KEY_ENV[spec.kind];
  const replaying = spec.transport !== undefined && 'replay' in spec.transport;
  // A replay reaches no vendor, so it needs no key; a local runtime needs none unless one was set.
  const key =
    replaying ||
    (spec.kind === 'compatible' && preset?.local && !spec.apiKey && !spec.apiKeyEnv && !spec.apiKeyRedacted)
      ? null
      : resolveKey(spec, envName, name);
  // From here on this thread scrubs the key, the headers and the URL's credentials from every error it raises.
  holdSecrets(providerSecrets(key === null ? spec : { ...spec, apiKey: key }));
  const config: WireConfig = {
    name,
    baseUrl,
    model: spec.model,
    headers: headersFor(spec, key),
    keySource: key === null ? null : keySource(spec, envName),
    maxTokens: spec.maxTokens ?? null,
    promptCacheKey: spec.kind === 'openai' || spec.kind === 'openrouter' || (preset?.promptCacheKey ?? false),
    systemCacheMarker: spec.kind === 'openrouter',
    extraBody: spec.kind === 'openrouter' ? { usage: { include: true } } : {},
    images: spec.images !== false,
    agentHeader: spec.agentHeader?.toLowerCase() ?? null,
    web: spec.kind === 'anthropic' || spec.kind === 'openrouter' ? spec.kind : null,
  };
  let transport: Transport = undiciTransport;
  if (spec.transport && 'replay' in spec.transport)
    transport = replayTransport(spec.transport.replay, spec.transport.served);
  else if (spec.transport && 'record' in spec.transport)
    transport = recordingTransport(undiciTransport, spec.transport.record);
  const idleTimeoutMs =
    spec.idleTimeoutMs === undefined
      ? DEFAULT_IDLE_TIMEOUT_MS
      : checkIdleTimeout(spec.idleTimeoutMs, `${name}: idleTimeoutMs`);
  return new HttpProvider(
    spec.kind === 'anthropic' ? anthropicWire : openAiWire,
    config,
    transport,
    spec.retry,
    idleTimeoutMs,
  );
}
