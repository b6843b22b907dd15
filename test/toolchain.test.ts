import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { HarnessError } from '../dist/errors.js';
import {
  COMMAND_NAMES,
  checkToolchainOverrides,
  detectToolchain,
  ECOSYSTEM_IDS,
  type Toolchain,
  type ToolchainOverrides,
  toolchainTable,
} from '../dist/runtime/workspace/toolchain.js';

const roots: string[] = [];

afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

/** A fresh workspace root holding an empty file for each name. */
function workspace(...files: string[]): string {
  const root = mkdtempSync(join(tmpdir(), 'io-harness-toolchain-'));
  roots.push(root);
  for (const name of files) writeFileSync(join(root, name), '');
  return root;
}

function detect(files: string[], overrides?: ToolchainOverrides): Toolchain {
  const toolchain = detectToolchain(workspace(...files), overrides);
  if (toolchain === null) throw new Error(`no toolchain for ${files.join(', ')}`);
  return toolchain;
}

function error(run: () => unknown): HarnessError {
  try {
    run();
  } catch (caught) {
    if (HarnessError.isInstance(caught)) return caught;
    throw caught;
  }
  throw new Error('did not throw');
}

const ROWS: {
  files: string[];
  ecosystem: string;
  driver: string;
  marker: string;
  test: string[];
  check: string[] | null;
}[] = [
  {
    files: ['Cargo.toml'],
    ecosystem: 'cargo',
    driver: 'cargo',
    marker: 'Cargo.toml',
    test: ['cargo', 'test'],
    check: ['cargo', 'check', '--message-format=json'],
  },
  {
    files: ['deno.json'],
    ecosystem: 'deno',
    driver: 'deno',
    marker: 'deno.json',
    test: ['deno', 'test'],
    check: ['deno', 'check', '.'],
  },
  {
    files: ['deno.jsonc'],
    ecosystem: 'deno',
    driver: 'deno',
    marker: 'deno.jsonc',
    test: ['deno', 'test'],
    check: ['deno', 'check', '.'],
  },
  {
    files: ['package.json'],
    ecosystem: 'node',
    driver: 'npm',
    marker: 'package.json',
    test: ['npm', 'test'],
    check: ['tsc', '--noEmit'],
  },
  {
    files: ['go.mod'],
    ecosystem: 'go',
    driver: 'go',
    marker: 'go.mod',
    test: ['go', 'test', './...'],
    check: ['go', 'build', './...'],
  },
  {
    files: ['pyproject.toml'],
    ecosystem: 'python',
    driver: 'pip',
    marker: 'pyproject.toml',
    test: ['python', '-m', 'pytest'],
    check: ['pyright'],
  },
  {
    files: ['requirements.txt'],
    ecosystem: 'python',
    driver: 'pip',
    marker: 'requirements.txt',
    test: ['python', '-m', 'pytest'],
    check: ['pyright'],
  },
  {
    files: ['pom.xml'],
    ecosystem: 'maven',
    driver: 'mvn',
    marker: 'pom.xml',
    test: ['mvn', '-B', 'test'],
    check: null,
  },
  {
    files: ['build.gradle'],
    ecosystem: 'gradle',
    driver: 'gradle',
    marker: 'build.gradle',
    test: ['gradle', 'test'],
    check: null,
  },
  {
    files: ['build.gradle.kts'],
    ecosystem: 'gradle',
    driver: 'gradle',
    marker: 'build.gradle.kts',
    test: ['gradle', 'test'],
    check: null,
  },
  { files: ['mix.exs'], ecosystem: 'elixir', driver: 'mix', marker: 'mix.exs', test: ['mix', 'test'], check: null },
  {
    files: ['Gemfile'],
    ecosystem: 'ruby',
    driver: 'bundler',
    marker: 'Gemfile',
    test: ['bundle', 'exec', 'rake', 'test'],
    check: null,
  },
  {
    files: ['composer.json'],
    ecosystem: 'php',
    driver: 'composer',
    marker: 'composer.json',
    test: ['composer', 'test'],
    check: null,
  },
  {
    files: ['Package.swift'],
    ecosystem: 'swift',
    driver: 'swift',
    marker: 'Package.swift',
    test: ['swift', 'test'],
    check: null,
  },
  {
    files: ['CMakeLists.txt'],
    ecosystem: 'cmake',
    driver: 'cmake',
    marker: 'CMakeLists.txt',
    test: ['ctest', '--test-dir', 'build'],
    check: null,
  },
  {
    files: ['App.csproj'],
    ecosystem: 'dotnet',
    driver: 'dotnet',
    marker: 'App.csproj',
    test: ['dotnet', 'test'],
    check: null,
  },
  { files: ['Makefile'], ecosystem: 'make', driver: 'make', marker: 'Makefile', test: ['make', 'test'], check: null },
];

