/**
 * The package's types as a consumer meets them: the example programs the README and the
 * guides show type-check under `strict` as they are (checked as JavaScript, the way an
 * editor checks them), and a consumer of the packed package, with `skipLibCheck: false`,
 * type-checks a program whose run answers to a zod schema and reads `result.output` as
 * that schema's type, with no cast. Each compile is a real `tsc` child process.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { tempWorkspace } from './support/workspace.js';

const HERE = fileURLToPath(new URL('..', import.meta.url));
const TSC = join(HERE, 'node_modules', 'typescript', 'bin', 'tsc');

/** Runs tsc on a project directory: its diagnostics, or '' when it compiles. */
function tsc(project: string): string {
  try {
    execFileSync(process.execPath, [TSC, '-p', project], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    return '';
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string; message: string };
    return `${failed.stdout ?? ''}${failed.stderr ?? ''}` || failed.message;
  }
}

const STRICT = {
  strict: true,
  noEmit: true,
  module: 'nodenext',
  moduleResolution: 'nodenext',
  target: 'es2023',
  skipLibCheck: false,
  types: ['node'],
};

describe('the types a consumer meets', () => {
  it('type-checks every example program the README and the guides show, under strict', { timeout: 120_000 }, () => {
    const examples = readdirSync(join(HERE, 'examples'), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => join(HERE, 'examples', entry.name, 'main.mjs'))
      // A folder of example tests has no program (examples/testing: the vitest config runs them).
      .filter((file) => existsSync(file));
    expect(examples.length).toBeGreaterThanOrEqual(6);
    // Each README block that is a whole program is one of them, as it is.
    const readme = readFileSync(join(HERE, 'README.md'), 'utf8');
    const programs = [...readme.matchAll(/```js\n([\s\S]*?)```/g)]
      .map((match) => match[1] as string)
      .filter((block) => block.startsWith('import '));
    expect(programs.length).toBeGreaterThanOrEqual(3);
    const texts = examples.map((file) => readFileSync(file, 'utf8'));
    for (const program of programs) expect(texts).toContain(program);
    // Checked where they are, so `io-harness` resolves to this package by its own name.
    const project = tempWorkspace();
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { ...STRICT, allowJs: true, checkJs: true, typeRoots: [join(HERE, 'node_modules', '@types')] },
        files: examples,
      }),
    );
    expect(tsc(project)).toBe('');
  });

  it('type-checks every TypeScript snippet in the README and docs/, under strict, as a module of its own', {
    timeout: 120_000,
  }, () => {
    const pages = [
      join(HERE, 'README.md'),
      ...readdirSync(join(HERE, 'docs'), { recursive: true, encoding: 'utf8' })
        .filter((name) => name.endsWith('.md'))
        .map((name) => join(HERE, 'docs', name)),
    ];
    const project = tempWorkspace({ 'package.json': JSON.stringify({ type: 'module', private: true }) });
    // `io-harness` resolves to this package by its own name, as in a project that installed it.
    mkdirSync(join(project, 'node_modules'));
    symlinkSync(HERE, join(project, 'node_modules', 'io-harness'));
    // And what a project using it has installed beside it: zod for shapes, vitest for its tests.
    for (const name of ['zod', 'vitest', '@vitest'])
      symlinkSync(join(HERE, 'node_modules', name), join(project, 'node_modules', name));
    const files: string[] = [];
    for (const page of pages) {
      const text = readFileSync(page, 'utf8');
      for (const [index, match] of [...text.matchAll(/^```ts\n([\s\S]*?)^```/gm)].entries()) {
        const name = `${page.slice(HERE.length).replace(/[^A-Za-z0-9]+/g, '-')}-${index + 1}.ts`;
        // Each snippet is a module of its own: its names do not meet another's.
        writeFileSync(join(project, name), `${match[1]}\nexport {};\n`);
        files.push(name);
      }
    }
    expect(files.length).toBeGreaterThanOrEqual(20);
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { ...STRICT, skipLibCheck: true, typeRoots: [join(HERE, 'node_modules', '@types')] },
        files,
      }),
    );
    expect(tsc(project)).toBe('');
  });

  it('type-checks a consumer of the packed package with skipLibCheck off, result.output typed by its zod schema', {
    timeout: 180_000,
  }, () => {
    const consumer = tempWorkspace();
    // The package as npm would ship it (dist/ is built by the test command before the suite).
    const [packed] = JSON.parse(
      execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', consumer], {
        cwd: HERE,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      }),
    ) as { filename: string }[];
    const installed = join(consumer, 'node_modules', 'io-harness');
    mkdirSync(installed, { recursive: true });
    execFileSync('tar', [
      '-xzf',
      join(consumer, (packed as { filename: string }).filename),
      '-C',
      installed,
      '--strip-components=1',
    ]);
    // Its dependencies, and the consumer's own (typescript's node types, zod), as an install would put them.
    const manifest = JSON.parse(readFileSync(join(HERE, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    for (const name of [...Object.keys(manifest.dependencies), '@types/node']) {
      mkdirSync(join(consumer, 'node_modules', name, '..'), { recursive: true });
      symlinkSync(join(HERE, 'node_modules', name), join(consumer, 'node_modules', name));
    }
    writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', type: 'module', private: true }));
    writeFileSync(join(consumer, 'tsconfig.json'), JSON.stringify({ compilerOptions: STRICT, files: ['main.ts'] }));
    writeFileSync(
      join(consumer, 'main.ts'),
      `import { OutputSchema, Policy, runWith, Store, Supervisor, TaskContract, type TreeResult } from 'io-harness';
import { ScriptedModelServer } from 'io-harness/testing';
import { z } from 'zod';

const Review = z.object({ summary: z.string(), risk: z.enum(['low', 'high']), files: z.array(z.string()).optional() });
const model = await ScriptedModelServer.start((call) => ({ text: call.body.messages.length > 0 ? '{}' : '' }));
const store = await Store.open('runs.db');
const provider = { kind: 'openai', model: 'scripted', baseUrl: model.url, apiKey: 'unused' } as const;

// From the zod schema itself, or through OutputSchema.of: either way the output is typed.
const contract = TaskContract.workspace('review it', '.').withOutputSchema(Review).withBudget({ steps: 5 });
const result = await runWith(contract, provider, store, Policy.default());
if (result.output) {
  const summary: string = result.output.summary;
  const risk: 'low' | 'high' = result.output.risk;
  const files: string[] | undefined = result.output.files;
  // @ts-expect-error: a field the schema does not have
  void result.output.verdict;
  // @ts-expect-error: the risk is not a number
  const wrong: number = result.output.risk;
  void [summary, risk, files, wrong];
}

const supervisor = await Supervisor.start(store);
const declared = OutputSchema.of(z.object({ ok: z.boolean() }), 'verdict');
const handle = supervisor.run({ contract: TaskContract.workspace('check', '.').withOutputSchema(declared), provider });
const tree: TreeResult<{ ok: boolean }> = await handle.result;
const ok: boolean | undefined = tree.output?.ok;

// A JSON Schema gives unknown: the caller narrows it.
const plain = await runWith(TaskContract.workspace('x', '.').withOutputSchema({ type: 'object' }), provider, store);
// @ts-expect-error: unknown until narrowed
void plain.output.anything;
void ok;

// A handle is a stream of parts, narrowed by their type; textStream is strings.
for await (const part of handle) {
  if (part.type === 'text-delta') process.stdout.write(part.text);
  if (part.type === 'outcome') {
    const done: boolean | undefined = part.result.output?.ok;
    void done;
  }
}
for await (const text of handle.textStream) {
  const piece: string = text;
  void piece;
}

// A live event is told from a committed one by a plain property check.
supervisor.observe(
  (event) => {
    if (event.live && event.type === 'text-delta') process.stdout.write(event.text);
    if (!event.live) {
      const id: number = event.eventId;
      void id;
    }
  },
  { live: true },
);
`,
    );
    expect(tsc(consumer)).toBe('');
  });
});
