/**
 * The toolchain table. Language support in the runtime is command execution plus this
 * table: a marker file in the workspace root names the ecosystem, and the ecosystem's own
 * commands build, test, lint and format it. Nothing here runs a command; it is data and a
 * detector, so a caller can show, override or refuse a command before anything executes.
 *
 * Detection reads the root once and never walks subdirectories: a marker deeper down is a
 * sub-project, and guessing which one the task is about is the caller's call, not ours.
 */
import { readdirSync } from 'node:fs';
import { ErrorCode, HarnessError, InvalidArgumentError, shownValue } from '../../errors.js';

/**
 * The ecosystems the table knows, in the order their markers are tried. The order is part
 * of the contract: `deno` comes before `node` because a Deno project may carry a
 * package.json too, and `make` comes last because many projects carry a Makefile beside
 * their real build system.
 *
 * @example
 * ```ts
 * ECOSYSTEM_IDS.includes('go'); // true
 * ```
 */
export const ECOSYSTEM_IDS = [
  'cargo',
  'deno',
  'node',
  'go',
  'python',
  'maven',
  'gradle',
  'elixir',
  'ruby',
  'php',
  'swift',
  'cmake',
  'dotnet',
  'make',
] as const;
export type EcosystemId = (typeof ECOSYSTEM_IDS)[number];

/**
 * The six commands every row carries, in the order a project is usually worked on.
 *
 * @example
 * ```ts
 * for (const name of COMMAND_NAMES) console.log(name, toolchain.commands[name]);
 * ```
 */
export const COMMAND_NAMES = ['install', 'build', 'test', 'lint', 'format', 'run'] as const;
export type CommandName = (typeof COMMAND_NAMES)[number];

/**
 * A command as an argv array, program first. Never a shell string: an argv cannot be
 * re-split or have a metacharacter expanded, so what the policy approved is what runs.
 */
export type Argv = readonly string[];

/** An ecosystem's conventional commands; null where the ecosystem has no convention for one. */
export interface ToolchainCommands {
  install: Argv | null;
  build: Argv | null;
  test: Argv | null;
  lint: Argv | null;
  format: Argv | null;
  run: Argv | null;
}

/**
 * What {@link detectToolchain} found in a workspace root.
 *
 * @example
 * ```ts
 * const toolchain = detectToolchain('/repo');
 * // { ecosystem: 'node', driver: 'pnpm', marker: 'package.json',
 * //   commands: { test: ['pnpm', 'test'], ... }, check: ['tsc', '--noEmit'] }
 * ```
 */
export interface Toolchain {
  ecosystem: EcosystemId;
  /** The tool that drives the ecosystem here, e.g. the package manager a lockfile picked. */
  driver: string;
  /** The file in the root that matched, e.g. `package.json` or `App.csproj`. */
  marker: string;
  commands: ToolchainCommands;
  /**
   * A cheap checker to run after a write, or null. Only ecosystems with a type check that
   * is cheaper than their build carry one; the rest would only repeat `build`.
   */
  check: Argv | null;
}

/** What one ecosystem's override may replace. */
export type ToolchainOverride = Partial<ToolchainCommands> & {
  /** Null disables the post-write check. */
  check?: Argv | null;
  /**
   * One of the ecosystem's known drivers (node: bun, pnpm, yarn, npm; python: uv, poetry,
   * pip) picks that driver's commands whatever the lockfile says. Any other string names a
   * program that replaces the detected driver's program wherever a command starts with it,
   * e.g. `./gradlew` for `gradle` or `python3` for `python`.
   */
  driver?: string;
};

/**
 * Overrides keyed by ecosystem id. They apply only when that ecosystem is detected, but
 * every entry is validated on every call, so a typo is an error rather than a silent no-op.
 *
 * @example
 * ```ts
 * detectToolchain(root, { node: { test: ['npm', 'run', 'test:unit'], check: null }, gradle: { driver: './gradlew' } });
 * ```
 */
export type ToolchainOverrides = Partial<Record<EcosystemId, ToolchainOverride>>;

