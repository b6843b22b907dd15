/**
 * The checks after a step's calls, before it is committed, in order: a final answer is
 * judged (the planning phase, the output schema, the gate), a step a cancel, a person or
 * the deadline stopped says which calls it did not reach and how the run ends, and files
 * the run read that changed since are read again. Each check may settle how the run ends
 * with the step or add to what the model reads next; a new check is one more entry in
 * {@link CHECKS}.
 */
import { judge } from './gates.js';
import type { PreparedRun } from './prepare.js';
import { observedName } from './records.js';
import type { Step } from './stage.js';

type Check = (run: PreparedRun, step: Step) => Promise<void> | void;

/** Runs the checks on a step whose calls are done. */
export async function checkStep(run: PreparedRun, step: Step): Promise<void> {
  for (const check of CHECKS) await check(run, step);
}

/** A final answer, judged: feedback to the model (the run goes on) or how the run ends. */
async function judgeAnswer(run: PreparedRun, step: Step): Promise<void> {
  const { agent } = run;
  const contract = run.judge;
  if (!step.final || !contract || agent.cancelled || step.stop !== null || agent.deadline.overdue) return;
  // A gate the deadline stopped (its command killed, its review call aborted) ends the run on the ceiling below.
  const parts = { workspace: agent.workspace, reviewer: agent.start.reviewer, executor: agent.executor };
  const verdict = await judge(agent, parts, contract, step.completion, run.spent, step.calls).catch(
    (error: unknown) => {
      if (agent.deadline.overdue) return null;
      throw error;
    },
  );
  if (verdict?.feedback) {
    step.observations.push(verdict.feedback);
    step.final = null;
  } else if (verdict) {
    step.final = verdict.final;
  }
}

/**
 * A cancel, a person's stop, or the wall clock running out, mid-step: the step commits
 * what it did (its writes are in the files, so their diffs belong in the trace), and the
 * calls it did not reach say so.
 */
function stopMidStep(run: PreparedRun, step: Step): void {
  const { agent } = run;
  const overdue = agent.cancelled || step.stop !== null ? null : agent.deadline.overdue;
  if (!agent.cancelled && step.stop === null && !overdue) return;
  const reason =
    step.stop ??
    (overdue ? `the wallMs ceiling of run ${overdue.account} was reached during a step` : agent.cancelReason);
  const reached = step.observations.filter((observation) => !observation.name.startsWith('@')).length;
  for (const call of step.completion.toolCalls.slice(reached)) {
    step.observations.push({
      callId: call.id,
      name: observedName(call.name),
      content: `not run: ${reason}`,
      isError: true,
    });
  }
  step.final = { status: overdue ? 'budget-exhausted' : 'cancelled', reply: null, reason };
  if (overdue) agent.step.events.push(overdue);
}

/** A file read earlier that has changed since is read again, after the step's results. */
function refreshStale(run: PreparedRun, step: Step): void {
  const { agent, freshness } = run;
  const workspace = agent.workspace;
  if (!freshness || !workspace || step.final !== null) return;
  step.observations.push(
    ...freshness.stale(
      agent.seq,
      // A refresh is a read like any other: decided by the policy first.
      (path) =>
        agent.policy?.decide({ kind: 'read', path }, workspace.workspace.root).effect === 'allow'
          ? workspace.readNow({ path }, path)
          : { content: `the policy does not let ${path} be read`, isError: true },
      new Set(agent.step.changes.map((change) => change.path)),
    ),
  );
}

/** In order: judging may end the run or send feedback; a stop overrides it; only a step that goes on is refreshed. */
const CHECKS: readonly Check[] = [judgeAnswer, stopMidStep, refreshStale];
