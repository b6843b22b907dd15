/**
 * The paths a command reads and writes, decided like a file tool's: redirects, a `cd`,
 * the path arguments of a program the check knows, and every entry under a directory a
 * recursive command walks. A file with several names (hard links) is neither read nor
 * written; a write through a dangling symbolic link is decided where it leads.
 */
import { type Dirent, existsSync, lstatSync, readdirSync, readlinkSync, realpathSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import type { PathUse } from '../path-programs/index.js';
import type { ShellRedirect } from '../shell.js';
import type { Context } from './effects.js';
import type { Tally } from './tally.js';

/** How many entries a recursive read or write is walked through before the check gives up. */
export const WALK_LIMIT = 20_000;

/** A regular file with more than one name: another name may lie outside the workspace or under a denied path. */
export function hardLinked(path: string): number {
  const stat = statSync(path, { throwIfNoEntry: false });
  return stat?.isFile() && stat.nlink > 1 ? stat.nlink : 0;
}

function hardLinkRefusal(tally: Tally, path: string, links: number): true {
  return tally.refuse(
    'fs.hard-link',
    path,
    `${path} has ${links} names (hard links): another may lie outside the workspace or under a denied path, so it is neither read nor written; remove the extra link or copy the file`,
  );
}

/** Decides one path act in every directory the command may run in; true when refused. */
export function decidePath(
  kind: 'read' | 'write',
  word: string,
  ctx: Context,
  tally: Tally,
  seen: Set<string>,
): boolean {
  if (word === '' || word === '-' || word === '/dev/null') return false;
  tally.pathActs++;
  for (const cwd of ctx.cwds) {
    const absolute = resolve(cwd, word);
    const chain = kind === 'write' ? danglingChain(absolute) : [absolute];
    for (const path of chain) {
      const links = hardLinked(path);
      if (links > 0) return hardLinkRefusal(tally, path, links);
      const decision = ctx.policy.decide({ kind, path }, ctx.root);
      if (seen.has(`${kind} ${decision.subject}`)) continue;
      seen.add(`${kind} ${decision.subject}`);
      if (tally.add(decision)) return true;
    }
  }
  return false;
}

/**
 * Every entry under a directory a recursive command reads or writes, decided one by one.
 * A symbolic link is followed only when the command follows links (`grep -R`); otherwise
 * the command reads or removes the link itself, not what it leads to.
 */
function walkPaths(
  kind: 'read' | 'write',
  word: string,
  follow: boolean,
  subject: string,
  ctx: Context,
  tally: Tally,
  seen: Set<string>,
): boolean {
  if (decidePath(kind, word, ctx, tally, seen)) return true;
  let count = 0;
  const visited = new Set<string>();
  for (const cwd of ctx.cwds) {
    const stack = [resolve(cwd, word)];
    while (stack.length > 0) {
      const dir = stack.pop() as string;
      let entries: Dirent[];
      try {
        entries = readdirSync(dir, { withFileTypes: true });
      } catch {
        continue;
      }
      for (const entry of entries) {
        if (++count > WALK_LIMIT) {
          return tally.refuse(
            'exec.walk-limit',
            subject,
            `${subject} reaches more than ${WALK_LIMIT} entries under ${word}, more than the check walks; name narrower paths`,
          );
        }
        const path = join(dir, entry.name);
        const link = entry.isSymbolicLink();
        if (link && !follow) continue;
        const links = hardLinked(path);
        if (links > 0) return hardLinkRefusal(tally, path, links);
        // Allowed entries are not listed one by one; what asks or refuses is.
        const decision = ctx.policy.decide({ kind, path }, ctx.root);
        const key = `${kind} ${decision.subject}`;
        if (decision.effect !== 'allow' && !seen.has(key)) {
          seen.add(key);
          if (tally.add(decision)) return true;
        }
        const directory = link ? statSync(path, { throwIfNoEntry: false })?.isDirectory() : entry.isDirectory();
        if (!directory) continue;
        const real = link ? realpathSync.native(path) : path;
        if (visited.has(real)) continue;
        visited.add(real);
        stack.push(real);
      }
    }
  }
  return false;
}

/** The paths a known program reads and writes, decided like a file tool's; true when refused. */
export function checkPaths(use: PathUse, subject: string, ctx: Context, tally: Tally): boolean {
  if (use.hardLinks) {
    return tally.refuse(
      'exec.hard-link',
      subject,
      'it makes a hard link, a second name for a file that no rule on either name can tell apart; copy the file or make a symbolic link',
    );
  }
  const seen = new Set<string>();
  for (const word of use.reads) if (decidePath('read', word, ctx, tally, seen)) return true;
  for (const word of use.writes)
    if (decidePath('write', word.replace(/\/+$/, '') || '/', ctx, tally, seen)) return true;
  for (const [dir, source] of use.into) {
    for (const cwd of ctx.cwds) {
      if (!statSync(resolve(cwd, dir), { throwIfNoEntry: false })?.isDirectory()) continue;
      const name = basename(source.replace(/\/+$/, ''));
      if (name !== '' && decidePath('write', join(resolve(cwd, dir), name), ctx, tally, seen)) return true;
    }
  }
  for (const word of use.walkedReads) {
    if (walkPaths('read', word, use.followLinks, subject, ctx, tally, seen)) return true;
  }
  for (const word of use.walkedWrites) {
    if (walkPaths('write', word, use.followLinks, subject, ctx, tally, seen)) return true;
  }
  return false;
}

export function checkRedirect(redirect: ShellRedirect, ctx: Context, tally: Tally): boolean {
  if (redirect.op === '<<' || redirect.op === '<<<') return false;
  if ((redirect.op === '>&' || redirect.op === '<&') && /^([0-9]+-?|-)$/.test(redirect.target)) return false;
  if (redirect.target === '/dev/null') return false;
  tally.pathActs++;
  const kind = redirect.op === '<' || redirect.op === '<&' ? 'read' : 'write';
  const seen = new Set<string>();
  for (const cwd of ctx.cwds) {
    for (const path of danglingChain(resolve(cwd, redirect.target))) {
      const links = hardLinked(path);
      if (links > 0) return hardLinkRefusal(tally, path, links);
      const decision = ctx.policy.decide({ kind, path }, ctx.root);
      if (seen.has(decision.subject)) continue;
      seen.add(decision.subject);
      if (tally.add(decision)) return true;
    }
  }
  return false;
}

/**
 * A path and, when it is a symlink to nothing yet, where it leads: `>` follows a dangling
 * link and creates its target, which the path as written does not show.
 */
export function danglingChain(path: string): string[] {
  const chain = [path];
  let current = path;
  for (let hop = 0; hop < 8; hop++) {
    let link: string;
    try {
      if (!lstatSync(current).isSymbolicLink() || existsSync(current)) break;
      link = readlinkSync(current);
    } catch {
      break;
    }
    current = resolve(dirname(current), link);
    chain.push(current);
  }
  return chain;
}

/** A `cd`: the directory is read-checked; later stages may run in it or where they were (it may fail). */
export function changeDirectory(args: string[], ctx: Context, tally: Tally): string[] | null {
  tally.pathActs++;
  const operands = args.filter((arg) => !/^-[LPe@]+$/.test(arg));
  const target = operands[0] ?? homedir();
  if (target === '-') {
    tally.refuse('shell.unsupported', 'cd -', 'cd - goes to a directory the check does not track');
    return null;
  }
  if (/[*?[]/.test(target)) {
    tally.refuse('shell.unsupported', `cd ${target}`, `cd to a pattern (${target}) goes where the shell expands it`);
    return null;
  }
  const next = new Set(ctx.cwds);
  for (const cwd of ctx.cwds) {
    const dir = resolve(cwd, target);
    if (tally.add(ctx.policy.decide({ kind: 'read', path: dir }, ctx.root))) return null;
    next.add(dir);
  }
  return [...next];
}
