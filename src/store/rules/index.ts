/**
 * Every durable write the runtime makes, as rules written once for both backends. A
 * rule is a generator that yields the statements it needs (see ../sql.ts) and returns
 * the write's result: the SQLite backend answers them at once on its one writer
 * connection (sqlite/writer.ts), the PostgreSQL backend awaits each (postgres/batch.ts).
 * Each runs inside a savepoint or transaction its backend opens, so an operation is
 * all-or-nothing even when several share one group-commit transaction. Every operation
 * on a run is fenced: it checks the run's lease generation and owner first and refuses,
 * writing nothing, when they moved.
 *
 * The map of operations ({@link StoreOperations}) is read off the rules' own types, so a
 * rule's input and result are written once, in its signature, and the store actor's
 * protocol and every client of it follow.
 */
import { ErrorCode, StoreError } from '../../errors.js';
import { scrubValue } from '../../runtime/secrets.js';
import type { Q, Query } from '../sql.js';
import { askCancel } from './cancel.js';
import { acceptChanges } from './changes.js';
import type { RuleContext } from './context.js';
import { acquireLease, admit, claim, createRoot, park, releaseLease, renewLeases } from './leases.js';
import { drawNotes, forget, pinNote, remember } from './notes.js';
import { answer, beginIntent, finishIntent, pause, regate, resumePaused } from './people.js';
import { beginTurn, endTurn, moveHead, openSession, startedTurn, steer, takeSteers } from './sessions.js';
import { cancelQueued, dropBacklog, spawn } from './spawn.js';
import { clearStepImages, commitStep, endReply, endRun, recordEvents, recordRestorePoint } from './step.js';

export { emptyNotifications, RuleContext } from './context.js';

/** Every write the store serves, by its operation's name. */
const writeRules = {
  createRoot,
  acceptChanges,
  askCancel,
  acquireLease,
  renewLeases,
  releaseLease,
  admit,
  claim,
  park,
  spawn,
  commitStep,
  endRun,
  recordEvents,
  cancelQueued,
  recordRestorePoint,
  dropBacklog,
  beginIntent,
  finishIntent,
  pause,
  answer,
  resumePaused,
  clearStepImages,
  regate,
  openSession,
  beginTurn,
  startedTurn,
  endTurn,
  moveHead,
  steer,
  takeSteers,
  endReply,
  remember,
  forget,
  pinNote,
  drawNotes,
};

type Rules = typeof writeRules;

/** What a rule returns once every statement it yielded has been answered. */
type Answered<G> = G extends Generator<Query, infer R, unknown> ? R : never;

/** Every write the store serves: its input and its result, as its rule declares them. */
export type StoreOperations = {
  [K in keyof Rules]: [Parameters<Rules[K]>[1], Answered<ReturnType<Rules[K]>>];
};
export type StoreOperation = keyof StoreOperations;

/** One write as a message: an operation's name and its input (`K` narrows it to some operations). */
export type StoreRequest<K extends StoreOperation = StoreOperation> = {
  [P in K]: { op: P; input: StoreOperations[P][0] };
}[K];

/**
 * The rules as a dispatch by name reads them: indexed by an operation, each typed by that
 * operation, so that `RULES[request.op](context, request.input)` is checked for any one
 * operation without a cast (TypeScript's pattern for correlated unions, #47109).
 */
type RuleMap = {
  [K in StoreOperation]: (context: RuleContext, input: StoreOperations[K][0]) => Q<StoreOperations[K][1]>;
};
const RULES: RuleMap = writeRules;

/** True when `op` names one of the store's writes. */
export function isStoreOperation(op: unknown): op is StoreOperation {
  return typeof op === 'string' && Object.hasOwn(RULES, op);
}

/**
 * The rule serving one write, bound to its input: a generator of the statements it needs,
 * which the caller answers inside the transaction it holds. No secret this thread holds is
 * written: the input is scrubbed first, every row of the write and its events with it (see
 * runtime/secrets.ts). A request that names no operation (it crossed a thread as data) is
 * refused.
 */
export function ruleFor<K extends StoreOperation>(
  context: RuleContext,
  request: StoreRequest<K>,
): Q<StoreOperations[K][1]> {
  if (!isStoreOperation(request.op))
    throw new StoreError(ErrorCode.Internal, `unknown store operation ${String(request.op)}`);
  return RULES[request.op](context, scrubValue(request.input));
}
