/**
 * The `diff` package, required on its first use rather than with the modules that use it:
 * the main thread of a program that never shows or applies a patch (most) never loads it,
 * and an agent thread loads it at its run's first file change. Its CommonJS build, so the
 * call that needs it stays synchronous (see docs/ARCHITECTURE.md, "Thread start cost").
 */
import { createRequire } from 'node:module';

type DiffLib = typeof import('diff');
let lib: DiffLib | undefined;

export function diffLib(): DiffLib {
  lib ??= createRequire(import.meta.url)('diff') as DiffLib;
  return lib;
}
