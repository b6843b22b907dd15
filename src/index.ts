/**
 * io-harness: an embeddable agent runtime. A supervisor on your main thread runs one
 * actor per agent on worker threads; a store actor is the one writer of a SQLite
 * trace you own; a tree of agents draws from one budget ledger no child can raise.
 */

export type { Clock } from './clock.js';
export { systemClock } from './clock.js';
export type { LeaseHolder, SerializedError } from './errors.js';
export {
  ActorExitedError,
  ConflictError,
  ErrorCode,
  HarnessError,
  InvalidArgumentError,
  LeaseLostError,
  StoreError,
} from './errors.js';
export type { Budget, Ceilings, Clamp } from './runtime/budget.js';
export type { DrawAmount, EventData, EventType, HarnessEvent, RunStatus } from './runtime/events.js';
export { isTerminal, TERMINAL_STATUSES } from './runtime/events.js';
export type {
  CallAttempt,
  Completion,
  FallbackProviderSpec,
  HttpProviderSpec,
  JsonValue,
  ModelRequest,
  ModuleProviderSpec,
  Provider,
  ProviderSpec,
  RequestMetadata,
  RequestOptions,
  RetryOptions,
  ToolCall,
  ToolDefinition,
  TranscriptEntry,
  Usage,
} from './runtime/provider.js';
export { loadProvider } from './runtime/provider.js';
export type { CommonOptions, CompatibleOptions, VendorOptions } from './runtime/providers/builders.js';
export { Anthropic, Compatible, listModels, OpenAI, OpenRouter, withFallback } from './runtime/providers/builders.js';
export { HttpProvider } from './runtime/providers/client.js';
export type { Preset } from './runtime/providers/presets.js';
export { PRESETS } from './runtime/providers/presets.js';
export type {
  CallUsage,
  ModelInfo,
  ProviderFailureKind,
  RateLimits,
  RateLimitWindow,
  StreamPart,
} from './runtime/providers/types.js';
export { ProviderError } from './runtime/providers/types.js';
export type {
  CostReport,
  DrawRecord,
  LedgerAccount,
  MessageRecord,
  ModelCallRow,
  PriceTable,
  QueueRecord,
  RunRecord,
  StepRecord,
  TreeLedger,
} from './store/reader.js';
export { TraceReader } from './store/reader.js';
export { SCHEMA_VERSION } from './store/schema.js';
export type { StoreOptions } from './store/store.js';
export { Store } from './store/store.js';
export type { ModelCallRecord } from './store/writer.js';
export type { EventFilter, Observer } from './supervisor/event-bus.js';
export type {
  ResumeOptions,
  RunHandle,
  RunOptions,
  SupervisorOptions,
  SupervisorState,
  TreeResult,
} from './supervisor/supervisor.js';
export { Supervisor } from './supervisor/supervisor.js';
