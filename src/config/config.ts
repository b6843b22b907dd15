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
 * (see ./widening.ts) is refused, naming the user file where it may go. Every file is
 * checked on its own, with its own lines, before anything is merged, and no partial
 * configuration is ever used: the first problem throws.
 */
import { existsSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { ConfigError, ErrorCode, HarnessError, InvalidArgumentError } from '../errors.js';
import { checkSpecs, type McpServerSpec } from '../mcp/spec.js';
import type { AgentDefinition } from '../runtime/agents.js';
import { type BrowserData, checkBrowserOptions } from '../runtime/browser/browser.js';
import type { PriceTable } from '../runtime/budget.js';
import { type CodeActData, checkCodeActOptions } from '../runtime/codeact/codeact.js';
import type { ContextData } from '../runtime/context/assembler.js';
import {
  type ContractBudget,
  type InstructionFile,
  type MemoryData,
  TaskContract,
} from '../runtime/contract/contract.js';
import { checkDocumentsOptions, type DocumentsData } from '../runtime/documents/documents.js';
import { DEFAULT_SANDBOX, type SandboxData } from '../runtime/exec/containment/boundary.js';
import { keepFromCommands } from '../runtime/exec/containment/kept.js';
import { checkLspServers, type LspServerData } from '../runtime/lsp/servers.js';
import { type Policy, realTarget } from '../runtime/policy/policy.js';
import type { ProviderSpec } from '../runtime/provider.js';
import type { SkillRoot } from '../runtime/skills.js';
import { checkWebOptions, type WebData } from '../runtime/web/web.js';
import type { ToolchainOverrides } from '../runtime/workspace/toolchain.js';
import { type BundleBin, type BundleProblem, type LoadedBundle, loadBundle, type PromptTemplate } from './bundles.js';
import { check, type Findings, redacted } from './check.js';
import { emptyDirectory, readGuidance } from './guidance.js';
import { type HookObserver, type HookSpec, hookObserver, hookSpecFrom } from './hooks.js';
import {
  browserOf,
  budgetOf,
  codeactOf,
  contextOf,
  documentsOf,
  lspOf,
  mcpOf,
  memoryOf,
  policyOf,
  pricesOf,
  providerOf,
  sandboxOf,
  webOf,
} from './project.js';
import { normalKey, renameOld } from './renamed.js';
import type { ConfigBody } from './schema.js';
import { type ConfigScope, defaultUserFile, merge, type Origin, type ScopeFile, type ValueOrigin } from './scopes.js';
import { filePath } from './substitute.js';
import { isTable, isTables, lineOf, type ParsedFile, readToml, type Table, valueAt } from './toml.js';
import { inside } from './widening.js';

export type { ConfigScope, ValueOrigin } from './scopes.js';
export { defaultUserFile } from './scopes.js';

export interface DiscoverOptions {
  /** The user file; `null` to read none. Default `$XDG_CONFIG_HOME/io-harness/io.toml`, else `~/.config/io-harness/io.toml`. */
  userFile?: string | null;
  /** A `[profile.<name>]` to overlay. */
  profile?: string;
}

/** The library's defaults, the first scope. */
const DEFAULTS: Record<string, unknown> = { policy: { base: 'default' } };

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
    return pricesOf(this.#data);
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
        ['lsp', () => alone.lsp()],
        ['web', () => alone.web()],
        ['browser', () => alone.browser()],
        ['codeact', () => alone.codeact()],
        ['documents', () => alone.documents()],
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
    return policyOf(this.#data, this.#bundles);
  }

  /** The model to run with, and its fallbacks in order (a fallback spec when there are several); null when none is set. */
  provider(): ProviderSpec | null {
    return providerOf(this.#data);
  }

  /** The tree's ceilings, as `withBudget` takes them; null when none is set. */
  budget(): ContractBudget | null {
    return budgetOf(this.#data);
  }

  /** What commands are granted, as a contract's `sandbox` data holds it; null when nothing is set. */
  sandbox(): Partial<SandboxData> | null {
    return sandboxOf(this.#data);
  }

  /** How requests are fitted to the window, as `withContext` takes it; null when nothing is set. */
  context(): ContextData | null {
    return contextOf(this.#data);
  }

  /** Durable memory, as `withMemory` takes it; null when there is no `[memory]`. */
  memory(): MemoryData | null {
    return memoryOf(this.#data);
  }

  /** The MCP servers, as `run({ mcp })` takes them. */
  mcp(): McpServerSpec[] {
    return checkSpecs([...mcpOf(this.#data), ...this.#bundles.flatMap((bundle) => bundle.mcp)], '[[mcp]]');
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

  /** Whether the git tools are on (`[git]`). */
  git(): boolean {
    return this.#data.git !== undefined;
  }

  /** The language servers (`[[lsp]]`, the user file's only), checked as `withLsp` checks them; empty when none is named. */
  lsp(): LspServerData[] {
    const servers = lspOf(this.#data);
    return servers.length === 0 ? [] : checkLspServers(servers);
  }

  /** The web settings (`[web]`, the user file's only), checked as `withWeb` checks them; null when the section is absent. */
  web(): WebData | null {
    const options = webOf(this.#data);
    return options === null ? null : checkWebOptions(options);
  }

  /** The browser settings (`[browser]`, the user file's only), checked as `withBrowser` checks them; null when absent. */
  browser(): BrowserData | null {
    const options = browserOf(this.#data);
    return options === null ? null : checkBrowserOptions(options);
  }

  /** The CodeAct settings (`[codeact]`, the user file's only), checked as `withCodeAct` checks them; null when absent. */
  codeact(): CodeActData | null {
    const options = codeactOf(this.#data);
    return options === null ? null : checkCodeActOptions(options);
  }

  /** The document settings (`[documents]`, the user file's only), checked as `withDocuments` checks them; null when absent. */
  documents(): DocumentsData | null {
    const options = documentsOf(this.#data);
    return options === null ? null : checkDocumentsOptions(options);
  }

  /** A workspace contract for `goal` with this configuration's budget, context, memory, git, sandbox and toolchain. */
  contract(goal: string): TaskContract {
    this.#assertWhole('contract');
    const budget = this.budget();
    const context = this.context();
    const memory = this.memory();
    const sandbox = this.sandbox();
    const toolchain = this.toolchain();
    const lsp = this.lsp();
    const web = this.web();
    const browser = this.browser();
    const codeact = this.codeact();
    const documents = this.documents();
    return TaskContract.from({
      goal,
      root: this.root,
      ...(budget ? { budget } : {}),
      ...(context ? { context } : {}),
      ...(memory ? { memory } : {}),
      ...(this.git() ? { git: true } : {}),
      ...(lsp.length > 0 ? { lsp } : {}),
      ...(web ? { web } : {}),
      ...(browser ? { browser } : {}),
      ...(codeact ? { codeact } : {}),
      ...(documents ? { documents } : {}),
      ...(sandbox ? { sandbox: { ...DEFAULT_SANDBOX, ...sandbox } } : {}),
      ...(toolchain ? { toolchain } : {}),
      ...(this.#findings.env.size > 0 ? { scrubbedEnv: this.scrubbedEnv() } : {}),
      ...(this.#guidance.length > 0 ? { instructions: this.instructions() } : {}),
      ...(this.#problems.length > 0 ? { bundleProblems: this.problems() } : {}),
    });
  }
}
