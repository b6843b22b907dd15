/**
 * The rungs below a fold: ways to make a request fit its share with no model call. Each is
 * off unless the contract turns it on (`withContext({ collapse, snip, microcompact, reduce })`)
 * and they run in this order, each only while the request is still over:
 *
 * - collapse: a tool result that alone would take more than its part of a request is sent
 *   shortened (its tool and target named, its head kept) the first time it is sent; the
 *   trace keeps it whole, so a run without collapse assembles it whole again;
 * - reduce: the memory block is cut to a smaller share (its least relevant notes go);
 * - snip: old lookups are dropped by kind, `find` and `grep` before `read_file`, each
 *   replaced by a line that says what it was;
 * - microcompact: an old step's run of results is replaced by one counted line;
 * - fold: the model's notes on the old steps (see ./assembler.ts), the last rung.
 *
 * Reduce, snip and microcompact rewrite entries already sent, so like a fold they run only
 * when the request would not fit, and their replacements are stored as a step of their own:
 * a resume applies them to the same entries and assembles the same bytes. Every function
 * here is pure. Agent threads load this module: no dependencies.
 */
import type { TranscriptEntry } from '../provider.js';
import { entryChars } from './assembler.js';

/** The rungs below a fold, in the order they run. */
export const RUNGS = ['collapse', 'reduce', 'snip', 'microcompact'] as const;
export type Rung = (typeof RUNGS)[number];

/** What a contract turns on of the rungs (each off by default). */
export interface RungOptions {
  /** Results over this share of a request's limit are sent shortened (true: {@link DEFAULT_COLLAPSE_OVER}). */
  collapse?: boolean | { over: number };
  reduce?: boolean;
  snip?: boolean;
  microcompact?: boolean;
}

/** The share of a request's limit one result may take before collapse shortens it. */
export const DEFAULT_COLLAPSE_OVER = 0.25;

/** The share of its limit the mechanical rungs bring a request down to, so they do not run again at the next step. */
export const RUNG_TARGET = 0.6;

/** Lookups snip drops, cheapest to lose first: a search is easily run again, a read is more often load-bearing. */
const SNIP_RANK: Readonly<Record<string, number>> = { find: 0, grep: 0, read_file: 1, read_skill: 1 };

/** A result whose content a rung replaced: the observation at `index` of step `seq`. */
export interface Replacement {
  seq: number;
  index: number;
  content: string;
}

/** One step of the transcript's head (older than the steps a rung keeps whole), by position. */
export interface HeadStep {
  seq: number;
  /** Where the step's assistant turn is in the transcript. */
  at: number;
  /** Where its next step (or the transcript's end) begins. */
  end: number;
}

/** What a call acted on, as a rung's line names it: its path, pattern, command or query. */
export function callTarget(args: Record<string, unknown> | undefined): string {
  if (!args) return '';
  for (const key of ['path', 'pattern', 'command', 'query', 'url', 'name', 'key']) {
    const value = args[key];
    if (typeof value === 'string' && value !== '') return value.length > 120 ? `${value.slice(0, 120)}…` : value;
    if (Array.isArray(value) && value.every((part) => typeof part === 'string')) return value.join(' ').slice(0, 120);
  }
  return '';
}

/** A collapsed result: its tool and target, how long it was, and its first `shown` characters. */
export function collapsedContent(name: string, target: string, content: string, shown: number): string {
  const what = target ? `${name} ${target}` : name;
  return `[collapsed to fit the context window: ${what} returned ${content.length} characters; the first ${shown} follow. Call it again, narrower (a line range, a tighter pattern), for the rest.]\n${content.slice(0, shown)}`;
}

/** Room for the line a collapsed result starts with: a result shortened by less is left whole. */
const COLLAPSE_LINE = 400;

/** How many characters of a result collapse keeps, or null when it fits as it is (or would not get shorter). */
export function collapseAt(contentLength: number, limitChars: number, over: number): number | null {
  const most = Math.max(200, Math.floor(limitChars * over));
  return contentLength > most + COLLAPSE_LINE ? most : null;
}

