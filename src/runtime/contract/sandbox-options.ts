/**
 * The options of `withWritableRoots` and `withSandbox`, checked: every path a directory
 * that exists, every key known, every cap a whole number (or null to lift a disk cap), or
 * an {@link InvalidArgumentError} naming the option and what it takes.
 */
import { existsSync, realpathSync, statSync } from 'node:fs';
import { InvalidArgumentError } from '../../errors.js';
import { DEFAULT_DISK_CAPS, type SandboxCaps, type SandboxData } from '../exec/containment/boundary.js';
import { RUNGS, type RungName } from '../exec/containment/rungs.js';

/** withWritableRoots' paths checked: absolute paths of directories that exist, never the root. */
export function checkWritableRoots(paths: readonly string[]): void {
  if (!Array.isArray(paths)) {
    throw new InvalidArgumentError(
      `withWritableRoots takes an array of absolute directory paths, like ['/srv/build']; got ${JSON.stringify(paths)}.`,
    );
  }
  for (const path of paths) {
    if (typeof path !== 'string' || !path.startsWith('/')) {
      throw new InvalidArgumentError(
        `withWritableRoots: ${JSON.stringify(path)} is not an absolute path; name each directory in full, like '/srv/build'.`,
      );
    }
    if (!existsSync(path) || !statSync(path).isDirectory()) {
      throw new InvalidArgumentError(`withWritableRoots: ${path} is not a directory; make it first, or leave it out.`);
    }
    if (path === '/' || realpathSync(path) === '/') {
      throw new InvalidArgumentError('withWritableRoots: / would grant every write; use withFullAccess() to say that.');
    }
  }
}

const CAP_NAMES = [
  'memoryBytes',
  'cpuSecs',
  'processes',
  'fileBytes',
  'writtenBytes',
  'outputBytes',
  'wallSecs',
] as const;

/** withSandbox's options checked against the contract's `current` sandbox: the rung, caps and shared caches it sets. */
export function checkSandboxOptions(
  options: { rung?: RungName; caps?: SandboxCaps; sharedCaches?: boolean },
  current: SandboxData,
): { rung: RungName | null; caps: SandboxCaps; sharedCaches: boolean } {
  if (options === null || typeof options !== 'object') {
    throw new InvalidArgumentError('withSandbox takes { rung?, caps?, sharedCaches? }.');
  }
  const unknown = Object.keys(options).filter((key) => !['rung', 'caps', 'sharedCaches'].includes(key));
  if (unknown.length > 0) {
    throw new InvalidArgumentError(
      `withSandbox: ${unknown.join(', ')} is not an option; it takes rung, caps and sharedCaches.`,
    );
  }
  if (options.sharedCaches !== undefined && typeof options.sharedCaches !== 'boolean') {
    throw new InvalidArgumentError(
      `withSandbox: sharedCaches must be true or false, got ${JSON.stringify(options.sharedCaches)}.`,
    );
  }
  const sharedCaches = options.sharedCaches ?? current.sharedCaches ?? false;
  const rung = options.rung ?? null;
  if (rung !== null && !RUNGS.includes(rung)) {
    throw new InvalidArgumentError(
      `withSandbox: rung ${JSON.stringify(rung)} is not a rung; the rungs are ${RUNGS.join(', ')}.`,
    );
  }
  const caps: SandboxCaps = {};
  // The disk's caps are on unless lifted, in so many words: null.
  const liftable: readonly string[] = Object.keys(DEFAULT_DISK_CAPS);
  for (const [name, value] of Object.entries(options.caps ?? {})) {
    if (!CAP_NAMES.includes(name as (typeof CAP_NAMES)[number])) {
      throw new InvalidArgumentError(`withSandbox: caps.${name} is not a cap; the caps are ${CAP_NAMES.join(', ')}.`);
    }
    if (value === undefined) continue;
    if (value === null && liftable.includes(name)) {
      (caps as Record<string, null>)[name] = null;
      continue;
    }
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
      throw new InvalidArgumentError(
        `withSandbox: caps.${name} must be a whole number above 0${liftable.includes(name) ? ', or null to lift it' : ''}, got ${JSON.stringify(value)}.`,
      );
    }
    caps[name as (typeof CAP_NAMES)[number]] = value;
  }
  return { rung, caps, sharedCaches };
}
