/**
 * The write rules run on a SQLite connection: each statement a rule yields is answered at
 * once from the connection's prepared statements, so a write runs to its end
 * synchronously, inside the transaction (or savepoint) its caller holds.
 */
import type Database from 'better-sqlite3';
import type { Notifications } from '../records.js';
import { RuleContext, ruleFor, type StoreOperation, type StoreOperations, type StoreRequest } from '../rules/index.js';
import { runSync, statementsOf } from './run.js';

/** The store's writes on one SQLite connection, each run synchronously; the caller holds the transaction. */
export interface StoreWriter {
  /** One write by its operation's name, its rows scrubbed of every secret this thread holds (see ruleFor). */
  call<K extends StoreOperation>(op: K, input: StoreOperations[K][0]): StoreOperations[K][1];
  /** One write as it crossed a thread: its name and input in one value. */
  apply<K extends StoreOperation>(request: StoreRequest<K>): StoreOperations[K][1];
  /** Hands over what the writes since the last call announced. */
  takeNotifications(): Notifications;
  /** Where the announcements stand, for {@link rollbackNotifications} to return to. */
  markNotifications(): number[];
  /** Forgets what a rolled-back write would have announced. */
  rollbackNotifications(mark: number[]): void;
}

/** The write rules run on a SQLite connection. */
export function sqliteWriter(db: Database.Database): StoreWriter {
  const context = new RuleContext();
  const statements = statementsOf(db);
  const apply = <K extends StoreOperation>(request: StoreRequest<K>): StoreOperations[K][1] =>
    runSync(statements, ruleFor(context, request));
  return {
    call: (op, input) => apply({ op, input }),
    apply,
    takeNotifications: () => context.takeNotifications(),
    markNotifications: () => context.markNotifications(),
    rollbackNotifications: (mark) => context.rollbackNotifications(mark),
  };
}
