/**
 * The records the store's writes take and give back, beside the port (./port.ts) rather
 * than inside the SQLite writer: what any backend of the port reads and returns.
 */

import type { AgentDefinition } from '../runtime/agents.js';
import type { Ceilings, Clamp } from '../runtime/budget.js';
import type { NoteKind, NoteRecord } from '../runtime/context/memory.js';
import type { ContractData } from '../runtime/contract/contract.js';
import type { DrawAmount, EventData, HarnessEvent, QuestionKind, RunStatus } from '../runtime/events.js';
import type { ImageAttachment } from '../runtime/images.js';
import type { PolicyData } from '../runtime/policy/policy.js';
import type { Completion, TranscriptEntry, Usage } from '../runtime/provider.js';
import type { SkillData } from '../runtime/skills.js';

/** What a rebuilt actor needs to run a root again, as stored with it (never a key). */
export interface RunSpec {
  /** Serialised provider spec, without keys. */
  provider: unknown;
  system?: string;
  session?: string;
  /** A workspace run's contract (a review gate's provider without its key). */
  contract?: ContractData;
  /** The run's policy; a child's is its parent's, narrowed. */
  policy?: PolicyData;
  /** The workspace part of the first turn, computed when the run was created. */
  briefing?: string;
  /** Turns of a conversation the run's transcript begins with, before its own opening turn (a session's earlier turns). */
  history?: TranscriptEntry[];
  /** Skills the tree's agents are offered (a catalogue line each, and read_skill), sorted by name. */
  skills?: SkillData[];
  /** Named agents a spawn may ask for (a roster line each), sorted by name. */
  agents?: AgentDefinition[];
  /** False: the tree's agents are not offered spawn_agent (a session's turn that was not asked to fan out). */
  spawn?: boolean;
  /** A session turn's root: a first completion that stops on text ends the run as a reply, with no step. */
  reply?: boolean;
  /**
   * The embedder's tools the tree was started with, by name and effect, and the MCP server
   * of each that came from one; a resume must give them again.
   */
  tools?: { name: string; effect: 'reads' | 'acts'; server?: string }[];
}

export interface LeaseClaim {
  owner: string;
  pid: number;
  host: string;
  ttlMs: number;
  now: number;
}

export interface Fence {
  runId: string;
  generation: number;
  owner: string;
}

export interface CreateRootInput {
  runId: string;
  task: string;
  spec: RunSpec;
  ceilings: Ceilings;
  maxTotalAgents: number | null;
  maxConcurrentAgents: number | null;
  maxWaitSecs: number;
  claim: LeaseClaim;
}

export interface SpawnInput extends Fence {
  key: string;
  task: string;
  as: string | null;
  asked: Ceilings;
  maxWaitSecs: number | null;
  newRunId: string;
  /**
   * True when the parent will wait for the child inside this step (`wait`): the child
   * is queued at once. False reserves it as `pending`; the parent's step commit
   * releases it to the queue, so a step that never commits never starts a child.
   */
  queueNow: boolean;
  /** The child's policy, when the spawn narrowed the parent's. */
  policy?: unknown;
  /** The child's system prompt, when the spawn named an agent of the roster. */
  system?: string;
  /** With no `as`: the address to give the child (the roster agent's name under its parent's), numbered if taken. */
  addressHint?: string;
  now: number;
}

export type SpawnResult =
  | { status: 'created' | 'existing'; childId: string; address: string; clamps: Clamp[]; childStatus: RunStatus }
  | { status: 'refused'; rule: string; reason: string };

export interface SentMessage {
  to: string;
  body: string;
}

export interface Observation {
  callId: string;
  name: string;
  content: string;
  isError: boolean;
  /** Images the result attached, sent to the model with it (the latest ones; see runtime/images.ts). */
  images?: ImageAttachment[];
  /** On a fold's step (name `@fold`): the seq of the last step its notes replace. */
  folded?: { through: number };
  /** On a refresh (name `@refresh`): the file read again because it changed since the model read it. */
  refreshed?: { path: string };
  /** Sent shortened (the collapse rung): its tool, target and first `shown` characters; the trace keeps it whole. */
  collapsed?: { shown: number };
  /** On a compaction's step (name `@compact`): the rungs that ran and the results they replaced, by step and index. */
  compacted?: {
    rungs: string[];
    replacements: { seq: number; index: number; content: string }[];
    /** The memory block reduce left, carried from then on, and its notes as they were. */
    memory?: string;
    memoryNotes?: NoteRecord[];
  };
}

