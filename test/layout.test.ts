/**
 * The store's writes stay behind the store port: outside src/store no file opens a
 * connection or prepares a statement, so every write goes through the store actor, or
 * through the one in-process path for when no supervisor runs (src/store/local.ts).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
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
        /\bnew StoreWriter\b/,
        /\b(INSERT INTO|UPDATE \w+ SET|DELETE FROM)\b/,
      ]) {
        if (pattern.test(text)) found.push(`${relative(SRC, path)}: ${pattern.source}`);
      }
    }
    expect(found).toEqual([]);
  });
});

describe('the tool declarations', () => {
  it('say what kind of act each built-in tool is, and the model sees only name, description and parameters', async () => {
    const { registryFor } = await import('../dist/actors/agent/toolset.js');
    const registry = registryFor('workspace', true, [
      { name: 'lookup', description: 'Looks up.', parameters: { type: 'object' }, effect: 'reads' },
    ]);
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
