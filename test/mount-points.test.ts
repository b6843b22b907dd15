/**
 * The registry of mount points the containment makes (src/runtime/exec/containment/mount-points.ts):
 * an entry whose mount point is gone with the workspace that held it is dropped the next
 * time a run removes its own, so the temporary directory does not keep it for good.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeMountPoints, removeMountPoints } from '../dist/runtime/exec/containment/mount-points.js';

const made: string[] = [];
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function workspace(): string {
  const dir = mkdtempSync(join(tmpdir(), 'io-harness-mounts-'));
  made.push(dir);
  return dir;
}

/** Where the registry notes a mount point (the module's own naming, by the path's hash). */
function entryOf(path: string): string {
  return join(tmpdir(), 'io-harness-mount-points', createHash('sha256').update(path).digest('hex').slice(0, 32));
}

describe('the mount points registry', () => {
  it('drops the entry of a mount point whose workspace is gone, and keeps the entries of those still there', () => {
    const gone = workspace();
    const kept = workspace();
    const mine = workspace();
    const [goneGit] = makeMountPoints({ bind: [], empty: [join(gone, '.git')] });
    const [keptGit] = makeMountPoints({ bind: [], empty: [join(kept, '.git')] });
    const ours = makeMountPoints({ bind: [], empty: [join(mine, '.git')] });
    for (const path of [goneGit, keptGit, ...ours]) expect(existsSync(entryOf(path as string))).toBe(true);
    // The workspace is removed with its mount point in it, its run never having closed.
    rmSync(gone, { recursive: true, force: true });
    removeMountPoints(ours);
    expect(existsSync(entryOf(goneGit as string))).toBe(false);
    expect(existsSync(entryOf(ours[0] as string))).toBe(false);
    // Another run's, whose mount point is there, stays for that run (or the last one) to remove.
    expect(existsSync(entryOf(keptGit as string))).toBe(true);
    removeMountPoints([keptGit as string]);
    expect(existsSync(entryOf(keptGit as string))).toBe(false);
  });
});
