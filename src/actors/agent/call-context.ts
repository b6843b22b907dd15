/** The step context one tool call is given: what its tool may do beyond computing its result. */
import type { ToolCall } from '../../runtime/provider.js';
import { type AgentCall, callContext as buildCallContext, type ProgramActs } from '../../runtime/tools/context.js';
import { sameArguments } from './records.js';
import type { AgentRun } from './run.js';

/**
 * The step context of the call at `index`. `dispatched` is false for a call started while
 * its completion streams, which has no result of its own to pick up. `program`: for a
 * call that runs a program, how its acts are made (`acts`); for one of those acts, its
 * number (`act`), which started nothing early.
 */
export function callContext(
  agent: AgentRun,
  index: number,
  call: ToolCall,
  dispatched = true,
  program: { act?: { number: number; fingerprint: string }; acts?: ProgramActs } = {},
): AgentCall {
  const early = dispatched && program.act === undefined ? agent.step.early.get(index) : undefined;
  const started =
    early && early.call.name === call.name && sameArguments(early.call.args, call.args) ? early.result : undefined;
  return buildCallContext(agent, {
    index,
    ...program,
    callId: program.act === undefined ? call.id : `${call.id}.${program.act.number}`,
    started,
    workspace: agent.workspace,
    mail: agent.mail,
    policy: agent.policy,
  });
}
