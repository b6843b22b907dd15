/**
 * io-harness: an embeddable agent runtime. A supervisor on your main thread runs one
 * actor per agent on worker threads; a store actor is the one writer of a SQLite
 * trace you own; a tree of agents draws from one budget ledger no child can raise.
 */

import { HostTool } from './runtime/tools/host-tool.js';

export type { Isolation } from './actors/host.js';
export type { Clock } from './clock.js';
export { systemClock } from './clock.js';
export type { BundleBin, BundleProblem, LoadedBundle, PromptTemplate } from './config/bundles.js';
export type { ConfigScope, DiscoverOptions, ValueOrigin } from './config/config.js';
export { Config, defaultUserFile } from './config/config.js';
export type { HookFailure, HookObserver, HookSpec } from './config/hooks.js';
export type { LeaseHolder, SerializedError } from './errors.js';
export {
  ActorExitedError,
  CodeNotKeptError,
  ConfigError,
  ConflictError,
  ContainmentUnavailableError,
  ErrorCode,
  HarnessError,
  InvalidArgumentError,
  LeaseLostError,
  OutputSchemaError,
  StoreError,
} from './errors.js';
// Types only: the MCP client itself is io-harness/mcp, so the core never loads the protocol's SDK.
export type { McpServerSpec } from './mcp/spec.js';
export type { AgentDefinition, AgentDeny } from './runtime/agents.js';
export type { Budget, Ceilings, Clamp } from './runtime/budget.js';
export type { ContextData } from './runtime/context/assembler.js';
export type { Rung, RungOptions } from './runtime/context/rungs.js';
export type { ContractBudget, ContractData, MemoryData, VerificationData } from './runtime/contract/contract.js';
export { TaskContract, ToolMask, Verification, WORKSPACE_TOOL_NAMES } from './runtime/contract/contract.js';
export { contractFromJSON } from './runtime/contract/from-json.js';
export type { OutputCheck } from './runtime/contract/output-check.js';
export { checkOutput } from './runtime/contract/output-check.js';
export type { JsonSchema, OutputSchemaInput } from './runtime/contract/output-schema.js';
export { OUTPUT_SCHEMA_KEYWORDS, OutputSchema } from './runtime/contract/output-schema.js';
export type {
  DrawAmount,
  EventData,
  EventType,
  GateVerdict,
  HarnessEvent,
  PlanStep,
  QuestionKind,
  RunStatus,
} from './runtime/events.js';
export { EVENT_TYPES, isTerminal, TERMINAL_STATUSES } from './runtime/events.js';
export type { Access, SandboxCaps, SandboxData } from './runtime/exec/containment/boundary.js';
export type { ContainedReport } from './runtime/exec/containment/contained.js';
export { selectBackend } from './runtime/exec/containment/contained.js';
export type { RungName } from './runtime/exec/containment/rungs.js';
export type { CommandResult } from './runtime/exec/run-command.js';
export type { ImageAttachment } from './runtime/images.js';
export type { LiveData, LiveEvent } from './runtime/live.js';
export { LIVE_CHANNELS } from './runtime/live.js';
export type {
  ApprovalAnswer,
  ApprovalRequest,
  Approver,
  Operator,
  OperatorQuestion,
  PlanDecision,
  PlanGate,
  PlanReview,
} from './runtime/policy/approval.js';
export { ApproveAll, CallbackApprover, DenyAll } from './runtime/policy/approval.js';
export type { CommandCheck } from './runtime/policy/commands/index.js';
export { checkArgv, checkShell } from './runtime/policy/commands/index.js';
export type { Act, ActKind, Decision, Effect, PolicyData, PolicyLayer, PolicyRule } from './runtime/policy/policy.js';
export { FLOOR, Policy, resolvePath } from './runtime/policy/policy.js';
export type { ShellParse, ShellStage } from './runtime/policy/shell.js';
export { parseShell } from './runtime/policy/shell.js';
export type {
  AiSdkProviderSpec,
  CallAttempt,
  Completion,
  CompletionHooks,
  FallbackProviderSpec,
  HostProviderSpec,
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
export type { AiSdkOptions, CommonOptions, CompatibleOptions, VendorOptions } from './runtime/providers/builders.js';
export {
  Anthropic,
  aiSdk,
  Compatible,
  hostModel,
  listModels,
  OpenAI,
  OpenRouter,
  withFallback,
} from './runtime/providers/builders.js';
export { HttpProvider } from './runtime/providers/client.js';
export type { HostModel, HostModelAnswer, HostModelRequest } from './runtime/providers/host-model.js';
export type { Preset } from './runtime/providers/presets.js';
export { PRESETS } from './runtime/providers/presets.js';
export { loadProvider } from './runtime/providers/registry.js';
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
  ToolCallContext,
  ToolCallResult,
  ToolDeclaration,
  ToolDefinitionData,
  ToolEffect,
  ToolImage,
} from './runtime/tools/host-tool.js';
export { HostTool, MAX_TOOL_RESULT_CHARS, ToolOutput, tool } from './runtime/tools/host-tool.js';
export type { GateEvaluation } from './runtime/verify/gate.js';
export type { WebActivity, WebData, WebOptions, WebSource } from './runtime/web/web.js';
export type { FileChange } from './runtime/workspace/files.js';
export { reverseApply, unifiedDiff } from './runtime/workspace/files.js';
export type {
  Argv,
  CommandName,
  EcosystemId,
  Toolchain,
  ToolchainCommands,
  ToolchainOverride,
  ToolchainOverrides,
} from './runtime/workspace/toolchain.js';
export {
  checkToolchainOverrides,
  detectToolchain,
  ECOSYSTEM_IDS,
  toolchainTable,
} from './runtime/workspace/toolchain.js';
export type { MemoryOptions, NoteKind, NoteRecord } from './store/memory.js';
export { Memory } from './store/memory.js';
export { formatCost } from './store/queries.js';
export type {
  CostReport,
  DrawRecord,
  FileChangeRecord,
  IntentRecord,
  LedgerAccount,
  MessageRecord,
  ModelCallRecord,
  ModelCallRow,
  PriceTable,
  QuestionRecord,
  QueueRecord,
  RememberResult,
  RestorePoint,
  RunRecord,
  SessionRecord,
  StepRecord,
  TreeLedger,
  TurnRecord,
  WebSourceRow,
} from './store/records.js';
export { TraceReader } from './store/sqlite/reader.js';
export type { StoreOptions } from './store/sqlite/store.js';
export { Store } from './store/sqlite/store.js';
export { SCHEMA_VERSION } from './store/version.js';
export { Attach } from './supervisor/attach.js';
export type { EventFilter, LiveObserver, Observer, ObserverContext } from './supervisor/event-bus.js';
export { answerQuestion } from './supervisor/questions.js';
export type { RewoundFile } from './supervisor/rewind.js';
export { rewind, rewindRun, rewindStep } from './supervisor/rewind.js';
export type { RunPart } from './supervisor/run-stream.js';
export type { Outcome, PlainRunOptions, RunResult, RunWithOptions } from './supervisor/run-with.js';
export { outcomeOf, retryGate, runWith } from './supervisor/run-with.js';
export type {
  Containment,
  SessionOptions,
  TurnEvent,
  TurnKind,
  TurnOptions,
  TurnResult,
} from './supervisor/session.js';
export { Session, TurnConflictError, TurnHandle } from './supervisor/session.js';
export type {
  ResumeOptions,
  RetriedGate,
  RunHandle,
  RunOptions,
  SupervisorOptions,
  SupervisorState,
  TreeResult,
} from './supervisor/supervisor.js';
export { Supervisor } from './supervisor/supervisor.js';
export type { UIMessageChunk, UIMessageMetadata } from './ui/message-stream.js';
export type { UIMessage, UIMessagePart } from './ui/messages.js';

/**
 * The embedder's tool class under its first name.
 *
 * @deprecated Use {@link HostTool}: the class is named for where it runs, so it is not
 * confused with the runtime's own tool type. `Tool` is the same class (`instanceof` and
 * `new` work alike), kept so code that names it keeps compiling.
 */
export const Tool = HostTool;
/** @deprecated Use {@link HostTool}; see the value `Tool`. */
export type Tool<Args = Record<string, unknown>> = HostTool<Args>;