describe('detectToolchain: the table', () => {
  it.each(ROWS)('$marker → $ecosystem', (row) => {
    const toolchain = detect(row.files);
    expect(toolchain.ecosystem).toBe(row.ecosystem);
    expect(toolchain.driver).toBe(row.driver);
    expect(toolchain.marker).toBe(row.marker);
    expect(toolchain.commands.test).toEqual(row.test);
    expect(toolchain.check).toEqual(row.check);
  });

  it('covers every ecosystem, in the documented order', () => {
    expect(new Set(ROWS.map((row) => row.ecosystem))).toEqual(new Set(ECOSYSTEM_IDS));
    expect(toolchainTable().map((row) => row.ecosystem)).toEqual([...ECOSYSTEM_IDS]);
    expect(toolchainTable().map((row) => row.markers)).toEqual([
      ['Cargo.toml'],
      ['deno.json', 'deno.jsonc'],
      ['package.json'],
      ['go.mod'],
      ['pyproject.toml', 'requirements.txt'],
      ['pom.xml'],
      ['build.gradle', 'build.gradle.kts'],
      ['mix.exs'],
      ['Gemfile'],
      ['composer.json'],
      ['Package.swift'],
      ['CMakeLists.txt'],
      ['*.csproj', '*.fsproj', '*.sln'],
      ['Makefile'],
    ]);
  });

  it('carries all six commands as argv arrays or null, and a checker for exactly five ecosystems', () => {
    const withCheck: string[] = [];
    for (const row of ROWS) {
      const toolchain = detect(row.files);
      expect(Object.keys(toolchain.commands).sort()).toEqual([...COMMAND_NAMES].sort());
      for (const argv of [...Object.values(toolchain.commands), toolchain.check]) {
        if (argv === null) continue;
        expect(Array.isArray(argv)).toBe(true);
        expect(argv.length).toBeGreaterThan(0);
        for (const part of argv) expect(typeof part).toBe('string');
        expect(argv[0]).not.toMatch(/\s/);
      }
      if (toolchain.check !== null && !withCheck.includes(toolchain.ecosystem)) withCheck.push(toolchain.ecosystem);
    }
    expect(withCheck.sort()).toEqual(['cargo', 'deno', 'go', 'node', 'python']);
  });

  it('has the conventional commands for node and cargo', () => {
    expect(detect(['package.json', 'package-lock.json']).commands).toEqual({
      install: ['npm', 'ci'],
      build: ['npm', 'run', 'build'],
      test: ['npm', 'test'],
      lint: ['npm', 'run', 'lint'],
      format: ['npm', 'run', 'format'],
      run: ['npm', 'start'],
    });
    expect(detect(['Cargo.toml']).commands).toEqual({
      install: ['cargo', 'fetch'],
      build: ['cargo', 'build'],
      test: ['cargo', 'test'],
      lint: ['cargo', 'clippy'],
      format: ['cargo', 'fmt'],
      run: ['cargo', 'run'],
    });
  });

  it('uses tsc directly for the node checker, never npx', () => {
    expect(detect(['package.json']).check).toEqual(['tsc', '--noEmit']);
  });

  it('returns null for a root with no marker, without guessing from other files', () => {
    expect(detectToolchain(workspace())).toBeNull();
    expect(detectToolchain(workspace('README.md', 'main.go', 'index.ts', 'yarn.lock', 'makefile'))).toBeNull();
  });

  it('reads only the root: a marker in a subdirectory does not count', () => {
    const root = workspace();
    mkdirSync(join(root, 'crate'));
    writeFileSync(join(root, 'crate', 'Cargo.toml'), '');
    expect(detectToolchain(root)).toBeNull();
  });

  it('ignores a directory named like a marker', () => {
    const root = workspace('go.mod');
    mkdirSync(join(root, 'Cargo.toml'));
    expect(detectToolchain(root)?.ecosystem).toBe('go');
  });

  it('returns fresh objects: changing one result does not change the next', () => {
    const root = workspace('package.json');
    const first = detectToolchain(root)!;
    (first.commands.test as string[]).push('--watch');
    first.commands.build = null;
    (first.check as string[])[0] = 'npx';
    const second = detectToolchain(root)!;
    expect(second.commands.test).toEqual(['npm', 'test']);
    expect(second.commands.build).toEqual(['npm', 'run', 'build']);
    expect(second.check).toEqual(['tsc', '--noEmit']);
    const table = toolchainTable();
    table[0]!.markers.push('x');
    expect(toolchainTable()[0]!.markers).toEqual(['Cargo.toml']);
  });
});

