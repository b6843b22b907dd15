/**
 * The files a module of code named by path (a provider module, a preloaded file) brings in
 * by relative path, read from its source (static imports and re-exports, dynamic imports
 * and requires whose specifier is a literal starting with a dot), followed from each file
 * found, with the nearest package.json of a `.js` file or of one that imports `#name` (its
 * `type` and `imports` decide how the file is read). The harness keeps them from runs with
 * the module (see ./harness-code.ts): where the module sits directly in a workspace's root,
 * its directory cannot be kept read-only, and these are what it would load from there. A
 * specifier computed at run time cannot be read here.
 */
import { readFileSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { manifestOf } from '../../../package-files.js';

/** The most files followed from one module. */
const MAX_FILES = 200;

/** The largest file read for its imports. */
const MAX_BYTES = 1 << 20;

const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|\brequire\s*\(\s*|\bimport\s+)(['"])(\.{1,2}\/[^'"\n]*)\1/g;

/** How Node may complete a relative specifier: as written (ES modules), or with an extension or an index (CommonJS). */
const COMPLETIONS = ['', '.js', '.mjs', '.cjs', '.json', '.node', '/index.js', '/index.mjs', '/index.cjs'];

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** `file`'s relative imports, followed, each file once, and the package.json files that decide how they are read. */
export function relativeImports(file: string): string[] {
  const found = new Set<string>();
  const manifests = new Set<string>();
  const queue = [resolve(file)];
  while (queue.length > 0 && found.size < MAX_FILES) {
    const at = queue.shift() as string;
    if (found.has(at)) continue;
    found.add(at);
    let source: string;
    try {
      if (statSync(at).size > MAX_BYTES) continue;
      source = readFileSync(at, 'utf8');
    } catch {
      continue;
    }
    // Its package.json decides how a .js file is read (`type`) and what `#name` imports are.
    const manifest = at.endsWith('.js') || /['"]#/.test(source) ? manifestOf(dirname(at)) : null;
    if (manifest) manifests.add(manifest);
    for (const match of source.matchAll(SPECIFIER)) {
      const base = resolve(dirname(at), (match[2] as string).split(/[?#]/)[0] as string);
      const target = COMPLETIONS.map((suffix) => base + suffix).find(isFile);
      if (target) queue.push(target);
    }
  }
  found.delete(resolve(file));
  return [...found, ...manifests];
}
