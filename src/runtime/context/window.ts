/**
 * How many tokens a request to a run's model may hold: its context window. A window the
 * embedder states wins; else the vendor's own catalogue where the provider already reads
 * one on the host it dials (OpenRouter, an OpenAI-compatible endpoint); else, when asked
 * for, a reference table of OpenAI's and Anthropic's models; else an assumption, stated as
 * one, that differs for a remote endpoint and a local runtime. The run records which it
 * used (a `context-window` event), and a resume reads it back rather than asking again.
 */
import type { HttpProviderSpec, ProviderSpec } from '../provider.js';
import { findPreset } from '../providers/presets.js';
import type { ModelInfo } from '../providers/types.js';

/** Where a run's window came from. */
export type WindowSource = 'stated' | 'catalogue' | 'reference' | 'assumed-remote' | 'assumed-local';

export interface ContextWindow {
  tokens: number;
  source: WindowSource;
}

/** What a remote model is assumed to hold when nothing says: the smallest window of the models most used today. */
export const ASSUMED_REMOTE_WINDOW = 128_000;
/** What a local runtime is assumed to hold: what such runtimes give a model unless told otherwise. */
export const ASSUMED_LOCAL_WINDOW = 8_192;

/**
 * OpenAI's and Anthropic's published windows, by model name prefix (the longest prefix
 * that matches wins). Used only when a contract asks for it (`referenceCatalogue: true`).
 */
const REFERENCE: readonly [prefix: string, tokens: number][] = [
  ['claude-', 200_000],
  ['gpt-4.1', 1_047_576],
  ['gpt-4o', 128_000],
  ['gpt-4-turbo', 128_000],
  ['gpt-5', 400_000],
  ['o1', 200_000],
  ['o3', 200_000],
  ['o4-mini', 200_000],
];

/** The reference table's window for a model, or null when it has none. */
export function referenceWindow(model: string): number | null {
  let best: [string, number] | null = null;
  for (const entry of REFERENCE)
    if (model.startsWith(entry[0]) && (!best || entry[0].length > best[0].length)) best = entry;
  return best ? best[1] : null;
}

/** The HTTP spec a window is looked up for: a fallback's primary, the spec itself, or none (a module provider). */
export function primarySpec(spec: ProviderSpec): HttpProviderSpec | null {
  if (spec.kind === 'module' || spec.kind === 'host' || spec.kind === 'ai-sdk') return null;
  if (spec.kind === 'fallback') {
    const first = spec.providers[0];
    return first ? primarySpec(first) : null;
  }
  return spec;
}

/** Whether the provider's own catalogue is read (on the host it already dials) for its window. */
export function readsCatalogue(spec: HttpProviderSpec): boolean {
  return spec.kind === 'openrouter' || spec.kind === 'compatible';
}

/** What is assumed when nothing can size the model: a local runtime holds far less than a remote endpoint. */
export function assumedWindow(spec: HttpProviderSpec | null): ContextWindow {
  const local = spec?.kind === 'compatible' && spec.preset !== undefined && findPreset(spec.preset)?.local === true;
  return local
    ? { tokens: ASSUMED_LOCAL_WINDOW, source: 'assumed-local' }
    : { tokens: ASSUMED_REMOTE_WINDOW, source: 'assumed-remote' };
}

/** The catalogue's window for `model`: an exact id first, then an id ending in `/model` (OpenRouter's vendor prefix). */
export function catalogueWindow(models: readonly ModelInfo[], model: string): number | null {
  const found = models.find((item) => item.id === model) ?? models.find((item) => item.id.endsWith(`/${model}`));
  return found?.contextWindow ?? null;
}
