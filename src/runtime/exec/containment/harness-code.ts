/**
 * The harness's own code, held to the rule of trust (./kept.ts): every thread the runtime
 * starts later imports io-harness's modules again (and runs the process's preloads again),
 * the containment compiles its helper from io-harness's `native/` source, and a package is
 * loaded at its first use (a diff, a language server's client, a browser, an AI SDK
 * provider, a document parser), long after a run may have started. Where the workspace
 * holds that code (an agent working on the very project io-harness is installed in, or a
 * monorepo holding its package), a command or a file tool that rewrote it, or planted a
 * package where Node's lookup would find it first, would run its own code inside the
 * harness, outside every sandbox.
 *
 * So what the harness loads code from is kept read-only to commands and to the file tools
 * from the moment the process starts its first supervisor or executor: the directory
 * holding io-harness's modules (`dist/`, or `src/` run from source), its `package.json` and
 * `native/`, every place on the way up from its package where Node looks for a dependency
 * (`node_modules`, kept whether it exists or not, so none can be made in the way), and the
 * files the process preloads into every thread (`--require`, `--import`, `--loader`, on
 * its command line or in NODE_OPTIONS). A package loaded at first use must then be found,
 * by its real path, inside one of those directories: one found anywhere else (a
 * `node_modules` no lookup of io-harness's goes through, a link out of a kept one) is
 * refused, not loaded (CODE_NOT_KEPT).
 *
 * The list is made by the thread that starts the supervisor, before any run; actors'
 * threads take it with each run they start (see keepAll) before they could make their own,
 * so a directory a run made is never counted as one the harness trusted from the start.
 */
import { existsSync, realpathSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
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

/** The files `argv` (node's own options: execArgv, or NODE_OPTIONS split) preloads, resolved from `cwd`. */
export function preloadedFiles(argv: readonly string[], cwd: string): string[] {
  const files: string[] = [];
  const flags = new Set(['-r', '--require', '--import', '--loader', '--experimental-loader']);
  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index] as string;
    const eq = arg.indexOf('=');
    const [flag, value] = eq > 0 ? [arg.slice(0, eq), arg.slice(eq + 1)] : [arg, argv[index + 1]];
    if (!flags.has(flag) || value === undefined) continue;
    if (eq <= 0) index++;
    // A package name is looked up in node_modules, which is kept; a path is kept as it is.
    if (value.startsWith('file:')) files.push(fileURLToPath(value));
    else if (value.startsWith('.') || value.startsWith('/')) files.push(resolve(cwd, value));
  }
  return files;
}

/**
 * Where the harness loads code from, as this process sees it now (see the module's comment):
 * each by the path it is reached by and, where that is a link, by its target too.
 */
export function harnessCodePaths(
  cwd: string = process.cwd(),
  argv: readonly string[] = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/).filter(Boolean)],
): string[] {
  const paths = new Set<string>();
  const add = (path: string) => {
    paths.add(path);
    paths.add(real(path));
  };
  add(CODE_ROOT.endsWith(sep) ? CODE_ROOT.slice(0, -1) : CODE_ROOT);
  const packageRoot = dirname(real(CODE_ROOT));
  for (const part of ['package.json', 'native']) if (existsSync(join(packageRoot, part))) add(join(packageRoot, part));
  // Every place Node looks for a dependency of io-harness's, made or not: a run can make none.
  for (const dir of ancestors(packageRoot)) add(join(dir, 'node_modules'));
  for (const file of preloadedFiles(argv, cwd)) add(file);
  return [...paths];
}

/**
 * Keeps the harness's code from commands and file tools, once, on the thread that starts
 * the process's first supervisor or executor (the main thread, or a worker an embedder runs
 * io-harness on); an actor's thread is handed the list with each run (see keepAll).
 */
export function keepHarnessCode(): void {
  // An actor's thread has been handed the list before it could get here: only the thread
  // that starts a supervisor or an executor of its own makes one.
  if (knowsCode()) return;
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
 * none. Where this thread knows the harness's code directories, one whose real path is
 * outside them is refused: it is in a place a run could have written (or reached through a
 * link from a kept one), and loading it would run that code.
 */
export function keptPackageDir(name: string, fromDir: string, roots: readonly string[] = codeKept()): string | null {
  for (const dir of ancestors(fromDir)) {
    const candidate = join(dir, 'node_modules', name);
    if (!isDirectory(candidate)) continue;
    const at = real(candidate);
    if (roots.length > 0 && !inside(at, roots))
      throw new CodeNotKeptError(
        `io-harness will not load the package ${name} from ${at}: it is outside the directories io-harness loads code from, kept read-only from runs since this process started (${roots.join(', ')}), so a run could have put it there or changed it. Install ${name} beside io-harness (npm install ${name} in the project io-harness is installed in) and start the process again.`,
        { package: name, path: at },
      );
    return candidate;
  }
  return null;
}
