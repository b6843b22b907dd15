/**
 * The keys of io.toml, as zod schemas: one strict object a section, so an unknown key is
 * an error naming the nearest known one. Every key is described here, and
 * docs/guides/configuration.md lists them from these descriptions (see {@link describeKeys};
 * a test keeps the guide in step). Keys are snake_case, as TOML files write them; the
 * projections in ./config.ts turn them into the typed API's camelCase.
 */
import { z } from 'zod';
import { EVENT_TYPES } from '../runtime/events.js';
import { MAX_GLOB_CHARS } from '../runtime/policy/globs.js';

/** Layer names decisions already use for the runtime's own: a configured layer taking one would pass for it. */
const RESERVED_LAYERS = ['floor', 'runtime', 'default', 'permissive', 'input'];
const RESERVED_LAYERS_TEXT = RESERVED_LAYERS.join(', ');

const positiveInt = (what: string) => z.number().int().min(1).describe(what);
const share = (what: string) => z.number().gt(0).lte(1).describe(what);

const rule = z.strictObject({
  effect: z.enum(['allow', 'deny', 'ask']).describe('What the rule decides: "allow", "deny" or "ask".'),
  act: z.enum(['read', 'write', 'exec', 'net', 'tool']).describe('The act it covers: read, write, exec, net or tool.'),
  pattern: z
    .string()
    .max(MAX_GLOB_CHARS)
    .refine((value) => value.trim() !== '', 'a pattern must not be blank')
    .describe('A path glob, an argv pattern, a host, or a tool name, as the policy reads it.'),
});

const layer = z.strictObject({
  name: z
    .string()
    .max(64)
    .refine((value) => value.trim() !== '', 'a layer’s name must not be blank')
    .refine(
      (value) => !RESERVED_LAYERS.includes(value.trim()),
      `a layer may not take a name the runtime gives its own (${RESERVED_LAYERS_TEXT})`,
    )
    // `__` is a bundle's namespace: a layer named `kit__deny` would pass a refusal off as the bundle's.
    .refine((value) => !value.includes('__'), 'a layer’s name may not hold __, which names what a bundle brought')
    .describe('The layer’s name, as a decision names it (not floor, runtime, default or permissive; no __).'),
  rule: z.array(rule).optional().describe('The layer’s rules, in order ([[policy.layer.rule]]).'),
});

const policy = z.strictObject({
  base: z
    .enum(['default', 'empty', 'permissive'])
    .optional()
    .describe(
      'The policy the layers go on: "default" (reads and writes the workspace, asks about commands), "empty" or "permissive".',
    ),
  layer: z
    .array(layer)
    .optional()
    .describe('Layers over the base, in order; deny wins in any layer ([[policy.layer]]).'),
});

const provider = z.strictObject({
  kind: z.enum(['openai', 'anthropic', 'openrouter', 'compatible']).describe('The vendor’s wire.'),
  model: z.string().min(1).describe('The model’s id, as the vendor names it.'),
  base_url: z.string().url().optional().describe('The endpoint, when not the vendor’s own.'),
  api_key_env: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/)
    .optional()
    .describe('The environment variable that holds the key (the key itself never goes in the file).'),
  preset: z.string().min(1).optional().describe('A compatible endpoint’s preset (ollama, llamacpp, lmstudio, ...).'),
  name: z.string().min(1).optional().describe('The name the trace gives it.'),
  max_tokens: positiveInt('The most tokens an answer may have.').optional(),
  images: z.boolean().optional().describe('Whether the model reads images (default true).'),
});

const budget = z.strictObject({
  steps: positiveInt('Model steps of the whole tree.').optional(),
  tokens: positiveInt('Tokens of the whole tree.').optional(),
  wall_secs: z.number().gt(0).optional().describe('Wall clock, seconds from the run’s start.'),
});

const caps = z.strictObject({
  memory_bytes: positiveInt('Memory a command may use, in bytes.').optional(),
  cpu_secs: positiveInt('CPU time a command may use, in seconds.').optional(),
  processes: positiveInt('Processes a command may have at once.').optional(),
  file_bytes: positiveInt('The largest file a command may write, in bytes.').optional(),
  written_bytes: positiveInt("What a run's commands may write to disk in all, in bytes.").optional(),
  output_bytes: positiveInt('What a command may print, both streams, in bytes.').optional(),
});

