/**
 * Retention: what a store keeps of its sessions, decided by the embedder and never by a
 * model. A session is deleted whole (its turns, the runs they drove, every run those
 * spawned, every row of theirs in every table) in one transaction; old sessions are swept
 * the same way, refusing any that still holds a run that can be resumed; a session is
 * archived by keeping every row and every number and emptying every column that holds
 * words; the file gives its freed pages back to the filesystem when compacted. Nothing
 * expires on its own.
 *
 * Here are the rules, written once: which tables hold a session's rows, which columns
 * hold words and how an archive empties them. sqlite/retention.ts runs them on a file.
 */
/** The tables a run's rows are in, by the column that names the tree (`root_id`) or the run (`run_id`). */
export const BY_ROOT = [
  'ledger',
  'draws',
  'events',
  'mailbox',
  'spawn_queue',
  'model_calls',
  'restore_points',
  'file_changes',
  'questions',
] as const;
export const BY_RUN = ['steps', 'checkpoints', 'intents', 'drafts', 'step_images', 'steers', 'memory_draws'] as const;

/** Every table a session's rows are in, for counting. */
export const SESSION_TABLES = ['sessions', 'turns', 'runs', ...BY_ROOT, ...BY_RUN] as const;

/**
 * Columns that hold words (prompts, replies, tool arguments and output, diffs, messages,
 * file contents) and how an archive empties them: `text` to '', `null` to NULL, `json`
 * to the same JSON with every string in it emptied (its shape, numbers and flags kept,
 * so readers still parse it).
 */
export const WORDS: Record<string, Record<string, 'text' | 'null' | 'json'>> = {
  turns: { user_text: 'text', reply: 'null' },
  runs: { task: 'text', spec: 'json', outcome: 'json', reply: 'null' },
  steps: { completion: 'json', observations: 'json' },
  checkpoints: { state: 'json' },
  events: { data: 'json' },
  mailbox: { body: 'text' },
  intents: { detail: 'text', result: 'null' },
  restore_points: { content: 'null' },
  file_changes: { diff: 'text' },
  questions: { payload: 'json', answer: 'json' },
  drafts: { completion: 'json', partial: 'json' },
  step_images: { content: 'null' },
  steers: { body: 'null' },
};

/** How a row is found again for its update: the primary key of a table without a rowid, else the rowid. */
export const KEYS: Record<string, readonly string[]> = {
  steps: ['run_id', 'seq'],
  restore_points: ['run_id', 'path'],
  file_changes: ['run_id', 'seq', 'ordinal'],
  step_images: ['run_id', 'seq', 'path'],
};

/**
 * Which rows of `table` belong to the trees in `retention_roots`: by `root_id`, or for the
 * tables that have none, by the runs of those trees; a session's turns by its id (`?`).
 */
export function scope(table: string): string {
  if (table === 'turns') return 'session_id = ?';
  // Only a turn's root is steered, and a turn may name its run before the run's row is written.
  if (table === 'steers') return 'run_id IN (SELECT root_id FROM retention_roots)';
  if (table === 'runs' || (BY_ROOT as readonly string[]).includes(table))
    return 'root_id IN (SELECT root_id FROM retention_roots)';
  return 'run_id IN (SELECT run_id FROM runs WHERE root_id IN (SELECT root_id FROM retention_roots))';
}

/** Every string in a JSON value emptied; its keys, numbers, flags and shape kept. */
export function emptied(value: unknown): unknown {
  if (typeof value === 'string') return '';
  if (Array.isArray(value)) return value.map(emptied);
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, emptied(item)]));
  return value;
}