/** The line snip leaves for a result it dropped. */
export function snippedContent(name: string, target: string, chars: number): string {
  return `[snipped to fit the context window: an old ${target ? `${name} ${target}` : name} result of ${chars} characters; call it again if you need it.]`;
}

/**
 * Snip: the head's lookups replaced, `find` and `grep` (oldest first) before `read_file`,
 * until `excess` characters are saved. Results already replaced are left alone.
 */
export function snip(
  transcript: readonly TranscriptEntry[],
  head: readonly HeadStep[],
  excess: number,
  replaced: ReadonlySet<string>,
): Replacement[] {
  const candidates: { rank: number; order: number; replacement: Replacement; saves: number }[] = [];
  let order = 0;
  for (const step of head) {
    const assistant = transcript[step.at];
    const calls = assistant?.role === 'assistant' ? assistant.toolCalls : [];
    for (let index = 0; step.at + 1 + index < step.end; index++) {
      const entry = transcript[step.at + 1 + index];
      if (entry?.role !== 'tool' || replaced.has(`${step.seq}:${index}`)) continue;
      const rank = SNIP_RANK[entry.name];
      if (rank === undefined || entry.isError) continue;
      const call = calls.find((item) => item.id === entry.callId);
      const content = snippedContent(entry.name, callTarget(call?.args), entry.content.length);
      const saves = entryChars(entry) - entryChars({ ...entry, content, images: undefined });
      if (saves > 0) candidates.push({ rank, order: order++, replacement: { seq: step.seq, index, content }, saves });
    }
  }
  candidates.sort((a, b) => a.rank - b.rank || a.order - b.order);
  const out: Replacement[] = [];
  let saved = 0;
  for (const candidate of candidates) {
    if (saved >= excess) break;
    out.push(candidate.replacement);
    saved += candidate.saves;
  }
  return out;
}

/**
 * Microcompact: an old step's results (two or more), oldest step first, replaced by one
 * counted line on its first result and a pointer to it on the others, until `excess`
 * characters are saved. A step any of whose results were already replaced is left alone.
 */
export function microcompact(
  transcript: readonly TranscriptEntry[],
  head: readonly HeadStep[],
  excess: number,
  replaced: ReadonlySet<string>,
): Replacement[] {
  const out: Replacement[] = [];
  let saved = 0;
  for (const step of head) {
    if (saved >= excess) break;
    const results: { index: number; entry: Extract<TranscriptEntry, { role: 'tool' }> }[] = [];
    for (let index = 0; step.at + 1 + index < step.end; index++) {
      const entry = transcript[step.at + 1 + index];
      if (entry?.role === 'tool') results.push({ index, entry });
    }
    if (results.length < 2 || results.some(({ index }) => replaced.has(`${step.seq}:${index}`))) continue;
    const counts = new Map<string, number>();
    let chars = 0;
    let errors = 0;
    for (const { entry } of results) {
      counts.set(entry.name, (counts.get(entry.name) ?? 0) + 1);
      chars += entry.content.length;
      if (entry.isError) errors++;
    }
    const named = [...counts].map(([name, count]) => `${name} ×${count}`).join(', ');
    const first = `[compacted to fit the context window: this step's ${results.length} results (${named}; ${chars} characters${errors > 0 ? `, ${errors} of them errors` : ''}) were replaced by this line; call the tools again for any you need.]`;
    const rest = '[compacted: see the first result of this step.]';
    let before = 0;
    let after = 0;
    const replacements: Replacement[] = [];
    for (const [n, { index, entry }] of results.entries()) {
      const content = n === 0 ? first : rest;
      before += entryChars(entry);
      after += entryChars({ ...entry, content, images: undefined });
      replacements.push({ seq: step.seq, index, content });
    }
    // Results shorter than their counted line stay as they are.
    if (after >= before) continue;
    out.push(...replacements);
    saved += before - after;
  }
  return out;
}

/** The entry a replacement stands for, put in place in `transcript` (its images go with its content). */
export function applyReplacement(transcript: TranscriptEntry[], position: number, content: string): void {
  const entry = transcript[position];
  if (entry?.role !== 'tool') return;
  const { images: _images, ...rest } = entry;
  transcript[position] = { ...rest, content };
}
