/**
 * What a run's system prompt says, by the kind of run: a workspace run's (its tools, its
 * plan gate, its output schema) or an agent's in a tree. Which tools a run has is
 * runtime/tools/registry.ts (`registryFor`).
 */
import type { ContractData } from '../../runtime/contract/contract.js';
import type { RunRecord, RunSpec } from '../../store/records.js';

/** What a run whose answer has a shape is told. */
const SHAPED = ' Your final answer must be a single JSON value matching the schema you were given.';

export function workspaceSystem(contract: ContractData): string {
  return (
    'You are a coding agent working in a repository. Use the tools to read, search, change and run the project. ' +
    'Change files with edit_file (an exact, unique replacement), patch_file (a unified diff) or write_file. ' +
    'When something about the intent of the task is unclear, ask with ask_operator rather than guess. ' +
    'When the work is done, answer without a tool call, saying what you did.' +
    (contract.planGate
      ? ' This run starts in a planning phase: read what you need, then submit an ordered plan with submit_plan; changes and commands wait until it is approved.'
      : '') +
    (contract.outputSchema ? SHAPED : '')
  );
}

export function defaultSystem(run: RunRecord, spec: Pick<RunSpec, 'outputSchema'> = {}): string {
  return (
    `You are agent "${run.address}" in a tree of agents. ` +
    'Use spawn_agent to hand work to sub-agents, send_message and read_messages to talk to agents of this tree by address, ' +
    'and answer without a tool call when your task is done.' +
    (spec.outputSchema && run.parentId === null ? SHAPED : '')
  );
}
