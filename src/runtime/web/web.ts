/**
 * Web search and fetch run by the model's vendor (`TaskContract.withWeb`): what a run
 * asks for, checked; whether a provider can say it, decided before any call; and the
 * sources a vendor cites, as the trace keeps them. Each wire writes the request in its
 * vendor's terms (anthropic-wire.ts, openai-wire.ts); nothing here dials anything: the
 * vendor's servers search and fetch, and the runtime's own policy never sees those
 * requests — only the hosts the vendor is told to keep to.
 */
import { ErrorCode, HarnessError, InvalidArgumentError } from '../../errors.js';
import type { ProviderSpec } from '../provider.js';

/** What `withWeb` takes. */
export interface WebOptions {
  /** The vendor's web search tool. Default true. */
  search?: boolean;
  /** The vendor's fetch tool (a page the model names, read by the vendor). Default false. */
  fetch?: boolean;
  /** The most searches (and, separately, fetches) the model may make in one model call. */
  maxUses?: number;
  /** Only these hosts (and their subdomains) in results and fetches. */
  allowedHosts?: readonly string[];
  /** Never these hosts (and their subdomains). */
  blockedHosts?: readonly string[];
}

/** A contract's web settings, checked, as stored with the run and sent with every request. */
export interface WebData {
  search: boolean;
  fetch: boolean;
  maxUses?: number;
  allowedHosts?: string[];
  blockedHosts?: string[];
}

/**
 * A page the vendor reported: a search `result` (what a search found), a `citation` (a
 * passage the answer cites), or a page `fetched` whole.
 */
export interface WebSource {
  kind: 'result' | 'citation' | 'fetched';
  url: string;
  title: string | null;
  /** The cited passage, where the vendor quotes it. */
  citedText: string | null;
}

/** What one model call did on the web, as its vendor reported it. */
export interface WebActivity {
  searches: number;
  fetches: number;
  sources: WebSource[];
}

const HOST = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/;

function hosts(value: unknown, key: string): string[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.length === 0)
    throw new InvalidArgumentError(
      `withWeb: ${key} must be a non-empty list of host names such as ["docs.python.org"], got ${JSON.stringify(value)}; leave it out for no such rule.`,
    );
  return value.map((item) => {
    const host = typeof item === 'string' ? item.trim().toLowerCase() : '';
    if (/^[a-z][a-z0-9+.-]*:\/\//.test(host) || host.includes('/'))
      throw new InvalidArgumentError(
        `withWeb: ${key} takes host names, not URLs or paths: give ${JSON.stringify(hostOf(host))} for ${JSON.stringify(item)}.`,
      );
    if (!HOST.test(host) || host.length > 253)
      throw new InvalidArgumentError(
        `withWeb: ${JSON.stringify(item)} in ${key} is not a host name (letters, digits, hyphens and dots, such as example.com; subdomains are included).`,
      );
    return host;
  });
}

