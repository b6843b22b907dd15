/**
 * A run's gate run again against the workspace the run left (Supervisor.retryGate): the
 * evaluation recorded through the store actor, a run that ended on its gate and now passes
 * made `finished`.
 */
import type { StoreClient } from '../actors/store.js';
import type { Clock } from '../clock.js';
import { ErrorCode, HarnessError, InvalidArgumentError } from '../errors.js';
import { type ContractData, contractSecrets } from '../runtime/contract/contract.js';
import type { EventData } from '../runtime/events.js';
import { executorFor } from '../runtime/exec/factory.js';
import { commandEnvironment } from '../runtime/exec/run-command.js';
import { Policy, type PolicyData } from '../runtime/policy/policy.js';
import type { ProviderSpec } from '../runtime/provider.js';
import { checkProviderSpec } from '../runtime/providers/builders.js';
import { evaluateCommandGate, evaluateReviewGate, gateEvent, writingModels } from '../runtime/verify/gate.js';
import { TraceQueries } from '../store/queries.js';
import type { Q } from '../store/sql.js';
import type { RetriedGate } from './handles.js';
import { contractProviders, holdProviderSecrets } from './root-spec.js';

/** The reads a retry makes, run on whichever backend holds the store. */
const reads = new TraceQueries();

/** What a retry reaches of the supervisor. */
export interface GateRetryPorts {
  read<T>(body: Q<T>): Promise<T>;
  /** Where the store is, for messages. */
  where: string;
  store: StoreClient;
  clock: Clock;
}

/** See Supervisor.retryGate. */
export async function retryGate(
  ports: GateRetryPorts,
  runId: string,
  options: { reviewer?: ProviderSpec },
): Promise<RetriedGate> {
  const { read } = ports;
  const run = await read(reads.run(runId));
  if (!run) {
    throw new HarnessError(ErrorCode.RunNotFound, `no run ${runId} in ${ports.where}; list runs with store.runs().`);
  }
  const contract = ((await read(reads.spec(runId))) as { contract?: ContractData } | null)?.contract;
  if (!contract || contract.verification.kind === 'none') {
    throw new InvalidArgumentError(
      `run ${runId} has no gate to retry: it was not started with a verification criterion.`,
    );
  }
  if (run.status !== 'gate-failed' && run.status !== 'finished') {
    throw new HarnessError(
      ErrorCode.RunStillLive,
      `run ${runId} is ${run.status}; a gate can be retried once the run has ended on it (gate-failed) or finished.`,
      { details: { runId, status: run.status } },
    );
  }
  const gate = contract.verification;
  const stored = (await read(reads.spec(runId))) as { provider?: ProviderSpec; policy?: PolicyData } | null;
  const patch = gate.kind === 'command' ? '' : await read(reads.patch(runId));
  const calls = gate.kind === 'command' ? [] : await read(reads.modelCalls({ rootId: run.rootId }));
  holdProviderSecrets([stored?.provider, options.reviewer, ...contractProviders(contract)]);
  const secrets = stored?.provider ? contractSecrets(contract, stored.provider) : [];
  // What the containment recorded: the rung it chose again here, and the egress proxy's decisions.
  const recorded: EventData[] = [];
  const evaluation =
    gate.kind === 'command'
      ? await retryCommandGate(gate, contract, stored?.policy, secrets, recorded)
      : await evaluateReviewGate(
          gate,
          options.reviewer ? checkProviderSpec(options.reviewer, 'retryGate()') : gate.provider,
          {
            goal: contract.goal,
            patch,
            reply: run.reply ?? '',
            writerModels: writingModels(calls),
          },
        );
  const events = [...recorded, gateEvent(evaluation, true), ...(evaluation.output ? [evaluation.output] : [])];
  const { status } = await ports.store.call('regate', {
    runId,
    events,
    passed: evaluation.verdict === 'passed',
    reply: run.reply,
    now: ports.clock.now(),
  });
  return { verdict: evaluation.verdict, exitStatus: evaluation.exitStatus, reasons: evaluation.reasons, status };
}

/**
 * A command gate run again, contained as its run was: the executor factory's, from the
 * run's stored contract (its sandbox and workspace) and policy (its egress rules), so the
 * code the run wrote runs on the same terms it did in the run. Refused with
 * CONTAINMENT_UNAVAILABLE where the contract names a rung this host cannot give.
 */
async function retryCommandGate(
  gate: Extract<ContractData['verification'], { kind: 'command' }>,
  contract: ContractData,
  policyData: PolicyData | undefined,
  secrets: string[],
  recorded: EventData[],
) {
  // As the run itself: its stored policy, else the default one a workspace run gets.
  const policy = policyData ? Policy.from(policyData) : Policy.default();
  const executor = executorFor({
    purpose: 'gate-retry',
    contract,
    policy,
    record: (event) => recorded.push(event),
  });
  try {
    recorded.push({ type: 'contained', ...executor.contained() });
    return await evaluateCommandGate(gate, contract.root, executor, {
      env: commandEnvironment(process.env, secrets, contract.inheritedEnv ?? []),
    });
  } finally {
    await executor.close();
  }
}
