/**
 * Every error the runtime raises is a {@link HarnessError} with a stable `code`.
 * Identity survives a thread boundary: errors cross as plain data and are rebuilt
 * here, and {@link HarnessError.isInstance} checks a `Symbol.for` marker rather than
 * the prototype chain. The codes are listed in docs/ERRORS.md.
 */

import { scrubError, scrubText, scrubValue } from './runtime/secrets.js';

const MARKER = Symbol.for('io-harness.error');

export const ErrorCode = {
  InvalidArgument: 'INVALID_ARGUMENT',
  StoreNotSqlite: 'STORE_NOT_SQLITE',
  StoreSchemaTooNew: 'STORE_SCHEMA_TOO_NEW',
  StoreOpenFailed: 'STORE_OPEN_FAILED',
  StoreNotOurs: 'STORE_NOT_OURS',
  StoreNotEmpty: 'STORE_NOT_EMPTY',
  StoreNotFound: 'STORE_NOT_FOUND',
  StoreSchemaOld: 'STORE_SCHEMA_OLD',
  StoreUnreachable: 'STORE_UNREACHABLE',
  StoreFailed: 'STORE_FAILED',
  StoreActorExited: 'STORE_ACTOR_EXITED',
  ActorExited: 'ACTOR_EXITED',
  Conflict: 'CONFLICT',
  LeaseLost: 'LEASE_LOST',
  RunNotFound: 'RUN_NOT_FOUND',
  MailboxConflict: 'MAILBOX_CONFLICT',
  StepOutOfOrder: 'STEP_OUT_OF_ORDER',
  ProviderLoadFailed: 'PROVIDER_LOAD_FAILED',
  ProviderFailed: 'PROVIDER_FAILED',
  ReplayMiss: 'REPLAY_MISS',
  SupervisorClosed: 'SUPERVISOR_CLOSED',
  OutputSchemaUnsupported: 'OUTPUT_SCHEMA_UNSUPPORTED',
  WorkspaceNotFound: 'WORKSPACE_NOT_FOUND',
  NoRestorePoint: 'NO_RESTORE_POINT',
  RewindConflict: 'REWIND_CONFLICT',
  RunStillLive: 'RUN_STILL_LIVE',
  QuestionNotFound: 'QUESTION_NOT_FOUND',
  AlreadyAnswered: 'ALREADY_ANSWERED',
  ToolsMissing: 'TOOLS_MISSING',
  FingerprintChanged: 'FINGERPRINT_CHANGED',
  ContainmentUnavailable: 'CONTAINMENT_UNAVAILABLE',
  CodeNotKept: 'CODE_NOT_KEPT',
  SessionNotFound: 'SESSION_NOT_FOUND',
  TurnNotFound: 'TURN_NOT_FOUND',
  TurnEnded: 'TURN_ENDED',
  McpServerFailed: 'MCP_SERVER_FAILED',
  WebUnsupported: 'WEB_UNSUPPORTED',
  ConfigInvalid: 'CONFIG_INVALID',
  ConfigRefused: 'CONFIG_REFUSED',
  Internal: 'INTERNAL',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** The data form an error takes to cross a thread or process boundary. */
export interface SerializedError {
  name: string;
  code: string;
  message: string;
  stack?: string;
  details?: Record<string, unknown>;
  /** What a class keeps besides its details (see {@link HarnessError.serializedFields}). */
  fields?: Record<string, unknown>;
}

export interface HarnessErrorOptions {
  cause?: unknown;
  details?: Record<string, unknown>;
}

/** The root of every error io-harness raises. */
export class HarnessError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown>;
  readonly [MARKER] = true;

  constructor(code: ErrorCode, message: string, options: HarnessErrorOptions = {}) {
    // Every secret this thread holds is scrubbed from what an error says, before its stack is taken.
    super(scrubText(message), options.cause === undefined ? undefined : { cause: scrubError(options.cause) });
    this.name = 'HarnessError';
    this.code = code;
    this.details = scrubValue(options.details ?? {});
  }

  /**
   * What this error keeps besides its code, message and details, for its class to be rebuilt
   * whole on the other side of a thread. Plain data only.
   */
  serializedFields(): Record<string, unknown> | undefined {
    return undefined;
  }

  /** True for any io-harness error, including one rebuilt from another thread. */
  static isInstance(value: unknown): value is HarnessError {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[MARKER] === true;
  }
}

