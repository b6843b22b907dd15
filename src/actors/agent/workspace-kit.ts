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
import { BROWSER_SANDBOX, openBrowser, RunBrowser } from '../../runtime/browser/run-browser.js';
import { programPolicy, programSandbox, RunPrograms } from '../../runtime/codeact/run-programs.js';
import { type ContractData, contractSecrets, guidanceBlock } from '../../runtime/contract/contract.js';
import { missingPackages } from '../../runtime/documents/documents.js';
import type { EventData } from '../../runtime/events.js';
import { DEFAULT_SANDBOX } from '../../runtime/exec/containment/boundary.js';
import { type ContainedExecutor, containmentLine } from '../../runtime/exec/containment/contained.js';
import type { Executor } from '../../runtime/exec/executor.js';
import { executorFor } from '../../runtime/exec/factory.js';
import { commandEnvironment } from '../../runtime/exec/run-command.js';
import { keepsReadsBack, RunLanguageServers } from '../../runtime/lsp/run-servers.js';
import { checkArgv } from '../../runtime/policy/commands/index.js';
import type { Policy } from '../../runtime/policy/policy.js';
import type { ProviderSpec } from '../../runtime/provider.js';
import { GIT_MISSING, gitEnvironment, gitProgram } from '../../runtime/tools/families/git.js';
import { LSP_TOOLS } from '../../runtime/tools/families/lsp.js';
import { workspaceTools } from '../../runtime/tools/families/workspace.js';
import { WorkspaceSession } from '../../runtime/workspace/session.js';
import { ensureWorktree } from '../../runtime/workspace/worktree.js';
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
  // A document format whose packages are not installed is refused, naming them, before the first step.
  const noPackages = contract.documents ? missingPackages(contract.documents.formats) : null;
  if (noPackages !== null) return noPackages;
  let executor = agent.ports.executor ?? null;
  let gitExecutor: (() => Executor) | undefined;
  let serversExecutor: (() => ContainedExecutor) | undefined;
  let browserExecutor: ((anchor: string) => ContainedExecutor) | undefined;
  let programsExecutor: (() => ContainedExecutor) | undefined;
  const egress = egressGate(agent, policy, contract.root, (event) => agent.step.events.push(event));
  if (!executor) {
    try {
      executor = executorFor({ purpose: 'run', contract, policy, egress });
      // The git tools' own: the same containment, the repository writable (their argv is fixed).
      if (contract.git)
        gitExecutor = () => executorFor({ purpose: 'run', contract, policy, egress, repository: 'writable' });
      // The language servers' own: the same containment, with every path the model may not read outright hidden.
      if (contract.lsp && contract.lsp.length > 0)
        serversExecutor = () => executorFor({ purpose: 'run', contract, policy, egress, hideReads: 'unreadable' });
      // The browser's own: the run's egress gate, and nothing of the workspace (see BROWSER_SANDBOX).
      if (contract.browser)
        browserExecutor = (anchor) =>
          executorFor({ purpose: 'run', root: anchor, sandbox: { ...BROWSER_SANDBOX }, policy, egress });
      // The programs' own: the workspace read-only, no network, what the model may not read outright hidden.
      if (contract.codeact)
        programsExecutor = () =>
          executorFor({
            purpose: 'run',
            contract: { ...contract, sandbox: programSandbox(contract.sandbox) },
            policy: programPolicy(policy),
            egress,
            hideReads: 'unreadable',
          });
    } catch (error) {
      return unavailable(error);
    }
  }
  const secrets = contractSecrets(contract, provider);
  const workspace = new WorkspaceSession(contract, policy as Policy, secrets, executor, gitExecutor);
  if (contract.lsp && contract.lsp.length > 0)
    workspace.lsp = languageServers(contract, workspace, policy, serversExecutor ?? null);
  if (contract.browser)
    workspace.browser = new RunBrowser(
      contract.browser,
      contract.root,
      policy,
      egress,
      () => openBrowser(browserExecutor ?? null, workspace.commandEnv),
      [contract.root, ...(contract.sandbox?.writableRoots ?? [])],
    );
  if (contract.codeact) {
    const made = programsExecutor;
    workspace.programs = new RunPrograms({
      data: contract.codeact,
      root: contract.root,
      policy,
      env: workspace.commandEnv,
      untrusted: [contract.root, ...(contract.sandbox?.writableRoots ?? [])],
      wallSecs: contract.sandbox?.caps?.wallSecs,
      open: () =>
        made?.() ??
        "this run's executor was handed in, and a program cannot be started under it; run without ports.executor to use withCodeAct().",
    });
  }
  return { executor, workspace };
}

