/**
 * The act stage: the completion's calls, in order, each through the registry under the
 * step's deadline, until a pause (the step is kept as a draft until a person answers), a
 * stop (a person ended the run), a cancel or the deadline. Reads the policy allows
 * outright may have started while the completion streamed; a run of spawns without wait
 * is reserved together.
 */
import type { EventData } from '../../runtime/events.js';
import type { ToolCall } from '../../runtime/provider.js';
import type { AgentCall } from '../../runtime/tools/context.js';
import { RUN_PROGRAM } from '../../runtime/tools/families/codeact.js';
import * as tree from '../../runtime/tools/families/tree.js';
import type { ToolRegistry } from '../../runtime/tools/registry.js';
import { CANCELLED, type Halt, type ToolResult } from '../../runtime/tools/tool.js';
import { callContext } from './call-context.js';
import type { PreparedRun } from './prepare.js';
import { programActs } from './program-acts.js';
import { observedName } from './records.js';
import type { Step, StepOutcome } from './stage.js';

/** Runs the step's calls; a pause is the step's outcome, anything else goes on to the checks. */
export async function act(run: PreparedRun, step: Step): Promise<StepOutcome | null> {
  const { agent } = run;
  const effects = agent.step;
  const { completion, observations } = step;
  for (const [index, call] of completion.toolCalls.entries()) {
    // Calls a paused step had already made are not made again.
    if (index < observations.length) continue;
    agent.deadline.fireIfDue();
    if (agent.cancelled || agent.deadline.overdue) break;
    const mark = effects.events.length;
    const event: Extract<EventData, { type: 'tool-call' }> = {
      type: 'tool-call',
      callId: call.id,
      name: call.name,
      args: call.args,
      ...(call.invalid ? { invalid: call.invalid } : {}),
    };
    effects.events.push(event);
    const result = await dispatch(run, step, index, call);
    // A tool that threw says so in its own event, committed with the step.
    if (result.error) event.failed = { name: result.error.name, message: result.error.message };
    const halt: Halt | undefined = result.halt;
    if (halt?.kind === 'pause' && agent.cancelled) {
      step.stop = agent.cancelReason;
      break;
    }
    if (halt?.kind === 'pause') return pause(run, step, halt, mark);
    if (halt?.kind === 'stop') {
      // Ended by a person (a cancel, a cancelled plan, an aborted command): the step commits what it did.
      step.stop = halt === CANCELLED ? agent.cancelReason : halt.reason;
      break;
    }
    if (result.refusal) {
      effects.events.push({
        type: 'refusal',
        callId: call.id,
        tool: call.name,
        rule: result.refusal.rule,
        layer: result.refusal.layer ?? 'runtime',
        reason: result.refusal.reason,
      });
    }
    observations.push({
      callId: call.id,
      name: observedName(call.name),
      content: result.content,
      isError: result.isError,
      ...(result.images ? { images: result.images } : {}),
      ...(result.error ? { error: result.error } : {}),
    });
  }
  return null;
}

/** One call: refused when withheld or malformed, else run by its tool, held to the step's deadline. */
async function dispatch(run: PreparedRun, step: Step, index: number, call: ToolCall): Promise<ToolResult> {
  const { agent, registry } = run;
  const refused = step.withheld(call.name);
  if (refused) return refused;
  if (call.invalid) return { content: call.invalid.reason, isError: true };
  const live = agent.ports.live;
  const seq = agent.seq;
  const calls = step.completion.toolCalls;
  // A run of spawns without wait is reserved together, each call taking its own reply.
  tree.reserveAhead(agent, calls, index, (at) => {
    const next = calls[at] as ToolCall;
    return step.withheld(next.name) === null && !next.invalid && registry.accepts(next.name, next.args);
  });
  live?.publish({ type: 'tool-call-start', seq, callId: call.id, name: call.name, index });
  // A program's acts are dispatched as this call's (see ./program-acts.ts).
  const program = call.name === RUN_PROGRAM ? { acts: programActs(run, step, index, call) } : {};
  const result = await agent.deadline.hold(
    registry.dispatch(call.name, call.args, callContext(agent, index, call, true, program)),
  );
  if (!result.halt) {
    live?.publish({ type: 'tool-call-end', seq, callId: call.id, name: call.name, index, isError: result.isError });
  }
  return result;
}

/** Keeps the step as a draft (what it did before the pausing call) until a person answers the question. */
async function pause(
  run: PreparedRun,
  step: Step,
  halt: Extract<Halt, { kind: 'pause' }>,
  mark: number,
): Promise<StepOutcome> {
  const { agent } = run;
  await agent.ports.live?.flush();
  await agent.store.call('pause', {
    ...agent.fence,
    seq: agent.seq,
    completion: step.completion,
    partial: agent.step.draft(step.observations, step.calls, mark),
    question: halt.question,
    events: halt.events,
    now: agent.clock.now(),
  });
  return { kind: 'paused', questionId: halt.question.questionId };
}

/**
 * A call the stream has finished, at the head of the completion, that its tool can start
 * now (it only reads, and the policy allows it outright): started. Its result is used
 * only if the finished completion asks for the same call with the same arguments;
 * otherwise it is dropped unrecorded.
 */
export function startEarly(
  run: PreparedRun,
  call: ToolCall,
  index: number,
  withheld: (name: string) => ToolResult | null,
): void {
  const { agent, registry } = run;
  const early = agent.step.early;
  // A new attempt (a retry, a fallback) starts its calls from index 0: nothing of an earlier attempt is reused.
  if (index === 0) early.clear();
  if (index !== early.size || withheld(call.name) !== null) return;
  let result: ToolResult | Promise<ToolResult> | null;
  try {
    result = registry.startEarly(call.name, call.args, callContext(agent, index, call, false));
  } catch {
    // A start that throws is simply not started early.
    return;
  }
  if (result === null) return;
  // Awaited only when the finished completion makes this call; otherwise its outcome is dropped.
  if (result instanceof Promise) result.catch(() => undefined);
  early.set(index, { call, result });
}

/**
 * The refusal of a call to a tool the run withholds: one its contract masks, or one of a
 * tier not offered in this step's request. Null when the call may be dispatched.
 */
export function withheldBy(
  mask: ReadonlySet<string>,
  offered: ReadonlySet<string> | undefined,
  registry: ToolRegistry<AgentCall>,
  name: string,
): ToolResult | null {
  if (mask.has(name)) {
    const reason = `${name} is withheld for this run (tool mask); use another tool.`;
    return { content: reason, isError: true, refusal: { rule: 'tool-mask', reason } };
  }
  const family = offered ? registry.family(name) : undefined;
  if (family !== undefined && !offered?.has(family)) {
    const reason = `${name} is in the ${family} tools, which this step was not offered; call expand_tools with family "${family}" first, and it is offered from the next step.`;
    return { content: reason, isError: true, refusal: { rule: 'tool-tier', reason } };
  }
  return null;
}
