/**
 * A call to one of the embedder's tools, from the agent's side: the policy decides it as
 * an act of kind `tool` (allow, deny, or ask the tree's approver), an `acts` tool is
 * journaled as an intent before the call, and the main thread checks the arguments and
 * runs it over the host channel.
 */

import type { ArgumentSchema } from '../../arguments.js';
import type { Act } from '../../policy/policy.js';
import type { AgentCall, RunContext } from '../context.js';
import { CANCELLED, halted, type StepContext, type Tool, type ToolDefinitionData, type ToolResult } from '../tool.js';

/**
 * One of the embedder's tools as the agent declares it: the main thread checks its
 * arguments and runs it. A call the policy asks about has its arguments checked first (a
 * person is asked only about a good call); one that reads and is allowed outright may
 * start while its completion streams.
 */
export function hostTool(definition: ToolDefinitionData): Tool<AgentCall> {
  const { name } = definition;
  return {
    name,
    description: definition.description,
    parameters: definition.parameters as unknown as ArgumentSchema,
    kind: 'host',
    checkedBy: 'host',
    ...(definition.family ? { family: definition.family } : {}),
    early: (args, call) =>
      definition.effect === 'reads' && call.decide({ kind: 'tool', name }) === 'allow'
        ? callHostTool(call.agent, definition, args, call.callId, null)
        : null,
    execute: async (args, call) => {
      if (call.planning && definition.effect === 'acts') {
        const reason = `${name} acts on the world, so it waits for an approved plan: this run is in its planning phase; call submit_plan.`;
        return { content: reason, isError: true, refusal: { rule: 'plan-gate', reason } };
      }
      if (call.decide({ kind: 'tool', name }) === 'ask') {
        const invalid = await call.agent.host.checkTool({ runId: call.agent.run.runId, name, args });
        if (invalid !== null) return { content: invalid, isError: true };
      }
      const refused = await call.authorize(toolAct(name, args));
      if (refused) return refused;
      // Started while the completion streamed, for this very call: its result, after the same decision as ever.
      return call.started ?? callHostTool(call.agent, definition, args, call.callId, call.intent);
    },
  };
}

/** The longest a tool's arguments are shown in the question an interrupted call asks. */
const SHOWN_ARGUMENT_CHARS = 200;

/** The arguments as an approver reads them: JSON, cut at this many characters. */
const SHOWN_TO_APPROVER_CHARS = 1_000;

/** A call's arguments as JSON, cut at `chars` characters. */
function shownArguments(args: Record<string, unknown>, chars: number): string {
  const shown = JSON.stringify(args);
  return shown.length > chars ? `${shown.slice(0, chars)}…` : shown;
}

/** A tool act, with its arguments shown (never matched on). */
export function toolAct(name: string, args: Record<string, unknown>): Act {
  return { kind: 'tool', name, args: shownArguments(args, SHOWN_TO_APPROVER_CHARS) };
}

/**
 * Runs the call on the main thread; an `acts` tool under a journaled intent (`journal`,
 * the call's own; a read started early has none, nor needs one). When the
 * step's signal fires (a cancel, the deadline) the main thread is told, so the tool's own
 * signal fires; a cancel does not wait for the tool to settle (the deadline gives it its
 * grace, see Deadline.hold).
 */
export function callHostTool(
  context: RunContext,
  definition: ToolDefinitionData,
  args: Record<string, unknown>,
  callId: string,
  journal: StepContext['intent'] | null,
): Promise<ToolResult> {
  const { run } = context;
  const call = async (): Promise<ToolResult> => {
    const signal = context.signal;
    if (signal.aborted)
      return context.cancelled ? halted(CANCELLED) : { content: 'not run: the step was stopped.', isError: true };
    let onAbort: () => void = () => undefined;
    const cancelled = new Promise<ToolResult>((resolve) => {
      onAbort = () => {
        context.host.abortTool({ runId: run.runId, callId }).catch(() => undefined);
        if (context.cancelled) resolve(halted(CANCELLED));
      };
      signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      const answer = context.host
        .callTool({ rootId: run.rootId, runId: run.runId, address: run.address, callId, name: definition.name, args })
        .then(
          (result): ToolResult => ({
            content: result.content,
            isError: result.isError,
            ...(result.images && result.images.length > 0 ? { images: result.images } : {}),
            ...(result.error ? { error: result.error } : {}),
          }),
        );
      return await Promise.race([answer, cancelled]);
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  };
  if (definition.effect === 'reads' || journal === null) return call();
  const detail = `${definition.name} ${shownArguments(args, SHOWN_ARGUMENT_CHARS)}`;
  return journal('tool', detail, call);
}
