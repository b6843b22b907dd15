/**
 * The agent loop: prepare the run, then step until a step says otherwise. That is all
 * this driver does, and all it should ever do: a step is a function of the prepared run
 * (`runStep`, ./run-step.ts) made of named stages, so a new capability of the step is a
 * stage there or a hook on one stage, never more lines in this loop.
 *
 * It holds no thread and no module state: a worker hosts it (../agent-worker.ts) and a
 * host or a test on the main thread runs it in-process alike, against the ports it is
 * given (./ports.ts).
 */
import { ErrorCode, HarnessError, serializeError } from '../../errors.js';
import { keepAll } from '../../runtime/exec/containment/kept.js';
import type { RunExit } from '../agent.js';
import type { AgentPorts } from './ports.js';
import { prepareRun } from './prepare.js';
import { AgentRun, type AgentStart } from './run.js';
import { runStep } from './run-step.js';

/** Runs one agent from where its trace leaves it, against the given ports; `agent` is its handle (cancel, mail). */
export function runAgent(start: AgentStart, ports: AgentPorts): { exit: Promise<RunExit>; agent: AgentRun } {
  keepAll(start.kept);
  const agent = new AgentRun(start, ports);
  return { agent, exit: drive(agent) };
}

async function drive(agent: AgentRun): Promise<RunExit> {
  try {
    const prepared = await prepareRun(agent);
    if (prepared.kind === 'ended') return prepared;
    for (;;) {
      const outcome = await runStep(prepared.run);
      if (outcome.kind === 'ended') return outcome;
      if (outcome.kind === 'paused') return { kind: 'ended', status: 'paused' };
    }
  } catch (error) {
    return failed(agent, error);
  } finally {
    await agent.close();
  }
}

/**
 * How a run leaves on an error. A lost lease leaves it to its new owner. A store that is
 * gone, a lease that moved, or a provider this process cannot build (a key it does not
 * have) are not the run's doing: the run is left as it was, to resume elsewhere. Any other
 * failure the run can record ends it as failed; one it cannot is reported as it was.
 */
async function failed(agent: AgentRun, error: unknown): Promise<RunExit> {
  if (HarnessError.isInstance(error) && error.code === ErrorCode.LeaseLost) return { kind: 'lease-lost' };
  const leaveResumable =
    HarnessError.isInstance(error) &&
    (error.code === ErrorCode.StoreActorExited ||
      error.code === ErrorCode.Conflict ||
      error.code === ErrorCode.ProviderLoadFailed);
  if (!leaveResumable) {
    try {
      await agent.store.call('endRun', {
        ...agent.fence,
        status: 'failed',
        reply: null,
        reason: error instanceof Error ? error.message : String(error),
        events: [],
        now: agent.clock.now(),
      });
      return { kind: 'ended', status: 'failed' };
    } catch {
      // fall through: report the original error
    }
  }
  return { kind: 'error', error: serializeError(error) };
}