function hostOf(text: string): string {
  try {
    return new URL(text.includes('://') ? text : `https://${text}`).hostname;
  } catch {
    return text.replace(/^[a-z]+:\/\//, '').split('/')[0] ?? text;
  }
}

/**
 * Whether the vendor's own tools ran for an answer. Its input tokens then count what they
 * brought back (results, pages) on top of the request the runtime sent, so the answer says
 * nothing of how big that request was (see runtime/context/assembler.ts).
 */
export function usedWeb(completion: { web?: WebActivity | undefined }): boolean {
  const web = completion.web;
  return web !== undefined && (web.searches > 0 || web.fetches > 0 || web.sources.length > 0);
}

/** Checks what `withWeb` (or `[web]` in io.toml) was given; the defaults filled in. */
export function checkWebOptions(options: WebOptions | undefined): WebData {
  const given = options ?? {};
  if (typeof given !== 'object' || Array.isArray(given))
    throw new InvalidArgumentError(`withWeb takes { search, fetch, maxUses, allowedHosts, blockedHosts }.`);
  const known = ['search', 'fetch', 'maxUses', 'allowedHosts', 'blockedHosts'];
  for (const key of Object.keys(given))
    if (!known.includes(key))
      throw new InvalidArgumentError(
        `withWeb: unknown option ${JSON.stringify(key)}; the options are ${known.join(', ')}.`,
      );
  for (const key of ['search', 'fetch'] as const)
    if (given[key] !== undefined && typeof given[key] !== 'boolean')
      throw new InvalidArgumentError(`withWeb: ${key} must be true or false, got ${JSON.stringify(given[key])}.`);
  const search = given.search ?? true;
  const fetch = given.fetch ?? false;
  if (!search && !fetch)
    throw new InvalidArgumentError('withWeb: search and fetch are both off; turn one on, or leave withWeb out.');
  const data: WebData = { search, fetch };
  if (given.maxUses !== undefined) {
    if (!Number.isInteger(given.maxUses) || given.maxUses < 1)
      throw new InvalidArgumentError(
        `withWeb: maxUses is how many searches (or fetches) one model call may make, a whole number from 1; got ${JSON.stringify(given.maxUses)}.`,
      );
    data.maxUses = given.maxUses;
  }
  const allowed = hosts(given.allowedHosts, 'allowedHosts');
  const blocked = hosts(given.blockedHosts, 'blockedHosts');
  const both = allowed?.filter((host) => blocked?.includes(host)) ?? [];
  if (both.length > 0)
    throw new InvalidArgumentError(`withWeb: ${both.join(', ')} is both allowed and blocked; name each host once.`);
  if (allowed) data.allowedHosts = allowed;
  if (blocked) data.blockedHosts = blocked;
  return data;
}

/** Why `spec` cannot carry `web`, or null when it can (a fallback: every provider in it). */
export function webRefusal(spec: ProviderSpec, web: WebData): string | null {
  switch (spec.kind) {
    case 'host':
    case 'module':
      // The embedder's own code gets the settings with each request and does what it can.
      return null;
    case 'fallback': {
      for (const [index, inner] of spec.providers.entries()) {
        const why = webRefusal(inner, web);
        if (why !== null) return `fallback provider ${index}: ${why}`;
      }
      return null;
    }
    case 'anthropic':
      if (web.allowedHosts && web.blockedHosts)
        return "Anthropic's web tools take allowed hosts or blocked hosts, not both in one request: keep one list.";
      return null;
    case 'openrouter': {
      if (web.fetch)
        return 'io-harness asks OpenRouter for its web search tool only, not for page fetches: set fetch to false, or use Anthropic.';
      if (web.maxUses !== undefined)
        return "OpenRouter's web search tool has no cap on searches a call: leave maxUses out (a step budget bounds the calls).";
      if (web.allowedHosts && web.blockedHosts)
        return "OpenRouter's web search takes allowed hosts or blocked hosts, not both: keep one list.";
      return null;
    }
    case 'openai':
      // Its search models (gpt-4o-search-preview and the like) take no function tools, and a
      // run always offers its own; the Responses API, whose web search tool does, is not a wire of ours.
      return "OpenAI's Chat Completions searches the web only with its search models, which take no function tools, and a run always offers its own: use Anthropic or OpenRouter (OpenAI's Responses API is not a wire of io-harness yet).";
    case 'compatible':
      return `an OpenAI-compatible endpoint${spec.preset ? ` (${spec.preset})` : ''} has no standard web tool to ask for: use OpenAI, Anthropic or OpenRouter, or a host model.`;
    case 'ai-sdk':
      return `an AI SDK model (${spec.package}) is asked through the AI SDK's common interface, which has no standard web tool: use Anthropic or OpenRouter on the harness's own wires, or a host model.`;
  }
}

/** The names the vendors' web tools go by in a request: a tool of the run's own may not take one. */
export const VENDOR_TOOL_NAMES = ['web_search', 'web_fetch'] as const;

/** Refuses a tree whose own tools would share a name with the vendor's web tools in its requests. */
export function checkWebToolNames(names: readonly string[], web: WebData | undefined, where: string): void {
  const taken = web ? names.filter((name) => (VENDOR_TOOL_NAMES as readonly string[]).includes(name)) : [];
  if (taken.length > 0)
    throw new InvalidArgumentError(
      `${where}: your tool ${taken[0]} has the name of the vendor's own web tool, which the contract asks for (withWeb): rename yours.`,
    );
}

/** Refuses, before anything is stored or called, a run whose provider cannot carry its web settings. */
export function refuseWebFor(spec: ProviderSpec, web: WebData | undefined, where: string): void {
  if (!web) return;
  const why = webRefusal(spec, web);
  if (why !== null)
    throw new HarnessError(ErrorCode.WebUnsupported, `${where}: the contract asks for the web (withWeb), and ${why}`, {
      details: { provider: spec.kind },
    });
}
