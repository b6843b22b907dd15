/** io-harness/testing: what tests, demos and benchmarks drive the runtime with. */

export { ManualClock } from '../clock.js';
export type {
  ModelScript,
  ScriptedAnswer,
  ScriptedCall,
  ScriptedCompletion,
  ScriptedFault,
  ScriptedMessage,
  ScriptedModel,
  ScriptedModelServerOptions,
  ScriptedRequest,
  ScriptedRequestBody,
  ScriptedToolCall,
  ScriptedUsage,
  ScriptedWeb,
} from './model-server.js';
export {
  AGENT_HEADER,
  assistantTurns,
  lastUserText,
  ScriptedModelServer,
  systemText,
  toolResults as wireToolResults,
} from './model-server.js';
export type { Script, ScriptedOptions, ScriptedProvider, ScriptedReply } from './scripted.js';
export { scriptedProvider, scriptedTokens, toolResults, turn } from './scripted.js';
export { requestOf, serveScript, transcriptOf } from './serve.js';