/** One way of driving an ecosystem, chosen by the first variant whose `when` file is present. */
interface Variant {
  driver: string;
  /** The argv[0] a replacement driver takes the place of. */
  program: string;
  /** Any of these files in the root selects the variant; empty means always. */
  when: readonly string[];
  commands: ToolchainCommands;
}

interface Row {
  ecosystem: EcosystemId;
  /**
   * Variables the ecosystem's tools read to find their installation and caches: commands
   * inherit them from the harness (locations only; a variable that can carry a
   * credential, such as a proxy or a registry token, is left out).
   */
  env: readonly string[];
  /** Exact file names, or `*.ext` for any file with that extension. */
  markers: readonly string[];
  check: Argv | null;
  variants: readonly Variant[];
}

const none: ToolchainCommands = { install: null, build: null, test: null, lint: null, format: null, run: null };

function single(driver: string, commands: Partial<ToolchainCommands>, program = driver): Variant[] {
  return [{ driver, program, when: [], commands: { ...none, ...commands } }];
}

/** A package.json script runner: every command but install goes through the project's scripts. */
function nodeVariant(driver: string, when: readonly string[], install: Argv): Variant {
  return {
    driver,
    program: driver,
    when,
    commands: {
      install,
      build: [driver, 'run', 'build'],
      // `bun test` is Bun's own test runner, not the package's test script; `bun run test` is.
      test: driver === 'bun' ? ['bun', 'run', 'test'] : [driver, 'test'],
      lint: [driver, 'run', 'lint'],
      format: [driver, 'run', 'format'],
      run: driver === 'bun' ? ['bun', 'run', 'start'] : [driver, 'start'],
    },
  };
}

function pythonVariant(driver: string, when: readonly string[], install: Argv, build: Argv | null): Variant {
  // uv and poetry run tools inside the project's environment; pip runs them with the
  // interpreter on PATH, through `python -m` so that they share one interpreter.
  const prefix = driver === 'pip' ? ['python', '-m'] : [driver, 'run'];
  return {
    driver,
    program: driver === 'pip' ? 'python' : driver,
    when,
    commands: {
      install,
      build,
      test: [...prefix, 'pytest'],
      lint: [...prefix, 'ruff', 'check', '.'],
      format: [...prefix, 'ruff', 'format', '.'],
      run: null,
    },
  };
}

