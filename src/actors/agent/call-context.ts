/** The step context one tool call is given: what its tool may do beyond computing its result. */
import type { EventData } from '../../runtime/events.js';
import type { CommandCheck } from '../../runtime/policy/commands.js';
import type { Act } from '../../runtime/policy/policy.js';
import type { ToolCall } from '../../runtime/provider.js';
import type { ToolResult } from '../../runtime/tools.js';
import { type DecisionHost, settleCommand, settleDecision } from '../../runtime/workspace/session.js';
import type { AgentCall } from './context.js';
import * as people from './people.js';
import { sameArguments } from './records.js';
import type { AgentRun } from './run.js';

/**
 * The step context of the call at `index`. `dispatched` is false for a call started while
 * its completion streams, which has no result of its own to pick up.
 */
export function callContext(agent: AgentRun, index: number, call: ToolCall, dispatched = true): AgentCall {
  const decisions: DecisionHost = {
    ask: (act, decision, callIndex) => people.ask(agent, act, decision, callIndex),
    event: (event) => agent.step.events.push(event),
  };
  const root = agent.contract?.root ?? '/';
  const early = dispatched ? agent.step.early.get(index) : undefined;
  const started =
    early && early.call.name === call.name && sameArguments(early.call.args, call.args) ? early.result : undefined;
  return {
    callIndex: index,
    callId: call.id,
    get signal() {
      return agent.signal;
    },
    get planning() {
      return agent.planning;
    },
    started,
    agent,
    workspace: agent.workspace,
    mail: agent.mail,
    decide: (act: Act) => agent.policy?.decide(act, root).effect ?? 'allow',
    authorize: async (act: Act) => {
      const policy = agent.policy;
      return policy ? settleDecision(decisions, act, policy.decide(act, root), [], index) : null;
    },
    authorizeCommand: (act: Act, check: CommandCheck) => settleCommand(decisions, act, check, index),
    intent: (kind: string, detail: string, run: () => Promise<ToolResult>) =>
      people.intent(agent, index, kind, detail, run),
    restorePoint: async (path: string, content: Uint8Array | null) => {
      await agent.store.call('recordRestorePoint', {
        ...agent.fence,
        seq: agent.seq,
        workspace: agent.contract?.root as string,
        path,
        content,
        now: agent.clock.now(),
      });
    },
    record: (event: EventData) => agent.step.events.push(event),
    change: (change: { path: string; diff: string }) => agent.step.changes.push(change),
  };
}