const sandbox = z.strictObject({
  access: z
    .enum(['read-only', 'workspace-write', 'full'])
    .optional()
    .describe('What commands may write: "read-only", "workspace-write" (the default) or "full".'),
  writable_roots: z
    .array(z.string().min(1))
    .optional()
    .describe('Absolute directories outside the workspace commands may also write.'),
  shared_caches: z.boolean().optional().describe('Commands write the toolchains’ shared caches (default false).'),
  rung: z
    .enum(['bubblewrap', 'landlock', 'namespaces', 'floor'])
    .optional()
    .describe('The containment asked for by name; the run fails where it cannot be had.'),
  caps: caps.optional().describe('Resource caps on every command.'),
});

const context = z.strictObject({
  share: share('The share of the window a request may fill (default 0.8).').optional(),
  window: z.number().int().min(1024).optional().describe('The model’s window in tokens, stated.'),
  reference_catalogue: z.boolean().optional().describe('Size OpenAI’s and Anthropic’s models by the reference table.'),
  collapse: z.boolean().optional().describe('Send a result too long for its part of a request shortened.'),
  collapse_over: z
    .number()
    .gt(0)
    .lt(1)
    .optional()
    .describe('The part of a request one result may take before collapse (default 0.25).'),
  reduce: z.boolean().optional().describe('Cut the memory block first when a request is over.'),
  snip: z.boolean().optional().describe('Drop old find and grep results, then old reads, when a request is over.'),
  microcompact: z
    .boolean()
    .optional()
    .describe('Replace an old step’s results with a counted line when a request is over.'),
});

const memory = z.strictObject({
  share: z.number().gt(0).lt(1).optional().describe('The share of a request the memory block may take (default 0.1).'),
  cap: positiveInt('Notes a workspace keeps (default 64, at most 100000).').max(100_000).optional(),
});

const git = z.strictObject({});

const browser = z.strictObject({
  executable: z
    .string()
    .min(1)
    .optional()
    .describe('The Chromium to run, by its absolute path (default: found on the host, never downloaded).'),
  timeout_secs: z.number().positive().max(600).optional().describe('How long one browser call may take (default 30).'),
});

const codeact = z.strictObject({
  languages: z
    .array(z.enum(['javascript', 'python']))
    .min(1)
    .optional()
    .describe('The languages a program may be written in (default both, where the host has the interpreter).'),
  python: z
    .string()
    .min(1)
    .optional()
    .describe('The Python to run: a name in the system’s directories (default python3) or an absolute path.'),
  node: z
    .string()
    .min(1)
    .optional()
    .describe('The node to run: a name in the system’s directories (default node) or an absolute path.'),
  max_acts: z
    .number()
    .int()
    .min(1)
    .max(10_000)
    .optional()
    .describe('How many tool calls one program may make (default 100).'),
  max_output_bytes: z
    .number()
    .int()
    .min(1)
    .max(8 * 1024 * 1024)
    .optional()
    .describe('How many bytes one program may print (default 32768).'),
  timeout_secs: z.number().positive().max(3600).optional().describe('How long one program may run (default 120).'),
});

const documents = z.strictObject({
  formats: z
    .array(z.enum(['barcode', 'docx', 'pdf', 'pptx', 'xlsx']))
    .min(1)
    .optional()
    .describe('The formats whose tools are offered (default all).'),
  timeout_secs: z.number().positive().max(600).optional().describe('How long one document may take (default 60).'),
});

const web = z.strictObject({
  search: z.boolean().optional().describe('The vendor’s web search tool (default true).'),
  fetch: z.boolean().optional().describe('The vendor’s page fetch tool (default false).'),
  max_uses: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe('The most searches (and fetches) one model call may make, where the vendor can cap them.'),
  allowed_hosts: z
    .array(z.string().min(1))
    .min(1)
    .optional()
    .describe('Only these hosts (and their subdomains) in results and fetches.'),
  blocked_hosts: z.array(z.string().min(1)).min(1).optional().describe('Never these hosts (and their subdomains).'),
});

