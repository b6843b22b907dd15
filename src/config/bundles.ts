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

/**
 * Loads the bundle in `dir` (see the module's comment). `root` is the workspace; a
 * workspace-declared bundle is held to what a workspace may bring.
 */
export function loadBundle(
  dir: string,
  options: {
    fromWorkspace: boolean;
    declaredIn: string;
    root: string;
    taken: ReadonlySet<string>;
    /** Whether the configuration's policy lets a file be read: what it denies, a bundle does not read into a prompt. */
    readable: (path: string) => boolean;
  },
): { bundle: LoadedBundle | null; problems: BundleProblem[]; name: string | null } {
  const problems: BundleProblem[] = [];
  let label = dir;
  const file = join(dir, 'plugin.toml');
  const drop = (message: string, where = file): never => {
    problems.push({ plugin: label, file: where, message, dropped: true });
    throw new Dropped(message);
  };
  try {
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
    const at = (key: string) => `${file}:${lineOf(lines, key) ?? 1}`;
    if (typeof data.name === 'string') label = data.name;
    const substituted = findSubstitution(data, '');
    if (substituted)
      drop(
        `${substituted} holds a substitution; a bundle's file is read as written (substitutions go in your io.toml)`,
        at(substituted),
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
      drop(message, at(issue.code === 'unrecognized_keys' ? `${path ? `${path}.` : ''}${issue.keys[0]}` : path));
    }
    const plugin = result.data as PluginData;
    const name = plugin.name;
    label = name;
    if (options.taken.has(name)) drop(`another bundle is named ${name} already; a bundle's name is its namespace`);
    const within = (path: string, key: string): string => {
      const full = resolve(dir, path);
      if (escapes(relative(realTarget(dir), realTarget(full))))
        drop(
          `${key} names ${JSON.stringify(path)}, outside the bundle's directory; a bundle ships what it contributes`,
          at(key),
        );
      if (!options.readable(full))
        drop(`${key} names ${JSON.stringify(path)}, which your policy does not let be read`, at(key));
      return full;
    };
    const refuse = (key: string, what: string) =>
      problems.push({
        plugin: name,
        file: at(key),
        message: `${key} was refused: a bundle declared in a workspace file (${options.declaredIn}) may not bring ${what}, which names a program this machine would run; declare the bundle in your user file to have it`,
        dropped: false,
      });

    const skills = (plugin.skills?.roots ?? []).map((root, index) => ({
      root: within(root, `skills.roots[${index}]`),
      namespace: name,
    }));
    if (skills.length > 0)
      try {
        discoverSkills(skills, options.readable);
      } catch (error) {
        drop(error instanceof HarnessError ? error.message : String(error), at('skills'));
      }
    const templates = (plugin.template ?? []).map((item, index) => ({
      name: `${name}__${item.name}`,
      description: item.description ?? null,
      text:
        item.text ??
        readShipped(within(item.file as string, `template[${index}].file`), at(`template[${index}]`), drop),
    }));
    let agents: AgentDefinition[] = [];
    try {
      agents = checkAgents(
        (plugin.agent ?? []).map((item, index) => ({
          name: `${name}__${item.name}`,
          description: item.description,
          system:
            item.system ??
            readShipped(within(item.system_file as string, `agent[${index}].system_file`), at(`agent[${index}]`), drop),
          ...(item.deny ? { deny: item.deny } : {}),
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
        file,
      );
    } catch (error) {
      if (error instanceof Dropped) throw error;
      drop(error instanceof HarnessError ? error.message : String(error), at('agent'));
    }
    let mcp: McpServerSpec[] = [];
    if (plugin.mcp && plugin.mcp.length > 0) {
      if (options.fromWorkspace) refuse('mcp', 'an MCP server');
      else
        try {
          mcp = checkSpecs(
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
                    cwd: item.cwd ? resolve(dir, item.cwd) : dir,
                  },
            ),
            `${file} [[mcp]]`,
          );
        } catch (error) {
          drop(error instanceof HarnessError ? error.message : String(error), at('mcp'));
        }
    }
    const hooks: HookSpec[] = [];
    if (plugin.hook && plugin.hook.length > 0) {
      if (options.fromWorkspace) refuse('hook', 'a hook');
      else
        plugin.hook.forEach((item, index) => {
          const spec = hookSpecFrom(item, {
            name: `${name}__${item.name ?? `hook-${index + 1}`}`,
            base: dir,
            from: at(`hook[${index}]`),
          });
          if (spec.append !== undefined && !escapes(relative(realTarget(options.root), realTarget(spec.append))))
            drop(
              `hook[${index}].append names ${spec.append}, inside the workspace, where the agent could change the log`,
              at(`hook[${index}]`),
            );
          hooks.push(spec);
        });
    }
    const bins: BundleBin[] = [];
    if (plugin.bin && plugin.bin.length > 0) {
      if (options.fromWorkspace) refuse('bin', 'a bin');
      else
        plugin.bin.forEach((item, index) => {
          const path = within(item.path, `bin[${index}].path`);
          if (!existsSync(path) || !statSync(path).isFile())
            drop(`bin[${index}].path names ${path}, which is not a file the bundle ships`, at(`bin[${index}]`));
          bins.push({ name: `${name}__${item.name}`, path, description: item.description ?? null, plugin: name });
        });
    }
    // Every deny rule built as the policy will build it: a pattern it cannot use drops the bundle now, not a run later.
    const denies = (
      layer: string,
      lists: Partial<Record<'read' | 'write' | 'exec' | 'net', string[]>>,
      key: string,
    ) => {
      try {
        let policy = Policy.empty().layer(layer);
        for (const pattern of lists.read ?? []) policy = policy.denyRead(pattern);
        for (const pattern of lists.write ?? []) policy = policy.denyWrite(pattern);
        for (const pattern of lists.exec ?? []) policy = policy.denyExec(pattern);
        for (const pattern of lists.net ?? []) policy = policy.denyNet(pattern);
        Policy.from(policy.toJSON());
      } catch (error) {
        drop(error instanceof HarnessError ? error.message : String(error), at(key));
      }
    };
    denies(`${name}__deny`, plugin.deny ?? {}, 'deny');
    for (const [index, agent] of agents.entries()) if (agent.deny) denies(agent.name, agent.deny, `agent[${index}]`);
    const seen = new Set<string>();
    for (const contributed of [...templates, ...bins])
      if (seen.has(contributed.name)) drop(`two of the bundle's contributions are named ${contributed.name}`);
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
    const named = label === dir ? null : label;
    if (error instanceof Dropped) return { bundle: null, problems, name: named };
    problems.push({ plugin: label, file, message: `could not be loaded: ${String(error)}`, dropped: true });
    return { bundle: null, problems, name: named };
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
