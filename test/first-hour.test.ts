/**
 * The first hour of a Node developer: an events iterator scoped to a tree ends once the
 * tree settles (after its last event), and a process whose runs have all settled exits
 * on its own even when it never calls close().
 */
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { cpSync, existsSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  CallbackApprover,
  formatCost,
  type HarnessEvent,
  OutputSchema,
  Policy,
  runWith,
  Store,
  TaskContract,
} from '../dist/index.js';
import { tempStorePath } from './support/processes.js';
import { serve, supervisorOnStore, tempWorkspace } from './support/workspace.js';

const LOOP = fileURLToPath(new URL('./support/scripts/loop.mjs', import.meta.url));

describe('the first hour', () => {
  it('ends an events iterator scoped to a tree after the tree’s last event, and at once for one settled already', async () => {
    const { supervisor } = await supervisorOnStore();
    const { provider } = await serve(() => ({ text: 'done' }));
    const handle = supervisor.run({ task: 'answer', provider });
    const seen: HarnessEvent[] = [];
    for await (const event of supervisor.events({ rootId: handle.rootId })) seen.push(event);
    expect(seen.at(-1)?.type).toBe('run-end');
    expect((await handle.result).status).toBe('finished');
    // Scoped to the settled tree, or to its run: nothing more will come, so it ends now.
    const after: HarnessEvent[] = [];
    for await (const event of supervisor.events({ rootId: handle.rootId })) after.push(event);
    for await (const event of supervisor.events({ runId: handle.rootId })) after.push(event);
    expect(after).toEqual([]);
  });

  it('shows an amount as a person reads it, the raw figure kept', () => {
    expect(formatCost(0.0028640000000000002)).toBe('$0.0029');
    expect(formatCost(12.4)).toBe('$12.40');
    expect(formatCost(0)).toBe('$0.00');
    expect(formatCost(0.1 + 0.2)).toBe('$0.30');
    expect(formatCost(0.000000123)).toBe('$0.00000012');
  });

  it('says who refused an ask: the approver that denied it, or no approver at all', async () => {
    const root = tempWorkspace({ 'a.txt': 'a\n' });
    const { store } = await supervisorOnStore();
    const { provider } = await serve((call) =>
      (call.body as { messages: { role: string }[] }).messages.some((m) => m.role === 'tool')
        ? { text: 'done' }
        : { text: 'running', toolCalls: [{ name: 'exec', args: { argv: ['node', '--version'] } }] },
    );
    const refusal = async (approver?: CallbackApprover) => {
      const result = await runWith(TaskContract.workspace('run it', root), provider, store, Policy.default(), approver);
      return store.steps(result.runId)[0]?.observations[0]?.content ?? '';
    };
    expect(await refusal()).toMatch(/needs approval \(ask-exec \*, layer default\) and no approver was given to ask/);
    expect(await refusal(new CallbackApprover(() => 'deny'))).toMatch(/and the approver denied it/);
  });

  it('hands back a structured answer as data, declared from a zod schema, on runWith and on a run handle', async () => {
    const root = tempWorkspace({ 'a.txt': 'a\n' });
    const { supervisor, store } = await supervisorOnStore();
    const { provider } = await serve(() => ({ text: '```json\n{ "summary": "fine", "risk": "low" }\n```' }));
    const Review = z.object({ summary: z.string(), risk: z.enum(['low', 'high']) });
    const contract = TaskContract.workspace('review it', root).withOutputSchema(Review);
    // What zod wrote is what the run was held to.
    expect(contract.toJSON().outputSchema?.schema).toMatchObject({
      type: 'object',
      required: ['summary', 'risk'],
      additionalProperties: false,
    });
    const result = await runWith(contract, provider, store);
    expect(result.outcome.kind).toBe('finished');
    expect(result.output).toEqual({ summary: 'fine', risk: 'low' });
    const tree = await supervisor.run({ contract: contract.withBudget({ steps: 3 }), provider }).result;
    expect(tree.output).toEqual({ summary: 'fine', risk: 'low' });
    // No schema, or an answer that misses it: no output, the reply kept.
    const plain = await runWith(TaskContract.workspace('review it', root), provider, store);
    expect(plain.output).toBeNull();
    expect(plain.reply).toContain('"summary"');
    const strict = TaskContract.workspace('review it', root).withOutputSchema(
      OutputSchema.of(z.object({ summary: z.string(), risk: z.literal('high') }), 'review'),
    );
    const missed = await runWith(strict.withRetries(0), provider, store);
    expect(missed.outcome.kind).toBe('schema-unsatisfied');
    expect(missed.output).toBeNull();
    // What zod writes outside the subset is refused by keyword, as a hand-written schema's is.
    expect(() => OutputSchema.of(z.object({ email: z.string().email() }))).toThrow(/format/);
    expect(() => OutputSchema.of(z.string().transform((text) => text.length))).toThrow(
      /cannot be written as JSON Schema/,
    );
  });

  it('refuses an in-memory store plainly, making no file of that name', async () => {
    const dir = tempWorkspace();
    const cwd = process.cwd();
    process.chdir(dir);
    try {
      for (const spelled of [':memory:', ' :memory:', 'file::memory:', 'file:x.db?mode=memory', ''])
        await expect(Store.open(spelled), spelled).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      await expect(Store.open(':memory:')).rejects.toThrow(/cannot be in memory; pass a path/);
    } finally {
      process.chdir(cwd);
    }
    expect(readdirSync(dir)).toEqual([]);
  });

  it('builds before it packs: a package made from a fresh clone ships dist/bundle', { timeout: 120_000 }, () => {
    // The package's own files with no dist/, as a fresh clone has them; its node_modules borrowed.
    const copy = tempWorkspace();
    const here = fileURLToPath(new URL('..', import.meta.url));
    for (const entry of [
      'package.json',
      'package-lock.json',
      'tsconfig.json',
      'tsconfig.build.json',
      'src',
      'scripts',
      'bin',
      'native',
      'viewer',
      'README.md',
      'LICENSE',
      'CHANGELOG.md',
    ])
      cpSync(join(here, entry), join(copy, entry), { recursive: true });
    symlinkSync(join(here, 'node_modules'), join(copy, 'node_modules'));
    const packed = JSON.parse(
      execFileSync('npm', ['pack', '--dry-run', '--json'], {
        cwd: copy,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      }),
    ) as { files: { path: string }[] }[];
    const files = (packed[0]?.files ?? []).map((file) => file.path);
    expect(files).toContain('dist/bundle/index.js');
    expect(files).toContain('dist/bundle/agent-worker.js');
    expect(files).toContain('dist/viewer/page/index.html');
    expect(files).toContain('dist/index.d.ts');
    // One copy of the code: tsc's modules (and their maps) are the suite's, not the package's.
    expect(files.filter((file) => /^dist\/(?!bundle\/|viewer\/page\/).*\.js(\.map)?$/.test(file))).toEqual([]);
  });

  it('publishes declarations that need only what the package depends on', () => {
    const here = fileURLToPath(new URL('..', import.meta.url));
    const manifest = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8')) as {
      name: string;
      dependencies: Record<string, string>;
      peerDependencies?: Record<string, string>;
      exports: Record<string, { types?: string } | string>;
    };
    // What it depends on, and itself (a declaration may name its own subpaths).
    const allowed = new Set([
      manifest.name,
      ...Object.keys(manifest.dependencies),
      ...Object.keys(manifest.peerDependencies ?? {}),
    ]);
    // A dependency's types come with it, or from an @types package that is a dependency too (not a dev one).
    const typed = (name: string): boolean => {
      if (name === manifest.name) return true;
      if (!allowed.has(name)) return false;
      const own = JSON.parse(readFileSync(join(here, 'node_modules', name, 'package.json'), 'utf8')) as Record<
        string,
        unknown
      >;
      const ships =
        own.types !== undefined ||
        own.typings !== undefined ||
        JSON.stringify(own.exports ?? {}).includes('"types"') ||
        existsSync(join(here, 'node_modules', name, 'index.d.ts'));
      return ships || allowed.has(`@types/${name.replace(/^@/, '').replace('/', '__')}`);
    };
    const packageOf = (specifier: string) =>
      specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : (specifier.split('/')[0] as string);
    // Every declaration file an export's types reach, and every module each imports.
    const seen = new Set<string>();
    const stack = Object.values(manifest.exports)
      .map((entry) => (typeof entry === 'string' ? null : entry.types))
      .filter((types): types is string => typeof types === 'string')
      .map((types) => join(here, types));
    const outside: string[] = [];
    while (stack.length > 0) {
      const file = stack.pop() as string;
      if (seen.has(file)) continue;
      seen.add(file);
      for (const match of readFileSync(file, 'utf8').matchAll(/from '([^']+)'|import\('([^']+)'\)/g)) {
        const specifier = (match[1] ?? match[2]) as string;
        if (specifier.startsWith('.')) {
          const target = join(dirname(file), specifier.replace(/\.js$/, '.d.ts'));
          if (existsSync(target)) stack.push(target);
        } else if (!specifier.startsWith('node:') && !typed(packageOf(specifier)))
          outside.push(`${file.slice(here.length)} imports ${specifier}`);
      }
    }
    expect(seen.size).toBeGreaterThan(20);
    expect(outside).toEqual([]);
  });

  it('lets a process whose runs have all settled exit without close()', { timeout: 60_000 }, async () => {
    const file = join(tempWorkspace(), 'forgets-close.mjs');
    writeFileSync(
      file,
      `import { Store, Supervisor } from ${JSON.stringify(new URL('../dist/index.js', import.meta.url).href)};
const store = await Store.open(${JSON.stringify(tempStorePath())});
const supervisor = await Supervisor.start(store);
const handle = supervisor.run({ task: 'x', provider: { kind: 'module', module: ${JSON.stringify(LOOP)}, options: { steps: 2 } } });
console.log((await handle.result).status);
`,
    );
    const child = spawn(process.execPath, [file], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
    });
    // Past this the process is kept alive by something it should not be: fail, and say so.
    const guard = setTimeout(() => child.kill('SIGKILL'), 30_000);
    const [code, signal] = await once(child, 'exit');
    clearTimeout(guard);
    expect(out.trim()).toBe('finished');
    expect(signal, 'the process did not exit on its own within 30 s').toBeNull();
    expect(code).toBe(0);
  });
});