const mcp = z
  .strictObject({
    name: z.string().min(1).describe('The server’s name; its tools are <name>__<tool>.'),
    command: z.array(z.string().min(1)).min(1).optional().describe('A stdio server’s argv.'),
    env: z.record(z.string(), z.string()).optional().describe('A stdio server’s environment, beside the scrubbed one.'),
    cwd: z.string().min(1).optional().describe('A stdio server’s working directory.'),
    url: z.string().url().optional().describe('A streamable-HTTP server’s endpoint.'),
    headers: z.record(z.string(), z.string()).optional().describe('Headers sent to an HTTP server.'),
    allow_local_address: z.boolean().optional().describe('The HTTP server is on this machine or a private network.'),
  })
  .refine((server) => (server.command === undefined) !== (server.url === undefined), {
    message: 'an MCP server has a command (stdio) or a url (streamable HTTP), one of the two',
  });

const lsp = z.strictObject({
  command: z
    .array(z.string().min(1))
    .min(1)
    .describe('The server’s argv, e.g. ["typescript-language-server", "--stdio"] (found on the run’s PATH).'),
  extensions: z
    .array(z.string().min(1))
    .min(1)
    .describe('The files it answers for, each with its dot: [".ts", ".tsx"].'),
  initialization_options: z
    .record(z.string(), z.unknown())
    .optional()
    .describe('Handed to the server as its initializationOptions.'),
  timeout_secs: z.number().positive().optional().describe('How long a question may take, in seconds (default 30).'),
});

const skills = z.strictObject({
  roots: z.array(z.string().min(1)).describe('Directories holding skills (a SKILL.md each).'),
});

const instructions = z.strictObject({
  files: z
    .array(z.string().min(1))
    .optional()
    .describe(
      'The files of guidance put in the system block, from the workspace root (default ["AGENTS.md"]); [] puts none. A file not there is skipped.',
    ),
});

const price = z.strictObject({
  input: z.number().min(0).describe('Dollars per million input tokens.'),
  output: z.number().min(0).describe('Dollars per million output tokens.'),
  cache_read: z.number().min(0).optional().describe('Dollars per million tokens read from the cache (default: input).'),
  cache_write: z
    .number()
    .min(0)
    .optional()
    .describe('Dollars per million tokens written to the cache (default: input).'),
  web_search: z
    .number()
    .min(0)
    .optional()
    .describe('Dollars per thousand of the vendor’s own web searches ([web]); not counted when absent.'),
  web_fetch: z
    .number()
    .min(0)
    .optional()
    .describe('Dollars per thousand of the vendor’s own page fetches ([web]); not counted when absent.'),
});

/** A hook's or a bundle's contributed name: what `<plugin>__<name>` is built from. */
export const NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/;

const hook = z
  .strictObject({
    name: z
      .string()
      .regex(NAME_PATTERN, 'a hook’s name is 1 to 64 lowercase letters, digits, _ or -')
      .optional()
      .describe('Its name, as a failure and a cancelled run name it (default hook-<n>).'),
    events: z
      .array(z.enum(['*', ...EVENT_TYPES]))
      .min(1)
      .describe('The event types it wants (EVENT_TYPES lists them), or ["*"] for every one.'),
    append: z
      .string()
      .min(1)
      .optional()
      .describe('An audit log: the file each chosen event is appended to, one JSON line.'),
    run: z
      .array(z.string().min(1))
      .min(1)
      .optional()
      .describe('A program to run for each chosen event, the event in IO_HARNESS_EVENT.'),
    on_failure: z
      .enum(['ignore', 'cancel'])
      .optional()
      .describe('With run: "cancel" ends the event’s tree when the program fails (default "ignore").'),
    timeout_secs: z
      .number()
      .gt(0)
      .max(3600)
      .optional()
      .describe('With run: how long the program may take (default 30).'),
  })
  .refine((item) => (item.append === undefined) !== (item.run === undefined), {
    message: 'a hook does one thing: append = "path" (an audit log) or run = [argv], one of the two',
  })
  .refine((item) => item.run !== undefined || (item.on_failure === undefined && item.timeout_secs === undefined), {
    message: 'on_failure and timeout_secs go with run = [argv]',
  });

/** A bundle's name: what every name it contributes is prefixed with, `<plugin>__<name>`. */
export const PLUGIN_NAME = /^[a-z0-9][a-z0-9-]{0,29}$/;
/** A name a bundle gives what it contributes (a skill's is its SKILL.md's). */
const CONTRIBUTED = /^[a-z0-9][a-z0-9-]{0,29}$/;
const contributed = (what: string) =>
  z.string().regex(CONTRIBUTED, `${what} is 1 to 30 lowercase letters, digits or - (it becomes <plugin>__<name>)`);