describe('detectToolchain: drivers chosen by lockfile', () => {
  it.each([
    { lock: 'bun.lockb', driver: 'bun', install: ['bun', 'install'], test: ['bun', 'run', 'test'] },
    { lock: 'bun.lock', driver: 'bun', install: ['bun', 'install'], test: ['bun', 'run', 'test'] },
    { lock: 'pnpm-lock.yaml', driver: 'pnpm', install: ['pnpm', 'install'], test: ['pnpm', 'test'] },
    { lock: 'yarn.lock', driver: 'yarn', install: ['yarn', 'install'], test: ['yarn', 'test'] },
    { lock: 'package-lock.json', driver: 'npm', install: ['npm', 'ci'], test: ['npm', 'test'] },
    { lock: null, driver: 'npm', install: ['npm', 'install'], test: ['npm', 'test'] },
  ])('node with $lock → $driver', ({ lock, driver, install, test }) => {
    const toolchain = detect(lock === null ? ['package.json'] : ['package.json', lock]);
    expect(toolchain.ecosystem).toBe('node');
    expect(toolchain.driver).toBe(driver);
    expect(toolchain.commands.install).toEqual(install);
    expect(toolchain.commands.test).toEqual(test);
    expect(toolchain.commands.build).toEqual([driver, 'run', 'build']);
  });

  it('prefers bun, then pnpm, then yarn, then npm when several lockfiles are present', () => {
    expect(detect(['package.json', 'package-lock.json', 'yarn.lock', 'pnpm-lock.yaml', 'bun.lock']).driver).toBe('bun');
    expect(detect(['package.json', 'package-lock.json', 'yarn.lock', 'pnpm-lock.yaml']).driver).toBe('pnpm');
    expect(detect(['package.json', 'package-lock.json', 'yarn.lock']).driver).toBe('yarn');
  });

  it.each([
    { files: ['pyproject.toml', 'uv.lock'], driver: 'uv', install: ['uv', 'sync'], test: ['uv', 'run', 'pytest'] },
    {
      files: ['pyproject.toml', 'poetry.lock'],
      driver: 'poetry',
      install: ['poetry', 'install'],
      test: ['poetry', 'run', 'pytest'],
    },
    {
      files: ['pyproject.toml'],
      driver: 'pip',
      install: ['python', '-m', 'pip', 'install', '-e', '.'],
      test: ['python', '-m', 'pytest'],
    },
    {
      files: ['requirements.txt'],
      driver: 'pip',
      install: ['python', '-m', 'pip', 'install', '-r', 'requirements.txt'],
      test: ['python', '-m', 'pytest'],
    },
    {
      files: ['pyproject.toml', 'requirements.txt'],
      driver: 'pip',
      install: ['python', '-m', 'pip', 'install', '-r', 'requirements.txt'],
      test: ['python', '-m', 'pytest'],
    },
  ])('python with $files → $driver', ({ files, driver, install, test }) => {
    const toolchain = detect(files);
    expect(toolchain.ecosystem).toBe('python');
    expect(toolchain.driver).toBe(driver);
    expect(toolchain.commands.install).toEqual(install);
    expect(toolchain.commands.test).toEqual(test);
    expect(toolchain.check).toEqual(['pyright']);
  });

  it('prefers uv over poetry when both lockfiles are present', () => {
    expect(detect(['pyproject.toml', 'poetry.lock', 'uv.lock']).driver).toBe('uv');
  });
});

describe('detectToolchain: deliberate orderings', () => {
  it('tries deno.json before package.json: a Deno project carrying both is deno, not npm', () => {
    const toolchain = detect(['package.json', 'deno.json', 'package-lock.json']);
    expect(toolchain.ecosystem).toBe('deno');
    expect(toolchain.marker).toBe('deno.json');
    expect(toolchain.commands.test).toEqual(['deno', 'test']);
    expect(detect(['package.json', 'deno.jsonc']).ecosystem).toBe('deno');
  });

  it('tries Makefile last: a Makefile beside go.mod is go', () => {
    const toolchain = detect(['Makefile', 'go.mod']);
    expect(toolchain.ecosystem).toBe('go');
    expect(toolchain.commands.test).toEqual(['go', 'test', './...']);
    for (const row of ROWS.filter((candidate) => candidate.ecosystem !== 'make')) {
      expect(detect(['Makefile', ...row.files]).ecosystem).toBe(row.ecosystem);
    }
  });

  it('takes the first marker of the table when two ecosystems are present', () => {
    expect(detect(['package.json', 'Cargo.toml']).ecosystem).toBe('cargo');
    expect(detect(['pyproject.toml', 'go.mod']).ecosystem).toBe('go');
  });
});

