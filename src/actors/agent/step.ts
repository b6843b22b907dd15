/**
 * What one step has done so far, and how a run is restored from the trace: its committed
 * steps (the transcript, the re-prompts spent), its draft (the step a pause kept) and the
 * events that decide where it stands (a plan approved, a model escalated).
 */
import type { EventData } from '../../runtime/events.js';
import type { Completion, ToolCall, TranscriptEntry } from '../../runtime/provider.js';
import type { ToolResult } from '../../runtime/tools.js';
import type { StoreReads } from '../../store/port.js';
import type { RunRecord } from '../../store/reader.js';
import type { FileDiff, ModelCallRecord, Observation, SentMessage } from '../../store/records.js';
import { appendStep } from './records.js';

/** Observations that answer no tool call: what the runtime tells the model (a re-prompt), as a user turn. */
export const FEEDBACK = { schema: '@schema', gate: '@gate', plan: '@plan' } as const;

/** A person's correction of a running turn, as the transcript gives it to the model: the user's own words. */
export function steerTurn(text: string): TranscriptEntry {
  return { role: 'user', text };
}

/**
 * A run's committed steps as transcript turns, each correction a person sent put before
 * the step it came before (`before`), and those taken after the last step at the end:
 * how a resumed run and a session's next turn both rebuild what the model saw.
 */
export function appendSteered(
  history: TranscriptEntry[],
  steps: readonly { seq: number; completion: Completion; observations: Observation[] }[],
  steers: readonly { before: number; text: string }[],
  next: number,
): void {
  const steered = (before: number) => {
    for (const item of steers) if (item.before === before) history.push(steerTurn(item.text));
  };
  for (const step of steps) {
    steered(step.seq);
    appendStep(history, step.completion, step.observations);
  }
  steered(next);
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
  /** The committed steps as transcript turns (after the opening turn). */
  history: TranscriptEntry[];
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

/** Restores a run from its steps and its draft. Null when the store has no such run. */
export async function restoreRun(store: StoreReads, runId: string): Promise<RestoredRun | null> {
  const run = await store.run(runId);
  if (!run) return null;
  const [spec, steps, events, draft] = await Promise.all([
    store.spec(runId),
    store.steps(runId),
    store.events(runId),
    store.draft(runId),
  ]);
  const seq = run.lastSeq + 1;
  const history: TranscriptEntry[] = [];
  // Re-prompts already spent, counted from the trace so a resumed run keeps its count.
  const spent: Spent = { schema: 0, gate: 0, plan: 0 };
  // Corrections a person sent, each before the step it came before.
  const steers = events.flatMap((event) => (event.type === 'steered' ? [event] : []));
  appendSteered(history, steps, steers, seq);
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