const pluginEntry = z.strictObject({
  path: z.string().min(1).describe('The bundle’s directory (its plugin.toml in it), from the file that names it.'),
});

const denyLists = z.strictObject({
  read: z.array(z.string().min(1).max(MAX_GLOB_CHARS)).optional(),
  write: z.array(z.string().min(1).max(MAX_GLOB_CHARS)).optional(),
  exec: z.array(z.string().min(1).max(MAX_GLOB_CHARS)).optional(),
  net: z.array(z.string().min(1).max(MAX_GLOB_CHARS)).optional(),
});

/** A bundle's plugin.toml: everything it contributes, each name namespaced as it loads. */
export const pluginSchema = z.strictObject({
  name: z.string().regex(PLUGIN_NAME, 'a bundle’s name is 1 to 30 lowercase letters, digits or -'),
  description: z.string().max(1024).optional(),
  version: z.string().max(64).optional(),
  skills: z.strictObject({ roots: z.array(z.string().min(1)) }).optional(),
  template: z
    .array(
      z
        .strictObject({
          name: contributed('a template’s name'),
          description: z.string().max(1024).optional(),
          text: z.string().min(1).optional(),
          file: z.string().min(1).optional(),
        })
        .refine((item) => (item.text === undefined) !== (item.file === undefined), {
          message: 'a template has text or a file, one of the two',
        }),
    )
    .optional(),
  agent: z
    .array(
      z
        .strictObject({
          name: contributed('an agent’s name'),
          description: z.string().min(1).max(1024),
          system: z.string().min(1).optional(),
          system_file: z.string().min(1).optional(),
          deny: denyLists.optional(),
          budget: z
            .strictObject({
              steps: z.number().int().min(1).optional(),
              tokens: z.number().int().min(1).optional(),
              wall_secs: z.number().gt(0).optional(),
            })
            .optional(),
          worktree: z.boolean().optional(),
        })
        .refine((item) => (item.system === undefined) !== (item.system_file === undefined), {
          message: 'an agent has system or system_file, one of the two',
        }),
    )
    .optional(),
  mcp: z.array(mcp).optional(),
  hook: z.array(hook).optional(),
  bin: z
    .array(
      z.strictObject({
        name: contributed('a bin’s name'),
        path: z.string().min(1),
        description: z.string().max(1024).optional(),
      }),
    )
    .optional(),
  deny: denyLists.optional(),
});

export type PluginData = z.infer<typeof pluginSchema>;

/** The sections a file may hold, but a profile. */
const sections = {
  app: z.record(z.string(), z.unknown()).optional().describe('Your program’s own settings: stored, never validated.'),
  provider: z
    .array(provider)
    .min(1)
    .optional()
    .describe('The model to run with, then its fallbacks in order ([[provider]]). User file only.'),
  budget: budget.optional().describe('The tree’s ceilings.'),
  policy: policy.optional().describe('The permission boundary.'),
  sandbox: sandbox.optional().describe('What commands are granted and how they are contained.'),
  context: context.optional().describe('How each request is fitted to the model’s window.'),
  memory: memory.optional().describe('Durable memory between runs (on when the section is present).'),
  git: git
    .optional()
    .describe('The git tools: status, diff, log, add, commit, branch (on when the section is present).'),
  browser: browser
    .optional()
    .describe(
      'A browser the model drives: open, click, type, scroll, read, screenshot (on when the section is present). User file only.',
    ),
  codeact: codeact
    .optional()
    .describe(
      'Programs instead of call chains: run_program, with the run’s tools as functions (on when the section is present). User file only.',
    ),
  documents: documents
    .optional()
    .describe(
      'Tools for documents: xlsx, docx, pptx, pdf and barcodes (on when the section is present). User file only.',
    ),
  web: web
    .optional()
    .describe('Web search and fetch run by the model’s vendor (on when the section is present). User file only.'),
  lsp: z
    .array(lsp)
    .optional()
    .describe(
      'Language servers whose answers are offered as tools: definition, references, symbols, hover, rename ([[lsp]]). User file only.',
    ),
  mcp: z.array(mcp).optional().describe('MCP servers whose tools the run is offered ([[mcp]]). User file only.'),
  skills: skills.optional().describe('Where skills are found.'),
  hook: z
    .array(hook)
    .optional()
    .describe('What to do with committed events: an audit log, a notification, a check ([[hook]]). User file only.'),
  plugin: z
    .array(pluginEntry)
    .optional()
    .describe(
      'Capability bundles to load ([[plugin]]); one from a workspace file may not bring hooks, MCP servers or bins.',
    ),
  instructions: instructions
    .optional()
    .describe('The repository’s own guidance for agents, read into the system block.'),
  prices: z
    .record(z.string().min(1), price)
    .optional()
    .describe('What each model costs you, by its id ([prices."model-id"]); cost is derived from it on read.'),
  toolchain: z
    .record(z.string(), z.unknown())
    .optional()
    .describe('Commands by ecosystem, as withToolchain takes them ({ node = { test = ["npm", "test"] } }).'),
};

