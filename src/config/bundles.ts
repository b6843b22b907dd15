/**
 * Capability bundles: a directory with a `plugin.toml` that contributes skills, prompt
 * templates, an agent roster, MCP servers, hooks, executables it ships and deny rules at
 * once, named by a `[[plugin]]` entry of any scope.
 *
 * Every name a bundle contributes is namespaced `<plugin>__<name>` as it loads (a skill,
 * a template, an agent, an MCP server and so its tools, a hook, a bin; its deny rules are
 * the layer `<plugin>__deny`), so a refusal, a tool call and a child's spend already say
 * which bundle brought them. Everything a bundle names stays inside its own directory,
 * by real path.
 *
 * A bundle declared from a workspace file must sit inside the workspace, and may not
 * contribute a hook, an MCP server or a bin (each names a program this machine would run):
 * those are refused and reported, the rest loads. A bundle that cannot be loaded (no
 * plugin.toml, a bad key, a path outside it, a name another bundle has) is dropped and
 * reported, never fatal: `config.problems()` lists it, and a run's contract records it as
 * a `bundle-problem` event.
 */
import { existsSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import type { z } from 'zod';
import { ConfigError, HarnessError } from '../errors.js';
import { checkSpecs, type McpServerSpec } from '../mcp/spec.js';
import { type AgentDefinition, checkAgents } from '../runtime/agents.js';
import { escapes, Policy, realTarget } from '../runtime/policy/policy.js';
import { readBounded } from '../runtime/read-bounded.js';
import { discoverSkills } from '../runtime/skills.js';
import { type HookSpec, hookSpecFrom } from './hooks.js';
import { type PluginData, pluginSchema } from './schema.js';
import { lineOf, readToml } from './toml.js';

/** What went wrong with a bundle: dropped whole, or one contribution refused. */
export interface BundleProblem {
  /** The bundle's name when known, else its directory. */
  plugin: string;
  /** The file (and line) the problem is in, or that declared the bundle. */
  file: string;
  message: string;
  /** True: nothing of the bundle was loaded. False: only what the message names was refused. */
  dropped: boolean;
}

/** A prompt template a bundle ships. */
export interface PromptTemplate {
  name: string;
  description: string | null;
  text: string;
}

/** An executable a bundle ships: a declaration, never a grant (the policy still decides a run of it). */
export interface BundleBin {
  name: string;
  path: string;
  description: string | null;
  plugin: string;
}

/** A bundle as it loaded: every contribution namespaced. */
export interface LoadedBundle {
  name: string;
  dir: string;
  description: string | null;
  version: string | null;
  /** The file and line of the `[[plugin]]` entry that named it. */
  declaredIn: string;
  fromWorkspace: boolean;
  skills: { root: string; namespace: string }[];
  templates: PromptTemplate[];
  agents: AgentDefinition[];
  mcp: McpServerSpec[];
  hooks: HookSpec[];
  bins: BundleBin[];
  /** Deny rules, as the layer `<plugin>__deny` holds them. */
  deny: { read: string[]; write: string[]; exec: string[]; net: string[] };
}

/** The most a template or an agent's system file may hold. */
const MAX_BUNDLE_FILE_BYTES = 64 * 1024;

class Dropped extends Error {}

/** How a bundle is declared, and what the configuration around it holds. */
interface LoadOptions {
  fromWorkspace: boolean;
  declaredIn: string;
  root: string;
  taken: ReadonlySet<string>;
  /** Whether the configuration's policy lets a file be read: what it denies, a bundle does not read into a prompt. */
  readable: (path: string) => boolean;
}

/**
 * Loads the bundle in `dir` (see the module's comment). `root` is the workspace; a
 * workspace-declared bundle is held to what a workspace may bring.
 */
export function loadBundle(
  dir: string,
  options: LoadOptions,
): { bundle: LoadedBundle | null; problems: BundleProblem[]; name: string | null } {
  const load = new BundleLoad(dir, options);
  const { problems } = load;
  try {
    const plugin = load.read();
    const name = plugin.name;
    const skills = load.skills(plugin);
    const templates = load.templates(plugin);
    const agents = load.agents(plugin);
    const mcp = load.mcp(plugin);
    const hooks = load.hooks(plugin);
    const bins = load.bins(plugin);
    load.denies(`${name}__deny`, plugin.deny ?? {}, 'deny');
    for (const [index, agent] of agents.entries())
      if (agent.deny) load.denies(agent.name, agent.deny, `agent[${index}]`);
    const seen = new Set<string>();
    for (const contributed of [...templates, ...bins])
      if (seen.has(contributed.name)) load.drop(`two of the bundle's contributions are named ${contributed.name}`);
      else seen.add(contributed.name);
    return {
      bundle: {
        name,
        dir,
        description: plugin.description ?? null,
        version: plugin.version ?? null,
        declaredIn: options.declaredIn,
        fromWorkspace: options.fromWorkspace,
        skills,
        templates,
        agents,
        mcp,
        hooks,
        bins,
        deny: {
          read: [...(plugin.deny?.read ?? [])],
          write: [...(plugin.deny?.write ?? [])],
          exec: [...(plugin.deny?.exec ?? [])],
          net: [...(plugin.deny?.net ?? [])],
        },
      },
      problems,
      name,
    };
  } catch (error) {
    const named = load.label === dir ? null : load.label;
    if (error instanceof Dropped) return { bundle: null, problems, name: named };
    problems.push({
      plugin: load.label,
      file: load.file,
      message: `could not be loaded: ${String(error)}`,
      dropped: true,
    });
    return { bundle: null, problems, name: named };
  }
}

/**
 * One bundle as it loads: its plugin.toml read and checked, then each contribution
 * namespaced and checked in turn. A problem that drops the bundle throws (see
 * {@link drop}); a contribution a workspace may not bring is refused and reported.
 */
class BundleLoad {
  readonly dir: string;
  readonly file: string;
  readonly options: LoadOptions;
  readonly problems: BundleProblem[] = [];
  /** The bundle's name once read, its directory until then: what a problem is reported under. */
  label: string;
  #lines: ReadonlyMap<string, number> = new Map();

  constructor(dir: string, options: LoadOptions) {
    this.dir = dir;
    this.file = join(dir, 'plugin.toml');
    this.options = options;
    this.label = dir;
  }

  /** Reports the bundle dropped, and ends its load. */
  drop = (message: string, where = this.file): never => {
    this.problems.push({ plugin: this.label, file: where, message, dropped: true });
    throw new Dropped(message);
  };

  /** The file and line of a key of plugin.toml. */
  at(key: string): string {
    return `${this.file}:${lineOf(this.#lines, key) ?? 1}`;
  }

  /** A path the bundle names, resolved in its directory: outside it, or unreadable by the policy, drops the bundle. */
  within(path: string, key: string): string {
    const full = resolve(this.dir, path);
    if (escapes(relative(realTarget(this.dir), realTarget(full))))
      this.drop(
        `${key} names ${JSON.stringify(path)}, outside the bundle's directory; a bundle ships what it contributes`,
        this.at(key),
      );
    if (!this.options.readable(full))
      this.drop(`${key} names ${JSON.stringify(path)}, which your policy does not let be read`, this.at(key));
    return full;
  }

  /** Reports a contribution refused because a workspace declared the bundle; the rest still loads. */
  refuse(key: string, what: string): void {
    this.problems.push({
      plugin: this.label,
      file: this.at(key),
      message: `${key} was refused: a bundle declared in a workspace file (${this.options.declaredIn}) may not bring ${what}, which names a program this machine would run; declare the bundle in your user file to have it`,
      dropped: false,
    });
  }

  /** plugin.toml, read as written (no substitution) and checked against the schema; its name free. */
  read(): PluginData {
    const { dir, file, options, drop } = this;
    if (options.fromWorkspace && escapes(relative(realTarget(options.root), realTarget(dir))))
      drop(
        `the bundle ${dir} is declared in a workspace file and lies outside the workspace; a workspace may bring only its own bundles (declare this one in your user file)`,
        options.declaredIn,
      );
    if (!existsSync(file)) drop(`${dir} has no plugin.toml; a bundle is a directory with one`, options.declaredIn);
    let parsed: ReturnType<typeof readToml>;
    try {
      parsed = readToml(file, { noLinks: options.fromWorkspace });
    } catch (error) {
      return drop(
        error instanceof ConfigError
          ? error.message.replace(/ \(nothing of the configuration was used\)\.$/, '')
          : String(error),
      );
    }
    const { data, lines } = parsed;
    this.#lines = lines;
    if (typeof data.name === 'string') this.label = data.name;
    const substituted = findSubstitution(data, '');
    if (substituted)
      drop(
        `${substituted} holds a substitution; a bundle's file is read as written (substitutions go in your io.toml)`,
        this.at(substituted),
      );
    const result = pluginSchema.safeParse(data);
    if (!result.success) {
      const issue = result.error.issues[0] as z.core.$ZodIssue;
      const path = issue.path
        .map((part) => (typeof part === 'number' ? `[${part}]` : `.${String(part)}`))
        .join('')
        .replace(/^\./, '');
      const message =
        issue.code === 'unrecognized_keys'
          ? `unknown key ${path ? `${path}.` : ''}${issue.keys[0]} (a bundle holds name, description, version, skills, template, agent, mcp, hook, bin and deny; deny rules only)`
          : `${path || '(the file)'}: ${issue.message}`;
      drop(message, this.at(issue.code === 'unrecognized_keys' ? `${path ? `${path}.` : ''}${issue.keys[0]}` : path));
    }
    const plugin = result.data as PluginData;
    this.label = plugin.name;
    if (options.taken.has(plugin.name))
      drop(`another bundle is named ${plugin.name} already; a bundle's name is its namespace`);
    return plugin;
  }

  skills(plugin: PluginData): LoadedBundle['skills'] {
    const skills = (plugin.skills?.roots ?? []).map((root, index) => ({
      root: this.within(root, `skills.roots[${index}]`),
      namespace: plugin.name,
    }));
    if (skills.length > 0)
      try {
        discoverSkills(skills, this.options.readable);
      } catch (error) {
        this.drop(error instanceof HarnessError ? error.message : String(error), this.at('skills'));
      }
    return skills;
  }

  templates(plugin: PluginData): PromptTemplate[] {
    return (plugin.template ?? []).map((item, index) => ({
      name: `${plugin.name}__${item.name}`,
      description: item.description ?? null,
      text:
        item.text ??
        readShipped(
          this.within(item.file as string, `template[${index}].file`),
          this.at(`template[${index}]`),
          this.drop,
        ),
    }));
  }

  agents(plugin: PluginData): AgentDefinition[] {
    const name = plugin.name;
    try {
      return checkAgents(
        (plugin.agent ?? []).map((item, index) => ({
          name: `${name}__${item.name}`,
          description: item.description,
          system:
            item.system ??
            readShipped(
              this.within(item.system_file as string, `agent[${index}].system_file`),
              this.at(`agent[${index}]`),
              this.drop,
            ),
          ...(item.deny ? { deny: item.deny } : {}),
          ...(item.worktree ? { worktree: true } : {}),
          ...(item.budget
            ? {
                budget: {
                  ...(item.budget.steps === undefined ? {} : { steps: item.budget.steps }),
                  ...(item.budget.tokens === undefined ? {} : { tokens: item.budget.tokens }),
                  ...(item.budget.wall_secs === undefined ? {} : { wallSecs: item.budget.wall_secs }),
                },
              }
            : {}),
        })),
        this.file,
      );
    } catch (error) {
      if (error instanceof Dropped) throw error;
      return this.drop(error instanceof HarnessError ? error.message : String(error), this.at('agent'));
    }
  }

  mcp(plugin: PluginData): McpServerSpec[] {
    const name = plugin.name;
    if (!plugin.mcp || plugin.mcp.length === 0) return [];
    if (this.options.fromWorkspace) {
      this.refuse('mcp', 'an MCP server');
      return [];
    }
    try {
      return checkSpecs(
        plugin.mcp.map((item) =>
          item.url !== undefined
            ? {
                name: `${name}__${item.name}`,
                bundle: name,
                url: item.url,
                ...(item.headers ? { headers: item.headers } : {}),
                ...(item.allow_local_address === undefined ? {} : { allowLocalAddress: item.allow_local_address }),
              }
            : {
                name: `${name}__${item.name}`,
                bundle: name,
                command: item.command ?? [],
                ...(item.env ? { env: item.env } : {}),
                // A bundle's server works in the bundle's directory unless it says otherwise.
                cwd: item.cwd ? resolve(this.dir, item.cwd) : this.dir,
              },
        ),
        `${this.file} [[mcp]]`,
      );
    } catch (error) {
      return this.drop(error instanceof HarnessError ? error.message : String(error), this.at('mcp'));
    }
  }

  hooks(plugin: PluginData): HookSpec[] {
    const hooks: HookSpec[] = [];
    if (!plugin.hook || plugin.hook.length === 0) return hooks;
    if (this.options.fromWorkspace) {
      this.refuse('hook', 'a hook');
      return hooks;
    }
    plugin.hook.forEach((item, index) => {
      const spec = hookSpecFrom(item, {
        name: `${plugin.name}__${item.name ?? `hook-${index + 1}`}`,
        base: this.dir,
        from: this.at(`hook[${index}]`),
      });
      if (spec.append !== undefined && !escapes(relative(realTarget(this.options.root), realTarget(spec.append))))
        this.drop(
          `hook[${index}].append names ${spec.append}, inside the workspace, where the agent could change the log`,
          this.at(`hook[${index}]`),
        );
      hooks.push(spec);
    });
    return hooks;
  }

  bins(plugin: PluginData): BundleBin[] {
    const bins: BundleBin[] = [];
    if (!plugin.bin || plugin.bin.length === 0) return bins;
    if (this.options.fromWorkspace) {
      this.refuse('bin', 'a bin');
      return bins;
    }
    plugin.bin.forEach((item, index) => {
      const path = this.within(item.path, `bin[${index}].path`);
      if (!existsSync(path) || !statSync(path).isFile())
        this.drop(`bin[${index}].path names ${path}, which is not a file the bundle ships`, this.at(`bin[${index}]`));
      bins.push({
        name: `${plugin.name}__${item.name}`,
        path,
        description: item.description ?? null,
        plugin: plugin.name,
      });
    });
    return bins;
  }

  /** Every deny rule built as the policy will build it: a pattern it cannot use drops the bundle now, not a run later. */
  denies(layer: string, lists: Partial<Record<'read' | 'write' | 'exec' | 'net', string[]>>, key: string): void {
    try {
      let policy = Policy.empty().layer(layer);
      for (const pattern of lists.read ?? []) policy = policy.denyRead(pattern);
      for (const pattern of lists.write ?? []) policy = policy.denyWrite(pattern);
      for (const pattern of lists.exec ?? []) policy = policy.denyExec(pattern);
      for (const pattern of lists.net ?? []) policy = policy.denyNet(pattern);
      Policy.from(policy.toJSON());
    } catch (error) {
      this.drop(error instanceof HarnessError ? error.message : String(error), this.at(key));
    }
  }
}

/** The first key holding a `${env:}`, `${file:}` or `${cmd:}`, or null. */
function findSubstitution(value: unknown, path: string): string | null {
  if (typeof value === 'string') return /\$\{(env|file|cmd):/.test(value) ? path : null;
  if (Array.isArray(value)) {
    for (const [index, item] of value.entries()) {
      const found = findSubstitution(item, `${path}[${index}]`);
      if (found) return found;
    }
    return null;
  }
  if (typeof value === 'object' && value !== null)
    for (const [key, item] of Object.entries(value)) {
      const found = findSubstitution(item, path ? `${path}.${key}` : key);
      if (found) return found;
    }
  return null;
}

/** A file the bundle ships, as text: a regular file, not empty, at most the bound; else the bundle is dropped. */
function readShipped(path: string, where: string, drop: (message: string, where?: string) => never): string {
  const read = readBounded(path, MAX_BUNDLE_FILE_BYTES);
  if (!read.ok)
    return drop(
      read.problem === 'not-file'
        ? `${path} is not a regular file`
        : read.problem === 'too-large'
          ? `${path} is above the ${MAX_BUNDLE_FILE_BYTES} bytes it may hold`
          : `${path} cannot be read (${read.code})`,
      where,
    );
  if (read.text.trim() === '') return drop(`${path} is empty`, where);
  return read.text;
}
