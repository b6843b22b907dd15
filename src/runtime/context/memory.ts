/**
 * Durable memory's rules, apart from where it is kept: a note is a fact or a decision under
 * a key, in the global scope or a workspace's; a workspace's note overrides a global one
 * under the same key. A request carries the notes as a block in the system prompt, printed
 * in the store's order (so the same notes assemble the same bytes run to run). When they
 * outgrow the block's share, the notes kept are those whose words the run is about (its
 * goal, the paths its tools have named), then those the most separate runs have drawn on.
 * A note restates another when their words are nearly the same set. Every function here
 * but {@link workspaceScope} is pure, and linear in the notes. Agent threads and the store
 * load this module: no dependencies.
 */

import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';

/**
 * The scope a workspace's notes are kept under: its root's real path, so every spelling of
 * one directory (relative, through a symbolic link, with a trailing slash) is one scope.
 */
export function workspaceScope(root: string): string {
  const absolute = resolve(root);
  try {
    return realpathSync.native(absolute);
  } catch {
    return absolute;
  }
}

/** A note as the store holds it. */
export interface NoteRecord {
  /** Its place in the store's order (an overwrite keeps it). */
  id: number;
  /** `global`, or the workspace root it belongs to. */
  scope: string;
  key: string;
  kind: NoteKind;
  text: string;
  /** A correction the operator made: no run may overwrite or forget it. */
  pinned: boolean;
  /** How many separate runs have drawn on it (carried it in their block, or recalled it). */
  runs: number;
  /** The run that wrote it, or null for the embedder. */
  writtenBy: string | null;
  createdAt: number;
  updatedAt: number;
}

export type NoteKind = 'fact' | 'decision';
export const NOTE_KINDS: readonly NoteKind[] = ['fact', 'decision'];

/** The scope above every workspace. */
export const GLOBAL_SCOPE = 'global';
/** Notes a workspace (or the global scope) holds by default before the least drawn-on goes. */
export const DEFAULT_MEMORY_CAP = 64;
/** The share of a request's limit the memory block may take by default. */
export const DEFAULT_MEMORY_SHARE = 0.1;
/** The longest a key and a note may be, in characters. */
export const MAX_KEY_CHARS = 120;
export const MAX_NOTE_CHARS = 2_000;
/** What a key may hold: letters, digits and `_ . : / -`, so it cannot pass for anything else in the block. */
const KEY = /^[\p{L}\p{N}_.:/-]+$/u;

/** Why `key` is not a key, or null when it is one. */
export function keyProblem(key: unknown): string | null {
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY_CHARS)
    return `a key is 1 to ${MAX_KEY_CHARS} characters, got ${typeof key === 'string' ? `${key.length}` : JSON.stringify(key)}`;
  if (!KEY.test(key))
    return `a key holds letters, digits and _ . : / - only (such as "test-command"), got ${JSON.stringify(key.slice(0, 60))}`;
  return null;
}

/** Word sets this alike (Jaccard) are taken for one note restated. */
const RESTATES = 0.8;

/** Words too common to say what a note is about. */
const STOP = new Set(
  'the and for with that this from are was were not you your our but all any can has have had its into out use used uses using when then than there their them they what which who will would should could must may one two also only just like some such each more most other over under about after before been being here where while how why yes'.split(
    ' ',
  ),
);

/** The words a text is about: lower-cased runs of letters and digits of three or more, common words left out. */
export function wordsOf(text: string): Set<string> {
  const words = new Set<string>();
  for (const word of text.toLowerCase().split(/[^\p{L}\p{N}_]+/u))
    if (word.length >= 3 && !STOP.has(word)) words.add(word);
  return words;
}

/** The words a note is about: its key's and its text's. */
function noteWords(note: Pick<NoteRecord, 'key' | 'text'>): Set<string> {
  return wordsOf(`${note.key.replace(/[-_.:/]/g, ' ')} ${note.text}`);
}