describe('detectToolchain: the .NET wildcard', () => {
  it.each(['App.csproj', 'Lib.fsproj', 'Everything.sln'])('%s → dotnet, naming the file', (name) => {
    const toolchain = detect([name]);
    expect(toolchain.ecosystem).toBe('dotnet');
    expect(toolchain.marker).toBe(name);
    expect(toolchain.commands.test).toEqual(['dotnet', 'test']);
  });

  it('tries .csproj, then .fsproj, then .sln, and names the first such file by name', () => {
    expect(detect(['Z.sln', 'B.fsproj', 'b.csproj', 'A.csproj']).marker).toBe('A.csproj');
    expect(detect(['Z.sln', 'B.fsproj']).marker).toBe('B.fsproj');
  });

  it('needs a name before the extension and the extension at the end', () => {
    expect(detectToolchain(workspace('.csproj', 'App.csproj.bak', 'App.sln.txt'))).toBeNull();
  });
});

describe('detectToolchain: overrides', () => {
  it('replaces any of the six commands and the checker, and leaves the rest', () => {
    const toolchain = detect(['package.json'], {
      node: { test: ['npm', 'run', 'test:unit'], lint: null, check: ['npx', 'tsc', '-b'] },
    });
    expect(toolchain.commands.test).toEqual(['npm', 'run', 'test:unit']);
    expect(toolchain.commands.lint).toBeNull();
    expect(toolchain.commands.build).toEqual(['npm', 'run', 'build']);
    expect(toolchain.check).toEqual(['npx', 'tsc', '-b']);
  });

  it('disables the checker with check: null', () => {
    expect(detect(['Cargo.toml'], { cargo: { check: null } }).check).toBeNull();
  });

  it("applies only the detected ecosystem's override", () => {
    const toolchain = detect(['go.mod'], {
      node: { test: ['vitest'] },
      go: { test: ['go', 'test', '-race', './...'] },
    });
    expect(toolchain.commands.test).toEqual(['go', 'test', '-race', './...']);
  });

  it('gives a command row to a null command', () => {
    expect(detect(['Makefile'], { make: { lint: ['make', 'lint'] } }).commands.lint).toEqual(['make', 'lint']);
  });

  it("picks a known driver's commands whatever the lockfile says", () => {
    const pnpm = detect(['package.json', 'package-lock.json'], { node: { driver: 'pnpm' } });
    expect(pnpm.driver).toBe('pnpm');
    expect(pnpm.commands.install).toEqual(['pnpm', 'install']);
    expect(pnpm.commands.test).toEqual(['pnpm', 'test']);
    expect(detect(['package.json', 'yarn.lock'], { node: { driver: 'npm' } }).commands.install).toEqual([
      'npm',
      'install',
    ]);
    const uv = detect(['pyproject.toml'], { python: { driver: 'uv' } });
    expect(uv.commands.test).toEqual(['uv', 'run', 'pytest']);
  });

  it('treats any other driver as a program standing in for the detected one', () => {
    const gradle = detect(['build.gradle.kts'], { gradle: { driver: './gradlew' } });
    expect(gradle.driver).toBe('./gradlew');
    expect(gradle.commands.test).toEqual(['./gradlew', 'test']);
    expect(gradle.commands.build).toEqual(['./gradlew', 'assemble']);
    const python = detect(['requirements.txt'], { python: { driver: 'python3' } });
    expect(python.commands.test).toEqual(['python3', '-m', 'pytest']);
    expect(python.check).toEqual(['pyright']);
    const cmake = detect(['CMakeLists.txt'], { cmake: { driver: '/opt/cmake/bin/cmake' } });
    expect(cmake.commands.build).toEqual(['/opt/cmake/bin/cmake', '--build', 'build']);
    expect(cmake.commands.test).toEqual(['ctest', '--test-dir', 'build']);
  });

  it('applies explicit commands over a replaced driver', () => {
    const toolchain = detect(['pom.xml'], { maven: { driver: './mvnw', test: ['./mvnw', '-B', 'verify'] } });
    expect(toolchain.commands.test).toEqual(['./mvnw', '-B', 'verify']);
    expect(toolchain.commands.build).toEqual(['./mvnw', '-B', 'package', '-DskipTests']);
  });

  it("copies the caller's arrays", () => {
    const test = ['cargo', 'nextest', 'run'];
    const toolchain = detect(['Cargo.toml'], { cargo: { test } });
    (toolchain.commands.test as string[]).push('--all');
    expect(test).toEqual(['cargo', 'nextest', 'run']);
  });

  it('ignores keys set to undefined', () => {
    expect(detect(['go.mod'], { go: { test: undefined, driver: undefined } }).commands.test).toEqual([
      'go',
      'test',
      './...',
    ]);
  });
});

