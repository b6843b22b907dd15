/**
 * The merged table projected onto the typed API: each section as the builder or the option
 * that takes it (`withBudget`, `withContext`, a provider spec, `run({ mcp })` ...). The
 * table was checked against the schema file by file, so a projection only renames and
 * reshapes; `Config` adds what the bundles contribute.
 */
import type { McpServerSpec } from '../mcp/spec.js';
import type { BrowserOptions } from '../runtime/browser/browser.js';
import type { PriceTable } from '../runtime/budget.js';
import type { CodeActOptions } from '../runtime/codeact/codeact.js';
import type { ContextData } from '../runtime/context/assembler.js';
import type { ContractBudget, MemoryData } from '../runtime/contract/contract.js';
import type { DocumentsOptions } from '../runtime/documents/documents.js';
import type { SandboxCaps, SandboxData } from '../runtime/exec/containment/boundary.js';
import type { LspServerOptions } from '../runtime/lsp/servers.js';
import { Policy, type PolicyLayer } from '../runtime/policy/policy.js';
import type { HttpProviderSpec, ProviderSpec } from '../runtime/provider.js';
import type { WebOptions } from '../runtime/web/web.js';
import type { LoadedBundle } from './bundles.js';
import type { ConfigBody } from './schema.js';
import type { Table } from './toml.js';

/** `[prices]`, as `store.cost(rootId, prices)` takes it. */
export function pricesOf(data: Table): PriceTable {
  const section = (data.prices ?? {}) as NonNullable<ConfigBody['prices']>;
  return Object.fromEntries(
    Object.entries(section).map(([model, price]) => [
      model,
      {
        input: price.input,
        output: price.output,
        ...(price.cache_read === undefined ? {} : { cacheRead: price.cache_read }),
        ...(price.cache_write === undefined ? {} : { cacheWrite: price.cache_write }),
        ...(price.web_search === undefined ? {} : { webSearch: price.web_search }),
        ...(price.web_fetch === undefined ? {} : { webFetch: price.web_fetch }),
      },
    ]),
  );
}

/** The policy: its base, then every `[[policy.layer]]` in order, then each bundle's deny rules as a layer of its own. */
export function policyOf(data: Table, bundles: readonly LoadedBundle[]): Policy {
  const section = (data.policy ?? {}) as NonNullable<ConfigBody['policy']>;
  const base =
    section.base === 'empty' ? Policy.empty() : section.base === 'permissive' ? Policy.permissive() : Policy.default();
  const layers: PolicyLayer[] = (section.layer ?? []).map((layer) => ({
    name: layer.name,
    rules: (layer.rule ?? []).map((rule) => ({ effect: rule.effect, act: rule.act, pattern: rule.pattern })),
  }));
  // Each bundle's deny rules are a layer of its own, named for it: a refusal says which bundle made it.
  const denied: PolicyLayer[] = bundles
    .map((bundle) => ({
      name: `${bundle.name}__deny`,
      rules: (['read', 'write', 'exec', 'net'] as const).flatMap((act) =>
        bundle.deny[act].map((pattern) => ({ effect: 'deny' as const, act, pattern })),
      ),
    }))
    .filter((layer) => layer.rules.length > 0);
  return Policy.from({ layers: [...base.toJSON().layers, ...layers, ...denied] });
}

/** `[[provider]]`: the model and its fallbacks in order (a fallback spec when there are several); null when none. */
export function providerOf(data: Table): ProviderSpec | null {
  const list = (data.provider ?? []) as NonNullable<ConfigBody['provider']>;
  const specs = list.map(
    (item): HttpProviderSpec => ({
      kind: item.kind,
      model: item.model,
      ...(item.base_url === undefined ? {} : { baseUrl: item.base_url }),
      ...(item.api_key_env === undefined ? {} : { apiKeyEnv: item.api_key_env }),
      ...(item.preset === undefined ? {} : { preset: item.preset }),
      ...(item.name === undefined ? {} : { name: item.name }),
      ...(item.max_tokens === undefined ? {} : { maxTokens: item.max_tokens }),
      ...(item.images === undefined ? {} : { images: item.images }),
    }),
  );
  if (specs.length === 0) return null;
  return specs.length === 1 ? (specs[0] as HttpProviderSpec) : { kind: 'fallback', providers: specs };
}

/** `[budget]`, as `withBudget` takes it; null when there is none. */
export function budgetOf(data: Table): ContractBudget | null {
  const section = data.budget as ConfigBody['budget'];
  if (!section) return null;
  return {
    ...(section.steps === undefined ? {} : { steps: section.steps }),
    ...(section.tokens === undefined ? {} : { tokens: section.tokens }),
    ...(section.wall_secs === undefined ? {} : { wallSecs: section.wall_secs }),
  };
}

const camel = (key: string) => key.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase());