/** How long git may take to check a child's worktree out: a large repository's checkout takes a while. */
const CHECKOUT_MS = 15 * 60_000;

/**
 * The worktree of a child that works in one of its own, made where it is not there yet (a
 * first start, or a resume after it was removed), before anything opens in it: git runs
 * under the run's containment in the workspace it was made from, with the repository's
 * git directory writable. Null when it is in place; else why the run cannot start.
 */
export async function openWorktree(
  agent: AgentRun,
  contract: ContractData,
  policy: Policy | null,
  provider: ProviderSpec,
  fresh: boolean,
): Promise<string | null> {
  const worktree = contract.worktree;
  if (!worktree) return null;
  const program = gitProgram();
  if (program === null) return GIT_MISSING;
  const egress = egressGate(agent, policy, worktree.repository, (event) => agent.step.events.push(event));
  let executor: Executor;
  try {
    executor =
      agent.ports.executor ??
      executorFor({
        purpose: 'run',
        contract: { root: worktree.repository, sandbox: contract.sandbox ?? DEFAULT_SANDBOX },
        policy,
        egress,
        repository: { gitDir: worktree.gitDir, writable: true },
      });
  } catch (error) {
    return unavailable(error);
  }
  const env = gitEnvironment(
    commandEnvironment(process.env, contractSecrets(contract, provider), contract.inheritedEnv ?? []),
  );
  try {
    return await ensureWorktree(
      worktree,
      contract.root,
      program,
      (argv) =>
        executor.run({
          argv,
          purpose: 'exec',
          cwd: worktree.repository,
          timeoutMs: CHECKOUT_MS,
          outputLimit: 8192,
          env,
        }),
      fresh,
    );
  } finally {
    if (executor !== agent.ports.executor) await executor.close?.();
  }
}

/**
 * Why an executor the run asked for is not to be had (a rung this host cannot give): it is
 * refused before the first step, never run with less. Any other error is thrown again.
 */
function unavailable(error: unknown): string {
  if (!HarnessError.isInstance(error) || error.code !== ErrorCode.ContainmentUnavailable) throw error;
  return error.message;
}

/**
 * The decisions that let the run's language servers start as it opens (see
 * RunLanguageServers.authorizeAtOpen): never while it plans, and none where every language
 * server tool is withheld (how a wide tree keeps its children from starting one each).
 */
export function authorizeServers(agent: AgentRun): EventData[] {
  const { workspace, contract } = agent;
  if (!workspace?.lsp || agent.planning) return [];
  if (Object.keys(LSP_TOOLS).every((name) => contract?.toolMask.includes(name))) return [];
  const root = workspace.contract.root;
  return workspace.lsp.authorizeAtOpen((argv) => checkArgv([...argv], workspace.policy, root));
}

/**
 * The run's language servers, on an executor of their own that hides from them what the
 * policy does not let the model read outright, made at the first question (the workspace
 * walked for what to hide then, not as every such run opens). None can start where that
 * cannot be hidden (a rung that hides no path, while the policy keeps some reads back), or
 * where the run's executor was handed in (nothing to wrap a long-lived server with).
 */
function languageServers(
  contract: ContractData,
  workspace: WorkspaceSession,
  policy: Policy | null,
  makeExecutor: (() => ContainedExecutor) | null,
): RunLanguageServers {
  return new RunLanguageServers(contract.lsp ?? [], contract.root, () => {
    if (!makeExecutor)
      return "this run's executor was handed in, and a language server cannot be started under it; run without ports.executor to use withLsp().";
    const executor = makeExecutor();
    const report = executor.contained?.();
    const reads = report?.reads ?? 'not established';
    if (policy && keepsReadsBack(policy, contract.root) && reads !== 'enforced') {
      void executor.close?.();
      return `the language servers cannot be started: the policy keeps some files from being read, and this run's containment cannot hide them from a server (reads ${reads} on the ${report?.rung ?? 'floor'} rung), which could then tell their contents in its answers. Run where bubblewrap or the Landlock helper is available, or without deny and ask rules for reads.`;
    }
    return { executor, launch: (argv) => executor.wrapCommand(argv, contract.root, workspace.commandEnv) };
  });
}

export { containmentLine, guidanceBlock, workspaceTools };