const body = z.strictObject(sections);

/** A whole file: the sections, and named profiles of them. */
export const fileSchema = z.strictObject({
  ...sections,
  profile: z
    .record(z.string(), body)
    .optional()
    .describe('Named sets of choices, [profile.<name>], chosen by discover({ profile }).'),
});

export type ConfigFileData = z.infer<typeof fileSchema>;
export type ConfigBody = z.infer<typeof body>;

/** Sections the reference names that are not built yet: a clear error, not a silent shrug. */
export const NOT_BUILT: readonly string[] = [];

type Def = {
  type: string;
  shape?: Record<string, z.ZodType>;
  innerType?: z.ZodType;
  element?: z.ZodType;
  valueType?: z.ZodType;
};
const defOf = (schema: z.ZodType) => (schema as unknown as { _zod: { def: Def } })._zod.def;

/** The schema of the value at `path` (key names; array indexes are skipped), or null. */
function schemaAt(path: readonly (string | number)[]): z.ZodType | null {
  let schema: z.ZodType = fileSchema;
  for (const part of path) {
    for (;;) {
      const def = defOf(schema);
      if ((def.type === 'optional' || def.type === 'default' || def.type === 'nullable') && def.innerType) {
        schema = def.innerType;
        continue;
      }
      break;
    }
    const def = defOf(schema);
    if (typeof part === 'number') {
      if (def.type !== 'array' || !def.element) return null;
      schema = def.element;
    } else if (def.type === 'object' && def.shape?.[part]) schema = def.shape[part] as z.ZodType;
    else if (def.type === 'record' && def.valueType) schema = def.valueType;
    else return null;
  }
  return schema;
}

/** The keys the object at `path` may hold. */
export function knownKeys(path: readonly (string | number)[]): string[] {
  let schema = schemaAt(path);
  while (schema) {
    const def = defOf(schema);
    if (def.type === 'object') return Object.keys(def.shape ?? {});
    if (def.type === 'array' && def.element) schema = def.element;
    else if (def.innerType) schema = def.innerType;
    else return [];
  }
  return [];
}

/** Every key of the file, dotted (`[]` for an array of tables), with its description: what the guide lists. */
export function describeKeys(): { key: string; description: string }[] {
  const out: { key: string; description: string }[] = [];
  const walk = (schema: z.ZodType, prefix: string, described?: string) => {
    let current = schema;
    let description = described ?? schema.description;
    for (;;) {
      const def = defOf(current);
      description ??= current.description;
      if ((def.type === 'optional' || def.type === 'default' || def.type === 'nullable') && def.innerType) {
        current = def.innerType;
        continue;
      }
      break;
    }
    description ??= current.description;
    const def = defOf(current);
    if (prefix) out.push({ key: prefix, description: description ?? '' });
    if (def.type === 'object' && prefix !== 'profile.<name>')
      for (const [name, child] of Object.entries(def.shape ?? {})) walk(child, prefix ? `${prefix}.${name}` : name);
    else if (def.type === 'array' && def.element && defOf(def.element).type === 'object')
      for (const [name, child] of Object.entries(defOf(def.element).shape ?? {})) walk(child, `${prefix}[].${name}`);
    else if (def.type === 'record' && prefix === 'profile' && def.valueType)
      out.push({
        key: 'profile.<name>',
        description: 'Any of the sections above, overlaid when the profile is chosen.',
      });
    else if (def.type === 'record' && def.valueType && defOf(def.valueType).type === 'object')
      for (const [name, child] of Object.entries(defOf(def.valueType).shape ?? {}))
        walk(child, `${prefix}.<name>.${name}`);
  };
  walk(fileSchema, '');
  return out;
}
