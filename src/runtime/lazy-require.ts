/**
 * A package (or one file of it) required at its first use rather than with the module that
 * names it: a thread pays for every module it loads as it starts, and the main thread of a
 * program that never shows a patch, reads a configuration or asks a language server never
 * needs what those take (see docs/ARCHITECTURE.md, "Thread start cost"). Required, so the
 * call that wants it stays synchronous: each package named here has a CommonJS build.
 */
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { keptPackageDir, packageName } from './exec/containment/harness-code.js';

const load = createRequire(import.meta.url);
const HERE = dirname(fileURLToPath(import.meta.url));

/**
 * A function that requires `id` the first time it is called and returns it ever after. The
 * package is first looked for as Node will find it, and refused where that is outside the
 * directories the harness keeps from runs (./exec/containment/harness-code.ts).
 */
export function requiredOnFirstUse<T>(id: string): () => T {
  let loaded: T | undefined;
  return () => {
    if (loaded === undefined) {
      keptPackageDir(packageName(id), HERE);
      loaded = load(id) as T;
    }
    return loaded;
  };
}
