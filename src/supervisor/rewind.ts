/**
 * Undo. A run's first touch of a file stores what it held (a restore point, committed
 * before the file changed), and every write records its whole-file diff with the step.
 * From those, a file, a step or a whole run can be put back — also after a crash and
 * a resume — while the steps, events and ledger stay exactly as they were: the spend
 * happened, and an undo that erased it would make the trace lie.
 */
import { existsSync, realpathSync, statSync } from 'node:fs';
import { isAbsolute, relative, resolve, sep } from 'node:path';
import { ErrorCode, HarnessError, InvalidArgumentError } from '../errors.js';
import { isTerminal } from '../runtime/events.js';
import { escapes } from '../runtime/policy/policy.js';
import {
  type Looked,
  lookBeneath,
  protectedName,
  protectedRule,
  type Refused,
  removeBeneath,
  replaceBeneath,
} from '../runtime/workspace/beneath.js';
import { reverseApply } from '../runtime/workspace/diffs.js';
import { type Answer, type AnyStore, type Effects, perform, read, whereIs, write } from '../store/either.js';
import { processLiveness } from '../store/liveness.js';
import { TraceQueries } from '../store/queries.js';
import type { RestorePoint, RunRecord } from '../store/records.js';
import { writeTogether } from '../store/sqlite/local.js';
import type { TraceReader } from '../store/sqlite/reader.js';

const QUERIES = new TraceQueries();

export interface RewoundFile {
  path: string;
  /** `restored`: written back; `deleted`: the run created it; `unchanged`: already as it was. */
  action: 'restored' | 'deleted' | 'unchanged';
}

function workspaceRoot(workspace: string): string {
  if (
    typeof workspace !== 'string' ||
    workspace === '' ||
    !existsSync(workspace) ||
    !statSync(workspace).isDirectory()
  ) {
    throw new HarnessError(
      ErrorCode.WorkspaceNotFound,
      `the workspace ${JSON.stringify(workspace)} is not an existing directory; pass the root the run worked in.`,
      { details: { workspace } },
    );
  }
  return realpathSync(workspace);
}

function relativePath(root: string, path: string): string {
  const absolute = isAbsolute(path) ? path : resolve(root, path);
  const inside = relative(root, absolute);
  if (inside === '' || escapes(inside)) {
    throw new InvalidArgumentError(`${path} is not a file inside the workspace ${root}.`);
  }
  return inside.split(sep).join('/');
}

/**
 * Refuses to change files under a run that a live process may still be driving: only a
 * dead owner on this host lets it go ahead. A lease on another host that has lapsed still
 * counts (its host may only be slow, and would renew it and write on over the rewind):
 * resume the run elsewhere first, or end it.
 */
function* assertNotLive(where: string, runId: string): Effects<RunRecord> {
  const run = yield* read(QUERIES.run(runId));
  if (!run) {
    throw new HarnessError(ErrorCode.RunNotFound, `no run ${runId} in ${where}; list runs with store.runs().`, {
      details: { runId },
    });
  }
  if (!isTerminal(run.status) && run.lease.owner !== null) {
    if (processLiveness(run.lease.pid, run.lease.host) !== 'dead')
      throw new HarnessError(
        ErrorCode.RunStillLive,
        `run ${runId} is ${run.status} and held by ${run.lease.owner} (pid ${run.lease.pid ?? 'unknown'}${run.lease.host ? ` on ${run.lease.host}` : ''}); rewind it once that process has stopped or the run has ended.`,
        { details: { runId, status: run.status } },
      );
  }
  return run;
}

/** The restore points were taken in one workspace: rewinding another would write into the wrong tree. */
function assertSameWorkspace(root: string, recorded: string): void {
  if (recorded !== root) {
    throw new InvalidArgumentError(
      `the run worked in ${recorded}, not ${root}; pass the workspace the run worked in (nothing was changed).`,
    );
  }
}

/**
 * Puts one file back by its path, walked beneath the root with no link followed (see
 * ./beneath.ts): a link put in the way since the run, a protected path (which no run
 * wrote: the store says otherwise) or a directory moved mid-act refuses the rewind
 * (REWIND_CONFLICT, `details.rule`), never carrying it into `.git` or out of the workspace.
 */
