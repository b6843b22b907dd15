/**
 * The executor factory: the one place that decides how a child process the harness starts
 * for a run runs. A run's tools' commands, its checker and its command gate; a gate
 * retried after the run (`retryGate`); a configuration's `run` hooks; MCP stdio servers
 * (a tree's, or ones an embedder connects itself) — each asks {@link executorFor} with the
 * contract's sandbox and workspace (or, outside a run, the sandbox and root it is given),
 * the policy, and what the processes are for. Nothing else constructs an executor, and no
 * parameter anywhere falls back to the direct one: test/layout.test.ts holds that.
 *
 * What it decides: every executor is a {@link ContainedExecutor} around the direct spawner,
 * on the strongest rung this host offers that can give what the sandbox and policy grant
 * (or the rung the sandbox names, else `CONTAINMENT_UNAVAILABLE`). The one way to the
 * direct spawner's behaviour is a sandbox of full access (`withFullAccess()`, a sentence in
 * the embedder's source): the executor then reports `rung: 'full-access'`, which the trace
 * records like any other rung, and still holds the harness's own caps (wall clock, output).
 *
 * The one child process that does not come here is a configuration's `${cmd:}`
 * substitution (src/config/substitute.ts): see docs/guides/containment.md for why.
 */
import type { EventData } from '../events.js';
import type { WorktreeData } from '../workspace/worktree.js';
import type { SandboxData } from './containment/boundary.js';
import { ContainedExecutor } from './containment/contained.js';
import { keepHarnessCode } from './containment/harness-code.js';
import { type EgressGate, recordingGate } from './containment/proxy.js';
import { directExecutor } from './executor.js';

/**
 * What the processes are for:
 * - `run`: a run's commands (exec, shell, shell_start, the checker, the command gate, the
 *   containment probe). Its egress gate is the run's own, which records each decision in
 *   the run's trace and takes an ask to the tree's approver: it must be given.
 * - `gate-retry`: a command gate run again after its run ended (`retryGate`), with the
 *   run's stored contract and policy.
 * - `hook`: a configuration's `run` hooks, by the configuration's sandbox and policy.
 * - `mcp-server`: MCP stdio servers (and the connections of HTTP ones, where the
 *   containment has an egress proxy).
 *
 * Outside a run nobody is there to answer a policy's `ask` for a connection: unless given
 * an egress gate, the last three refuse it (the policy alone decides).
 */
export type ExecutorPurpose = 'run' | 'gate-retry' | 'hook' | 'mcp-server';

/**
 * What {@link ContainedExecutor} takes, passed through whole: a field it gains reaches
 * every executor from here, with nothing to change on the way.
 */
export type ContainmentOptions = ConstructorParameters<typeof ContainedExecutor>[1];

/** Where the processes work and what they are granted: a contract's, or a root and sandbox given outright. */
type Grants =
  | {
      contract: { root: string; sandbox?: SandboxData | null | undefined; worktree?: WorktreeData | undefined };
      root?: never;
      sandbox?: never;
    }
  | { contract?: never; root: string; sandbox?: SandboxData | undefined };

/**
 * What {@link executorFor} is asked: the purpose, the grants, the policy and the rest of
 * the containment's options. Outside a run, `record` (when there is no `egress`) is given
 * each decision the egress proxy makes, as the `policy-decision` and `refusal` events a
 * run's own commands would leave in its trace.
 */
export type ExecutorRequest = Omit<ContainmentOptions, 'root' | 'sandbox' | 'egress'> &
  Grants &
  (
    | { purpose: 'run'; egress: EgressGate; record?: never }
    | {
        purpose: Exclude<ExecutorPurpose, 'run'>;
        egress?: EgressGate;
        record?: (event: EventData) => void;
      }
  );

/**
 * The executor for child processes of `purpose`, contained by the contract's (or the
 * given) sandbox at its root under `policy`. Throws ContainmentUnavailableError where the
 * sandbox names a rung this host cannot give: the caller refuses what it was about to
 * start, never runs it with less.
 *
 * @example
 * const executor = executorFor({ purpose: 'gate-retry', contract, policy });
 * const result = await executor.run({ argv: ['npm', 'test'], purpose: 'gate', cwd: contract.root, ... });
 * await executor.close();
 */
export function executorFor(request: ExecutorRequest): ContainedExecutor {
  // On a process's first executor (none made by a supervisor): its code is kept from what the executor runs.
  keepHarnessCode();
  const { purpose: _purpose, contract, root, sandbox, record, ...options } = request;
  const grants = contract ?? { root: root as string, sandbox };
  const egress = options.egress ?? (record ? recordingGate(options.policy, grants.root, record) : undefined);
  // A worktree of a run's own: its git directory is its git tools' to write, never its
  // commands'; and what the policy hides of the checkout it came from is hidden from both.
  const worktree = contract?.worktree;
  return new ContainedExecutor(directExecutor, {
    ...options,
    ...(worktree
      ? {
          repository: {
            gitDir: worktree.gitDir,
            writable: options.repository === 'writable',
            from: worktree.checkout,
          },
        }
      : {}),
    root: grants.root,
    ...(grants.sandbox ? { sandbox: grants.sandbox } : {}),
    ...(egress ? { egress } : {}),
  });
}
