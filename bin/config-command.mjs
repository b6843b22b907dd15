// io-harness config explain [key] [--root <dir>] [--user-file <file> | --no-user-file] [--profile <name>]
// prints the merged io.toml of a workspace, every value with the file and line that set it
// (or one key's), as Config.discover reads it. A file it cannot use is an error on stderr
// and exit status 1, naming the file and line.
import { parseArgs } from 'node:util';

export const CONFIG_USAGE = `usage: io-harness config explain [key] [--root <dir>] [--user-file <file> | --no-user-file] [--profile <name>]

Prints the workspace's merged configuration (defaults, the user file, io.toml, io.local.toml),
each value with the file and line that decided it; with a key (budget.steps, policy.layer[1]),
that value alone. --root is the workspace (default: the current directory).`;

export async function runConfigCommand(args) {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      options: {
        root: { type: 'string' },
        'user-file': { type: 'string' },
        'no-user-file': { type: 'boolean' },
        profile: { type: 'string' },
      },
      strict: true,
    });
  } catch (error) {
    process.stderr.write(`io-harness config: ${error.message}\n\n${CONFIG_USAGE}\n`);
    return 2;
  }
  const [sub, key, ...extra] = parsed.positionals;
  if (sub !== 'explain' || extra.length > 0) {
    process.stderr.write(
      `io-harness config: ${sub === undefined ? 'name a subcommand' : `there is no subcommand ${JSON.stringify([sub, ...extra].join(' '))}`}\n\n${CONFIG_USAGE}\n`,
    );
    return 2;
  }
  const { values } = parsed;
  if (values['user-file'] !== undefined && values['no-user-file']) {
    process.stderr.write('io-harness config: give --user-file or --no-user-file, not both\n');
    return 2;
  }
  const { Config, ConfigError } = await import('../dist/bundle/index.js');
  // The renamed keys' deprecation warnings are printed below, once, in this command's own words.
  process.noDeprecation = true;
  let config;
  try {
    config = Config.discover(values.root ?? process.cwd(), {
      ...(values['no-user-file'] ? { userFile: null } : values['user-file'] ? { userFile: values['user-file'] } : {}),
      ...(values.profile ? { profile: values.profile } : {}),
    });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`io-harness config: ${error.message}\n`);
    return 1;
  }
  // What was read with a warning (a renamed key) or dropped (a bundle): on stderr, the values on stdout.
  for (const warning of config.warnings()) process.stderr.write(`io-harness config: warning: ${warning}\n`);
  for (const problem of config.problems())
    process.stderr.write(
      `io-harness config: ${problem.dropped ? 'bundle dropped' : 'refused'}: ${problem.file}: ${problem.plugin}: ${problem.message}\n`,
    );
  const where = (item) => (item.line === null ? `${item.scope}` : `${item.file}:${item.line} (${item.scope})`);
  if (key !== undefined) {
    const item = config.explain(key);
    if (!item) {
      process.stderr.write(`io-harness config: nothing sets ${key}\n`);
      return 1;
    }
    process.stdout.write(`${item.key} = ${JSON.stringify(item.value)}    # ${where(item)}\n`);
    return 0;
  }
  for (const file of config.files)
    process.stdout.write(`# ${file.scope}: ${file.file}${file.present ? '' : ' (none)'}\n`);
  for (const item of config.explainAll())
    process.stdout.write(`${item.key} = ${JSON.stringify(item.value)}    # ${where(item)}\n`);
  for (const bundle of config.bundles())
    process.stdout.write(
      `# bundle ${bundle.name}: ${bundle.dir} (${bundle.declaredIn}): ${[
        ...bundle.skills.map(() => 'skills'),
        ...bundle.agents.map((agent) => agent.name),
        ...bundle.templates.map((item) => item.name),
        ...bundle.mcp.map((server) => server.name),
        ...bundle.hooks.map((hook) => hook.name),
        ...bundle.bins.map((bin) => bin.name),
      ].join(', ')}\n`,
    );
  return 0;
}
