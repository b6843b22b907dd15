/**
 * Every request built to fit a share of the model's window. Between folds a request is the
 * one before it with the new step at its tail: nothing already sent is written over, so the
 * vendor's prefix cache serves all of it. When the next request would not fit its share, the
 * old head is folded: the model summarises the steps before the latest ones into one entry,
 * and that entry is stored as a step of its own, so a resume assembles the same bytes. A
 * request that does not extend the one before it (other than at a fold) is named by a
 * `prefix-broke` event with its cause.
 *
 * Sizes are estimated in characters and turned into tokens by a ratio calibrated on the
 * vendor's own count: the input tokens it reported for the last step's request, over that
 * request's characters. Agent threads load this module: no zod, no dependencies.
 */
import type { ImageAttachment } from '../images.js';
import type { ToolDefinition, TranscriptEntry } from '../provider.js';
import type { RungOptions } from './rungs.js';

/** What a contract says about assembly (`TaskContract.withContext`); every field optional. */
export interface ContextData extends RungOptions {
  /** The share of the window a request may fill, in (0, 1]. Default {@link DEFAULT_SHARE}. */
  share?: number;
  /** The window, in tokens, stated: no catalogue is read and nothing is assumed. */
  window?: number;
  /** Size OpenAI's and Anthropic's models by the reference table (no call is made for it). */
  referenceCatalogue?: boolean;
}

/** The share of the window a request fills by default: room left for the answer and for the estimate's error. */
export const DEFAULT_SHARE = 0.8;
/** Tokens a character is taken for before the vendor has counted one request of the run. */
export const INITIAL_RATIO = 0.3;
/** What an image is counted as, in characters (vendors bill an image at about 1,600 tokens). */
const IMAGE_CHARS = 6_400;
/** The share of a request's limit the steps kept whole through a fold may take. */
const KEPT_SHARE = 0.35;

/**
 * What this thread has measured for requests: entries (each an {@link entryChars}) and tool
 * lists serialised. Counted so a test can hold that a step measures what is new to it, not
 * the whole run again; nothing reads it otherwise.
 */
export const measured = { entries: 0, toolLists: 0 };

/** The characters an entry sends, its images at their token cost. */
export function entryChars(entry: TranscriptEntry): number {
  measured.entries++;
  if (entry.role === 'user') return entry.text.length + 16;
  if (entry.role === 'assistant') return entry.text.length + 16 + JSON.stringify(entry.toolCalls).length;
  return entry.content.length + entry.callId.length + entry.name.length + 32 + imagesChars(entry.images);
}

function imagesChars(images: readonly ImageAttachment[] | undefined): number {
  return (images?.length ?? 0) * IMAGE_CHARS;
}

/**
 * The characters of what every request of a run begins with: its system block and tool
 * definitions, serialised afresh. With {@link requestChars}, the measure a run's running
 * size (`RunningSize`, ./running-size.ts) must always agree with.
 */
export function headChars(system: string, tools: readonly ToolDefinition[]): number {
  measured.toolLists++;
  return system.length + JSON.stringify(tools).length;
}

/** Each tool list serialised, by the list: a run offers the same list step after step (the registry keeps one for each set of tiers). */
const toolLists = new WeakMap<readonly ToolDefinition[], string>();

/**
 * The tool definitions as the size estimate and the prefix check read them, serialised
 * once per list. A list is never changed once offered: the registry builds a new one
 * when its tools change.
 */
export function toolsJson(tools: readonly ToolDefinition[]): string {
  let json = toolLists.get(tools);
  if (json === undefined) {
    measured.toolLists++;
    json = JSON.stringify(tools);
    toolLists.set(tools, json);
  }
  return json;
}

/** The characters a whole request sends, every entry measured. */
export function requestChars(
  system: string,
  tools: readonly ToolDefinition[],
  transcript: readonly TranscriptEntry[],
): number {
  let total = headChars(system, tools);
  for (const entry of transcript) total += entryChars(entry);
  return total;
}

/** Tokens per character, from the last step's request and the input tokens the vendor counted for it. */
export function calibrated(last: { chars: number; inputTokens: number } | null): number {
  if (!last || last.chars <= 0 || last.inputTokens <= 0) return INITIAL_RATIO;
  return last.inputTokens / last.chars;
}

/** Where each step's assistant turn is in the transcript, after the opening turn. */
export function stepStarts(transcript: readonly TranscriptEntry[], opening: number): number[] {
  const starts: number[] = [];
  for (let index = opening + 1; index < transcript.length; index++)
    if (transcript[index]?.role === 'assistant') starts.push(index);
  return starts;
}

/** Where a fold cuts: entries before `cut` (the opening aside) are summarised, the rest kept whole. */
export interface FoldPlan {
  cut: number;
  /** The seq of the last step folded. */
  through: number;
  /** The steps kept whole, by seq. */
  kept: number[];
}

