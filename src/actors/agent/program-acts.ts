/**
 * The acts of a program (`run_program`, see src/runtime/codeact/): each call the program
 * makes is dispatched as the model's own calls are, through the same registry, with the
 * same refusals for what the run withholds, the same policy, approver and intent journal
 * (keyed `<call>.<act>`, so a program run again after a crash finds what each of its acts
 * did) and the same trace, under the program's call: a `program-act` event each, and a
 * `refusal` for each act refused.
 */
import type { ToolCall } from '../../runtime/provider.js';
import type { ProgramActs } from '../../runtime/tools/context.js';
import { NOT_IN_PROGRAMS } from '../../runtime/tools/families/codeact.js';
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

/** How the program the call at `index` runs makes its acts. */
export function programActs(run: PreparedRun, step: Step, index: number, call: ToolCall): ProgramActs {
  const { agent, registry } = run;
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
      const event = {
        type: 'program-act' as const,
        callId: id,
        program: call.id,
        tool: name,
        args: screened.args,
        isError: undefined as boolean | undefined,
      };
      agent.step.events.push(event);
      const result = await dispatchAct(run, step, index, call, act, screened, callable);
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
  act: number,
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
