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
 * (`node_modules`, kept whether it exists or not, so none can be made in the way), and what
 * the process preloads into every thread (`--require`, `--import`, `--loader`, on its
 * command line or in NODE_OPTIONS: a file with what it imports by relative path, a package
 * at every place Node would look for it); provider modules named by path are kept likewise
 * as a tree's specs are taken (src/supervisor/root-spec.ts). A package loaded at first use
 * must then be found, by its real path, inside one of those directories: one found anywhere
 * else (a `node_modules` no lookup of io-harness's goes through, a link out of a kept one)
 * is refused, not loaded (CODE_NOT_KEPT).
 *
 * The list is made by the thread that starts the supervisor, before any run; actors'
 * threads take it with each run they start (see keepAll) before they could make their own,
 * so a directory a run made is never counted as one the harness trusted from the start.
 */
import { existsSync, lstatSync } from 'node:fs';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CodeNotKeptError } from '../../../errors.js';
import { PACKAGE_ROOT } from '../../../package-files.js';
import { codeKept, codeNowKnown, keepFromCommands, knowsCode } from './kept.js';
import { holder, isDirectory, present, real } from './paths.js';
import { relativeImports } from './relative-imports.js';

/** The file this is (the package it belongs to is PACKAGE_ROOT: the nearest directory above it with a package.json). */
const HERE = fileURLToPath(import.meta.url);

/**
 * The directory holding io-harness's modules: the first directory of the package on the way
 * to this file (`dist/` as installed, `src/` run from source; the directory holding the
 * bundle, for an application that bundled io-harness into its own).
 */
function codeRoot(packageRoot: string): string {
  const first = relative(packageRoot, real(HERE)).split(sep)[0] as string;
  return first === basename(real(HERE)) ? dirname(real(HERE)) : join(packageRoot, first);
}

/** `dir` and each directory above it, to the root. */
function ancestors(dir: string): string[] {
  const out = [dir];
  for (let at = dir; dirname(at) !== at; at = dirname(at)) out.push(dirname(at));
  return out;
}

/**
 * What `argv` (node's own options: execArgv, or NODE_OPTIONS split) preloads into every
 * thread: files named by path, resolved from `cwd`, and packages named by name, which Node
 * looks up from `cwd` as each thread starts.
 */
export function preloads(argv: readonly string[], cwd: string): { files: string[]; packages: string[] } {
  const files: string[] = [];
  const packages: string[] = [];
  const flags = new Set(['-r', '--require', '--import', '--loader', '--experimental-loader']);
  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index] as string;
    const eq = arg.indexOf('=');
    const [flag, value] = eq > 0 ? [arg.slice(0, eq), arg.slice(eq + 1)] : [arg, argv[index + 1]];
    if (!flags.has(flag) || value === undefined) continue;
    if (eq <= 0) index++;
    if (value.startsWith('file:')) files.push(fileURLToPath(value));
    else if (value.startsWith('.') || value.startsWith('/')) files.push(resolve(cwd, value));
    else if (!/^[a-z]+:/i.test(value)) packages.push(packageName(value));
  }
  return { files, packages };
}

/** `path` if it exists (or is a link), else the directory on the way to it that is the first not to. */
function firstMissing(path: string): string {
  let at = path;
  while (dirname(at) !== at && !present(dirname(at))) at = dirname(at);
  return at;
}

/** Every place Node looks for a package asked for from `dir`: each `node_modules` on the way up, made or not. */
function lookupPlaces(dir: string): string[] {
  return ancestors(real(dir)).map((at) => join(at, 'node_modules'));
}

/**
 * The code a package `name` asked for from `from` runs: each place it could be found
 * nearer than where it is (made or not, so none can be put in the way), where it is, and
 * every place its own dependencies are looked for from there.
 */
function packageCode(name: string, from: string): string[] {
  const paths: string[] = [];
  for (const places of lookupPlaces(from)) {
    const candidate = join(places, name);
    // Where it is missing, by its first missing directory (`node_modules`, or a scope's):
    // the helper's rungs hold one missing level, as bubblewrap holds any.
    paths.push(firstMissing(candidate));
    if (isDirectory(candidate)) return [...paths, real(candidate), ...lookupPlaces(real(candidate))];
  }
  return paths;
}

/**
 * The code a file named by path brings into a thread (a module provider, a preloaded
 * file): the file and what it imports by relative path, read from its source (a directory
 * in a workspace's root cannot be kept read-only: these are what it loads from there), the
 * directory it is in (kept, but not a place a package may be found, since it may hold the
 * workspace), and every place the packages it imports are looked for from there.
 */
export function fileCode(file: string): HarnessCode {
  const dir = dirname(resolve(file));
  return { code: [resolve(file), ...relativeImports(file), ...lookupPlaces(dir)], protect: [dir] };
}

/**
 * What the harness loads code from: `code`, the places a package it loads at first use
 * must be found in (each also kept from runs); `protect`, more that is kept from runs only
 * (a directory holding a file of code, the directory holding a link), which may be as wide
 * as a workspace's parent and so is no place to find a package in.
 */
export interface HarnessCode {
  code: string[];
  protect: string[];
}

/**
 * Where the harness loads code from, as this process sees it now (see the module's comment).
 * A path that is a link is kept by its target too, and the directory holding it, so the link
 * cannot be renamed and a directory made in its place.
 */
export function harnessCodePaths(
  cwd: string = process.cwd(),
  argv: readonly string[] = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/).filter(Boolean)],
): HarnessCode {
  const packageRoot = PACKAGE_ROOT;
  const preloaded = preloads(argv, cwd);
  const files = preloaded.files.map(fileCode);
  return withLinks({
    code: [
      codeRoot(packageRoot),
      ...['package.json', 'native'].map((part) => join(packageRoot, part)).filter((path) => existsSync(path)),
      // Every place Node looks for a dependency of io-harness's, made or not: a run can make none.
      ...lookupPlaces(packageRoot),
      ...files.flatMap((file) => file.code),
      ...preloaded.packages.flatMap((name) => packageCode(name, cwd)),
    ],
    protect: files.flatMap((file) => file.protect),
  });
}

/** `given`, with each link's target among the code and the directory holding it among what is only protected. */
export function withLinks(given: HarnessCode): HarnessCode {
  const code = new Set<string>();
  const protect = new Set<string>(given.protect);
  for (const path of given.code) {
    code.add(path);
    if (isLink(path)) {
      code.add(real(path));
      protect.add(dirname(path));
    }
  }
  return { code: [...code], protect: [...protect] };
}

function isLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
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
  keepCode(harnessCodePaths());
  codeNowKnown();
}

/** Keeps `given` from commands and file tools: its code as places a package may be found, the rest protected only. */
export function keepCode(given: HarnessCode): void {
  for (const path of given.code) keepFromCommands(path, 'protect', { code: true });
  for (const path of given.protect) keepFromCommands(path, 'protect');
}

/** The name of the package a specifier names: `@scope/name` or `name`, without a subpath. */
export function packageName(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] as string);
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
    if (roots.length > 0 && holder(at, roots) === null)
      throw new CodeNotKeptError(
        `io-harness will not load the package ${name} from ${at}: it is outside the directories io-harness loads code from, kept read-only from runs since this process started (${roots.join(', ')}), so a run could have put it there or changed it. Install ${name} beside io-harness (npm install ${name} in the project io-harness is installed in) and start the process again.`,
        { package: name, path: at },
      );
    return candidate;
  }
  return null;
}
