/**
 * io.toml: one configuration over four scopes, read once, before a run, by the caller.
 *
 * `Config.discover(root)` reads the library's defaults, the user file
 * (`$XDG_CONFIG_HOME/io-harness/io.toml`, else `~/.config/io-harness/io.toml`), the
 * committed `io.toml` at the workspace root and the gitignored `io.local.toml` beside it, in
 * that order, and merges them: tables merge key by key, arrays of tables append (a later
 * file's `[[policy.layer]]` comes after an earlier one's), and any other value (a scalar, an
 * array of values) is the later file's. A `[profile.<name>]` chosen by `discover({ profile })`
 * is merged the same way straight after the file that holds it, so a workspace file still
 * narrows what a profile in the user file chose.
 *
 * A file inside the workspace may narrow the boundary and never widen it: a key that would
 * (see {@link widening}) is refused, naming the user file where it may go. Every file is
 * checked on its own, with its own lines, before anything is merged, and no partial
 * configuration is ever used: the first problem throws.
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import type { z } from 'zod';
import { ConfigError, ErrorCode, HarnessError, InvalidArgumentError } from '../errors.js';
import { checkSpecs, type McpServerSpec } from '../mcp/spec.js';
import type { AgentDefinition } from '../runtime/agents.js';
import type { PriceTable } from '../runtime/budget.js';
import { type ContextData, DEFAULT_SHARE } from '../runtime/context/assembler.js';
import { DEFAULT_MEMORY_CAP, DEFAULT_MEMORY_SHARE } from '../runtime/context/memory.js';
import {
  type ContractBudget,
  type InstructionFile,
  type MemoryData,
  TaskContract,
} from '../runtime/contract/contract.js';
import { DEFAULT_SANDBOX, type SandboxCaps, type SandboxData } from '../runtime/exec/containment/boundary.js';
import { keepFromCommands } from '../runtime/exec/containment/kept.js';
import { escapes, Policy, type PolicyLayer, realTarget } from '../runtime/policy/policy.js';
import type { HttpProviderSpec, ProviderSpec } from '../runtime/provider.js';
import type { SkillRoot } from '../runtime/skills.js';
import type { ToolchainOverrides } from '../runtime/workspace/toolchain.js';
import { type BundleBin, type BundleProblem, type LoadedBundle, loadBundle, type PromptTemplate } from './bundles.js';
import { emptyDirectory, readGuidance } from './guidance.js';
import { type HookObserver, type HookSpec, hookObserver, hookSpecFrom } from './hooks.js';
import { type ConfigBody, fileSchema, knownKeys, NOT_BUILT } from './schema.js';
import { filePath, filesIn, kindsIn, resolveText } from './substitute.js';
import { lineOf, type ParsedFile, readToml, valueAt } from './toml.js';

/** Where a file sits: the library's defaults, the user's own, or the workspace's two. */
export type ConfigScope = 'defaults' | 'user' | 'project' | 'local';

export interface DiscoverOptions {
  /** The user file; `null` to read none. Default `$XDG_CONFIG_HOME/io-harness/io.toml`, else `~/.config/io-harness/io.toml`. */
  userFile?: string | null;
  /** A `[profile.<name>]` to overlay. */
  profile?: string;
}

/** Where a value came from. */
export interface ValueOrigin {
  key: string;
  value: unknown;
  scope: ConfigScope;
  /** The file, or `(defaults)`. */
  file: string;
  /** Its line in the file, or null (a default). */
  line: number | null;
  /**
   * The value as the file wrote it, when a substitution (`${env:}`, `${file:}`, `${cmd:}`)
   * replaced it: `value` is then this text too, so explaining a configuration never shows
   * a credential it resolved. `Config.get` returns what it resolved to.
   */
  written?: unknown;
}

type Origin = Omit<ValueOrigin, 'key' | 'value'>;

/** The library's defaults, the first scope. */
const DEFAULTS: Record<string, unknown> = { policy: { base: 'default' } };

/** The user file's path when none is given. */
export function defaultUserFile(env: NodeJS.ProcessEnv = process.env): string {
  const base =
    env.XDG_CONFIG_HOME && isAbsolute(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : join(homedir(), '.config');
  return join(base, 'io-harness', 'io.toml');
}

/** Whether `path` lies in `root`, both by their real paths (links followed, a path not made yet by its nearest parent). */
const inside = (path: string, root: string) => !escapes(relative(realTarget(root), realTarget(path)));

type Table = Record<string, unknown>;
const isTable = (value: unknown): value is Table =>
  typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Date);
const isTables = (value: unknown): value is Table[] => Array.isArray(value) && value.length > 0 && value.every(isTable);

/** One file of the four, checked. */
interface ScopeFile {
  scope: ConfigScope;
  file: string;
  data: Table;
  lines: ReadonlyMap<string, number>;
  /** The keys a substitution replaced (their paths in the file), each with its value as written. */
  written?: ReadonlyMap<string, unknown>;
  /** The file's data as written, before substitution. */
  shown?: Table;
}

/** What reading the files found besides the values: the variables substitutions read, and renamed keys. */
interface Findings {
  env: Set<string>;
  warnings: string[];
}

/** The merged configuration of a workspace, and where each value came from. */
export class Config {
  /** The workspace root. */
  readonly root: string;
  /** The files read, in order, and whether each was there. */
  readonly files: readonly { scope: ConfigScope; file: string; present: boolean }[];
  readonly userFile: string | null;
  readonly profileName: string | null;
  readonly #data: Table;
  readonly #origins: Map<string, Origin>;
  #findings: Findings = { env: new Set(), warnings: [] };
  #guidance: InstructionFile[] = [];
  /** The merged data as the files wrote it (no substitution resolved): what explaining shows. */
  #shown: Table | null = null;
  #hooks: HookSpec[] = [];
  #bundles: LoadedBundle[] = [];
  #problems: BundleProblem[] = [];

  private constructor(
    root: string,
    files: Config['files'],
    userFile: string | null,
    profile: string | null,
    data: Table,
    origins: Map<string, Origin>,
  ) {
    this.root = root;
    this.files = files;
    this.userFile = userFile;
    this.profileName = profile;
    this.#data = data;
    this.#origins = origins;
  }