function putBack(root: string, path: string, content: Buffer | null): RewoundFile['action'] {
  const guarded = protectedName(path);
  if (guarded !== null)
    throw new HarnessError(
      ErrorCode.RewindConflict,
      `${path} is a protected path no run may change, so no rewind writes it (the store says otherwise: it was not written by a run of this runtime); nothing was changed.`,
      { details: { path, rule: protectedRule(guarded) } },
    );
  if (content === null) {
    const removed = removeBeneath(root, path);
    if (!removed.ok) throw refusedRewind(path, removed);
    return removed.removed ? 'deleted' : 'unchanged';
  }
  if (currentBytes(root, path)?.equals(content)) return 'unchanged';
  // Replaced by name, not written through: a hard link planted since the run keeps its content.
  const replaced = replaceBeneath(root, path, content);
  if (!replaced.ok) throw refusedRewind(path, replaced);
  return 'restored';
}

/** What `path` holds now, read with no link followed; null when there is no file. */
function currentBytes(root: string, path: string): Buffer | null {
  const looked: Looked = lookBeneath(root, path, Number.POSITIVE_INFINITY, true);
  if (!looked.ok) throw refusedRewind(path, looked);
  if (looked.kind === 'file') return looked.bytes;
  if (looked.kind === 'missing' || looked.kind === 'blocked') return null;
  throw new HarnessError(
    ErrorCode.RewindConflict,
    `${path} is now ${looked.kind === 'directory' ? 'a directory' : 'not a regular file'}, so it cannot be put back; nothing was changed there. Move it aside and rewind again.`,
    { details: { path } },
  );
}

function refusedRewind(path: string, refused: Refused): HarnessError {
  return new HarnessError(ErrorCode.RewindConflict, `${path} was not put back: ${refused.reason}`, {
    details: { path, rule: refused.rule },
  });
}

/**
 * Puts one file back as it was before run `runId` first touched it, deleting it when
 * the run created it. Says plainly (NO_RESTORE_POINT) when the run never touched it.
 * On a PostgreSQL store, the answer is a promise.
 *
 * @example
 * rewind(repoDir, store, result.runId, 'src/app.js');
 */
export function rewind<S extends AnyStore | TraceReader>(
  workspace: string,
  store: S,
  runId: string,
  path: string,
): Answer<S, RewoundFile> {
  return perform(store, rewindFile(workspace, whereIs(store), runId, path));
}

function* rewindFile(workspace: string, where: string, runId: string, path: string): Effects<RewoundFile> {
  const root = workspaceRoot(workspace);
  const relativeTo = relativePath(root, path);
  yield* assertNotLive(where, runId);
  const point = yield* read(QUERIES.restorePoint(runId, relativeTo));
  if (point) assertSameWorkspace(root, point.workspace);
  if (!point) {
    throw new HarnessError(
      ErrorCode.NoRestorePoint,
      `run ${runId} has no restore point for ${relativeTo}: it never wrote that file, so there is nothing to put back.`,
      { details: { runId, path: relativeTo } },
    );
  }
  return { path: relativeTo, action: putBack(root, relativeTo, point.existed ? point.content : null) };
}

/**
 * Rewinds a whole run: every file it touched goes back to its restore point, and the
 * children it left waiting (reserved or queued, never started) are cancelled. Steps,
 * events and the ledger are not touched. With a supervisor running in this process,
 * `supervisor.rewindRun(workspace, runId)` does the same through its store actor, and its
 * observers see the cancelled children end. On a PostgreSQL store, the answer is a promise.
 */
export function rewindRun<S extends AnyStore | TraceReader>(
  workspace: string,
  store: S,
  runId: string,
): Answer<S, { files: RewoundFile[]; cancelled: string[] }> {
  const body = function* (): Effects<{ files: RewoundFile[]; cancelled: string[] }> {
    const { files, subtree } = yield* rewindRunFiles(workspace, whereIs(store), runId);
    const cancelled: string[] = [];
    for (const member of subtree)
      cancelled.push(...(yield* write('dropBacklog', { runId: member, now: Date.now() })).cancelled);
    return { files, cancelled };
  };
  // A reader that is not a Store handle writes the backlog on a connection of its own, one short transaction each.
  const own =
    (store as { kind?: unknown }).kind === undefined
      ? (op: 'dropBacklog', input: unknown) =>
          writeTogether((store as TraceReader).path, (write) => write(op, input as never))
      : undefined;
  return perform(store, body(), own as never);
}

