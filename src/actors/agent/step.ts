/**
 * What one step has done so far, and how a run is restored from the trace: its committed
 * steps (the transcript, the re-prompts spent), its draft (the step a pause kept) and the
 * events that decide where it stands (a plan approved, a model escalated).
 */
import type { NoteRecord } from '../../runtime/context/memory.js';
import type { EventData } from '../../runtime/events.js';
import type { Completion, ToolCall, TranscriptEntry } from '../../runtime/provider.js';
import type { ToolResult } from '../../runtime/tools/tool.js';
import { usedWeb } from '../../runtime/web/web.js';
import type { StoreReads } from '../../store/port.js';
import type { FileDiff, ModelCallRecord, Observation, RunRecord, SentMessage } from '../../store/records.js';
import { appendStep } from './records.js';

/** Observations that answer no tool call: what the runtime tells the model (a re-prompt), as a user turn. */
export const FEEDBACK = { schema: '@schema', gate: '@gate', plan: '@plan' } as const;

/** A person's correction of a running turn, as the transcript gives it to the model: the user's own words. */
export function steerTurn(text: string): TranscriptEntry {
  return { role: 'user', text };
}

/** The name of a fold's observation: its content is the entry that stands for the steps it folded. */
export const FOLD = '@fold';

/** A fold's step: its notes replace the steps up to `folded.through` and everything before them. */
export function foldOf(step: { observations: readonly Observation[] }): Observation | null {
  const first = step.observations[0];
  return first?.name === FOLD && first.folded ? first : null;
}

/** The name of a compaction's observation: the results the mechanical rungs replaced (see runtime/context/rungs.ts). */
export const COMPACT = '@compact';

/** A compaction's step, or null. */
export function compactOf(step: { observations: readonly Observation[] }): Observation | null {
  const first = step.observations[0];
  return first?.name === COMPACT && first.compacted ? first : null;
}

/**
 * A run's committed steps as transcript turns, each correction a person sent put before
 * the step it came before (`before`), and those taken after the last step at the end:
 * how a resumed run and a session's next turn both rebuild what the model saw. After a
 * fold, what it folded is its notes alone: everything before them in `history` is
 * dropped, then come the steps it kept whole and those after it. Returns the seq of each
 * step whose turns are in the history after the latest fold (all of them without one), in
 * order, and the results the rungs replaced (`seq:index`).
 */
export function appendSteered(
  history: TranscriptEntry[],
  steps: readonly { seq: number; completion: Completion; observations: Observation[] }[],
  steers: readonly { before: number; text: string }[],
  next: number,
): { steps: number[]; folded: boolean; replaced: string[] } {
  const steered = (before: number) => {
    for (const item of steers) if (item.before === before) history.push(steerTurn(item.text));
  };
  let latest = -1;
  for (const [index, step] of steps.entries()) if (foldOf(step)) latest = index;
  const fold = latest >= 0 ? foldOf(steps[latest] as (typeof steps)[number]) : null;
  const through = fold?.folded?.through ?? 0;
  if (fold) {
    history.length = 0;
    history.push({ role: 'user', text: fold.content });
  }
  // What the rungs put in place of results, by step and index: a compaction's replacements stand from then on.
  const replaced = new Map<string, string>();
  for (const step of steps)
    for (const item of compactOf(step)?.compacted?.replacements ?? [])
      replaced.set(`${item.seq}:${item.index}`, item.content);
  const shown: number[] = [];
  for (const step of steps) {
    // Folded away: the steps its notes stand for (and the corrections before them: they are in the notes).
    if (fold && step.seq <= through) continue;
    // A fold or a compaction sends nothing of its own (a compaction's replacements are in the
    // steps they replaced). Corrections taken just before it were at the tail of the transcript
    // it acted on: a compaction leaves them there, a fold keeps them if it kept a step before them.
    if (compactOf(step)) {
      steered(step.seq);
      continue;
    }
    if (foldOf(step)) {
      if (shown.length > 0) steered(step.seq);
      continue;
    }
    steered(step.seq);
    appendStep(history, step.completion, step.observations, (index) => replaced.get(`${step.seq}:${index}`));
    shown.push(step.seq);
  }
  steered(next);
  return { steps: shown, folded: fold !== null, replaced: [...replaced.keys()] };
}

