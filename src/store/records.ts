/**
 * The records the store's writes take and give back, and the records its reads return,
 * beside the port (./port.ts) rather than inside a backend: what any backend of the port
 * reads and returns. Types only: what imports them loads nothing of the store.
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
import type { WebSource } from '../runtime/web/web.js';

/** What a rebuilt actor needs to run a root again, as stored with it (never a key). */
export interface RunSpec {
  /** Serialised provider spec, without keys. */
  provider: unknown;
  /** A plain run's answer shape (a contract's is in `contract`): the root's final answer is checked against it. */
  outputSchema?: { name: string; schema: Record<string, unknown> };
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
   * The embedder's tools the tree was started with, by name and effect, the MCP server of
   * each that came from one, and a digest of what the model is shown of it (its description
   * and parameters); a resume must give them again, unchanged or accepted as changed.
   */
  tools?: { name: string; effect: 'reads' | 'acts'; server?: string; digest?: string }[];
  /**
   * The release of io-harness that started the tree (or whose changes a resume last
   * accepted): a resume or a join under another release is a change (see
   * src/supervisor/fingerprint.ts). Absent on trees started before it was recorded.
   */
  release?: string;
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
  /** The child's contract, when it differs from its parent's (a worktree of its own: another root), and its briefing. */
  contract?: unknown;
  briefing?: string;
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
  /** When the tool threw: its class, message and stack (see ToolFailure in runtime/tools/tool.ts). */
  error?: { name: string; message: string; stack: string | null };
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
  /** What the vendor's own web tools did for the answer (Completion.web): counted on the row, its sources in `web_sources`. */
  web?: import('../runtime/web/web.js').WebActivity;
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

// What the reads give back (see ./queries.ts).

export interface RunRecord {
  runId: string;
  rootId: string;
  parentId: string | null;
  address: string;
  depth: number;
  /** Ancestor run ids, root first. */
  ancestry: string[];
  status: RunStatus;
  task: string;
  reply: string | null;
  outcome: { status: RunStatus; reason: string } | null;
  createdAt: number;
  endedAt: number | null;
  lastSeq: number;
  lease: {
    owner: string | null;
    pid: number | null;
    host: string | null;
    expiresAt: number | null;
    generation: number;
  };
}

export interface StepRecord {
  runId: string;
  seq: number;
  generation: number;
  completion: Completion;
  observations: Observation[];
  usage: Usage;
  at: number;
}

/** What a file held before a run first touched it. */
export interface RestorePoint {
  runId: string;
  path: string;
  workspace: string;
  /** False when the run created the file: putting it back deletes it. */
  existed: boolean;
  content: Buffer | null;
  seq: number;
  at: number;
}

/** A question a paused run waits on, and its answer once given. */
export interface QuestionRecord {
  questionId: string;
  rootId: string;
  runId: string;
  seq: number;
  kind: QuestionKind;
  payload: unknown;
  status: 'open' | 'answered';
  answer: unknown;
  answeredBy: string | null;
  createdAt: number;
  answeredAt: number | null;
}

/** An effect journaled before it started, and how it ended. */
export interface IntentRecord {
  key: string;
  runId: string;
  seq: number;
  kind: string;
  detail: string;
  startedAt: number;
  result: string | null;
  finishedAt: number | null;
}

/** One file a step changed, as a unified diff of the whole file. */
export interface FileChangeRecord {
  runId: string;
  seq: number;
  ordinal: number;
  path: string;
  diff: string;
  at: number;
}

export interface DrawRecord {
  drawId: string;
  runId: string;
  seq: number;
  generation: number;
  steps: number;
  tokens: number;
  at: number;
}

export interface LedgerAccount {
  runId: string;
  ceilings: { steps: number | null; tokens: number | null; wallMs: number | null };
  spent: DrawAmount;
  maxWaitSecs: number;
}

export interface TreeLedger {
  rootId: string;
  /** The root's account: the ceilings of the whole tree and what it has spent. */
  root: LedgerAccount;
  /** Every run's account (each covers the run and its descendants). */
  accounts: LedgerAccount[];
  draws: DrawRecord[];
  maxTotalAgents: number | null;
  maxConcurrentAgents: number | null;
}

export interface MessageRecord {
  ordinal: number;
  msgId: string;
  rootId: string;
  fromRun: string;
  fromAddress: string;
  toAddress: string;
  body: string;
  sentSeq: number;
  sentGeneration: number;
  consumedBy: string | null;
  consumedSeq: number | null;
  consumedGeneration: number | null;
}

export interface QueueRecord {
  ordinal: number;
  childRunId: string;
  parentId: string;
  state: 'pending' | 'queued' | 'admitted' | 'cancelled';
  enqueuedAt: number;
  admittedAt: number | null;
}

/** A stored model call: what the step recorded of it, and where it stands in the trace. */
export interface ModelCallRow extends Omit<ModelCallRecord, 'web'> {
  callId: number;
  runId: string;
  seq: number;
  attempt: number;
  /** Searches and fetches the vendor's own web tools ran for the call, as it reported them (0 without `withWeb`). */
  webSearches: number;
  webFetches: number;
  at: number;
}

/** A page a vendor's web tools found, fetched or cited, as the trace keeps it (see `TraceQueries.webSources`). */
export interface WebSourceRow extends WebSource {
  runId: string;
  /** The step the answer citing it belonged to, and which try of its model call. */
  seq: number;
  attempt: number;
  at: number;
}

export type { PriceTable } from '../runtime/budget.js';

export interface CostReport {
  /** Total in the table's currency, as computed (a float: for sums and comparisons, not for people). */
  total: number;
  byModel: Record<string, number>;
  /** Calls whose model the table does not price (their cost is not in the total). */
  unpriced: string[];
  /** The report for a person: `$0.0029 (gpt-4.1 $0.0021, claude-sonnet-4 $0.00080)`, the unpriced models named. */
  text: string;
}

/** A conversation: its workspace and the turn the next one follows. */
export interface SessionRecord {
  sessionId: string;
  /** The workspace the turns work in; null for a conversation with no repository. */
  root: string | null;
  /** The turn the next one follows (the head of its current branch); null before the first. */
  head: string | null;
  createdAt: number;
}

/** One turn of a session: what the user said, the run that answered, and its reply. */
export interface TurnRecord {
  turnId: string;
  sessionId: string;
  /** The turn it followed on its branch; null for a first turn. */
  parent: string | null;
  seq: number;
  runId: string | null;
  text: string;
  reply: string | null;
  /** `running`, the run's outcome (`finished`, `interrupted`, `failed`, …), or `conflicted` when another turn took the head first. */
  status: string;
  /** What the turn was, once it ended: `reply` (its first completion stopped on text, no step), else `work`. */
  kind: 'reply' | 'work' | null;
  createdAt: number;
  endedAt: number | null;
}