/**
 * The file half of {@link rewindRun}: puts back every file the run and the agents it
 * started touched, and says whose backlog is to be dropped (the run and those agents).
 * Refuses, changing nothing, while any of them is held by a live owner.
 */
export function* rewindRunFiles(
  workspace: string,
  where: string,
  runId: string,
): Effects<{ files: RewoundFile[]; subtree: string[] }> {
  const root = workspaceRoot(workspace);
  const run = yield* read(QUERIES.run(runId));
  if (!run) {
    throw new HarnessError(ErrorCode.RunNotFound, `no run ${runId} in ${where}; list runs with store.runs().`, {
      details: { runId },
    });
  }
  // The run and every agent it started: children work in the same workspace.
  const subtree = (yield* read(QUERIES.runs(run.rootId))).filter(
    (candidate) => candidate.runId === runId || candidate.ancestry.includes(runId),
  );
  for (const member of subtree) yield* assertNotLive(where, member.runId);
  // One restore point per file: the earliest any run of the subtree took.
  const earliest = new Map<string, RestorePoint>();
  for (const member of subtree) {
    for (const point of yield* read(QUERIES.restorePoints(member.runId))) {
      assertSameWorkspace(root, point.workspace);
      const seen = earliest.get(point.path);
      if (!seen || point.at < seen.at) earliest.set(point.path, point);
    }
  }
  const files = [...earliest.values()]
    .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
    .map((point) => ({ path: point.path, action: putBack(root, point.path, point.existed ? point.content : null) }));
  return { files, subtree: subtree.map((member) => member.runId) };
}

/**
 * Reverse-applies the changes one step made, newest first, as a unit: when a later
 * change no longer lets a hunk fit, nothing is written and the error names the file
 * and the hunk (REWIND_CONFLICT). Walk back from the newest step to undo several. On a
 * PostgreSQL store, the answer is a promise.
 */
export function rewindStep<S extends AnyStore | TraceReader>(
  workspace: string,
  store: S,
  runId: string,
  seq: number,
): Answer<S, RewoundFile[]> {
  return perform(store, reverseStep(workspace, whereIs(store), runId, seq));
}

function* reverseStep(workspace: string, where: string, runId: string, seq: number): Effects<RewoundFile[]> {
  const root = workspaceRoot(workspace);
  const lastSeq = (yield* assertNotLive(where, runId)).lastSeq;
  if (!Number.isInteger(seq) || seq < 1 || seq > lastSeq) {
    throw new InvalidArgumentError(`run ${runId} has no step ${seq}; its steps are 1 to ${lastSeq}.`);
  }
  const changes = yield* read(QUERIES.fileChanges(runId, seq));
  if (changes.length === 0) {
    throw new HarnessError(
      ErrorCode.NoRestorePoint,
      `step ${seq} of run ${runId} changed no files; there is nothing to reverse.`,
      { details: { runId, seq } },
    );
  }
  // Work out every file's content first, in memory; write only when all of it fits.
  const state = new Map<string, string | null>();
  for (const change of [...changes].reverse()) {
    const current = state.has(change.path)
      ? (state.get(change.path) as string | null)
      : (currentBytes(root, change.path)?.toString('utf8') ?? null);
    const reversed = reverseApply(change.diff, current);
    if (!reversed.ok) {
      throw new HarnessError(
        ErrorCode.RewindConflict,
        `step ${seq} of run ${runId} cannot be reversed: in ${change.path}, hunk ${reversed.hunk}${reversed.header ? ` (${reversed.header})` : ''} does not fit — ${reversed.reason}. Nothing was changed; rewind the later steps first.`,
        { details: { runId, seq, path: change.path, hunk: reversed.hunk, header: reversed.header } },
      );
    }
    state.set(change.path, reversed.content);
  }
  const out: RewoundFile[] = [];
  for (const [path, content] of state) {
    out.push({ path, action: putBack(root, path, content === null ? null : Buffer.from(content, 'utf8')) });
  }
  return out;
}