/**
 * Where to fold `transcript`: the latest steps whose entries fit {@link KEPT_SHARE} of the
 * limit are kept whole, the rest (and anything before the opening) folded. `steps` holds the
 * seq of each assistant entry after `opening`, in order. Null when there is nothing to fold.
 */
export function planFold(
  transcript: readonly TranscriptEntry[],
  opening: number,
  steps: readonly number[],
  limitChars: number,
): FoldPlan | null {
  const starts = stepStarts(transcript, opening);
  if (starts.length !== steps.length) return null;
  let keptFrom = starts.length;
  let tail = 0;
  for (let k = starts.length - 1; k >= 0; k--) {
    let chars = 0;
    const end = k + 1 < starts.length ? (starts[k + 1] as number) : transcript.length;
    for (let index = starts[k] as number; index < end; index++)
      chars += entryChars(transcript[index] as TranscriptEntry);
    if (tail + chars > limitChars * KEPT_SHARE) break;
    tail += chars;
    keptFrom = k;
  }
  // At least one step folded; a run whose only step does not fit folds it too.
  if (keptFrom === 0) keptFrom = Math.min(1, starts.length);
  if (keptFrom === 0) return null;
  const cut = keptFrom < starts.length ? (starts[keptFrom] as number) : transcript.length;
  return { cut, through: steps[keptFrom - 1] as number, kept: steps.slice(keptFrom) };
}

/**
 * The entries a fold's request carries, each cut to `cap` characters where it is longer
 * (a call of megabytes, a result the bounds let through): the request that summarises them
 * must fit the window itself. Calls whose arguments are cut keep their name, with a note
 * of how long their arguments were.
 */
export function shortened(entries: readonly TranscriptEntry[], cap: number): TranscriptEntry[] {
  const cut = (text: string) =>
    text.length <= cap ? text : `${text.slice(0, cap)}\n(${text.length - cap} more characters, not shown)`;
  return entries.map((entry) => {
    if (entry.role === 'user') return entry.text.length <= cap ? entry : { ...entry, text: cut(entry.text) };
    if (entry.role === 'tool') {
      if (entry.content.length <= cap && !entry.images) return entry;
      const { images: _images, ...rest } = entry;
      return { ...rest, content: cut(entry.content) };
    }
    const calls = entry.toolCalls.map((call) => {
      const length = JSON.stringify(call.args).length;
      return length <= cap ? call : { ...call, args: { shortened: `${length} characters of arguments, not shown` } };
    });
    return { ...entry, text: cut(entry.text), toolCalls: calls };
  });
}

/** What the model is asked at a fold, after the entries it folds. */
export const FOLD_PROMPT =
  'Your context is nearly full, so the steps above are about to be folded away. Write the notes you will need to go on without them: the task, what you have done and found (files, commands and their results, decisions), what is left to do, and anything you must not forget. Plain notes, no tool calls.';

/** The entry a fold leaves in place of what it folded. */
export function foldEntry(through: number, notes: string): string {
  return `Steps 1 to ${through} of this run were folded to fit the model's context window. Your notes on them:\n\n${notes}`;
}

/** A fold's notes when the model gave none: each folded call, mechanically. */
export function mechanicalNotes(folded: readonly TranscriptEntry[]): string {
  const lines: string[] = [];
  for (const entry of folded) {
    if (entry.role === 'assistant')
      for (const call of entry.toolCalls)
        lines.push(`- called ${call.name} ${JSON.stringify(call.args).slice(0, 200)}`);
    else if (entry.role === 'tool')
      lines.push(`  ${entry.isError ? 'error' : 'result'}: ${entry.content.slice(0, 200).replace(/\s+/g, ' ')}`);
  }
  return lines.join('\n') || '(nothing was done)';
}

/**
 * Why a request does not extend the one before it, or null when it does: its system block
 * or tools changed (a tier opened, a model changed), or an entry already sent was changed
 * or removed (never meant to happen between folds). `replaced` holds the entries put out
 * of place in the transcript since the request before, by position (what the running size
 * saw, `RunningSize.takeReplaced`): only those are compared, not the whole transcript.
 */
export function prefixBreak(
  before: { system: string; tools: readonly ToolDefinition[]; length: number },
  now: { system: string; tools: readonly ToolDefinition[]; transcript: readonly TranscriptEntry[] },
  replaced: ReadonlyMap<number, TranscriptEntry>,
): 'system' | 'tools' | 'transcript' | null {
  if (before.system !== now.system) return 'system';
  if (before.tools !== now.tools && toolsJson(before.tools) !== toolsJson(now.tools)) return 'tools';
  if (now.transcript.length < before.length) return 'transcript';
  for (const [index, sent] of replaced) {
    if (index >= before.length) continue;
    const entry = now.transcript[index];
    if (entry !== sent && JSON.stringify(entry) !== JSON.stringify(sent)) return 'transcript';
  }
  return null;
}