/**
 * The note `text` restates, under another key than `key`, or null: one whose words are
 * nearly the same set (four fifths in common, or the same words in another order).
 */
export function restated(text: string, key: string, notes: readonly Pick<NoteRecord, 'key' | 'text'>[]) {
  const words = wordsOf(text);
  if (words.size === 0) return null;
  for (const note of notes) {
    if (note.key === key) continue;
    const other = wordsOf(note.text);
    if (other.size === 0) continue;
    let shared = 0;
    for (const word of words) if (other.has(word)) shared++;
    if (shared / (words.size + other.size - shared) >= RESTATES) return note;
  }
  return null;
}

/** The notes a workspace sees, in the store's order: its own, and the global ones it has no note of its own for. */
export function visibleNotes(notes: readonly NoteRecord[]): NoteRecord[] {
  const own = new Set(notes.filter((note) => note.scope !== GLOBAL_SCOPE).map((note) => note.key));
  return notes.filter((note) => note.scope !== GLOBAL_SCOPE || !own.has(note.key)).sort((a, b) => a.id - b.id);
}

/** What a run is about, for ranking notes: its goal's words and those of every path its tools have named. */
export function runTerms(goal: string, paths: Iterable<string>): Set<string> {
  const terms = wordsOf(goal);
  for (const path of paths) for (const word of wordsOf(path.replace(/[-_./\\]/g, ' '))) terms.add(word);
  return terms;
}

/** The line a note is printed as, in the block and in a recall. */
export function noteLine(note: Pick<NoteRecord, 'key' | 'kind' | 'text' | 'pinned' | 'scope'>): string {
  const marks = [note.kind, ...(note.scope === GLOBAL_SCOPE ? ['global'] : []), ...(note.pinned ? ['pinned'] : [])];
  // One line a note, whatever its text holds: no line break, separator or control character
  // survives to start another line (the key can hold none: see keyProblem).
  return `- ${note.key} (${marks.join(', ')}): ${note.text.replace(/[\s\p{Cc}\p{Cf}\p{Zl}\p{Zp}]+/gu, ' ')}`;
}

const BLOCK_HEAD =
  'Memory kept from earlier runs in this workspace (notes as key (kind): text; recall finds more, remember keeps a note, forget drops a wrong one):';

/**
 * Ranks notes for a run: by how many of the run's terms each is about, then by how many
 * runs have drawn on it, then the store's order. Linear in the notes (and their words).
 */
export function rankNotes(notes: readonly NoteRecord[], terms: ReadonlySet<string>): NoteRecord[] {
  const scored = notes.map((note) => {
    let score = 0;
    for (const word of noteWords(note)) if (terms.has(word)) score++;
    return { note, score };
  });
  scored.sort((a, b) => b.score - a.score || b.note.runs - a.note.runs || a.note.id - b.note.id);
  return scored.map((item) => item.note);
}

/**
 * The memory block for `notes` (already the ones the workspace sees) in at most `most`
 * characters: all of them when they fit, else the best ranked that fit; either way printed
 * in the store's order. Empty when there are no notes.
 */
export function memoryBlock(
  notes: readonly NoteRecord[],
  terms: ReadonlySet<string>,
  most: number,
): { text: string; kept: NoteRecord[] } {
  if (notes.length === 0) return { text: '', kept: [] };
  const size = (note: NoteRecord) => noteLine(note).length + 1;
  let total = BLOCK_HEAD.length;
  for (const note of notes) total += size(note);
  let kept: NoteRecord[] = [...notes];
  if (total > most) {
    kept = [];
    let room = most - BLOCK_HEAD.length;
    for (const note of rankNotes(notes, terms)) {
      const chars = size(note);
      if (chars > room) continue;
      kept.push(note);
      room -= chars;
    }
    kept.sort((a, b) => a.id - b.id);
  }
  if (kept.length === 0) return { text: '', kept };
  return { text: [BLOCK_HEAD, ...kept.map(noteLine)].join('\n'), kept };
}
