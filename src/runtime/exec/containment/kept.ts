/**
 * The rule of trust, as the containment holds it: whatever the harness reads back later
 * to decide what a run may do (the store and the specs stored in it, the configuration's
 * files, bundles, skills and guidance) and every binary it runs itself is kept out of
 * reach of the run's commands, wherever it sits on disk. Each part of the harness that
 * opens or reads such a thing says so here once; every contained command then gets it
 * read-only (`protect`) or hidden altogether (`mask`: its content unreadable, and for a
 * directory its names too). A list of names cannot do this: a store or a bundle may sit
 * anywhere, and a fixed list leaves out the next thing the harness learns to read.
 *
 * The list is per thread (an actor's thread is handed the main thread's list with each
 * run it starts: see {@link keepAll}) and only grows: a path once trusted stays kept.
 */
import { realpathSync } from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { escape as escapeGlob } from 'minimatch';
import { escapes, Policy, type PolicyLayer } from '../../policy/policy.js';

/** `protect`: read-only to commands; `mask`: neither readable nor writable (a store holds other runs' data). */
export type Keeping = 'protect' | 'mask';

/** A path kept from commands, and how. */
export interface KeptPath {
  path: string;
  how: Keeping;
  /**
   * For a path that may not exist while a command runs (a store's journal): whether a
   * placeholder is to be made and kept in its place, so a command cannot make it.
   */
  evenAbsent?: boolean;
  /** A directory or file the harness loads code from (see ./harness-code.ts): a package found outside every such one is not loaded. */
  code?: boolean;
}

const kept = new Map<string, KeptPath>();

/** Whether this thread has the harness's code directories: made here (./harness-code.ts) or handed with a run. */
let codeKnown = false;

/** Keeps `path` from every contained command this thread starts from now on; a mask is never weakened to a protection. */
export function keepFromCommands(
  path: string,
  how: Keeping,
  options: { evenAbsent?: boolean; code?: boolean } = {},
): void {
  const absolute = resolve(path);
  const known = kept.get(absolute);
  const strongest: Keeping = known?.how === 'mask' ? 'mask' : how;
  kept.set(absolute, {
    path: absolute,
    how: strongest,
    ...(options.evenAbsent || known?.evenAbsent ? { evenAbsent: true } : {}),
    ...(options.code || known?.code ? { code: true } : {}),
  });
}

/** Keeps every path of `paths` (a list another thread sent: see {@link keptPaths}). */
export function keepAll(paths: readonly KeptPath[] | undefined): void {
  for (const entry of paths ?? []) {
    keepFromCommands(entry.path, entry.how, { evenAbsent: entry.evenAbsent === true, code: entry.code === true });
    if (entry.code) codeKnown = true;
  }
}

/** Whether this thread knows where the harness loads code from (see ./harness-code.ts). */
export function knowsCode(): boolean {
  return codeKnown;
}

/** Says this thread now knows where the harness loads code from. */
export function codeNowKnown(): void {
  codeKnown = true;
}

/** The directories and files kept as the harness's code. */
export function codeKept(): string[] {
  return [...kept.values()].filter((entry) => entry.code).map((entry) => entry.path);
}

/** What this thread keeps from commands, as data another thread can take. */
export function keptPaths(): KeptPath[] {
  return [...kept.values()].map((entry) => ({ ...entry }));
}

/**
 * A SQLite store's file and the files SQLite keeps beside it: each hidden from commands,
 * and the journals kept even where they do not exist yet (a journal or write-ahead log a
 * command made would be replayed into the store the next time it opens).
 */
export function keepStoreFiles(file: string): void {
  keepFromCommands(file, 'mask');
  for (const suffix of ['-wal', '-shm', '-journal']) keepFromCommands(`${file}${suffix}`, 'mask', { evenAbsent: true });
}

/** The name of the policy layer that holds the harness's own file tools to the list (see {@link withKept}). */
export const TRUST_LAYER = 'trust';

/** `path` by its real path, or its parent's real path and its name where it does not exist. */
function realish(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    try {
      return join(realpathSync(dirname(path)), basename(path));
    } catch {
      return path;
    }
  }
}

/**
 * `policy` with what this thread keeps from commands denied to the harness's own file
 * tools too, as a layer of its own named {@link TRUST_LAYER}: a hidden path may be neither
 * read nor written, a protected one not written. The mounts keep commands away; the run's
 * `read_file`, `write_file`, `grep` and `find` act in the harness's process, where no mount
 * reaches, and decide by the policy, so the same list goes there. Null stays null.
 */
export function withKept(policy: Policy | null, root: string): Policy | null {
  if (policy === null || kept.size === 0) return policy;
  const realRoot = realish(root);
  const rules: PolicyLayer['rules'] = [];
  for (const entry of kept.values()) {
    const path = realish(entry.path);
    const inside = relative(realRoot, path);
    if (inside === '') continue;
    const pattern = escapes(inside) ? escapeGlob(path) : escapeGlob(inside);
    rules.push({ effect: 'deny', act: 'write', pattern });
    if (entry.how === 'mask') rules.push({ effect: 'deny', act: 'read', pattern });
  }
  return Policy.from({ layers: [...policy.toJSON().layers, { name: TRUST_LAYER, rules }] });
}