const TABLE: readonly Row[] = [
  {
    ecosystem: 'cargo',
    env: ['CARGO_HOME', 'RUSTUP_HOME', 'RUSTUP_TOOLCHAIN'],
    markers: ['Cargo.toml'],
    check: ['cargo', 'check', '--message-format=json'],
    variants: single('cargo', {
      install: ['cargo', 'fetch'],
      build: ['cargo', 'build'],
      test: ['cargo', 'test'],
      lint: ['cargo', 'clippy'],
      format: ['cargo', 'fmt'],
      run: ['cargo', 'run'],
    }),
  },
  {
    ecosystem: 'deno',
    env: ['DENO_DIR', 'DENO_INSTALL'],
    markers: ['deno.json', 'deno.jsonc'],
    check: ['deno', 'check', '.'],
    variants: single('deno', {
      install: ['deno', 'install'],
      test: ['deno', 'test'],
      lint: ['deno', 'lint'],
      format: ['deno', 'fmt'],
    }),
  },
  {
    ecosystem: 'node',
    env: ['NVM_DIR', 'NODE_PATH'],
    markers: ['package.json'],
    check: ['tsc', '--noEmit'],
    variants: [
      nodeVariant('bun', ['bun.lockb', 'bun.lock'], ['bun', 'install']),
      nodeVariant('pnpm', ['pnpm-lock.yaml'], ['pnpm', 'install']),
      nodeVariant('yarn', ['yarn.lock'], ['yarn', 'install']),
      // `npm ci` installs exactly the lockfile and refuses to run without one.
      nodeVariant('npm', ['package-lock.json'], ['npm', 'ci']),
      nodeVariant('npm', [], ['npm', 'install']),
    ],
  },
  {
    ecosystem: 'go',
    env: ['GOPATH', 'GOROOT', 'GOCACHE', 'GOMODCACHE'],
    markers: ['go.mod'],
    check: ['go', 'build', './...'],
    variants: single('go', {
      install: ['go', 'mod', 'download'],
      build: ['go', 'build', './...'],
      test: ['go', 'test', './...'],
      lint: ['go', 'vet', './...'],
      format: ['go', 'fmt', './...'],
      run: ['go', 'run', '.'],
    }),
  },
  {
    ecosystem: 'python',
    env: ['VIRTUAL_ENV', 'PYENV_ROOT', 'PYENV_VERSION'],
    markers: ['pyproject.toml', 'requirements.txt'],
    check: ['pyright'],
    variants: [
      pythonVariant('uv', ['uv.lock'], ['uv', 'sync'], ['uv', 'build']),
      pythonVariant('poetry', ['poetry.lock'], ['poetry', 'install'], ['poetry', 'build']),
      pythonVariant('pip', ['requirements.txt'], ['python', '-m', 'pip', 'install', '-r', 'requirements.txt'], null),
      pythonVariant('pip', [], ['python', '-m', 'pip', 'install', '-e', '.'], null),
    ],
  },
  {
    ecosystem: 'maven',
    env: ['JAVA_HOME', 'MAVEN_HOME'],
    markers: ['pom.xml'],
    check: null,
    variants: single('mvn', {
      install: ['mvn', '-B', 'dependency:resolve'],
      build: ['mvn', '-B', 'package', '-DskipTests'],
      test: ['mvn', '-B', 'test'],
    }),
  },
  {
    ecosystem: 'gradle',
    env: ['JAVA_HOME', 'GRADLE_USER_HOME'],
    markers: ['build.gradle', 'build.gradle.kts'],
    check: null,
    variants: single('gradle', {
      build: ['gradle', 'assemble'],
      test: ['gradle', 'test'],
      run: ['gradle', 'run'],
    }),
  },
  {
    ecosystem: 'elixir',
    env: ['MIX_HOME', 'HEX_HOME'],
    markers: ['mix.exs'],
    check: null,
    variants: single('mix', {
      install: ['mix', 'deps.get'],
      build: ['mix', 'compile'],
      test: ['mix', 'test'],
      format: ['mix', 'format'],
      run: ['mix', 'run'],
    }),
  },
  {
    ecosystem: 'ruby',
    env: ['GEM_HOME', 'GEM_PATH'],
    markers: ['Gemfile'],
    check: null,
    variants: single(
      'bundler',
      {
        install: ['bundle', 'install'],
        test: ['bundle', 'exec', 'rake', 'test'],
        lint: ['bundle', 'exec', 'rubocop'],
        format: ['bundle', 'exec', 'rubocop', '--autocorrect'],
      },
      'bundle',
    ),
  },
  {
    ecosystem: 'php',
    env: ['COMPOSER_HOME'],
    markers: ['composer.json'],
    check: null,
    variants: single('composer', { install: ['composer', 'install'], test: ['composer', 'test'] }),
  },
  {
    ecosystem: 'swift',
    env: [],
    markers: ['Package.swift'],
    check: null,
    variants: single('swift', {
      install: ['swift', 'package', 'resolve'],
      build: ['swift', 'build'],
      test: ['swift', 'test'],
      format: ['swift', 'format', '--in-place', '--recursive', '.'],
      run: ['swift', 'run'],
    }),
  },
  {
    ecosystem: 'cmake',
    env: [],
    markers: ['CMakeLists.txt'],
    check: null,
    variants: single('cmake', {
      // Configuring is CMake's install step: it fetches dependencies and writes build/.
      install: ['cmake', '-S', '.', '-B', 'build'],
      build: ['cmake', '--build', 'build'],
      test: ['ctest', '--test-dir', 'build'],
    }),
  },
  {
    ecosystem: 'dotnet',
    env: ['DOTNET_ROOT'],
    markers: ['*.csproj', '*.fsproj', '*.sln'],
    check: null,
    variants: single('dotnet', {
      install: ['dotnet', 'restore'],
      build: ['dotnet', 'build'],
      test: ['dotnet', 'test'],
      format: ['dotnet', 'format'],
      run: ['dotnet', 'run'],
    }),
  },
  {
    ecosystem: 'make',
    env: [],
    markers: ['Makefile'],
    check: null,
    // `make install` installs onto the system, so it is not this table's install.
    variants: single('make', { build: ['make'], test: ['make', 'test'] }),
  },
];

