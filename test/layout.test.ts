/**
 * The store's writes stay behind the store port: outside src/store no file opens a
 * connection or prepares a statement, so every write goes through the store actor, or
 * through the one in-process path for when no supervisor runs (src/store/sqlite/local.ts).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = join(import.meta.dirname, '..', 'src');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

describe('the store port', () => {
  it('is the only way to the store file: no connection or statement outside src/store', () => {
    const outside = sources(SRC).filter((path) => !relative(SRC, path).startsWith('store/'));
    expect(outside.length).toBeGreaterThan(20);
    const found: string[] = [];
    for (const path of outside) {
      const text = readFileSync(path, 'utf8');
      for (const pattern of [
        /new Database\(/,
        /\.prepare\(/,
        /\bopenWriter\b/,
        /\bsqliteWriter\(/,
        /from 'pg'/,
        /\b(INSERT INTO|UPDATE \w+ SET|DELETE FROM)\b/,
      ]) {
        if (pattern.test(text)) found.push(`${relative(SRC, path)}: ${pattern.source}`);
      }
    }
    expect(found).toEqual([]);
  });
});

describe('the executor factory', () => {
  it('is the only way to an executor: nothing else constructs one, nothing outside src/runtime/exec names the direct one', () => {
    const files = sources(SRC);
    const factory = readFileSync(join(SRC, 'runtime', 'exec', 'factory.ts'), 'utf8');
    // What the rule looks for is there to be found, in the one place it may be.
    expect(factory).toMatch(/new ContainedExecutor\(directExecutor/);
    const found: string[] = [];
    for (const path of files) {
      const text = readFileSync(path, 'utf8');
      const where = relative(SRC, path);
      // Anywhere, src/runtime/exec included: no parameter or field falls back to the direct executor.
      if (/(?<![=!<>])=\s*directExecutor\b|\?\?\s*directExecutor\b/.test(text))
        found.push(`${where}: defaults to directExecutor`);
      // The factory alone constructs the containing executor, here as anywhere.
      if (where !== 'runtime/exec/factory.ts' && /new ContainedExecutor\b/.test(text))
        found.push(`${where}: constructs ContainedExecutor`);
      if (!where.startsWith('runtime/exec/') && /\bdirectExecutor\b/.test(text))
        found.push(`${where}: names directExecutor`);
    }
    expect(found).toEqual([]);
  });
});

describe('the tool declarations', () => {
  it('say what kind of act each built-in tool is, and the model sees only name, description and parameters', async () => {
    const { registryFor } = await import('../dist/runtime/tools/registry.js');
    const { workspaceTools } = await import('../dist/runtime/tools/families/workspace.js');
    const registry = registryFor({
      mode: 'workspace',
      planGate: true,
      workspaceTools,
      hostTools: [{ name: 'lookup', description: 'Looks up.', parameters: { type: 'object' }, effect: 'reads' }],
    });
    const kinds = Object.fromEntries(registry.definitions().map((tool) => [tool.name, registry.kind(tool.name)]));
    expect(kinds).toEqual({
      ask_operator: 'asks',
      edit_file: 'acts',
      exec: 'acts',
      find: 'reads',
      grep: 'reads',
      lookup: 'host',
      patch_file: 'acts',
      read_file: 'reads',
      read_messages: 'reads',
      send_message: 'acts',
      shell: 'acts',
      shell_kill: 'acts',
      shell_poll: 'reads',
      shell_start: 'acts',
      spawn_agent: 'acts',
      submit_plan: 'asks',
      write_file: 'acts',
    });
    for (const definition of registry.definitions()) {
      expect(Object.keys(definition).sort()).toEqual(['description', 'name', 'parameters']);
    }
  });
});

/** Every module an entry file can load, static or dynamic, followed through the compiled code: relative paths and package names. */
function reachable(entry: string): { files: string[]; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.pop() as string;
    if (files.has(file)) continue;
    files.add(file);
    const text = readFileSync(file, 'utf8');
    // Static and dynamic imports, and packages required where first used (`createRequire(import.meta.url)('undici')`,
    // or through src/runtime/lazy-require.ts: `requiredOnFirstUse<T>('undici/...')`).
    const loads =
      /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+|createRequire\(import\.meta\.url\)\s*\(\s*|\brequiredOnFirstUse(?:<[^>]*>)?\(\s*)['"]([^'"]+)['"]/g;
    for (const match of text.matchAll(loads)) {
      const specifier = match[1] as string;
      if (specifier.startsWith('.')) queue.push(join(dirname(file), specifier));
      else if (!specifier.startsWith('node:'))
        packages.add(
          specifier
            .split('/')
            .slice(0, specifier.startsWith('@') ? 2 : 1)
            .join('/'),
        );
    }
  }
  return { files: [...files], packages };
}