/** One model call of a step, for the accounting table. */
export interface ModelCallRecord {
  provider: string;
  model: string;
  /** `ok`, or why the call failed: http, connection, truncated, stalled, undecodable, aborted, error. */
  outcome: string;
  statusCode: number | null;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  reasoningTokens: number;
  latencyMs: number | null;
  ttftMs: number | null;
  /** False when the vendor reported no tokens and the counts are the runtime's estimate (Completion.usageReported). Default true. */
  usageReported?: boolean;
}

export interface CommitStepInput extends Fence {
  seq: number;
  completion: Completion;
  observations: Observation[];
  usage: Usage;
  consumed: string[];
  sent: SentMessage[];
  /** Children this step reserved without waiting; the commit queues them. */
  spawned: string[];
  /** The model calls the step made, failed tries first. */
  calls?: ModelCallRecord[];
  /** The files the step changed, in order, each as a unified diff of the whole file. */
  changes?: FileDiff[];
  events: EventData[];
  final: { status: RunStatus; reply: string | null; reason?: string } | null;
  /** A fold's step: its tokens are drawn, and no step (it is the runtime's housekeeping, not the model's work). */
  fold?: boolean;
  now: number;
}

export type CommitStepResult =
  /** `steers`: corrections a person sent while the step ran, the user's words before the next step. */
  | { status: 'committed'; seq: number; treeSpent: DrawAmount; steers?: string[] }
  /** The step committed, and an interrupt waiting for the run ended it there. */
  | { status: 'interrupted'; seq: number; treeSpent: DrawAmount }
  | { status: 'duplicate'; seq: number }
  | { status: 'exhausted'; runId: string; ceiling: string; spent: number; limit: number };

export interface FileDiff {
  path: string;
  diff: string;
}

export interface RestorePointInput extends Fence {
  seq: number;
  workspace: string;
  path: string;
  /** What the file held before the run first touched it; null when it did not exist. */
  content: Uint8Array | null;
  now: number;
}

export interface QuestionInput {
  questionId: string;
  kind: QuestionKind;
  payload: unknown;
  summary: string;
}

export type IntentBegin =
  | { status: 'started' }
  /** It ran to the end before: its recorded result stands, and it is not run again. */
  | { status: 'done'; result: string }
  /** It was started and never recorded an end: the process died while it ran. */
  | { status: 'in-flight'; startedAt: number };

/** A command's intent, journaled before it starts (with the step's completion, for a re-run). */
export interface IntentInput extends Fence {
  seq: number;
  key: string;
  kind: string;
  detail: string;
  completion: Completion;
  /** A person chose to run an interrupted command again: one more start is allowed. */
  again?: boolean;
  now: number;
}

export interface EndRunInput extends Fence {
  status: RunStatus;
  reply: string | null;
  reason: string;
  events: EventData[];
  /** Model calls of the step that could not finish (all failed tries). */
  calls?: ModelCallRecord[];
  now: number;
}

/** What a batch of operations changed, for the supervisor to act on after commit. */
export interface Notifications {
  events: HarnessEvent[];
  mail: { rootId: string; to: string }[];
  spawned: { rootId: string; childId: string }[];
  ended: { rootId: string; runId: string; status: RunStatus }[];
}

/** A note written to durable memory: by a run (fenced by its lease), or by the embedder (`by` null). */
export interface RememberInput {
  scope: string;
  key: string;
  kind: NoteKind;
  text: string;
  by: Fence | null;
  /** The embedder's alone: keep the note pinned (true) or not (false); absent, as it was. */
  pin?: boolean;
  /** Notes the scope may hold; at it, the one the fewest separate runs have drawn on goes. */
  cap: number;
  now: number;
}

export type RememberResult =
  | {
      status: 'written';
      note: NoteRecord;
      /** A note under that key was there before, and this replaced it. */
      replaced: boolean;
      /** The note that went to make room, at the cap. */
      evicted: NoteRecord | null;
      /** The key of a note this one restates. */
      restates: string | null;
    }
  /** A run tried to overwrite a pinned note: nothing was written. */
  | { status: 'pinned'; note: NoteRecord }
  /** The scope is at its cap and every note in it is pinned: nothing was written. */
  | { status: 'full'; cap: number };
