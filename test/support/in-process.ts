/**
 * A root run driven in the test's own thread (runAgent, no supervisor, no worker), against
 * a store file of its own, on a clock the test gives: where a verdict turns on the time
 * (a wall-clock ceiling), the test moves the clock and the machine's speed decides nothing.
 */
import { runAgent } from '../../dist/actors/agent/loop.js';
import type { RunExit } from '../../dist/actors/agent.js';
import type { Clock } from '../../dist/clock.js';
import { Policy, type ProviderSpec, type Store, type TaskContract } from '../../dist/index.js';
import type { LiveData } from '../../dist/runtime/live.js';
import type { StoreOperations } from '../../dist/store/port.js';
import { openLocalStore } from '../../dist/store/sqlite/local.js';
import { stubHost } from './hosts.js';
import { tempStorePath } from './processes.js';
import { openStore } from './workspace.js';
import { claimOf } from './writer.js';

let runs = 0;

type RootInput = StoreOperations['createRoot'][0];

/**
 * Stores a lone root run (one agent, no children) for `runAgent` to drive, leased to
 * `owner`; its generation. Ceilings not given are none.
 */
export async function createLoneRoot(
  store: ReturnType<typeof openLocalStore>,
  root: Pick<RootInput, 'runId' | 'task' | 'spec'> & {
    ceilings?: Partial<RootInput['ceilings']>;
    owner: string;
    now?: number;
  },
): Promise<number> {
  const { generation } = await store.call('createRoot', {
    runId: root.runId,
    task: root.task,
    spec: root.spec,
    ceilings: { steps: null, tokens: null, wallMs: null, ...root.ceilings },
    maxTotalAgents: 1,
    maxConcurrentAgents: 1,
    maxWaitSecs: 30,
    claim: claimOf({ owner: root.owner, ...(root.now === undefined ? {} : { now: root.now }) }),
  });
  return generation;
}

/**
 * Runs `contract` to its end as runWith would with no approver, and opens its store for
 * reading. `onLive` sees what the run publishes as it happens (a tool call's start and
 * end), in order, as it happens: the place to move the clock at a point of the step.
 */
export async function runInProcess(
  contract: TaskContract,
  provider: ProviderSpec,
  clock: Clock,
  options: { policy?: Policy; onLive?: (data: LiveData) => void } = {},
): Promise<{ runId: string; exit: RunExit; store: Store }> {
  const path = tempStorePath();
  const local = openLocalStore(path);
  const data = contract.toJSON();
  const runId = `in-process-${++runs}`;
  const owner = 'in-process';
  const generation = await createLoneRoot(local, {
    runId,
    task: data.goal,
    spec: { provider, contract: data, policy: (options.policy ?? Policy.default()).toJSON() },
    ceilings: {
      steps: data.budget.steps ?? null,
      tokens: data.budget.tokens ?? null,
      wallMs: data.budget.wallSecs === undefined ? null : Math.round(data.budget.wallSecs * 1000),
    },
    owner,
    now: clock.now(),
  });
  const onLive = options.onLive;
  const { exit } = runAgent(
    { type: 'start', runId, generation, owner, resumed: false, provider, approver: false },
    {
      store: local,
      host: stubHost(),
      clock,
      ...(onLive ? { live: { publish: onLive, flush: () => Promise.resolve() } } : {}),
    },
  );
  const result = await exit;
  local.close();
  return { runId, exit: result, store: await openStore(path) };
}