/** Re-prompts spent, by kind. */
export interface Spent {
  schema: number;
  gate: number;
  plan: number;
}

/** What a paused step had done, so the resume picks it up instead of doing it again. */
export interface StepDraft {
  observations: Observation[];
  events: EventData[];
  changes: FileDiff[];
  consumed: string[];
  sent: SentMessage[];
  spawned: string[];
  calls: ModelCallRecord[];
}

/** The step in progress: what it has done, committed with it. */
export class StepState {
  consumed: string[] = [];
  sent: SentMessage[] = [];
  spawned: string[] = [];
  events: EventData[] = [];
  changes: FileDiff[] = [];
  /** The calls of the completion being dispatched. */
  calls: ToolCall[] = [];
  /** The completion the step acts on. */
  completion: Completion | null = null;
  /** Reads started while the completion streamed, by call index (an embedder's tool's still running). */
  early = new Map<number, { call: ToolCall; result: ToolResult | Promise<ToolResult> }>();
  /**
   * Spawns without `wait` reserved ahead, by call index: a run of them is sent to the store
   * together and each call takes its own reply. One the loop never reaches (a cancel, the
   * deadline) is not in `spawned`, so the step's commit drops it.
   */
  reservations = new Map<number, Promise<unknown>>();

  /** Starts a step on `completion`, from a draft's effects when it resumes one. */
  begin(completion: Completion, draft: StepDraft | null, events: EventData[]): void {
    this.completion = completion;
    this.calls = completion.toolCalls;
    this.reservations = new Map();
    this.consumed = draft ? [...draft.consumed] : [];
    this.sent = draft ? [...draft.sent] : [];
    this.spawned = draft ? [...draft.spawned] : [];
    this.changes = draft ? [...draft.changes] : [];
    this.events = draft ? [...draft.events] : events;
  }

  /** The step's effects so far, as a pause keeps them; `mark` is where the pausing call's events begin. */
  draft(observations: Observation[], calls: ModelCallRecord[], mark: number): StepDraft {
    return {
      observations,
      events: this.events.slice(0, mark),
      changes: this.changes,
      consumed: this.consumed,
      sent: this.sent,
      spawned: this.spawned,
      calls,
    };
  }
}

/** A run as the trace has it, ready for its next step. */
export interface RestoredRun {
  run: RunRecord;
  /** The run's spec as stored. */
  spec: unknown;
  /** The next step's sequence number. */
  seq: number;
  /** The committed steps as transcript turns (after the opening turn); after a fold, its notes first. */
  history: TranscriptEntry[];
  /** The seq of each step whose turns are in `history`, in order. */
  shown: number[];
  /** The committed steps as stored (what the files the run read were, for {@link Freshness}). */
  steps: readonly { seq: number; completion: Completion; observations: Observation[] }[];
  /** The events a committed step recorded. */
  stepEvents(seq: number): EventData[];
  /** The run has folded: its history starts with the fold's notes, and a session's earlier turns are in them. */
  folded: boolean;
  /** The seq of the latest fold's step, or null. */
  foldSeq: number | null;
  /** The results the rungs have replaced, as `seq:index`. */
  replaced: string[];
  /** The memory block the requests carry (the one found at the start, or the latest reduce left) and its notes as they were then; null before it was found. */
  memory: { text: string; notes: NoteRecord[] } | null;
  /** The last committed step is a compaction: the rungs below the fold have run for the request that comes next. */
  compactedLast: boolean;
  /** The window recorded when the run first started, if it did. */
  window: { tokens: number; source: string } | null;
  /** The last step's request size and the input tokens the vendor counted for it: what the estimate is calibrated by. */
  lastRequest: { chars: number; inputTokens: number } | null;
  spent: Spent;
  /** The step a pause kept, when it is the next one. */
  draft: { seq: number; completion: Completion; partial: StepDraft | null } | null;
  /** A plan was approved (or corrected) in a committed step. */
  planApproved: boolean;
  /** The trace already says the model was escalated. */
  escalated: boolean;
  /** The tool families opened by `expand_tools` in committed steps. */
  expanded: string[];
  /** Those opened in the draft's step, before it paused: offered from the step after it. */
  draftExpanded: string[];
}

