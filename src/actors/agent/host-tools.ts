/**
 * A call to one of the embedder's tools, from the agent's side: the policy decides it as
 * an act of kind `tool` (allow, deny, or ask the tree's approver), an `acts` tool is
 * journaled as an intent before the call, and the main thread checks the arguments and
 * runs it over the host channel.
 */
import type { ToolDefinitionData } from '../../runtime/custom-tool.js';
import type { Act, Decision, Policy } from '../../runtime/policy/policy.js';
import { halted, type ToolResult } from '../../runtime/tools.js';
import type { RunContext } from './context.js';
import * as people from './people.js';

/** The longest a tool's arguments are shown in the question an interrupted call asks. */
const SHOWN_ARGUMENT_CHARS = 200;

/**
 * Decides a tool act against a policy, recording the decision; null when it may go on.
 * (A workspace run decides through its session, which records the same way.)
 */
export async function authorizeTool(
  context: RunContext,
  policy: Policy,
  name: string,
  args: Record<string, unknown>,
  callIndex: number,
): Promise<ToolResult | null> {
  const act = toolAct(name, args);
  const decision = policy.decide(act, '/');
  let answer: 'approve' | 'deny' | undefined;
  if (decision.effect === 'ask') {
    const asked = await people.ask(context, act, decision as Extract<Decision, { effect: 'ask' }>, callIndex);
    if (typeof asked !== 'string') return halted(asked);
    answer = asked;
  }
  context.step.events.push({
    type: 'policy-decision',
    act: 'tool',
    subject: decision.subject,
    effect: decision.effect,
    rule: decision.rule,
    layer: decision.layer,
    ...(answer === undefined ? {} : { answer }),
  });
  if (decision.effect === 'allow' || answer === 'approve') return null;
  const rule = decision.rule ?? 'policy.no-rule';
  const layer = decision.layer ?? 'policy';
  const reason =
    decision.effect === 'deny'
      ? `tool ${name} is denied: ${decision.reason}${decision.layer ? ` (layer ${decision.layer})` : ''}.`
      : `tool ${name} needs approval (${decision.rule}, layer ${decision.layer}) and the approver denied it.`;
  return { content: reason, isError: true, refusal: { rule, reason, layer } };
}

/** The arguments as an approver reads them: JSON, cut at this many characters. */
const SHOWN_TO_APPROVER_CHARS = 1_000;

/** A tool act, with its arguments shown (never matched on). */
export function toolAct(name: string, args: Record<string, unknown>): Act {
  const shown = JSON.stringify(args);
  return {
    kind: 'tool',
    name,
    args: shown.length > SHOWN_TO_APPROVER_CHARS ? `${shown.slice(0, SHOWN_TO_APPROVER_CHARS)}…` : shown,
  };
}

const CANCELLED: ToolResult = halted({ kind: 'stop', reason: 'cancelled by the supervisor' });

/**
 * Runs the call on the main thread; an `acts` tool under a journaled intent. When the
 * step's signal fires (a cancel, the deadline) the main thread is told, so the tool's own
 * signal fires; a cancel does not wait for the tool to settle (the deadline gives it its
 * grace, see Deadline.hold).
 */
export function callHostTool(
  context: RunContext,
  definition: ToolDefinitionData,
  args: Record<string, unknown>,
  callIndex: number,
  callId: string = context.step.calls[callIndex]?.id ?? `call-${callIndex}`,
): Promise<ToolResult> {
  const { run } = context;
  const call = async (): Promise<ToolResult> => {
    const signal = context.signal;
    if (signal.aborted)
      return context.cancelled ? CANCELLED : { content: 'not run: the step was stopped.', isError: true };
    let onAbort: () => void = () => undefined;
    const cancelled = new Promise<ToolResult>((resolve) => {
      onAbort = () => {
        context.host.abortTool({ runId: run.runId, callId }).catch(() => undefined);
        if (context.cancelled) resolve(CANCELLED);
      };
      signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      const answer = context.host
        .callTool({ rootId: run.rootId, runId: run.runId, address: run.address, callId, name: definition.name, args })
        .then((result): ToolResult => ({ content: result.content, isError: result.isError }));
      return await Promise.race([answer, cancelled]);
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  };
  if (definition.effect === 'reads') return call();
  const shown = JSON.stringify(args);
  const detail = `${definition.name} ${shown.length > SHOWN_ARGUMENT_CHARS ? `${shown.slice(0, SHOWN_ARGUMENT_CHARS)}…` : shown}`;
  return people.intent(context, callIndex, 'tool', detail, call);
}
