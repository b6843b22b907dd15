/**
 * The acts of a program (`run_program`, see src/runtime/codeact/): each call the program
 * makes is dispatched as the model's own calls are, through the same registry, with the
 * same refusals for what the run withholds, the same policy, approver and intent journal,
 * and the same trace, under the program's call: a `program-act` event each, and a
 * `refusal` for each act refused.
 *
 * An act is known by its place in the program and a fingerprint of what it asks (its tool
 * and whole arguments): a person's answer is for that act alone, and a program run again
 * after a crash is held to the acts it made before, place by place. One that asks at a
 * journaled place for anything else, a read included, is ended there (see DIVERGED), so an
 * act the new path moved to a later place is never made twice.
 */
import { createHash } from 'node:crypto';
import { DIVERGED } from '../../runtime/codeact/program.js';
import { keptOfSent, type ToolCall } from '../../runtime/provider.js';
import type { ProgramActs } from '../../runtime/tools/context.js';
import { NOT_IN_PROGRAMS } from '../../runtime/tools/families/codeact.js';
import { intentKey } from '../../runtime/tools/intents.js';
import type { ToolResult } from '../../runtime/tools/tool.js';
import { callContext } from './call-context.js';
import type { PreparedRun } from './prepare.js';
import type { Step } from './stage.js';

/** The parameters of a tool's schema in the order positional arguments fill them: the required first. */
function parameterOrder(parameters: Record<string, unknown>): string[] {
  const properties = Object.keys((parameters.properties as Record<string, unknown> | undefined) ?? {});
  const required = ((parameters.required as string[] | undefined) ?? []).filter((name) => properties.includes(name));
  return [...required, ...properties.filter((name) => !required.includes(name))];
}

/** The answer to an act that is not the one journaled at its place: see DIVERGED. */
function diverged(before: { kind: string; detail: string }): ToolResult {
  const reason = `before the crash this program's act at this place was ${before.kind} "${before.detail}", and a program run again must ask for the same acts in the same order; it took another path, so it is ended here and nothing more of it is made.`;
  return { content: reason, isError: true, refusal: { rule: DIVERGED, reason, layer: 'runtime' } };
}

/** How the program the call at `index` runs makes its acts. */
export function programActs(run: PreparedRun, step: Step, index: number, call: ToolCall): ProgramActs {
  const { agent, registry } = run;
  // What this call's acts journaled before (a program run again after a crash or a pause),
  // read once for the program: its own acts journal only at places it has already passed.
  let journaled: Promise<Map<string, { kind: string; detail: string }>> | null = null;
  const journal = () => {
    journaled ??= agent.store
      .intents(agent.run.runId)
      .then((intents) => new Map(intents.map((intent) => [intent.key, intent])));
    return journaled;
  };
  const callable = (name: string) =>
    !NOT_IN_PROGRAMS.has(name) && registry.kind(name) !== null && registry.kind(name) !== 'asks';
  return {
    tools: () => {
      const tools: Record<string, string[]> = {};
      for (const definition of registry.definitions())
        if (callable(definition.name) && step.withheld(definition.name) === null)
          tools[definition.name] = parameterOrder(definition.parameters);
      return tools;
    },
    call: async (act, name, args) => {
      const id = `${call.id}.${act}`;
      const screened = registry.screen({ id, name, args });
      const sent = JSON.stringify(screened.args) ?? '';
      // Its arguments as a call's are kept, cut where long: a few lines of program can ask for many large writes.
      const kept = keptOfSent(sent);
      const event = {
        type: 'program-act' as const,
        callId: id,
        program: call.id,
        tool: name,
        args: kept === sent ? screened.args : { cut: kept },
        isError: undefined as boolean | undefined,
      };
      agent.step.events.push(event);
      const fingerprint = createHash('sha256').update(`${name}\n${sent}`).digest('hex').slice(0, 16);
      const before = (await journal()).get(intentKey(agent, `${index}.${act}#${fingerprint}`));
      const result =
        before && !before.detail.endsWith(`[act ${fingerprint}]`)
          ? diverged(before)
          : await dispatchAct(run, step, index, call, { number: act, fingerprint }, screened, callable);
      if (result.halt) return result;
      event.isError = result.isError;
      if (result.refusal)
        agent.step.events.push({
          type: 'refusal',
          callId: id,
          tool: name,
          rule: result.refusal.rule,
          layer: result.refusal.layer ?? 'runtime',
          reason: result.refusal.reason,
        });
      return result;
    },
  };
}

async function dispatchAct(
  run: PreparedRun,
  step: Step,
  index: number,
  call: ToolCall,
  act: { number: number; fingerprint: string },
  screened: ToolCall,
  callable: (name: string) => boolean,
): Promise<ToolResult> {
  const { name } = screened;
  if (screened.invalid) return { content: screened.invalid.reason, isError: true };
  if (run.registry.kind(name) !== null && !callable(name)) {
    const reason = `${name} is not a tool a program may call (a spawn, a message, a question for a person, a program or a tier is the model's own call to make); call it outside the program.`;
    return { content: reason, isError: true, refusal: { rule: 'codeact.not-in-programs', reason } };
  }
  const withheld = step.withheld(name);
  if (withheld) return withheld;
  return run.registry.dispatch(name, screened.args, callContext(run.agent, index, call, true, { act }));
}
