/**
 * Where a provider is rebuilt from its spec, inside the thread that uses it: an HTTP
 * vendor, a fallback of providers, or an embedder's module. This is the one module that
 * knows every kind of provider; the providers themselves know only the seam's types
 * (provider.ts), so the dependency runs one way, from here to them.
 */
import { pathToFileURL } from 'node:url';
import { ErrorCode, HarnessError } from '../../errors.js';
import type { JsonValue, Provider, ProviderSpec } from '../provider.js';
import { type HostModelChannel, HostModelProvider, hostModelNames } from './host-model.js';

type ProviderFactory = (options: JsonValue | undefined) => Provider | Promise<Provider>;

const cache = new Map<string, Promise<Provider>>();

/**
 * Rebuilds a provider from its spec; cached per thread by the spec's JSON. A host model
 * (`kind: 'host'`) is reached over `channel`, the asking run's host channel, so a spec
 * that names one is built for that run and not cached.
 */
export function loadProvider(spec: ProviderSpec, channel: HostModelChannel | null = null): Promise<Provider> {
  if (hostModelNames(spec).length > 0) return build(spec, channel);
  const key = JSON.stringify(spec);
  let pending = cache.get(key);
  if (!pending) {
    pending = build(spec);
    cache.set(key, pending);
    pending.catch(() => cache.delete(key));
  }
  return pending;
}

async function build(spec: ProviderSpec, channel: HostModelChannel | null = null): Promise<Provider> {
  if (spec.kind === 'host') {
    if (typeof spec.name !== 'string' || spec.name === '') {
      throw new HarnessError(ErrorCode.ProviderLoadFailed, 'a host model spec needs the name it was given under.');
    }
    return new HostModelProvider(spec.name, channel);
  }
  if (spec.kind === 'fallback') {
    if (spec.providers.length === 0) {
      throw new HarnessError(ErrorCode.ProviderLoadFailed, 'a fallback provider needs at least one provider.');
    }
    const { FallbackProvider } = await import('./client.js');
    return new FallbackProvider(await Promise.all(spec.providers.map((inner) => loadProvider(inner, channel))));
  }
  if (spec.kind === 'ai-sdk') {
    // Only a spec that names an AI SDK model loads its package (and this module).
    const { buildAiSdkProvider } = await import('./ai-sdk.js');
    return buildAiSdkProvider(spec);
  }
  if (spec.kind !== 'module') {
    const { buildHttpProvider } = await import('./from-spec.js');
    return buildHttpProvider(spec);
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
