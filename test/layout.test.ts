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