/** `[sandbox]`, as a contract's `sandbox` data holds it; null when there is none. */
export function sandboxOf(data: Table): Partial<SandboxData> | null {
  const section = data.sandbox as ConfigBody['sandbox'];
  if (!section) return null;
  const caps = section.caps
    ? (Object.fromEntries(
        Object.entries(section.caps).map(([key, value]) => [camel(key), value as number]),
      ) as SandboxCaps)
    : undefined;
  return {
    ...(section.access === undefined ? {} : { access: section.access }),
    ...(section.writable_roots === undefined ? {} : { writableRoots: section.writable_roots }),
    ...(section.shared_caches === undefined ? {} : { sharedCaches: section.shared_caches }),
    ...(section.rung === undefined ? {} : { rung: section.rung }),
    ...(caps === undefined ? {} : { caps }),
  };
}

/** `[context]`, as `withContext` takes it; null when there is none. */
export function contextOf(data: Table): ContextData | null {
  const section = data.context as ConfigBody['context'];
  if (!section) return null;
  let collapse: ContextData['collapse'];
  if (section.collapse === false) collapse = false;
  else if (section.collapse_over !== undefined) collapse = { over: section.collapse_over };
  else collapse = section.collapse;
  return {
    ...(section.share === undefined ? {} : { share: section.share }),
    ...(section.window === undefined ? {} : { window: section.window }),
    ...(section.reference_catalogue === undefined ? {} : { referenceCatalogue: section.reference_catalogue }),
    ...(collapse === undefined ? {} : { collapse }),
    ...(section.reduce === undefined ? {} : { reduce: section.reduce }),
    ...(section.snip === undefined ? {} : { snip: section.snip }),
    ...(section.microcompact === undefined ? {} : { microcompact: section.microcompact }),
  };
}

/** `[memory]`, as `withMemory` takes it; null when there is none. */
export function memoryOf(data: Table): MemoryData | null {
  const section = data.memory as ConfigBody['memory'];
  if (!section) return null;
  return {
    ...(section.share === undefined ? {} : { share: section.share }),
    ...(section.cap === undefined ? {} : { cap: section.cap }),
  };
}

/** A flat section whose keys only rename: each in camelCase, as the builder takes it. */
function renamed<T>(section: Record<string, unknown>): T {
  return Object.fromEntries(Object.entries(section).map(([key, value]) => [camel(key), value])) as T;
}

/** `[web]`, as `withWeb` takes it, not yet checked; null when the section is absent. */
export function webOf(data: Table): WebOptions | null {
  const section = data.web as NonNullable<ConfigBody['web']> | undefined;
  return section === undefined ? null : renamed<WebOptions>(section);
}

/** `[browser]`, as `withBrowser` takes it, not yet checked; null when the section is absent. */
export function browserOf(data: Table): BrowserOptions | null {
  const section = data.browser as NonNullable<ConfigBody['browser']> | undefined;
  return section === undefined ? null : renamed<BrowserOptions>(section);
}

/** `[codeact]`, as `withCodeAct` takes it, not yet checked; null when the section is absent. */
export function codeactOf(data: Table): CodeActOptions | null {
  const section = data.codeact as NonNullable<ConfigBody['codeact']> | undefined;
  return section === undefined ? null : renamed<CodeActOptions>(section);
}

/** `[documents]`, as `withDocuments` takes it, not yet checked; null when the section is absent. */
export function documentsOf(data: Table): DocumentsOptions | null {
  const section = data.documents as NonNullable<ConfigBody['documents']> | undefined;
  return section === undefined ? null : renamed<DocumentsOptions>(section);
}

/** `[[lsp]]`, as `withLsp` takes them, not yet checked. */
export function lspOf(data: Table): LspServerOptions[] {
  const list = (data.lsp ?? []) as NonNullable<ConfigBody['lsp']>;
  return list.map((item) => ({
    command: item.command,
    extensions: item.extensions,
    ...(item.initialization_options === undefined ? {} : { initializationOptions: item.initialization_options }),
    ...(item.timeout_secs === undefined ? {} : { timeoutSecs: item.timeout_secs }),
  }));
}

/** `[[mcp]]`, as `run({ mcp })` takes them, not yet checked. */
export function mcpOf(data: Table): McpServerSpec[] {
  const list = (data.mcp ?? []) as NonNullable<ConfigBody['mcp']>;
  return list.map((item) =>
    item.url !== undefined
      ? {
          name: item.name,
          url: item.url,
          ...(item.headers ? { headers: item.headers } : {}),
          ...(item.allow_local_address === undefined ? {} : { allowLocalAddress: item.allow_local_address }),
        }
      : {
          name: item.name,
          command: item.command ?? [],
          ...(item.env ? { env: item.env } : {}),
          ...(item.cwd ? { cwd: item.cwd } : {}),
        },
  );
}