/**
 * Every variable the table names, once: the toolchain part of the allow-list a command's
 * environment is built from (whatever ecosystem was detected, so a gate or a checker
 * finds its tools the same way).
 */
export const TOOLCHAIN_VARIABLES: readonly string[] = [...new Set(TABLE.flatMap((row) => row.env))];

const OVERRIDE_KEYS: readonly string[] = [...COMMAND_NAMES, 'check', 'driver'];

/**
 * The markers of each ecosystem in the order they are tried, and the drivers it knows.
 * A fresh copy on every call.
 *
 * @example
 * ```ts
 * toolchainTable()[0]; // { ecosystem: 'cargo', markers: ['Cargo.toml'], drivers: ['cargo'] }
 * ```
 */
export function toolchainTable(): { ecosystem: EcosystemId; markers: string[]; drivers: string[] }[] {
  return TABLE.map((row) => ({
    ecosystem: row.ecosystem,
    markers: [...row.markers],
    drivers: [...new Set(row.variants.map((variant) => variant.driver))],
  }));
}

/**
 * Finds the ecosystem of the workspace at `root` from the marker files in it, and returns
 * its commands with `overrides` applied. Markers are tried in {@link ECOSYSTEM_IDS} order
 * and the first present wins; a root with no marker is null, never a guess. The result is
 * a fresh object the caller may change.
 *
 * Throws `INVALID_ARGUMENT` for a bad override (an unknown ecosystem or command name, or a
 * command that is not an argv array) and `WORKSPACE_NOT_FOUND` when `root` is not a
 * directory.
 *
 * @example
 * ```ts
 * const toolchain = detectToolchain('/repo', { python: { driver: 'python3' } });
 * if (toolchain?.commands.test) await exec(toolchain.commands.test, { cwd: '/repo' });
 * ```
 */
export function detectToolchain(root: string, overrides?: ToolchainOverrides): Toolchain | null {
  if (typeof root !== 'string' || root === '') {
    throw new InvalidArgumentError(
      `detectToolchain: root must be the path of the workspace directory, got ${shownValue(root)}.`,
    );
  }
  const valid = checkToolchainOverrides(overrides);
  const files = listFiles(root);
  for (const row of TABLE) {
    const marker = findMarker(row.markers, files);
    if (marker === null) continue;
    return build(row, marker, files, valid[row.ecosystem]);
  }
  return null;
}

/** The names of the regular files (and links) in root; one read, no descent. */
function listFiles(root: string): string[] {
  try {
    return readdirSync(root, { withFileTypes: true })
      .filter((entry) => entry.isFile() || entry.isSymbolicLink())
      .map((entry) => entry.name)
      .sort();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      throw new HarnessError(
        ErrorCode.WorkspaceNotFound,
        `detectToolchain: ${root} is not a directory; pass the root of an existing workspace.`,
        { cause: error, details: { root } },
      );
    }
    throw error;
  }
}

function findMarker(markers: readonly string[], files: readonly string[]): string | null {
  for (const marker of markers) {
    if (marker.startsWith('*.')) {
      const ext = marker.slice(1);
      const hit = files.find((name) => name.endsWith(ext) && name.length > ext.length);
      if (hit !== undefined) return hit;
    } else if (files.includes(marker)) {
      return marker;
    }
  }
  return null;
}

/**
 * The first variant whose files are present. With a driver asked for, only that driver's
 * variants count, and its first stands even without its lockfile: the caller said so.
 */
function pickVariant(variants: readonly Variant[], files: readonly string[], driver?: string): Variant | undefined {
  const candidates = driver === undefined ? variants : variants.filter((variant) => variant.driver === driver);
  const present = candidates.find(
    (variant) => variant.when.length === 0 || variant.when.some((name) => files.includes(name)),
  );
  return present ?? candidates[0];
}