describe('detectToolchain: bad arguments', () => {
  const root = () => workspace('package.json');

  it.each([
    {
      name: 'an unknown ecosystem id',
      overrides: { nodejs: { test: ['npm', 'test'] } },
      message: /unknown ecosystem "nodejs"; pass one of cargo, deno, node/,
    },
    {
      name: 'an unknown command name',
      overrides: { node: { tests: ['npm', 'test'] } },
      message: /overrides\.node has an unknown command "tests"; pass any of install, build, test, lint, format, run/,
    },
    {
      name: 'a shell string',
      overrides: { node: { test: 'npm test' } },
      message: /overrides\.node\.test must be an argv array of strings.*got "npm test"/,
    },
    {
      name: 'an empty array',
      overrides: { go: { build: [] } },
      message: /overrides\.go\.build must be an argv array of strings.*got \[\]/,
    },
    {
      name: 'an array with a non-string',
      overrides: { cargo: { run: ['cargo', 1] } },
      message: /overrides\.cargo\.run must be an argv array of strings.*or null for none/,
    },
    {
      name: 'an empty program',
      overrides: { make: { test: ['', 'test'] } },
      message: /overrides\.make\.test must be an argv array/,
    },
    {
      name: 'a bad check',
      overrides: { python: { check: 'pyright' } },
      message: /overrides\.python\.check must be an argv array/,
    },
    {
      name: 'a bad driver',
      overrides: { node: { driver: '' } },
      message: /overrides\.node\.driver must be a non-empty string/,
    },
    {
      name: 'a null driver',
      overrides: { node: { driver: null } },
      message: /overrides\.node\.driver must be a non-empty string/,
    },
    {
      name: 'an override that is not an object',
      overrides: { node: ['npm', 'test'] },
      message: /overrides\.node must be an object of commands/,
    },
    {
      name: 'overrides that are not an object',
      overrides: [['npm', 'test']],
      message: /overrides must be an object keyed by ecosystem id/,
    },
  ])('rejects $name', ({ overrides, message }) => {
    const thrown = error(() => detectToolchain(root(), overrides as unknown as ToolchainOverrides));
    expect(thrown.name).toBe('InvalidArgumentError');
    expect(thrown.code).toBe('INVALID_ARGUMENT');
    expect(thrown.message).toMatch(message);
  });

  it("validates overrides for ecosystems that are not detected, and when nothing's detected", () => {
    const bad = { ruby: { test: 'rake' } } as unknown as ToolchainOverrides;
    expect(error(() => detectToolchain(workspace('go.mod'), bad)).code).toBe('INVALID_ARGUMENT');
    expect(error(() => detectToolchain(workspace(), bad)).code).toBe('INVALID_ARGUMENT');
  });

  it('names the shipped command as the shape to pass', () => {
    expect(error(() => detectToolchain(root(), { maven: { test: 'mvn test' } } as never)).message).toContain(
      'like ["mvn","-B","test"]',
    );
  });

  it('checks overrides on their own, with the caller named in the message', () => {
    const good: ToolchainOverrides = { node: { test: ['npm', 'run', 'test:unit'] }, gradle: { driver: './gradlew' } };
    expect(checkToolchainOverrides(good)).toBe(good);
    expect(checkToolchainOverrides(undefined)).toEqual({});
    const thrown = error(() => checkToolchainOverrides({ node: { test: 'npm test' } }, 'withToolchain'));
    expect(thrown.code).toBe('INVALID_ARGUMENT');
    expect(thrown.message).toMatch(/^withToolchain: overrides\.node\.test must be an argv array/);
  });

  it('rejects a root that is not a path', () => {
    expect(error(() => detectToolchain('')).code).toBe('INVALID_ARGUMENT');
    expect(error(() => detectToolchain(undefined as unknown as string)).code).toBe('INVALID_ARGUMENT');
  });

  it('raises WORKSPACE_NOT_FOUND for a root that is missing or a file', () => {
    const root = workspace('Cargo.toml');
    const missing = error(() => detectToolchain(join(root, 'nope')));
    expect(missing.code).toBe('WORKSPACE_NOT_FOUND');
    expect(missing.message).toContain(join(root, 'nope'));
    expect(error(() => detectToolchain(join(root, 'Cargo.toml'))).code).toBe('WORKSPACE_NOT_FOUND');
  });
});
