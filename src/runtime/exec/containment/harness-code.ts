/**
 * The harness's own code, held to the rule of trust (./kept.ts): every thread the runtime
 * starts later imports io-harness's modules again, and every package it loads at first use
 * (a diff, a language server's client, a browser, an AI SDK provider, a document parser)
 * is read from disk when it is first wanted, long after a run may have started. Where the
 * workspace holds that code (an agent working on the very project io-harness is installed
 * in), a command or a file tool that rewrote it would run its own code inside the harness,
 * outside every sandbox, at the next thread's start.
 *
 * So the directories the harness loads code from are kept read-only to commands and to the
 * file tools, as the process first starts a supervisor or a contained executor: the
 * directory holding io-harness's modules (`dist/`, or `src/` run from source), its
 * package.json, and every `node_modules` that exists on the way up from io-harness's
 * package and from the working directory (where Node looks for a package, and where an AI
 * SDK provider is looked for). A package loaded at first use must then be found inside one
 * of those directories: one found anywhere else (a `node_modules` a run made higher up,
 * where Node's lookup would go on to) is refused, not loaded (CODE_NOT_KEPT).
 *
 * The list is made on the thread that starts the supervisor, before any run; actors'
 * threads take it with each run they start (see keepAll), never making their own, so a
 * directory a run made is never counted as one the harness trusted from the start.
 */
import { existsSync, realpathSync, statSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isMainThread } from 'node:worker_threads';
import { CodeNotKeptError } from '../../../errors.js';
import { codeKept, codeNowKnown, keepFromCommands, knowsCode } from './kept.js';

/** The directory holding io-harness's modules: `dist/` as installed, `src/` run from source. */
const CODE_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

function real(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** `dir` and each directory above it, to the root. */
function ancestors(dir: string): string[] {
  const out = [dir];
  for (let at = dir; dirname(at) !== at; at = dirname(at)) out.push(dirname(at));
  return out;
}

/**
 * Where the harness loads code from, as this process sees it now (see the module's comment):
 * each by the path it is reached by and, where that is a link, by its target too.
 */
export function harnessCodePaths(cwd: string = process.cwd()): string[] {
  const paths = new Set<string>();
  const add = (path: string) => {
    paths.add(path);
    paths.add(real(path));
  };
  add(CODE_ROOT.endsWith(sep) ? CODE_ROOT.slice(0, -1) : CODE_ROOT);
  const packageRoot = dirname(real(CODE_ROOT));
  if (existsSync(join(packageRoot, 'package.json'))) add(join(packageRoot, 'package.json'));
  for (const start of [packageRoot, real(cwd)])
    for (const dir of ancestors(start)) {
      const modules = join(dir, 'node_modules');
      if (isDirectory(modules)) add(modules);
    }
  return [...paths];
}

/**
 * Keeps the harness's code from commands and file tools, once per process, on the main
 * thread; an actor's thread is handed the list with each run (see keepAll).
 */
export function keepHarnessCode(): void {
  // Only the thread that starts the others makes the list: one made later, on a thread of a
  // run, could count a directory a run made among those trusted from the start.
  if (knowsCode() || !isMainThread) return;
  for (const path of harnessCodePaths()) keepFromCommands(path, 'protect', { code: true });
  codeNowKnown();
}

/** The name of the package a specifier names: `@scope/name` or `name`, without a subpath. */
export function packageName(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] as string);
}

/** Whether `path` is one of `roots` or inside one. */
function inside(path: string, roots: readonly string[]): boolean {
  return roots.some((root) => {
    const rel = relative(root, path);
    return rel === '' || (!rel.startsWith('..') && !rel.startsWith(sep) && rel !== '..');
  });
}

/**
 * The directory Node would load package `name` from when asked from `fromDir` (the first
 * `node_modules/<name>` directory on the way up, as its lookup goes), or null where there is
 * none. Where this thread knows the harness's code directories, one found outside them is
 * refused: it is in a place a run could have written, and loading it would run that code.
 */
export function keptPackageDir(name: string, fromDir: string, roots: readonly string[] = codeKept()): string | null {
  for (const dir of ancestors(fromDir)) {
    const candidate = join(dir, 'node_modules', name);
    if (!isDirectory(candidate)) continue;
    if (roots.length > 0 && !inside(real(candidate), roots) && !inside(candidate, roots))
      throw new CodeNotKeptError(
        `io-harness will not load the package ${name} from ${candidate}: it is outside the directories io-harness loads code from, kept read-only from runs since this process started (${roots.join(', ')}), so a run could have put it there. Install ${name} beside io-harness (npm install ${name}) and start the process again.`,
        { package: name, path: candidate },
      );
    return candidate;
  }
  return null;
}

/** Refuses a file of code named by path (an AI SDK provider given as a file) that is outside the kept directories. */
export function checkKeptFile(path: string, roots: readonly string[] = codeKept()): void {
  if (roots.length > 0 && !inside(real(path), roots) && !inside(path, roots))
    throw new CodeNotKeptError(
      `io-harness will not load ${path}: it is outside the directories io-harness loads code from, kept read-only from runs (${roots.join(', ')}), so a run could have changed it.`,
      { package: path, path },
    );
}