function build(row: Row, marker: string, files: readonly string[], override: ToolchainOverride | undefined): Toolchain {
  const requested = override?.driver;
  const known = pickVariant(row.variants, files, requested);
  // A driver the row does not know is a program standing in for the detected one.
  const replacement = known === undefined ? requested : undefined;
  const variant = known ?? pickVariant(row.variants, files)!;
  const copy = (argv: Argv | null): Argv | null => {
    if (argv === null) return null;
    const out = [...argv];
    if (replacement !== undefined && out[0] === variant.program) out[0] = replacement;
    return out;
  };
  const commands = { ...none };
  for (const name of COMMAND_NAMES) {
    const given = override?.[name];
    commands[name] = given === undefined ? copy(variant.commands[name]) : given === null ? null : [...given];
  }
  const check = override?.check;
  return {
    ecosystem: row.ecosystem,
    driver: requested ?? variant.driver,
    marker,
    commands,
    check: check === undefined ? copy(row.check) : check === null ? null : [...check],
  };
}

/**
 * Checks overrides without detecting anything, so a caller that stores them (a task
 * contract) can refuse a bad one when it is given rather than when the run starts.
 * Returns them as given; throws `INVALID_ARGUMENT` naming the bad entry and what to pass.
 * `where` starts each message.
 *
 * @example
 * ```ts
 * checkToolchainOverrides({ node: { test: 'npm test' } }, 'withToolchain');
 * // InvalidArgumentError: withToolchain: overrides.node.test must be an argv array of strings ...
 * ```
 */
export function checkToolchainOverrides(overrides: unknown, where = 'detectToolchain'): ToolchainOverrides {
  if (overrides === undefined || overrides === null) return {};
  if (!isPlainObject(overrides)) {
    throw new InvalidArgumentError(
      `${where}: overrides must be an object keyed by ecosystem id, like { node: { test: ['npm', 'run', 'test:unit'] } }; got ${shownValue(overrides)}.`,
    );
  }
  for (const [ecosystem, override] of Object.entries(overrides)) {
    if (!(ECOSYSTEM_IDS as readonly string[]).includes(ecosystem)) {
      throw new InvalidArgumentError(
        `${where}: overrides names an unknown ecosystem ${JSON.stringify(ecosystem)}; pass one of ${ECOSYSTEM_IDS.join(', ')}.`,
      );
    }
    if (override === undefined) continue;
    if (!isPlainObject(override)) {
      throw new InvalidArgumentError(
        `${where}: overrides.${ecosystem} must be an object of commands, like { test: ${shownValue(example(ecosystem, 'test'))} }; got ${shownValue(override)}.`,
      );
    }
    for (const [key, value] of Object.entries(override)) {
      const at = `${where}: overrides.${ecosystem}.${key}`;
      if (!OVERRIDE_KEYS.includes(key)) {
        throw new InvalidArgumentError(
          `${where}: overrides.${ecosystem} has an unknown command ${JSON.stringify(key)}; pass any of ${OVERRIDE_KEYS.join(', ')}.`,
        );
      }
      if (value === undefined) continue;
      if (key === 'driver') {
        if (typeof value !== 'string' || value === '') {
          throw new InvalidArgumentError(
            `${at} must be a non-empty string naming the driver or its program, like 'pnpm' or './gradlew'; got ${shownValue(value)}.`,
          );
        }
        continue;
      }
      if (value === null) continue;
      if (
        !Array.isArray(value) ||
        value.length === 0 ||
        !value.every((part) => typeof part === 'string') ||
        value[0] === ''
      ) {
        throw new InvalidArgumentError(
          `${at} must be an argv array of strings with the program first, like ${shownValue(example(ecosystem, key))}, or null for none; got ${shownValue(value)}.`,
        );
      }
    }
  }
  return overrides as ToolchainOverrides;
}

/** The shipped command an error message shows as the shape to pass: the key's own, else the test command. */
function example(ecosystem: string, key: string): Argv | null {
  const row = TABLE.find((candidate) => candidate.ecosystem === ecosystem);
  const commands = row?.variants.at(-1)?.commands;
  if (!row || !commands) return null;
  const own = key === 'check' ? row.check : commands[key as CommandName];
  return own ?? commands.test;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
