/** The step context one tool call is given: what its tool may do beyond computing its result. */
import type { ToolCall } from '../../runtime/provider.js';
import { type AgentCall, callContext as buildCallContext } from '../../runtime/tools/context.js';
import { sameArguments } from './records.js';
import type { AgentRun } from './run.js';

/**
 * The step context of the call at `index`. `dispatched` is false for a call started while
 * its completion streams, which has no result of its own to pick up.
 */
export function callContext(agent: AgentRun, index: number, call: ToolCall, dispatched = true): AgentCall {
  const early = dispatched ? agent.step.early.get(index) : undefined;
  const started =
    early && early.call.name === call.name && sameArguments(early.call.args, call.args) ? early.result : undefined;
  return buildCallContext(agent, {
    index,
    callId: call.id,
    started,
    workspace: agent.workspace,
    mail: agent.mail,
    policy: agent.policy,
  });
}
