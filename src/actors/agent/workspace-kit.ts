/**
 * What only a run with a workspace needs, loaded by ./prepare.ts when the run has one: the
 * executor the contract asks for (its containment and the egress gate), the workspace
 * session, the workspace's tools, the line that says how its commands are contained, and
 * the system block's part for the repository's guidance.
 * A run without a contract (a plain agent, a fan-out's children) never loads this file, so
 * an agent thread that hosts only such runs starts without the policy's command rules,
 * the sandbox and the file tools.
 */
import { ErrorCode, HarnessError } from '../../errors.js';
import { type ContractData, contractSecrets, guidanceBlock } from '../../runtime/contract/contract.js';
import { containmentLine } from '../../runtime/exec/containment/contained.js';
import type { Executor } from '../../runtime/exec/executor.js';
import { executorFor } from '../../runtime/exec/factory.js';
import type { Policy } from '../../runtime/policy/policy.js';
import type { ProviderSpec } from '../../runtime/provider.js';
import { GIT_MISSING, gitProgram } from '../../runtime/tools/families/git.js';
import { workspaceTools } from '../../runtime/tools/families/workspace.js';
import { WorkspaceSession } from '../../runtime/workspace/session.js';
import { egressGate } from './egress.js';
import type { AgentRun } from './run.js';

/** A workspace run's executor and session, or why it is refused before its first step. */
export function openWorkspace(
  agent: AgentRun,
  contract: ContractData,
  policy: Policy | null,
  provider: ProviderSpec,
): { executor: Executor; workspace: WorkspaceSession } | string {
  // The git the tools run is found (and kept from the run's commands) before any executor draws its boundary.
  if (contract.git && gitProgram() === null) return GIT_MISSING;
  let executor = agent.ports.executor ?? null;
  let gitExecutor: (() => Executor) | undefined;
  if (!executor) {
    try {
      const egress = egressGate(agent, policy, contract.root, (event) => agent.step.events.push(event));
      executor = executorFor({ purpose: 'run', contract, policy, egress });
      // The git tools' own: the same containment, the repository writable (their argv is fixed).
      if (contract.git)
        gitExecutor = () => executorFor({ purpose: 'run', contract, policy, egress, repository: 'writable' });
    } catch (error) {
      if (!HarnessError.isInstance(error) || error.code !== ErrorCode.ContainmentUnavailable) throw error;
      // Asked for by name and not to be had: refused before the first step, never run with less.
      return error.message;
    }
  }
  const secrets = contractSecrets(contract, provider);
  return { executor, workspace: new WorkspaceSession(contract, policy as Policy, secrets, executor, gitExecutor) };
}

export { containmentLine, guidanceBlock, workspaceTools };
