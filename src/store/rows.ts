/**
 * A store's rows as records: what every read of ./queries.ts and the memory rules map
 * each row they read through, whichever backend answered it.
 */
import type { NoteKind, NoteRecord } from '../runtime/context/memory.js';
import type { EventData, HarnessEvent, QuestionKind, RunStatus } from '../runtime/events.js';
import type {
  IntentRecord,
  LedgerAccount,
  MessageRecord,
  QuestionRecord,
  RestorePoint,
  RunRecord,
  SessionRecord,
  TurnRecord,
} from './records.js';

export type Row = Record<string, unknown>;

/** A memory_notes row as a note. */
export function toNote(row: Row): NoteRecord {
  return {
    id: row.note_id as number,
    scope: row.scope as string,
    key: row.key as string,
    kind: row.kind as NoteKind,
    text: row.body as string,
    pinned: row.pinned === 1,
    runs: row.runs as number,
    writtenBy: (row.written_by as string | null) ?? null,
    createdAt: row.created_at as number,
    updatedAt: row.updated_at as number,
  };
}

export function toRun(row: Row): RunRecord {
  return {
    runId: row.run_id as string,
    rootId: row.root_id as string,
    parentId: row.parent_id as string | null,
    address: row.address as string,
    depth: row.depth as number,
    ancestry: JSON.parse(row.ancestry as string) as string[],
    status: row.status as RunStatus,
    task: row.task as string,
    reply: row.reply as string | null,
    outcome: row.outcome ? JSON.parse(row.outcome as string) : null,
    createdAt: row.created_at as number,
    endedAt: row.ended_at as number | null,
    lastSeq: row.last_seq as number,
    lease: {
      owner: row.lease_owner as string | null,
      pid: row.lease_pid as number | null,
      host: row.lease_host as string | null,
      expiresAt: row.lease_expires_at as number | null,
      generation: row.generation as number,
    },
  };
}

export function toAccount(row: Row): LedgerAccount {
  return {
    runId: row.run_id as string,
    ceilings: {
      steps: row.max_steps as number | null,
      tokens: row.max_tokens as number | null,
      wallMs: row.max_wall_ms as number | null,
    },
    spent: { steps: row.steps_spent as number, tokens: row.tokens_spent as number },
    maxWaitSecs: row.max_wait_secs as number,
  };
}

export function toEvent(row: Row): HarnessEvent {
  const data = JSON.parse(row.data as string) as Omit<EventData, 'type'>;
  return {
    ...data,
    type: row.type,
    eventId: row.event_id as number,
    rootId: row.root_id as string,
    runId: row.run_id as string,
    seq: row.seq as number | null,
    generation: row.generation as number,
    at: row.at as number,
  } as HarnessEvent;
}

export function toMessage(row: Row): MessageRecord {
  return {
    ordinal: row.ordinal as number,
    msgId: row.msg_id as string,
    rootId: row.root_id as string,
    fromRun: row.from_run as string,
    fromAddress: row.from_address as string,
    toAddress: row.to_address as string,
    body: row.body as string,
    sentSeq: row.sent_seq as number,
    sentGeneration: row.sent_generation as number,
    consumedBy: row.consumed_by as string | null,
    consumedSeq: row.consumed_seq as number | null,
    consumedGeneration: row.consumed_generation as number | null,
  };
}

export interface SessionRow {
  session_id: string;
  root: string;
  head: string | null;
  created_at: number;
}

export function toSession(row: SessionRow): SessionRecord {
  // A session with no workspace keeps '' in the column (a workspace's root is always an absolute path).
  return {
    sessionId: row.session_id,
    root: row.root === '' ? null : row.root,
    head: row.head,
    createdAt: row.created_at,
  };
}

/** A turn's row, and how many steps its run committed (none for a reply). */
export const TURN_SELECT =
  'SELECT turns.*, (SELECT COUNT(*) FROM steps WHERE steps.run_id = turns.run_id) AS steps FROM turns';

export interface TurnRow {
  turn_id: string;
  session_id: string;
  parent: string | null;
  seq: number;
  run_id: string | null;
  user_text: string;
  reply: string | null;
  status: string;
  created_at: number;
  ended_at: number | null;
  steps: number;
}

export function toTurn(row: TurnRow): TurnRecord {
  return {
    turnId: row.turn_id,
    sessionId: row.session_id,
    parent: row.parent,
    seq: row.seq,
    runId: row.run_id,
    text: row.user_text,
    reply: row.reply,
    status: row.status,
    kind:
      row.status === 'running' || row.status === 'paused'
        ? null
        : row.status === 'finished' && row.steps === 0
          ? 'reply'
          : 'work',
    createdAt: row.created_at,
    endedAt: row.ended_at,
  };
}

export function toRestorePoint(row: Row): RestorePoint {
  return {
    runId: row.run_id as string,
    path: row.path as string,
    workspace: row.workspace as string,
    existed: row.existed === 1,
    content: (row.content as Buffer | null) ?? null,
    seq: row.seq as number,
    at: row.at as number,
  };
}

export function toQuestion(row: Row): QuestionRecord {
  return {
    questionId: row.question_id as string,
    rootId: row.root_id as string,
    runId: row.run_id as string,
    seq: row.seq as number,
    kind: row.kind as QuestionKind,
    payload: JSON.parse(row.payload as string),
    status: row.status as 'open' | 'answered',
    answer: row.answer === null ? null : JSON.parse(row.answer as string),
    answeredBy: (row.answered_by as string | null) ?? null,
    createdAt: row.created_at as number,
    answeredAt: (row.answered_at as number | null) ?? null,
  };
}

export function toIntent(row: Row): IntentRecord {
  return {
    key: row.effect_key as string,
    runId: row.run_id as string,
    seq: row.seq as number,
    kind: row.kind as string,
    detail: row.detail as string,
    startedAt: row.started_at as number,
    result: (row.result as string | null) ?? null,
    finishedAt: (row.finished_at as number | null) ?? null,
  };
}
