/**
 * What a run's commands may not read: the paths the harness keeps hidden (a store's files)
 * and what the policy denies reading in so many words, found once per run (the workspace's
 * walk is in ./boundary.ts, scanWorkspace), and the mounts that hide each from a command.
 * A directory is hidden with its names, a file by its content.
 */
import { existsSync, lstatSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { type Policy, readDeniedBy } from '../../policy/policy.js';
import type { Boundary } from './boundary.js';
import type { KeptPath } from './kept.js';
import { components, holder, isDirectory, real } from './paths.js';

/**
 * The kept paths to hide: each that exists, by its real path; and one kept even where it
 * does not exist (a store's journal) that is missing inside a writable root gets an empty
 * file made in its place first (a placeholder, removed when the run ends), so that no
 * command can make it.
 */
export function keptMasks(kept: readonly KeptPath[], writable: readonly string[]): { path: string; dir: boolean }[] {
  const out: { path: string; dir: boolean }[] = [];
  for (const entry of kept) {
    if (entry.how !== 'mask') continue;
    let stat: ReturnType<typeof lstatSync> | null = null;
    try {
      stat = lstatSync(entry.path);
    } catch {
      stat = null;
    }
    if (stat === null) {
      const parent = real(dirname(entry.path));
      const path = join(parent, basename(entry.path));
      if (entry.evenAbsent && holder(path, writable) !== null) out.push({ path, dir: false });
      continue;
    }
    const path = real(entry.path);
    out.push({ path, dir: isDirectory(path) });
  }
  return out;
}

/**
 * What an absolute deny rule names outside the workspace, where it can be found without a
 * walk: the path itself when it has no wildcard, or the directory before its first
 * wildcard when the rule covers all that is in it (`/home/me/.ssh/**`). A rule with a
 * wildcard inside a name outside the workspace is not hidden (the policy still refuses
 * the agent's own reads of it).
 */
export function absoluteMasks(policy: Policy, root: string): { path: string; dir: boolean }[] {
  const out: { path: string; dir: boolean }[] = [];
  for (const layer of policy.layers)
    for (const rule of layer.rules) {
      if (rule.act !== 'read' || rule.effect !== 'deny' || !rule.pattern.startsWith('/')) continue;
      const literal = rule.pattern.split('/');
      const first = literal.findIndex((part) => /[*?[\]{}]/.test(part));
      const base = (first === -1 ? literal : literal.slice(0, first)).join('/') || '/';
      if (base === '/' || base === root || root.startsWith(`${base}/`)) continue;
      if (first !== -1 && readDeniedBy(policy, `${base}/${PROBE_NAME}`) === null) continue;
      if (!existsSync(base)) continue;
      const path = real(base);
      if (path === root || root.startsWith(`${path}/`) || path === '/') continue;
      out.push({ path, dir: isDirectory(path) });
    }
  return out;
}

/** A name no rule written for people names: a rule that covers it covers every name in its directory. */
export const PROBE_NAME = '.io-harness-any-name-0';

/**
 * What hides the masked paths, walked as the protected ones are: every directory on the
 * way inside a writable root pinned (bound over itself, so no command can rename it and
 * the mask with it, or put a link in its place), a link on the way leaves the path alone
 * (what it leads to is masked by its own name where the walk found it), and a placeholder
 * file made where a kept file is missing. Each directory is hidden with its names, each
 * file by its content; one inside another mask needs nothing of its own.
 */
export function maskMounts(boundary: Boundary): { pin: string[]; dirs: string[]; files: string[]; make: string[] } {
  const pin = new Set<string>();
  const dirs = new Set<string>();
  const files = new Set<string>();
  const make = new Set<string>();
  for (const entry of boundary.masked) {
    const base = holder(entry.path, boundary.writable);
    const pinned: string[] = [];
    let target: { path: string; dir: boolean } | null = null;
    for (const { at, last, stat } of components(base, entry.path)) {
      if (stat === null) {
        if (last && !entry.dir && base !== null) {
          make.add(at);
          target = { path: at, dir: false };
        }
        break;
      }
      if (stat.isSymbolicLink()) break;
      if (last) target = { path: at, dir: stat.isDirectory() };
      else if (!stat.isDirectory()) break;
      else if (base !== null) pinned.push(at);
    }
    if (target === null) continue;
    for (const path of pinned) pin.add(path);
    (target.dir ? dirs : files).add(target.path);
  }
  const covered = (path: string) => [...dirs].some((other) => other !== path && path.startsWith(`${other}/`));
  return {
    pin: [...pin].filter((path) => !covered(path) && !dirs.has(path)).sort((a, b) => a.length - b.length),
    dirs: [...dirs].filter((path) => !covered(path)),
    files: [...files].filter((path) => !covered(path)),
    make: [...make].filter((path) => !covered(path)),
  };
}
