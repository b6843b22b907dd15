/**
 * The check of a request against the run's window, before it is sent: the head of a
 * request (system block, tools, opening turn) must fit at all; a request over its share
 * is brought under it by the context rungs the contract turns on and then a fold, each
 * committed as a step of its own; a request that does not extend the one before it is
 * named. The rungs themselves are in ./assembly.ts and runtime/context/.
 */
import type { EventData } from '../../runtime/events.js';
import type { Provider, ToolDefinition } from '../../runtime/provider.js';
import type { PreparedRun } from './prepare.js';
import { endRun, metadataOf, type StepOutcome } from './stage.js';

/** A request that fits: its tools, its size and its estimate, and what assembling it noted. */
export interface Fitted {
  tools: ToolDefinition[];
  chars: number;
  tokens: number;
  assembled: EventData[];
}

export async function checkWindow(
  run: PreparedRun,
  model: Provider,
  offered: ReadonlySet<string> | undefined,
): Promise<StepOutcome | Fitted> {
  const { agent, assembly, transcript } = run;
  const tools = run.registry.definitions(offered);
  if (run.room === 'unchecked') {
    run.room = 'checked';
    const refused = assembly.noRoom(assembly.system, tools, transcript);
    if (refused) return endRun(agent, 'failed', refused);
  }
  // Over its share: the rungs the contract turns on, then a fold, each stored as a step of its own.
  const request = { system: assembly.system, tools, options: run.options, metadata: metadataOf(run) };
  const folded = await assembly.fit(agent, model, request, transcript);
  if (folded.kind === 'ended') return { kind: 'ended', status: folded.status };
  if (folded.kind === 'folded') agent.seq += folded.steps;
  // A reduce may have cut the memory block: the system block is the assembly's from here.
  const { chars, tokens, broke } = assembly.toSend(assembly.system, tools);
  return { tools, chars, tokens, assembled: broke ? [broke] : [] };
}