describe('the agent threads', () => {
  it('never load zod: it is for the edges, on the main thread', () => {
    const DIST = join(import.meta.dirname, '..', 'dist');
    const agent = reachable(join(DIST, 'actors', 'agent-worker.js'));
    expect(agent.files.length).toBeGreaterThan(20);
    // What they do load, so the walk is known to follow imports.
    expect(agent.packages).toContain('undici');
    expect(agent.packages).toContain('better-sqlite3');
    expect(agent.packages).not.toContain('zod');
    // The main thread's edge does load it.
    expect(reachable(join(DIST, 'supervisor', 'supervisor.js')).packages).toContain('zod');
  });
});

describe('the error codes', () => {
  it('are the sections of docs/ERRORS.md, each naming a class the package exports', async () => {
    const { ErrorCode } = await import('../dist/errors.js');
    const entries: Record<string, Record<string, unknown>> = {
      'io-harness': await import('../dist/index.js'),
      'io-harness/mcp': await import('../dist/mcp/index.js'),
      'io-harness/testing': await import('../dist/testing/index.js'),
    };
    const listed = readFileSync(join(import.meta.dirname, '..', 'docs', 'ERRORS.md'), 'utf8');
    const rows = [...listed.matchAll(/^## `([A-Z_]+)`\n\nClass: ([^\n]*)\.$/gm)].map((match) => ({
      code: match[1] as string,
      classes: match[2] as string,
    }));
    const codes = Object.values(ErrorCode as Record<string, string>);
    // Both ways: no code without its row, no row for a code the code does not have.
    expect(rows.map((row) => row.code).sort()).toEqual([...codes].sort());
    const unexported: string[] = [];
    for (const row of rows) {
      // `Class` (io-harness/sub) names the entry it is exported from; the package's root by default.
      const from = /\((io-harness[^)]*)\)/.exec(row.classes)?.[1] ?? 'io-harness';
      for (const match of row.classes.matchAll(/`(\w+)`/g)) {
        const exported = entries[from]?.[match[1] as string];
        if (typeof exported !== 'function') unexported.push(`${row.code}: ${match[1]} from ${from}`);
      }
    }
    expect(unexported).toEqual([]);
  });
});

describe('the event types', () => {
  it('are the table of docs/guides/actor-runtime.md, written from the code', async () => {
    const { eventsTable } = await import('../scripts/events-list.mjs');
    const { EVENT_TYPES } = await import('../dist/index.js');
    const guide = readFileSync(join(import.meta.dirname, '..', 'docs', 'guides', 'actor-runtime.md'), 'utf8');
    const table = eventsTable();
    expect(table.split('\n').length).toBe(EVENT_TYPES.length + 2);
    // The table as written, its columns aligned or not.
    const cells = (text: string) => text.replace(/ *\| */g, '|').replace(/-{3,}/g, '---');
    const written = guide.slice(guide.indexOf('<!-- events -->') + 15, guide.indexOf('<!-- /events -->')).trim();
    expect(cells(written)).toBe(cells(table));
  });
});
