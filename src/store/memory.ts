/**
 * Durable memory for the embedder: the notes a store keeps for a workspace (or above every
 * workspace, in the global scope), read and corrected from the embedder's thread. What the
 * embedder writes may be pinned, and then no run overwrites or forgets it. Each write is a
 * transaction of its own on the store (SQLite's lock orders it against the store actor of
 * a supervisor using the same file; PostgreSQL's row locks, against every host's). On a
 * PostgreSQL store each read and write answers with a promise.
 */
import { InvalidArgumentError } from '../errors.js';
import {
  DEFAULT_MEMORY_CAP,
  GLOBAL_SCOPE,
  keyProblem,
  MAX_NOTE_CHARS,
  NOTE_KINDS,
  type NoteKind,
  type NoteRecord,
  rankNotes,
  visibleNotes,
  wordsOf,
  workspaceScope,
} from '../runtime/context/memory.js';
import { type Answer, type AnyStore, type Effects, perform, read, write } from './either.js';
import { TraceQueries } from './queries.js';
import type { RememberResult } from './records.js';
import type { Store } from './sqlite/store.js';

const QUERIES = new TraceQueries();

export type { NoteKind, NoteRecord } from '../runtime/context/memory.js';

export interface MemoryOptions {
  /** The workspace whose notes these are (its root); leave it out, with `global: true`, for the scope above every workspace. */
  workspace?: string;
  global?: boolean;
  /** Notes the scope keeps before the one the fewest runs drew on goes (default 64): the same cap the runs' contracts should state. */
  cap?: number;
}

/** One scope of a store's durable memory: answers at once on SQLite, with promises on PostgreSQL. */
export class Memory<S extends AnyStore = Store> {
  readonly #store: S;
  /** `global`, or the workspace root's real path. */
  readonly scope: string;
  readonly cap: number;

  private constructor(store: S, scope: string, cap: number) {
    this.#store = store;
    this.scope = scope;
    this.cap = cap;
  }

  /**
   * The memory of a workspace (`{ workspace: root }`) or the global scope (`{ global: true }`) in `store`.
   *
   * @example
   * const memory = Memory.of(store, { workspace: '/repo' });
   * memory.remember('test-command', 'npm test runs the suite; it needs no network.', { pin: true });
   */
  static of<S extends AnyStore = Store>(store: S, options: MemoryOptions): Memory<S> {
    if (typeof options !== 'object' || options === null)
      throw new InvalidArgumentError('Memory.of takes { workspace: root } or { global: true }.');
    const { workspace, global, cap } = options;
    if ((workspace === undefined) === (global !== true))
      throw new InvalidArgumentError(
        'Memory.of takes one scope: { workspace: root } for a workspace’s notes, or { global: true } for those above every workspace.',
      );
    if (workspace !== undefined && (typeof workspace !== 'string' || workspace === ''))
      throw new InvalidArgumentError(`Memory.of: workspace is the workspace root, got ${JSON.stringify(workspace)}.`);
    if (cap !== undefined && (typeof cap !== 'number' || !Number.isInteger(cap) || cap < 1 || cap > 100_000))
      throw new InvalidArgumentError(`Memory.of: cap is a whole number from 1 to 100000, got ${JSON.stringify(cap)}.`);
    return new Memory(
      store,
      workspace === undefined ? GLOBAL_SCOPE : workspaceScope(workspace),
      cap ?? DEFAULT_MEMORY_CAP,
    );
  }

  #do<T>(body: Effects<T>): Answer<S, T> {
    return perform(this.#store, body);
  }

  /**
   * Keeps a note under `key` (replacing the one there, pinned or not: the embedder is the
   * operator). `pin: true` makes it a correction no run may overwrite or forget; `pin:
   * false` releases it. Says which note went to make room at the cap, and which note this
   * one restates under another key.
   */
  remember(key: string, text: string, options: { kind?: NoteKind; pin?: boolean } = {}): Answer<S, RememberResult> {
    const memory = this;
    return this.#do(
      (function* () {
        checkNote(key, text, options.kind);
        return yield* write('remember', {
          scope: memory.scope,
          key: key.trim(),
          kind: options.kind ?? 'fact',
          text: text.trim(),
          by: null,
          ...(options.pin === undefined ? {} : { pin: options.pin }),
          cap: memory.cap,
          now: Date.now(),
        });
      })(),
    );
  }

  /** Drops the note under `key`; false when there was none. */
  forget(key: string): Answer<S, boolean> {
    const scope = this.scope;
    return this.#do(
      (function* () {
        const { status } = yield* write('forget', { scope, key: String(key).trim(), by: null, now: Date.now() });
        return status === 'forgotten';
      })(),
    );
  }

  /** Pins the note under `key`: no run may overwrite or forget it. False when there is none. */
  pin(key: string): Answer<S, boolean> {
    return this.#do(this.#pin(key, true));
  }

  unpin(key: string): Answer<S, boolean> {
    return this.#do(this.#pin(key, false));
  }

  *#pin(key: string, pinned: boolean): Effects<boolean> {
    const trimmed = String(key).trim();
    return (yield* write('pinNote', { scope: this.scope, key: trimmed, pinned, now: Date.now() })).status === 'done';
  }

  /** This scope's own notes, in the store's order. */
  own(): Answer<S, NoteRecord[]> {
    return this.#do(read(QUERIES.notes([this.scope])));
  }

  /** What a run in this workspace sees: its notes, and the global ones it has none of its own for, in the store's order. */
  notes(): Answer<S, NoteRecord[]> {
    return this.#do(this.#visible());
  }

  *#visible(): Effects<NoteRecord[]> {
    return visibleNotes(
      yield* read(QUERIES.notes(this.scope === GLOBAL_SCOPE ? [GLOBAL_SCOPE] : [GLOBAL_SCOPE, this.scope])),
    );
  }

  /** The notes a run would be given for `query`, best first (no draw is recorded). */
  recall(query: string, limit = 20): Answer<S, NoteRecord[]> {
    const memory = this;
    return this.#do(
      (function* () {
        return rankNotes(yield* memory.#visible(), wordsOf(query)).slice(0, limit);
      })(),
    );
  }

  /** The notes a run drew on, in this store: carried in its requests (`block`) or recalled (`recall`). */
  drawnBy(runId: string): Answer<S, { scope: string; key: string; how: 'block' | 'recall' }[]> {
    return this.#do(read(QUERIES.noteDraws(runId)));
  }
}

function checkNote(key: unknown, text: unknown, kind: unknown): void {
  const problem = keyProblem(typeof key === 'string' ? key.trim() : key);
  if (problem) throw new InvalidArgumentError(`Memory.remember: ${problem}.`);
  if (typeof text !== 'string' || text.trim() === '' || text.length > MAX_NOTE_CHARS)
    throw new InvalidArgumentError(
      `Memory.remember: the note is text of 1 to ${MAX_NOTE_CHARS} characters, got ${typeof text === 'string' ? `${text.length} characters` : JSON.stringify(text)}.`,
    );
  if (kind !== undefined && !NOTE_KINDS.includes(kind as NoteKind))
    throw new InvalidArgumentError(`Memory.remember: kind is "fact" or "decision", got ${JSON.stringify(kind)}.`);
}