/** Raised when a bad argument is passed in; the message says what to pass instead. */
export class InvalidArgumentError extends HarnessError {
  constructor(message: string, options?: HarnessErrorOptions) {
    super(ErrorCode.InvalidArgument, message, options);
    this.name = 'InvalidArgumentError';
  }
}

/**
 * A configuration file cannot be used: a TOML syntax error, an unknown key, a wrong type
 * (CONFIG_INVALID), or a key a workspace file may not set because it would widen the
 * boundary (CONFIG_REFUSED). `details` names the file, the line and the key.
 */
export class ConfigError extends HarnessError {
  constructor(code: ErrorCode, message: string, options?: HarnessErrorOptions) {
    super(code, message, options);
    this.name = 'ConfigError';
  }
}

/** The store file cannot be used: not SQLite, a newer schema, or unopenable. */
export class StoreError extends HarnessError {
  constructor(code: ErrorCode, message: string, options?: HarnessErrorOptions) {
    super(code, message, options);
    this.name = 'StoreError';
  }
}

/** Who holds a run's lease, as named by a {@link ConflictError}. */
export interface LeaseHolder {
  owner: string;
  pid: number | null;
  host: string | null;
  /** Milliseconds since the epoch at which the lease lapses unless renewed. */
  expiresAt: number;
}

/** A second driver tried to take a run whose live owner still holds the lease. */
export class ConflictError extends HarnessError {
  readonly holder: LeaseHolder;
  constructor(runId: string, holder: LeaseHolder) {
    super(
      ErrorCode.Conflict,
      `run ${runId} is being driven by owner ${holder.owner} (pid ${holder.pid ?? 'unknown'} on ${holder.host ?? 'an unknown host'}); ` +
        `its lease lapses at ${new Date(holder.expiresAt).toISOString()} unless renewed. Wait for that process to finish or stop it, then resume.`,
      { details: { runId, holder } },
    );
    this.name = 'ConflictError';
    this.holder = holder;
  }
}

/** This driver's lease was taken over; its commit was refused and nothing was written. */
export class LeaseLostError extends HarnessError {
  constructor(runId: string, generation: number, current: number | null) {
    super(
      ErrorCode.LeaseLost,
      `run ${runId}: the lease at generation ${generation} is no longer held (current generation ${current ?? 'unknown'}); ` +
        'another driver took the run over, so this commit was refused and nothing was written.',
      { details: { runId, generation, current } },
    );
    this.name = 'LeaseLostError';
  }
}

/**
 * An OutputSchema used a keyword outside the supported subset, or used one wrongly.
 * `keyword` names it and `pointer` is the JSON pointer of the schema node holding it.
 */
export class OutputSchemaError extends HarnessError {
  readonly keyword: string;
  readonly pointer: string;
  constructor(keyword: string, pointer: string, message: string) {
    super(ErrorCode.OutputSchemaUnsupported, message, { details: { keyword, pointer } });
    this.name = 'OutputSchemaError';
    this.keyword = keyword;
    this.pointer = pointer;
  }
}

/** A worker thread exited while requests were pending on it. */
export class ActorExitedError extends HarnessError {
  constructor(code: ErrorCode, message: string, options?: HarnessErrorOptions) {
    super(code, message, options);
    this.name = 'ActorExitedError';
  }
}

/**
 * A run asked for a boundary by name (a rung of containment, or a grant) that this host
 * cannot give. `rung` names what was asked for and `reason` why it cannot be had. The run
 * is refused before its first step, never run with less.
 */
export class ContainmentUnavailableError extends HarnessError {
  constructor(message: string, details: { rung: string; reason: string }) {
    super(ErrorCode.ContainmentUnavailable, message, { details });
    this.name = 'ContainmentUnavailableError';
  }
}

/**
 * The harness was to load code (a package at its first use, an AI SDK provider given as a
 * file) from outside the directories it keeps read-only from runs, where a run could have
 * put or changed it; it refused (see src/runtime/exec/containment/harness-code.ts).
 */
export class CodeNotKeptError extends HarnessError {
  constructor(message: string, details: { package: string; path: string }) {
    super(ErrorCode.CodeNotKept, message, { details });
    this.name = 'CodeNotKeptError';
  }
}

export function serializeError(error: unknown): SerializedError {
  // What crosses a thread says no secret this thread holds, whoever raised it.
  return scrubValue(serializedOf(error));
}