/** The memory block a run's requests carry by now, and its notes: the latest a reduce left, else the one found at its start. */
function latestMemory(
  steps: readonly { observations: Observation[] }[],
  events: readonly EventData[],
): { text: string; notes: NoteRecord[] } | null {
  for (let index = steps.length - 1; index >= 0; index--) {
    const compacted = compactOf(steps[index] as { observations: Observation[] })?.compacted;
    if (compacted?.memory !== undefined) return { text: compacted.memory, notes: compacted.memoryNotes ?? [] };
  }
  const found = events.find((event) => event.type === 'memory-block');
  return found?.type === 'memory-block' ? { text: found.text, notes: found.kept ?? [] } : null;
}

/** Restores a run from its steps and its draft. Null when the store has no such run. */
export async function restoreRun(store: StoreReads, runId: string): Promise<RestoredRun | null> {
  // Read together (one wait on a server's store): a run that is not there has none of the rest either.
  const [run, spec, steps, events, draft] = await Promise.all([
    store.run(runId),
    store.spec(runId),
    store.steps(runId),
    store.events(runId),
    store.draft(runId),
  ]);
  if (!run) return null;
  const seq = run.lastSeq + 1;
  const history: TranscriptEntry[] = [];
  // Re-prompts already spent, counted from the trace so a resumed run keeps its count.
  const spent: Spent = { schema: 0, gate: 0, plan: 0 };
  // Corrections a person sent, each before the step it came before.
  const steers = events.flatMap((event) => (event.type === 'steered' ? [event] : []));
  const appended = appendSteered(history, steps, steers, seq);
  const windowEvent = events.find((event) => event.type === 'context-window');
  // The last step whose answer measured its request: not a fold's, nor one the vendor's web tools added input to.
  const measured = [...steps]
    .reverse()
    .find((step) => step.completion.requestChars !== undefined && !foldOf(step) && !usedWeb(step.completion));
  for (const step of steps) {
    for (const observation of step.observations) {
      if (observation.name === FEEDBACK.schema) spent.schema++;
      else if (observation.name === FEEDBACK.gate) spent.gate++;
      else if (observation.name === FEEDBACK.plan) spent.plan++;
    }
  }
  return {
    run,
    spec,
    seq,
    history,
    shown: appended.steps,
    steps,
    stepEvents: (at) => events.filter((event) => event.seq === at),
    folded: appended.folded,
    foldSeq: [...steps].reverse().find((step) => foldOf(step) !== null)?.seq ?? null,
    memory: latestMemory(steps, events),
    compactedLast: steps.length > 0 && compactOf(steps.at(-1) as (typeof steps)[number]) !== null,
    replaced: appended.replaced,
    window: windowEvent?.type === 'context-window' ? { tokens: windowEvent.tokens, source: windowEvent.source } : null,
    lastRequest: measured
      ? { chars: measured.completion.requestChars as number, inputTokens: measured.completion.usage.inputTokens }
      : null,
    spent,
    draft:
      draft && draft.seq === seq
        ? { seq, completion: draft.completion, partial: (draft.partial ?? null) as StepDraft | null }
        : null,
    planApproved: events.some((event) => event.type === 'plan-decided' && event.decision !== 'cancel'),
    escalated: events.some((event) => event.type === 'model-escalated'),
    expanded: events.flatMap((event) => (event.type === 'tools-expanded' ? [event.family] : [])),
    draftExpanded: ((draft?.partial as StepDraft | undefined)?.events ?? []).flatMap((event) =>
      event.type === 'tools-expanded' ? [event.family] : [],
    ),
  };
}
