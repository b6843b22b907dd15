/**
 * A run's request size kept as its transcript grows, instead of measured whole for every
 * request: a step's measuring costs what the step added, not what the run has piled up.
 *
 * Each entry is measured once, when it is first seen at its place, and the total is kept.
 * The transcript's entries are never changed in place, only appended or put in place of
 * others (a rung's replacement, a fold's rebuilt head, a resume's rebuilt transcript), so
 * an entry is told apart by identity: each request compares its entries with the ones
 * last measured, pointer by pointer, measures those that are not the same object, and
 * takes off what they replaced. The total is therefore always what `requestChars`
 * gives for the same request (the suite checks it at every request, see assembly.ts).
 */
import type { ToolDefinition, TranscriptEntry } from '../provider.js';
import { entryChars, toolsJson } from './assembler.js';

export class RunningSize {
  /** The entries measured, by position, and their sizes. */
  readonly #entries: TranscriptEntry[] = [];
  readonly #sizes: number[] = [];
  #total = 0;
  /** The entry first measured at each position put out of place since {@link takeReplaced}. */
  #replaced = new Map<number, TranscriptEntry>();

  /** The characters the request sends: what `requestChars` gives, measuring only the entries new at their place. */
  chars(system: string, tools: readonly ToolDefinition[], transcript: readonly TranscriptEntry[]): number {
    const entries = this.#entries;
    const sizes = this.#sizes;
    const kept = Math.min(transcript.length, entries.length);
    for (let index = 0; index < kept; index++) {
      const entry = transcript[index] as TranscriptEntry;
      const before = entries[index] as TranscriptEntry;
      if (entry === before) continue;
      this.#moved(index, before);
      const size = entryChars(entry);
      this.#total += size - (sizes[index] as number);
      entries[index] = entry;
      sizes[index] = size;
    }
    for (let index = kept; index < entries.length; index++) {
      this.#moved(index, entries[index] as TranscriptEntry);
      this.#total -= sizes[index] as number;
    }
    entries.length = kept;
    sizes.length = kept;
    for (let index = kept; index < transcript.length; index++) {
      const entry = transcript[index] as TranscriptEntry;
      const size = entryChars(entry);
      entries.push(entry);
      sizes.push(size);
      this.#total += size;
    }
    return system.length + toolsJson(tools).length + this.#total;
  }

  /**
   * The entries measured before that have since been put out of place (replaced or
   * dropped), each the first one measured at its position since the last call; the record
   * starts again empty. What the prefix check reads: a request extends the one before it
   * when none of the entries that one sent is here.
   */
  takeReplaced(): ReadonlyMap<number, TranscriptEntry> {
    const replaced = this.#replaced;
    this.#replaced = new Map();
    return replaced;
  }

  #moved(index: number, before: TranscriptEntry): void {
    if (!this.#replaced.has(index)) this.#replaced.set(index, before);
  }
}
