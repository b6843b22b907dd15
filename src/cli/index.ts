/**
 * What the command line (bin/io-harness.mjs) loads besides the package's public entry: an
 * entry of the bundle of its own (scripts/bundle.mjs), so a command runs on the same copy
 * of every class as a program, or a provider module, that imports 'io-harness'.
 */
export { addressOf } from '../runtime/exec/containment/address-floor.js';
export { nearestCommand } from './command.js';
export { runTraceCommand, TRACE_COMMANDS, traceCommandsHelp } from './trace-commands.js';