  /**
   * Reads the four scopes for the workspace at `root`, checks each, and merges them.
   *
   * @example
   * const config = Config.discover('/repo');
   * const result = await runWith(config.contract('fix the failing test'), config.provider(), store, config.policy());
   */
  static discover(root: string, options: DiscoverOptions = {}): Config {
    try {
      return Config.#discover(root, options);
    } catch (error) {
      if (HarnessError.isInstance(error)) throw error;
      // Whatever the files held, the caller gets the one error class: what failed, and that nothing was used.
      throw new ConfigError(
        ErrorCode.ConfigInvalid,
        `Config.discover(${JSON.stringify(root)}): the configuration could not be read (${error instanceof Error ? error.message : String(error)}); nothing of it was used.`,
        { cause: error },
      );
    }
  }

  static #discover(root: string, options: DiscoverOptions): Config {
    if (typeof root !== 'string' || root === '')
      throw new ConfigError(
        ErrorCode.ConfigInvalid,
        'Config.discover needs the workspace root, the directory its io.toml is in.',
      );
    const workspace = resolve(root);
    const userFile = options.userFile === null ? null : resolve(options.userFile ?? defaultUserFile());
    // The user file is the one that may widen, so it must be outside the workspace, by every spelling of both.
    if (userFile && inside(userFile, workspace))
      throw new ConfigError(
        ErrorCode.ConfigRefused,
        `Config.discover: the user file ${userFile} is inside the workspace ${workspace}, where the agent and the repository's authors can change it; keep it outside (the default is ${defaultUserFile()}).`,
        { details: { file: userFile, root: workspace } },
      );
    const paths: { scope: ConfigScope; file: string }[] = [
      ...(userFile ? [{ scope: 'user' as const, file: userFile }] : []),
      { scope: 'project', file: join(workspace, 'io.toml') },
      { scope: 'local', file: join(workspace, 'io.local.toml') },
    ];
    const read: ScopeFile[] = [
      { scope: 'defaults', file: '(defaults)', data: structuredClone(DEFAULTS), lines: new Map() },
    ];
    const files: { scope: ConfigScope; file: string; present: boolean }[] = [];
    const findings: Findings = { env: new Set(), warnings: [] };
    for (const { scope, file } of paths) {
      // An empty directory where a file is looked for is the containment's placeholder (it
      // keeps a run's commands from making the file): no file is there.
      const present = existsSync(file) && !emptyDirectory(file);
      files.push({ scope, file, present });
      if (!present) continue;
      const parsed = readToml(file, { noLinks: scope !== 'user' });
      findings.warnings.push(...renameOld(parsed));
      const { written, resolved, raw } = check(
        parsed,
        scope,
        userFile ?? defaultUserFile(),
        workspace,
        options.profile,
        findings,
      );
      try {
        Config.#project(parsed, workspace);
      } catch (error) {
        throw redacted(error, resolved);
      }
      read.push({ scope, ...parsed, written, shown: raw });
    }
    let profile: string | null = null;
    if (options.profile !== undefined) {
      const known = new Set(read.flatMap((item) => Object.keys((item.data.profile as Table | undefined) ?? {})));
      if (!known.has(options.profile))
        throw new ConfigError(
          ErrorCode.ConfigInvalid,
          `Config.discover: no [profile.${options.profile}] in ${read.map((item) => item.file).join(', ')}; ${known.size > 0 ? `the profiles are ${[...known].join(', ')}` : 'none names a profile'}.`,
          { details: { profile: options.profile } },
        );
      profile = options.profile;
    }
    // Each file in order, its chosen profile straight after it: a workspace file still narrows what a user's profile chose.
    const data: Table = {};
    const origins = new Map<string, Origin>();
    // The same merge of the files as they were written, before substitution: what explaining shows.
    const shown: Table = {};
    for (const item of read)
      for (const [target, source, into] of [
        [data, item.data, origins],
        [shown, item.shown ?? item.data, new Map<string, Origin>()],
      ] as const) {
        const { profile: profiles, ...body } = source;
        merge(target, body, item, '', '', into, userFile);
        const chosen = profile === null ? undefined : (profiles as Record<string, Table> | undefined)?.[profile];
        if (chosen) merge(target, chosen, item, '', `profile.${profile}`, into, userFile);
      }
    const config = new Config(workspace, files, userFile, profile, data, origins);
    config.#shown = shown;
    config.#findings = findings;
    // The renamed keys, said as deprecations below; what reading the rest warns of is said where it is found.
    const renamed = [...findings.warnings];
    config.#guidance = config.#readGuidance();
    config.#hooks = config.#hookSpecs();
    config.#loadBundles();
    config.#keepFromCommands();
    for (const warning of renamed)
      process.emitWarning(warning, { type: 'DeprecationWarning', code: 'IO_HARNESS_CONFIG_RENAMED' });
    return config;
  }

  /** The guidance, read as ./guidance.ts says; a link skipped is a warning of this configuration's. */
  #readGuidance(): InstructionFile[] {
    const section = this.#data.instructions as ConfigBody['instructions'];
    return readGuidance({
      names: section?.files ?? ['AGENTS.md'],
      originOf: (index) => this.#origins.get(`instructions.files[${index}]`) ?? this.#origins.get('instructions.files'),
      root: this.root,
      userFile: this.userFile ?? defaultUserFile(),
      policy: this.policy(),
      warn: (warning) => this.#findings.warnings.push(warning),
    });
  }

  /**
   * The `[[hook]]` tables as specs: an audit log's path resolved against the directory of
   * the file that named it (`~/` from the home directory), and refused inside the
   * workspace, where an agent's writes could change the record of what it did.
   */
  #hookSpecs(): HookSpec[] {
    const list = (this.#data.hook ?? []) as NonNullable<ConfigBody['hook']>;
    return list.map((item, index) => {
      const origin = this.#origins.get(`hook[${index}]`);
      const from = origin ? `${origin.file}:${origin.line ?? 1}` : '(defaults)';
      const base = origin && origin.file !== '(defaults)' ? dirname(origin.file) : this.root;
      const spec = hookSpecFrom(item, { name: item.name ?? `hook-${index + 1}`, base, from });
      if (spec.append !== undefined && inside(spec.append, this.root))
        throw new ConfigError(
          ErrorCode.ConfigRefused,
          `${from}: hook[${index}].append names ${spec.append}, inside the workspace, where the agent's own writes could change the record of what it did; keep the audit log outside (nothing of the configuration was used).`,
          { details: { file: origin?.file ?? null, line: origin?.line ?? null, key: `hook[${index}].append` } },
        );
      return spec;
    });
  }

  /**
   * The hooks, as one observer to install: `supervisor.observe(config.hooks())`. Installed
   * that way, an audit log catches up from the store first, and a cancel hook can end a
   * tree. With no `[[hook]]` it does nothing.
   */
  hooks(): HookObserver {
    const sandbox = this.sandbox();
    return hookObserver(this.hookSpecs(), {
      cwd: this.root,
      scrubbed: this.scrubbedEnv(),
      // Contained as the run's own commands are, by the executor factory: the same sandbox and policy.
      sandbox: { ...DEFAULT_SANDBOX, ...(sandbox ?? {}) },
      policy: this.policy(),
    });
  }

  /** The hooks' specs, as `hooks()` carries them out: the configuration's, then each bundle's. */
  hookSpecs(): HookSpec[] {
    return [...this.#hooks, ...this.#bundles.flatMap((bundle) => bundle.hooks)].map((hook) => structuredClone(hook));
  }

  /** The repository's guidance read into the system block by {@link contract}: each file's name and text. */
  instructions(): InstructionFile[] {
    return this.#guidance.map((file) => ({ ...file }));
  }

  /**
   * The environment variables the configuration's `${env:}` substitutions read. `contract()`
   * hands them to withScrubbedEnv, so no contained command is given them; pass them to your
   * own executor's environment filter if you run commands yourself.
   */
  scrubbedEnv(): string[] {
    return [...this.#findings.env].sort();
  }

  /** What reading the files warned of: a renamed key read under its new name, with the file and line to change. */
  warnings(): string[] {
    return [...this.#findings.warnings];
  }

  /** `[prices]`: what each model costs, as `store.cost(rootId, prices)` takes it; empty when none is set. */
  prices(): PriceTable {
    const section = (this.#data.prices ?? {}) as NonNullable<ConfigBody['prices']>;
    return Object.fromEntries(
      Object.entries(section).map(([model, price]) => [
        model,
        {
          input: price.input,
          output: price.output,
          ...(price.cache_read === undefined ? {} : { cacheRead: price.cache_read }),
          ...(price.cache_write === undefined ? {} : { cacheWrite: price.cache_write }),
        },
      ]),
    );
  }

  /**
   * Projects one file's values (and each of its profiles') on their own, so a value the
   * typed API refuses (a toolchain of the wrong shape, a writable root that is not a
   * directory, an MCP server the client cannot take) is named by the file and line that
   * set it, before anything is merged.
   */
  static #project(parsed: ParsedFile, root: string): void {
    const bodies: [string, Table][] = [['', parsed.data]];
    for (const [name, body] of Object.entries(isTable(parsed.data.profile) ? parsed.data.profile : {}))
      if (isTable(body)) bodies.push([`profile.${name}.`, body]);
    for (const [prefix, body] of bodies) {
      const alone = new Config(root, [], null, null, body, new Map());
      const parts: [string, () => unknown][] = [
        ['policy', () => alone.policy()],
        ['mcp', () => alone.mcp()],
        ...(['budget', 'context', 'memory', 'sandbox', 'toolchain'] as const).map(
          (section): [string, () => unknown] => [
            section,
            () => new Config(root, [], null, null, { [section]: body[section] }, new Map()).contract('check'),
          ],
        ),
      ];
      for (const [section, project] of parts) {
        if (body[section] === undefined) continue;
        try {
          project();
        } catch (error) {
          if (!(error instanceof HarnessError)) throw error;
          const key = `${prefix}${section}`;
          throw new ConfigError(
            ErrorCode.ConfigInvalid,
            `${parsed.file}:${lineOf(parsed.lines, key) ?? 1}: ${key}: ${error.message} (nothing of the configuration was used).`,
            { details: { file: parsed.file, line: lineOf(parsed.lines, key), key } },
          );
        }
      }
    }
  }

  /** The merged value at `key` (`budget.steps`, `policy.layer[2]`), or undefined. */
  get(key: string): unknown {
    return valueAt(this.#data, normalKey(key));
  }

  /** Which file and line decided `key`; null when nothing set it. */
  explain(key: string): ValueOrigin | null {
    const value = this.get(key);
    if (value === undefined) return null;
    const origin = this.#origins.get(normalKey(key));
    if (!origin) return null;
    const shown = this.#shown ? valueAt(this.#shown, normalKey(key)) : value;
    return { key: normalKey(key), ...origin, value: structuredClone(shown) };
  }

  /** Every value the configuration holds, each with its file and line: what `npx io-harness config explain` prints. */
  explainAll(): ValueOrigin[] {
    const out: ValueOrigin[] = [];
    const walk = (value: unknown, path: string) => {
      if (isTable(value)) {
        for (const [key, child] of Object.entries(value)) walk(child, path ? `${path}.${key}` : key);
        return;
      }
      if (isTables(value)) {
        for (const [index, child] of value.entries()) walk(child, `${path}[${index}]`);
        return;
      }
      const origin = this.#origins.get(path);
      if (origin) out.push({ key: path, ...origin, value });
    };
    // The files as they wrote it: a substituted value is shown as written, never resolved.
    walk(this.#shown ?? this.#data, '');
    return out;
  }

  /** `[app]`: your program's own settings, as written (never validated). */
  app(): Record<string, unknown> {
    return structuredClone((this.#data.app as Table | undefined) ?? {});
  }

  /**
   * The policy: its base, then every `[[policy.layer]]` in order (deny wins in any layer).
   * Refused (a {@link ConfigError}, `CONFIG_REFUSED`) while a bundle the configuration
   * names failed to load: see {@link problems}.
   */
  policy(): Policy {
    this.#assertWhole('policy');
    return this.#policy();
  }

  /**
   * Fails closed: a bundle that did not load would take its deny rules (and its guidance)
   * with it, so a configuration with one dropped gives no policy and no contract, and the
   * error names each bundle and why. `config explain` and {@link problems} still show it.
   */
  #assertWhole(what: string): void {
    const dropped = this.#problems.filter((problem) => problem.dropped);
    if (dropped.length === 0) return;
    throw new ConfigError(
      ErrorCode.ConfigRefused,
      `config.${what}(): ${dropped.length === 1 ? 'a bundle' : `${dropped.length} bundles`} the configuration names could not be loaded (${dropped
        .map((problem) => `${problem.file}: ${problem.plugin}: ${problem.message}`)
        .join(
          '; ',
        )}). A bundle that fails to load would take its deny rules with it, so nothing of the configuration is used until it loads: mend it, or remove its [[plugin]] entry.`,
      { details: { problems: dropped.map((problem) => ({ ...problem })) } },
    );
  }

  #policy(): Policy {
    const section = (this.#data.policy ?? {}) as NonNullable<ConfigBody['policy']>;
    const base =
      section.base === 'empty'
        ? Policy.empty()
        : section.base === 'permissive'
          ? Policy.permissive()
          : Policy.default();
    const layers: PolicyLayer[] = (section.layer ?? []).map((layer) => ({
      name: layer.name,
      rules: (layer.rule ?? []).map((rule) => ({ effect: rule.effect, act: rule.act, pattern: rule.pattern })),
    }));
    // Each bundle's deny rules are a layer of its own, named for it: a refusal says which bundle made it.
    const bundles: PolicyLayer[] = this.#bundles
      .map((bundle) => ({
        name: `${bundle.name}__deny`,
        rules: (['read', 'write', 'exec', 'net'] as const).flatMap((act) =>
          bundle.deny[act].map((pattern) => ({ effect: 'deny' as const, act, pattern })),
        ),
      }))
      .filter((layer) => layer.rules.length > 0);
    return Policy.from({ layers: [...base.toJSON().layers, ...layers, ...bundles] });
  }

  /** The model to run with, and its fallbacks in order (a fallback spec when there are several); null when none is set. */
  provider(): ProviderSpec | null {
    const list = (this.#data.provider ?? []) as NonNullable<ConfigBody['provider']>;
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

  /** The tree's ceilings, as `withBudget` takes them; null when none is set. */
  budget(): ContractBudget | null {
    const section = this.#data.budget as ConfigBody['budget'];
    if (!section) return null;
    return {
      ...(section.steps === undefined ? {} : { steps: section.steps }),
      ...(section.tokens === undefined ? {} : { tokens: section.tokens }),
      ...(section.wall_secs === undefined ? {} : { wallSecs: section.wall_secs }),
    };
  }

  /** What commands are granted, as a contract's `sandbox` data holds it; null when nothing is set. */
  sandbox(): Partial<SandboxData> | null {
    const section = this.#data.sandbox as ConfigBody['sandbox'];
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

  /** How requests are fitted to the window, as `withContext` takes it; null when nothing is set. */
  context(): ContextData | null {
    const section = this.#data.context as ConfigBody['context'];
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

  /** Durable memory, as `withMemory` takes it; null when there is no `[memory]`. */
  memory(): MemoryData | null {
    const section = this.#data.memory as ConfigBody['memory'];
    if (!section) return null;
    return {
      ...(section.share === undefined ? {} : { share: section.share }),
      ...(section.cap === undefined ? {} : { cap: section.cap }),
    };
  }

  /** The MCP servers, as `run({ mcp })` takes them. */
  mcp(): McpServerSpec[] {
    const list = (this.#data.mcp ?? []) as NonNullable<ConfigBody['mcp']>;
    const specs = list.map((item) =>
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
    return checkSpecs([...specs, ...this.#bundles.flatMap((bundle) => bundle.mcp)], '[[mcp]]');
  }

  /**
   * The skill roots, each resolved against the directory of the file that named it, then
   * each bundle's, as `{ root, namespace }` (its skills are named `<plugin>__<skill>`).
   */
  skills(): SkillRoot[] {
    const roots = ((this.#data.skills as ConfigBody['skills'])?.roots ?? []) as string[];
    const own = roots.map((root, index) => {
      const origin = this.#origins.get(`skills.roots`) ?? this.#origins.get(`skills.roots[${index}]`);
      const base = origin && origin.file !== '(defaults)' ? dirname(origin.file) : this.root;
      return resolve(base, root);
    });
    return [...own, ...this.#bundles.flatMap((bundle) => bundle.skills.map((skill) => ({ ...skill })))];
  }

  /** The agent roster the bundles contribute (`<plugin>__<agent>`), as `supervisor.run({ agents })` takes it. */
  agents(): AgentDefinition[] {
    return this.#bundles.flatMap((bundle) => structuredClone(bundle.agents));
  }

  /** The prompt templates the bundles ship (`<plugin>__<template>`). */
  templates(): PromptTemplate[] {
    return this.#bundles.flatMap((bundle) => bundle.templates.map((item) => ({ ...item })));
  }

  /**
   * A template's text with each `{{name}}` replaced by `values[name]`; a placeholder with no
   * value is an error naming it, as is a template no bundle ships.
   */
  template(name: string, values: Record<string, string> = {}): string {
    const found = this.templates().find((item) => item.name === name);
    if (!found)
      throw new InvalidArgumentError(
        `config.template: no template ${JSON.stringify(name)}; the bundles ship ${
          this.templates()
            .map((item) => item.name)
            .join(', ') || 'none'
        }.`,
      );
    return found.text.replace(/\{\{\s*([A-Za-z_][\w-]*)\s*\}\}/g, (_, key: string) => {
      const value = values[key];
      if (typeof value !== 'string')
        throw new InvalidArgumentError(`config.template(${JSON.stringify(name)}): give a value for {{${key}}}.`);
      return value;
    });
  }

  /**
   * The executables the bundles ship (`<plugin>__<bin>`, with their paths): a declaration,
   * not a grant. Where they go on a PATH, and whether the policy lets an agent run one, is
   * yours to decide.
   */
  bins(): BundleBin[] {
    return this.#bundles.flatMap((bundle) => bundle.bins.map((item) => ({ ...item })));
  }

  /** The bundles that loaded, each with what it contributed, namespaced. */
  bundles(): LoadedBundle[] {
    return structuredClone(this.#bundles);
  }

  /**
   * What went wrong with the bundles: one dropped whole (`dropped: true`), or a contribution
   * refused (a workspace-declared bundle's hook, MCP server or bin). A bundle dropped whole
   * fails the configuration closed: {@link policy} and {@link contract} refuse, naming it. A
   * contribution refused is not fatal; a contract from {@link contract} records it as a
   * `bundle-problem` event.
   */
  problems(): BundleProblem[] {
    return this.#problems.map((problem) => ({ ...problem }));
  }

  /**
   * Everything `supervisor.run()` takes from the configuration, for `goal`: the contract,
   * the provider (when one is configured), the policy, and the MCP servers, skills and
   * agent roster (the bundles' included), each only when there is some.
   */
  runOptions(goal: string): {
    contract: TaskContract;
    policy: Policy;
    provider?: ProviderSpec;
    mcp?: McpServerSpec[];
    skills?: SkillRoot[];
    agents?: AgentDefinition[];
  } {
    const provider = this.provider();
    const mcp = this.mcp();
    const skills = this.skills();
    const agents = this.agents();
    return {
      contract: this.contract(goal),
      policy: this.policy(),
      ...(provider ? { provider } : {}),
      ...(mcp.length > 0 ? { mcp } : {}),
      ...(skills.length > 0 ? { skills } : {}),
      ...(agents.length > 0 ? { agents } : {}),
    };
  }

  /**
   * The rule of trust: every file and directory this configuration reads (its files, the
   * guidance, every bundle named, loaded or not, the skills' roots, the hooks' programs) is
   * kept read-only to every contained command from now on, wherever it sits, so no run can
   * change what the next load reads (see runtime/exec/containment/kept.ts).
   */
  #keepFromCommands(): void {
    const section = this.#data.instructions as ConfigBody['instructions'];
    const paths = [
      ...this.files.map((item) => item.file),
      ...(section?.files ?? ['AGENTS.md']).map((name) => filePath(name, this.root)),
      ...this.#bundleDirs,
      ...this.skills().map((skill) => resolve(this.root, typeof skill === 'string' ? skill : skill.root)),
      ...this.hookSpecs().flatMap((hook) => {
        const program = hook.run?.[0];
        return program?.includes('/') ? [resolve(this.root, program)] : [];
      }),
    ];
    for (const path of paths) keepFromCommands(path, 'protect');
  }

  /** The directory of every bundle `[[plugin]]` names, loaded or not. */
  #bundleDirs: string[] = [];

  /** Reads the bundles `[[plugin]]` names, in order: each loaded, or dropped and reported. */
  #loadBundles(): void {
    const entries = (this.#data.plugin ?? []) as NonNullable<ConfigBody['plugin']>;
    const taken = new Set<string>();
    // What the configuration's own policy (before any bundle's deny rules) lets be read, inside the workspace.
    const policy = this.#policy();
    const readable = (path: string) =>
      !inside(path, this.root) ||
      policy.decide({ kind: 'read', path: relative(realTarget(this.root), realTarget(path)) }, this.root).effect ===
        'allow';
    for (const [index, entry] of entries.entries()) {
      const origin = this.#origins.get(`plugin[${index}]`);
      const declaredIn = origin ? `${origin.file}:${origin.line ?? 1}` : '(defaults)';
      const fromWorkspace = origin?.scope !== 'user';
      const base = origin && origin.file !== '(defaults)' ? dirname(origin.file) : this.root;
      const dir = filePath(entry.path, base);
      this.#bundleDirs.push(dir);
      const { bundle, problems, name } = loadBundle(dir, {
        fromWorkspace,
        declaredIn,
        root: this.root,
        taken,
        readable,
      });
      this.#problems.push(...problems);
      // A name your file's bundle has stays yours even when that bundle was dropped: no later one takes it over.
      if (name && !fromWorkspace) taken.add(name);
      if (!bundle) continue;
      taken.add(bundle.name);
      this.#bundles.push(bundle);
    }
  }

  /** The toolchain commands, as `withToolchain` takes them; null when none are set. */
  toolchain(): ToolchainOverrides | null {
    const section = this.#data.toolchain as ToolchainOverrides | undefined;
    return section ? structuredClone(section) : null;
  }

  /** A workspace contract for `goal` with this configuration's budget, context, memory, sandbox and toolchain. */
  contract(goal: string): TaskContract {
    this.#assertWhole('contract');
    const budget = this.budget();
    const context = this.context();
    const memory = this.memory();
    const sandbox = this.sandbox();
    const toolchain = this.toolchain();
    return TaskContract.from({
      goal,
      root: this.root,
      ...(budget ? { budget } : {}),
      ...(context ? { context } : {}),
      ...(memory ? { memory } : {}),
      ...(sandbox ? { sandbox: { ...DEFAULT_SANDBOX, ...sandbox } } : {}),
      ...(toolchain ? { toolchain } : {}),
      ...(this.#findings.env.size > 0 ? { scrubbedEnv: this.scrubbedEnv() } : {}),
      ...(this.#guidance.length > 0 ? { instructions: this.instructions() } : {}),
      ...(this.#problems.length > 0 ? { bundleProblems: this.problems() } : {}),
    });
  }
}

/** `a.b[2].c` as parts: ["a", "b", 2, "c"]. */
function splitKey(key: string): (string | number)[] {
  const parts: (string | number)[] = [];
  for (const piece of key.split('.')) {
    const match = /^([^[\]]*)((?:\[\d+\])*)$/.exec(piece);
    if (!match) {
      parts.push(piece);
      continue;
    }
    if (match[1]) parts.push(match[1]);
    for (const index of (match[2] ?? '').matchAll(/\[(\d+)\]/g)) parts.push(Number(index[1]));
  }
  return parts;
}

function normalKey(key: string): string {
  return splitKey(currentName(key))
    .map((part, index) => (typeof part === 'number' ? `[${part}]` : index === 0 ? part : `.${part}`))
    .join('');
}

const camel = (key: string) => key.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase());

/** The nearest of `known` to `key` by edit distance, when it is near enough to be a slip. */
function nearest(key: string, known: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const distance = editDistance(key.toLowerCase(), candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best !== null && bestDistance <= Math.max(2, Math.floor(key.length / 3)) ? best : null;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(
        (previous[j] as number) + 1,
        (row[j - 1] as number) + 1,
        (previous[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    previous = row;
  }
  return previous[b.length] as number;
}

const pathText = (path: readonly PropertyKey[]) =>
  path
    .map((part, index) => (typeof part === 'number' ? `[${part}]` : index === 0 ? String(part) : `.${String(part)}`))
    .join('');

/**
 * Checks one file (sections not built, where a workspace file may use substitutions, its
 * widening keys, then the schema) and resolves its substitutions in place: the top level's
 * and the chosen profile's, never another profile's (a variable only it needs may be unset).
 * Returns the keys a substitution replaced, each with its value as written.
 */
function check(
  parsed: ParsedFile,
  scope: ConfigScope,
  userFile: string,
  root: string,
  profile: string | undefined,
  findings: Findings,
): { written: Map<string, unknown>; resolved: [string, string][]; raw: Table } {
  const { file, data, lines } = parsed;
  const at = (key: string) => `${file}:${lineOf(lines, key) ?? 1}`;
  const workspace = scope === 'project' || scope === 'local';
  const bodies: [string, Table][] = [['', data]];
  for (const [name, body] of Object.entries(isTable(data.profile) ? data.profile : {}))
    if (isTable(body)) bodies.push([`profile.${name}.`, body]);
  // A NUL cannot be in a path, a name or an argv, and a value with one only ever fails later and less clearly.
  const nul = (value: unknown, path: string): string | null => {
    if (typeof value === 'string') return value.includes('\0') ? path : null;
    if (Array.isArray(value)) {
      for (const [index, item] of value.entries()) {
        const found = nul(item, `${path}[${index}]`);
        if (found) return found;
      }
    } else if (isTable(value))
      for (const [key, item] of Object.entries(value)) {
        const here = path ? `${path}.${key}` : key;
        const found = key.includes('\0') ? here : nul(item, here);
        if (found) return found;
      }
    return null;
  };
  const withNul = nul(data, '');
  if (withNul !== null)
    throw new ConfigError(
      ErrorCode.ConfigInvalid,
      `${at(withNul)}: ${withNul.replace(/\0/g, '\\0')} holds a NUL character, which no path, name or command may; remove it (nothing of the configuration was used).`,
      { details: { file, line: lineOf(lines, withNul), key: withNul } },
    );
  for (const [prefix, body] of bodies)
    for (const section of NOT_BUILT)
      if (section in body) {
        const key = `${prefix}${section}`;
        if (workspace && ['browser', 'lsp', 'web'].includes(section))
          refuse(file, lineOf(lines, key), key, 'names a program to run or a route out of the boundary', userFile);
        throw new ConfigError(
          ErrorCode.ConfigInvalid,
          `${at(key)}: [${section}] is not built yet in this release of io-harness; remove it (nothing of the configuration was used).`,
          { details: { file, line: lineOf(lines, key), key } },
        );
      }
  if (workspace)
    substitutions(data, '', (key, text) => {
      const kinds = kindsIn(text);
      if (kinds.size === 0) return;
      if (kinds.has('cmd'))
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the substitution's spelling, named for the reader
        refuse(file, lineOf(lines, key), key, 'runs a command (${cmd:...})', userFile);
      // Outside [app], a value of a workspace file shapes the run (a rule, a root, a name the agent reads): one
      // read from your environment or your disk there would hand it to the repository's authors.
      if (!isAppKey(key))
        refuse(
          file,
          lineOf(lines, key),
          key,
          `reads ${kinds.has('env') ? 'a variable of your environment' : 'a file'} into a value the run is built from (a substitution in a workspace file may only go in [app], which only your program reads)`,
          userFile,
        );
      for (const path of filesIn(text, dirname(file)))
        if (!inside(path, root))
          refuse(file, lineOf(lines, key), key, `reads ${path}, outside the workspace`, userFile);
    });
  const raw = structuredClone(data);
  const written = new Map<string, unknown>();
  // Each value a substitution resolved, with what the file wrote: an error past here shows the latter.
  const resolved: [string, string][] = [];
  const chosen = profile === undefined ? null : `profile.${profile}`;
  substitutions(data, '', (key, text, arrays, parts) => {
    if (key.startsWith('profile.') && (chosen === null || !(key === chosen || key.startsWith(`${chosen}.`)))) return;
    const result = resolveText(text, file);
    if (!result.ok)
      throw new ConfigError(
        ErrorCode.ConfigInvalid,
        `${at(key)}: ${key}: ${result.reason} (nothing of the configuration was used).`,
        { details: { file, line: lineOf(lines, key), key } },
      );
    if (result.value === text) return;
    for (const [path, array] of arrays) if (!written.has(path)) written.set(path, structuredClone(array));
    written.set(key, text);
    for (const name of result.env) findings.env.add(name);
    setAt(data, parts, result.value);
    resolved.push([result.value, text], ...result.pieces);
  });
  try {
    checkResolved(parsed, workspace, bodies, userFile, root);
  } catch (error) {
    throw redacted(error, resolved);
  }
  return { written, resolved, raw };
}

/**
 * An error with every value a substitution resolved shown as the file wrote it instead, so
 * no message quotes a credential (values under four characters are left: they are no key).
 */
export function redacted(error: unknown, resolved: readonly [string, string][]): unknown {
  if (!(error instanceof ConfigError) || resolved.length === 0) return error;
  let message = error.message;
  // The longest first, so a value holding another is shown whole.
  for (const [value, text] of [...resolved].sort((a, b) => b[0].length - a[0].length))
    if (value.length >= 4) message = message.split(value).join(text);
  if (message === error.message) return error;
  return new ConfigError(error.code as ErrorCode, message, { details: error.details });
}

/** The checks of a file that look at its values as resolved: a workspace file's widening keys, then the schema. */
function checkResolved(
  parsed: ParsedFile,
  workspace: boolean,
  bodies: [string, Table][],
  userFile: string,
  root: string,
): void {
  const { file, data, lines } = parsed;
  const at = (key: string) => `${file}:${lineOf(lines, key) ?? 1}`;
  if (workspace)
    for (const [prefix, body] of bodies) {
      widening(body, prefix, (key, why) => refuse(file, lineOf(lines, key), key, why, userFile));
      // A workspace's skills are its own: a root outside it would read what it has no business with into the prompt.
      const roots = isTable(body.skills) && Array.isArray(body.skills.roots) ? body.skills.roots : [];
      for (const [index, skillRoot] of roots.entries())
        if (typeof skillRoot === 'string' && !inside(resolve(root, skillRoot), root))
          refuse(
            file,
            lineOf(lines, `${prefix}skills.roots`),
            `${prefix}skills.roots[${index}]`,
            `names ${JSON.stringify(skillRoot)}, outside the workspace`,
            userFile,
          );
    }
  const result = fileSchema.safeParse(data);
  if (result.success) return;
  const issue = result.error.issues[0] as z.core.$ZodIssue;
  const path = pathText(issue.path);
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0] as string;
    const full = path ? `${path}.${key}` : key;
    const known = knownKeys(issue.path as (string | number)[]);
    const near = nearest(key, known);
    throw new ConfigError(
      ErrorCode.ConfigInvalid,
      `${at(full)}: unknown key ${full}${near ? `; did you mean ${path ? `${path}.` : ''}${near}?` : ''} (the keys ${path ? `of ${path} ` : ''}are ${known.join(', ')}; nothing of the configuration was used).`,
      { details: { file, line: lineOf(lines, full), key: full, ...(near ? { nearest: near } : {}) } },
    );
  }
  throw new ConfigError(
    ErrorCode.ConfigInvalid,
    `${at(path)}: ${path || '(the file)'}: ${issue.message}; fix it there (nothing of the configuration was used).`,
    { details: { file, line: lineOf(lines, path), key: path } },
  );
}

/** Whether a key path is in an `[app]` section (the top level's or a profile's). */
const isAppKey = (key: string) => /^(profile\.[^.]+\.)?app(\.|\[|$)/.test(key);

/**
 * Calls `found` with every string value that may hold a substitution (one with `${` in
 * it), with the arrays it sits in (their paths and values, outermost first).
 */
function substitutions(
  value: unknown,
  path: string,
  found: (key: string, text: string, arrays: [string, unknown[]][], parts: (string | number)[]) => void,
  arrays: [string, unknown[]][] = [],
  parts: (string | number)[] = [],
): void {
  if (typeof value === 'string') {
    if (value.includes('${')) found(path, value, arrays, parts);
  } else if (Array.isArray(value)) {
    const within: [string, unknown[]][] = [...arrays, [path, value]];
    for (const [index, item] of value.entries())
      substitutions(item, `${path}[${index}]`, found, within, [...parts, index]);
  } else if (isTable(value))
    for (const [key, item] of Object.entries(value))
      substitutions(item, path ? `${path}.${key}` : key, found, arrays, [...parts, key]);
}

/** Sets the value at a path of parsed data, by its parts (a key may itself hold a dot or a bracket). */
function setAt(data: Table, parts: readonly (string | number)[], value: unknown): void {
  let holder: unknown = data;
  for (const part of parts.slice(0, -1)) holder = (holder as Record<string | number, unknown>)[part];
  (holder as Record<string | number, unknown>)[parts.at(-1) as string | number] = value;
}

/**
 * Keys an earlier release spelled another way: still read, under the new name, with a
 * warning naming the file, the line and the key to write instead. `[]` is each element of
 * an array of tables.
 */
export const RENAMED_KEYS: readonly { from: string; to: string }[] = [
  { from: 'policy.layers', to: 'policy.layer' },
  { from: 'policy.layer[].rules', to: 'policy.layer[].rule' },
  { from: 'budget.wall_seconds', to: 'budget.wall_secs' },
  { from: 'skills.paths', to: 'skills.roots' },
  { from: 'sandbox.writable_paths', to: 'sandbox.writable_roots' },
];

/** A key (as `get` and `explain` are asked it) with every renamed part spelled the new way. */
function currentName(key: string): string {
  let out = key;
  for (const { from, to } of RENAMED_KEYS) {
    const pattern = new RegExp(
      `^((?:profile\\.[^.]+\\.)?${from.replace(/[.]/g, '\\.').replace(/\[\]/g, '\\[\\d+\\]')})(?=$|[.[])`,
    );
    out = out.replace(
      pattern,
      (whole) =>
        whole.slice(0, whole.length - (from.split('.').at(-1) as string).length) + (to.split('.').at(-1) as string),
    );
  }
  return out;
}

/** Moves each renamed key of a file (and of its profiles) to its new name; returns the warnings. */
function renameOld(parsed: ParsedFile): string[] {
  const warnings: [number, string][] = [];
  const bodies: [string, Table][] = [['', parsed.data]];
  for (const [name, body] of Object.entries(isTable(parsed.data.profile) ? parsed.data.profile : {}))
    if (isTable(body)) bodies.push([`profile.${name}.`, body]);
  for (const [prefix, body] of bodies)
    for (const { from, to } of RENAMED_KEYS) {
      const parts = from.split('.');
      const oldName = parts.at(-1) as string;
      const newName = to.split('.').at(-1) as string;
      // The tables the old key may sit in: each step a key, `name[]` every element of an array of tables.
      let holders: [string, Table][] = [[prefix.replace(/\.$/, ''), body]];
      for (const part of parts.slice(0, -1)) {
        const each = part.endsWith('[]');
        const name = each ? part.slice(0, -2) : part;
        holders = holders.flatMap(([path, table]): [string, Table][] => {
          const child = table[name];
          const here = path ? `${path}.${name}` : name;
          if (each) return isTables(child) ? child.map((item, index) => [`${here}[${index}]`, item]) : [];
          return isTable(child) ? [[here, child]] : [];
        });
      }
      for (const [path, table] of holders) {
        if (!(oldName in table)) continue;
        const oldKey = path ? `${path}.${oldName}` : oldName;
        const newKey = path ? `${path}.${newName}` : newName;
        const line = parsed.lines.get(oldKey) ?? parsed.lines.get(`${oldKey}[0]`) ?? lineOf(parsed.lines, oldKey);
        if (newName in table)
          throw new ConfigError(
            ErrorCode.ConfigInvalid,
            `${parsed.file}:${line ?? 1}: ${oldKey} is the old name of ${newKey}, and both are set; keep ${newKey} alone (nothing of the configuration was used).`,
            { details: { file: parsed.file, line, key: oldKey } },
          );
        table[newName] = table[oldName];
        delete table[oldName];
        for (const [key, number] of [...parsed.lines])
          if (key === oldKey || key.startsWith(`${oldKey}.`) || key.startsWith(`${oldKey}[`)) {
            parsed.lines.delete(key);
            parsed.lines.set(newKey + key.slice(oldKey.length), number);
          }
        warnings.push([
          line ?? 1,
          `${parsed.file}:${line ?? 1}: ${oldKey} is the old name of ${newKey}; it is read as ${newKey} for now, and a later release will stop reading it: write ${newKey}.`,
        ]);
      }
    }
  return warnings.sort((a, b) => a[0] - b[0]).map(([, text]) => text);
}

/**
 * The keys a workspace file may not set, because each would widen the boundary: sections
 * that name a program to run or an endpoint a credential is sent to, a policy rule that is
 * not a denial (or a base other than the empty one), and every sandbox grant. Budgets and
 * caps may only be lowered: that is checked as the files merge.
 */
function widening(body: Table, prefix: string, refused: (key: string, why: string) => void): void {
  if (body.provider !== undefined) refused(`${prefix}provider`, 'names an endpoint a credential is sent to');
  if (body.mcp !== undefined) refused(`${prefix}mcp`, 'names a program to run or an endpoint to dial');
  if (body.toolchain !== undefined) refused(`${prefix}toolchain`, 'names programs to run');
  if (body.hook !== undefined) refused(`${prefix}hook`, 'names a program to run or a file to write with the events');
  const policy = isTable(body.policy) ? body.policy : {};
  if (policy.base !== undefined && policy.base !== 'empty')
    refused(
      `${prefix}policy.base`,
      `sets the policy's base to ${JSON.stringify(policy.base)} (only "empty", which narrows, may be set here)`,
    );
  if (Array.isArray(policy.layer))
    policy.layer.forEach((layer, i) => {
      const rules = isTable(layer) && Array.isArray(layer.rule) ? layer.rule : [];
      rules.forEach((rule, j) => {
        if (isTable(rule) && rule.effect !== 'deny')
          refused(
            `${prefix}policy.layer[${i}].rule[${j}]`,
            `is a policy rule whose effect is ${JSON.stringify(rule.effect)} (only "deny" may be set here)`,
          );
      });
    });
  const sandbox = isTable(body.sandbox) ? body.sandbox : {};
  if (sandbox.access !== undefined && sandbox.access !== 'read-only')
    refused(
      `${prefix}sandbox.access`,
      `grants ${JSON.stringify(sandbox.access)} access (only "read-only" may be set here)`,
    );
  if (sandbox.writable_roots !== undefined)
    refused(`${prefix}sandbox.writable_roots`, 'grants writes outside the workspace');
  if (sandbox.shared_caches !== undefined && sandbox.shared_caches !== false)
    refused(`${prefix}sandbox.shared_caches`, 'shares the toolchains’ caches with the host');
  if (sandbox.rung !== undefined) refused(`${prefix}sandbox.rung`, 'chooses how commands are contained');
}

function refuse(file: string, line: number | null, key: string, why: string, userFile: string): never {
  throw new ConfigError(
    ErrorCode.ConfigRefused,
    `${file}:${line ?? 1}: ${key} ${why}; a file inside the workspace may narrow the boundary and never widen it. If you mean it, put it in your user file, ${userFile} (nothing of the configuration was used).`,
    { details: { file, line, key, userFile } },
  );
}

/** Keys a workspace file may only lower: budgets, caps, and the shares of a request and of memory. */
const LOWER_ONLY = /^(budget\.(steps|tokens|wall_secs)|sandbox\.caps\.[a-z_]+|context\.share|memory\.(share|cap))$/;
/** What a lower-only key is when no file sets it (a budget or a cap unset is no limit, so it has none). */
const LOWER_DEFAULTS: Readonly<Record<string, number>> = {
  'context.share': DEFAULT_SHARE,
  'memory.share': DEFAULT_MEMORY_SHARE,
  'memory.cap': DEFAULT_MEMORY_CAP,
};

/**
 * Merges `source` (a file's body, or one of its profiles at `from`) into `target`, and
 * records where each value came from: tables key by key, arrays of tables appended, any
 * other value replaced.
 */
function merge(
  target: Table,
  source: Table,
  file: ScopeFile,
  path: string,
  from: string,
  origins: Map<string, Origin>,
  userFile: string | null,
): void {
  const origin = (sourcePath: string): Origin => {
    const written = file.written?.get(sourcePath);
    return {
      scope: file.scope,
      file: file.file,
      line: file.scope === 'defaults' ? null : lineOf(file.lines, sourcePath),
      ...(written === undefined ? {} : { written }),
    };
  };
  const record = (value: unknown, at: string, sourceAt: string) => {
    for (const key of [...origins.keys()])
      if (key === at || key.startsWith(`${at}.`) || key.startsWith(`${at}[`)) origins.delete(key);
    const walk = (item: unknown, here: string, there: string) => {
      origins.set(here, origin(there));
      if (isTable(item))
        for (const [key, child] of Object.entries(item)) walk(child, `${here}.${key}`, `${there}.${key}`);
      else if (Array.isArray(item))
        for (const [index, child] of item.entries()) walk(child, `${here}[${index}]`, `${there}[${index}]`);
    };
    walk(value, at, sourceAt);
  };
  for (const [key, value] of Object.entries(source)) {
    const at = path ? `${path}.${key}` : key;
    const sourceAt = from ? `${from}.${at}` : at;
    const current = target[key];
    if (at === 'memory' && current === undefined && (file.scope === 'project' || file.scope === 'local'))
      refuse(
        file.file,
        lineOf(file.lines, sourceAt),
        at,
        'turns durable memory on, which hands the run the memory tools and your notes',
        userFile ?? defaultUserFile(),
      );
    if (isTable(value) && isTable(current)) {
      origins.set(at, origins.get(at) ?? origin(sourceAt));
      merge(current, value, file, at, from, origins, userFile);
    } else if (Array.isArray(value) && value.every(isTable) && Array.isArray(current) && current.every(isTable)) {
      // Arrays of tables append, whatever either holds: an empty one adds nothing, it never clears what was there.
      const base = current.length;
      value.forEach((item, index) => {
        current.push(structuredClone(item));
        record(item, `${at}[${base + index}]`, `${sourceAt}[${index}]`);
      });
    } else {
      // A value set whole (a table no earlier file had) is checked leaf by leaf, like one merged into a table.
      if (file.scope === 'project' || file.scope === 'local') {
        const lower = (item: unknown, here: string, there: string, before: unknown): void => {
          if (isTable(item)) {
            for (const [name, child] of Object.entries(item))
              lower(child, `${here}.${name}`, `${there}.${name}`, isTable(before) ? before[name] : undefined);
            return;
          }
          const earlier = typeof before === 'number' ? before : LOWER_DEFAULTS[here];
          if (!LOWER_ONLY.test(here) || typeof earlier !== 'number' || typeof item !== 'number' || item <= earlier)
            return;
          const set = origins.get(here) ?? { file: 'the defaults' };
          refuse(
            file.file,
            lineOf(file.lines, there),
            here,
            `raises ${earlier} (set in ${set.file}) to ${item} (a budget, a cap or a share may only be lowered here)`,
            userFile ?? defaultUserFile(),
          );
        };
        lower(value, at, sourceAt, current);
      }
      target[key] = structuredClone(value);
      record(value, at, sourceAt);
    }
  }
}
