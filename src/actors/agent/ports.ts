/**
 * What an agent's loop is given to run: the store, the host (the main thread's side of
 * the tree: its approver, plan gate, operator and the waits on children, declared with
 * the tools that ask them in runtime/tools/ports.ts) and a clock. The worker entry builds
 * these over its thread's ports; a test builds them in-process.
 */
import type { Clock } from '../../clock.js';
import type { Executor } from '../../runtime/exec/executor.js';
import type { LivePort } from '../../runtime/live.js';
import type { AgentHost } from '../../runtime/tools/ports.js';
import type { StorePort } from '../../store/port.js';

export interface AgentPorts {
  store: StorePort;
  host: AgentHost;
  clock: Clock;
  /**
   * What starts the run's commands, its gate and its checker, used as it is (whoever gives
   * one contains it: a test of the loop); absent, the executor factory's for the run's
   * contract and policy.
   */
  executor?: Executor;
  /** Where the run says what it does as it happens; absent when nobody is listening, and then nothing is published. */
  live?: LivePort;
}