function serializedOf(error: unknown): SerializedError {
  if (HarnessError.isInstance(error)) {
    const fields = typeof error.serializedFields === 'function' ? error.serializedFields() : undefined;
    return {
      name: error.name,
      code: error.code,
      message: error.message,
      stack: error.stack,
      details: error.details,
      ...(fields ? { fields } : {}),
    };
  }
  if (error instanceof Error) {
    return { name: error.name, code: ErrorCode.Internal, message: error.message, stack: error.stack };
  }
  return { name: 'Error', code: ErrorCode.Internal, message: String(error) };
}

type Rebuild = (data: SerializedError, details: Record<string, unknown>) => HarnessError;

/** How each error class is rebuilt from its data, by its name: one registry for every thread boundary. */
const REBUILDERS = new Map<string, Rebuild>();

/**
 * Registers how the class named `name` is rebuilt after crossing a thread. Every class the
 * runtime raises registers itself where it is defined; a name registered twice is a bug.
 */
export function registerErrorClass(name: string, rebuild: Rebuild): void {
  if (REBUILDERS.has(name)) throw new Error(`error class ${name} is registered twice`);
  REBUILDERS.set(name, rebuild);
}

/** The names of the classes {@link deserializeError} rebuilds as themselves. */
export function registeredErrorClasses(): string[] {
  return [...REBUILDERS.keys()].sort();
}

registerErrorClass(
  'ConflictError',
  (_data, details) => new ConflictError(String(details.runId), details.holder as LeaseHolder),
);
registerErrorClass(
  'LeaseLostError',
  (_data, details) =>
    new LeaseLostError(String(details.runId), Number(details.generation), (details.current as number | null) ?? null),
);
registerErrorClass('InvalidArgumentError', (data, details) => new InvalidArgumentError(data.message, { details }));
registerErrorClass(
  'OutputSchemaError',
  (data, details) => new OutputSchemaError(String(details.keyword), String(details.pointer), data.message),
);
registerErrorClass('StoreError', (data, details) => new StoreError(data.code as ErrorCode, data.message, { details }));
registerErrorClass(
  'ActorExitedError',
  (data, details) => new ActorExitedError(data.code as ErrorCode, data.message, { details }),
);

registerErrorClass(
  'ContainmentUnavailableError',
  (data, details) =>
    new ContainmentUnavailableError(data.message, { rung: String(details.rung), reason: String(details.reason) }),
);

registerErrorClass(
  'CodeNotKeptError',
  (data, details) =>
    new CodeNotKeptError(data.message, { package: String(details.package), path: String(details.path) }),
);

/** The class a code means when an error was raised as a plain HarnessError with it. */
const CLASS_OF_CODE: Partial<Record<string, string>> = {
  [ErrorCode.Conflict]: 'ConflictError',
  [ErrorCode.LeaseLost]: 'LeaseLostError',
  [ErrorCode.InvalidArgument]: 'InvalidArgumentError',
  [ErrorCode.OutputSchemaUnsupported]: 'OutputSchemaError',
  [ErrorCode.ContainmentUnavailable]: 'ContainmentUnavailableError',
  [ErrorCode.CodeNotKept]: 'CodeNotKeptError',
  [ErrorCode.StoreNotSqlite]: 'StoreError',
  [ErrorCode.StoreSchemaTooNew]: 'StoreError',
  [ErrorCode.StoreOpenFailed]: 'StoreError',
};

/**
 * Rebuilds an error that crossed a boundary as the class it was thrown as (its name); one
 * raised as a plain HarnessError is rebuilt as the class its code means, or as itself.
 */
export function deserializeError(given: SerializedError): HarnessError {
  // Nor what arrives: the thread that raised it may not have held every secret this one does.
  const data = scrubValue(given);
  const details = data.details ?? {};
  const rebuild = REBUILDERS.get(data.name) ?? REBUILDERS.get(CLASS_OF_CODE[data.code] ?? '');
  let error: HarnessError;
  if (rebuild) {
    error = rebuild(data, details);
  } else {
    error = new HarnessError((data.code as ErrorCode) ?? ErrorCode.Internal, data.message, { details });
    error.name = data.name;
  }
  // What a class computes from its inputs (a message, its details) stands as it was sent.
  if (error.message !== data.message) error.message = data.message;
  if (data.stack) error.stack = data.stack;
  return error;
}

/** A value as an error message shows it: JSON where it can be, and never a throw. */
export function shownValue(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (typeof value === 'function') return 'a function';
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
