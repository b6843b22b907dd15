/** io-harness/testing: what tests, demos and benchmarks drive the runtime with. */

export { ManualClock } from '../clock.js';
export type { Script, ScriptedOptions, ScriptedReply } from './scripted.js';
export { scriptedProvider, scriptedTokens, toolResults, turn } from './scripted.js';
