/**
 * Which lock a writing transaction takes on PostgreSQL, as narrow as the rule it protects.
 *
 * The writes of a tree's runs (a step's commit, a spawn, an admission, a run's end, its
 * lease) decide on rows of that tree only: its runs' generations, its one ledger, its
 * admission counts, its mailbox. Each takes the tree's lock, and the store's lock shared;
 * writes to different trees go side by side, from one host or several. Within a tree
 * they queue, as they did store-wide: two writers never take a tree's rows in opposite
 * orders, a count read before an insert holds, and the ids handed out to a tree's events
 * rise in the order they commit, so a tail of one tree misses none (see
 * supervisor/tree-tail.ts). A write naming several trees (a takeover's claim, a group
 * commit's batch) takes their locks in one statement, in a fixed order, so two such
 * writes cannot wait on each other in a circle. A host's lease renewal updates each
 * lease's row by its key and takes no tree's lock.
 *
 * Every other write takes the store's lock alone, exclusive: a session's next turn, a
 * scope's notes at their cap, an answer found by its question's id, a new tree, retention.
 * They are rare, and wait for the tree writes in flight and hold the next ones back. So
 * does a reader of every tree's events, which reads with no tree write in flight (see
 * {@link SETTLED_READ_LOCK}).
 */
import type { StoreRequestBody } from '../port.js';
import type { Query } from '../sql.js';

/** The trees a write decides on, named by runs of theirs or by their roots; null: the whole store. */
export interface LockScope {
  runs: readonly string[];
  roots: readonly string[];
}

/** The store's own lock: shared by tree writes, exclusive for the rest. Its key is the one every earlier release took. */
const STORE_LOCK = '7310, 0';
/** The class of a tree's lock; the key within it is the hash of the tree's root id. */
const TREE_LOCK_CLASS = 7311;

/** The strings `value` holds, or null when it is not a list of them (the rule refuses such input itself). */
function names(value: unknown): string[] | null {
  return Array.isArray(value) && value.every((item) => typeof item === 'string') ? value : null;
}

/** A write on a run of a tree, the run named by `field`; null (the whole store) for input not so shaped. */
const byRun =
  (field = 'runId') =>
  (input: unknown): LockScope | null => {
    const runs = names([(input as Record<string, unknown> | null)?.[field]]);
    return runs && { runs, roots: [] };
  };

/**
 * The writes that decide on one tree's rows only, and how each names its trees. An
 * operation not listed takes the whole store: a new operation is safe until it is shown
 * to stay inside its tree and is listed here.
 */
const TREE_WRITES: Record<string, (input: unknown) => LockScope | null> = {
  acquireLease: byRun(),
  releaseLease: byRun(),
  park: byRun(),
  spawn: byRun(),
  commitStep: byRun(),
  endReply: byRun(),
  recordEvents: byRun(),
  endRun: byRun(),
  recordRestorePoint: byRun(),
  clearStepImages: byRun(),
  beginIntent: byRun(),
  finishIntent: byRun(),
  pause: byRun(),
  resumePaused: byRun(),
  takeSteers: byRun(),
  dropBacklog: byRun(),
  admit: byRun('childId'),
  cancelQueued: (input) => {
    const roots = names([(input as Record<string, unknown> | null)?.rootId]);
    return roots && { runs: [], roots };
  },
  claim: (input) => {
    const roots = names((input as Record<string, unknown> | null)?.roots);
    return roots && { runs: [], roots };
  },
  // Each lease's row updated by its key, fenced by its generation, nothing read across rows
  // and no event written: the store's lock shared, no tree's.
  renewLeases: () => ({ runs: [], roots: [] }),
};

/** The trees `writes` decide on together (one transaction), or null when any of them takes the whole store. */
export function scopeOf(writes: readonly StoreRequestBody[]): LockScope | null {
  const runs = new Set<string>();
  const roots = new Set<string>();
  for (const write of writes) {
    const scope = TREE_WRITES[write.op]?.(write.input) ?? null;
    if (scope === null) return null;
    for (const run of scope.runs) runs.add(run);
    for (const root of scope.roots) roots.add(root);
  }
  // Each tree's lock takes an entry of the server's shared lock table for the transaction:
  // past a few dozen, one store-wide lock costs the server less (and cannot run it out).
  if (runs.size + roots.size > MAX_TREE_LOCKS) return null;
  return { runs: [...runs], roots: [...roots] };
}

/** The most trees' locks one transaction takes; a write naming more takes the store's lock whole. */
export const MAX_TREE_LOCKS = 32;

/**
 * The statements that take a transaction's locks, held to its end. A tree's key is read
 * off its root id; a run's root id never changes, so it is read without a lock. The keys
 * are taken in ascending order, one statement for all of them. Each run's row is found by
 * its key, one lookup a run: the statement is prepared, and a plan made for `run_id =
 * ANY(...)` while the table was small reads every run of the store on each write (half a
 * millisecond a write once a tree holds a thousand runs). A run not found gives a null
 * key, which takes no lock (the lock function returns null for it).
 */
export function lockStatements(scope: LockScope | null): Query[] {
  if (scope === null) return [{ op: 'run', text: `SELECT pg_advisory_xact_lock(${STORE_LOCK})`, params: [] }];
  return [
    { op: 'run', text: `SELECT pg_advisory_xact_lock_shared(${STORE_LOCK})`, params: [] },
    {
      op: 'run',
      text: `SELECT pg_advisory_xact_lock(${TREE_LOCK_CLASS}, k) FROM (
        SELECT hashtext((SELECT root_id FROM runs WHERE run_id = r)) AS k FROM unnest(?::text[]) AS r
        UNION SELECT hashtext(r) FROM unnest(?::text[]) AS r ORDER BY 1) AS keys`,
      params: [scope.runs, scope.roots],
    },
  ];
}

/**
 * What a settled read (../sql.ts) holds while it reads: the store's lock exclusive, so it
 * reads once no tree write is in flight, and no event with a smaller id than those it
 * reads can appear after it.
 */
export const SETTLED_READ_LOCK = `SELECT pg_advisory_xact_lock(${STORE_LOCK})`;
