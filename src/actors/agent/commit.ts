/**
 * The commit stage: the step in one transaction with its ledger draw (its completion and
 * observations, its model calls, the mail it consumed and sent, its spawns, its file diffs
 * and its events, and how the run ends when it does), fenced by the run's lease. Then
 * what the model is shown next: the step's turns, and the corrections a person sent.
 */
import { changedIn } from './freshness.js';
import type { PreparedRun } from './prepare.js';
import { appendStep } from './records.js';
import { ended, type Step, type StepOutcome } from './stage.js';
import { steerTurn } from './step.js';

export async function commit(run: PreparedRun, step: Step): Promise<StepOutcome> {
  const { agent, assembly, transcript } = run;
  const effects = agent.step;
  const { completion, observations } = step;
  // A result too long for its part of a request is sent shortened (collapse), from its first sending.
  const collapsed = assembly.collapse(observations, step.requestTokens);
  if (collapsed) effects.events.push(collapsed);
  // What the step streamed reaches its listeners before the step's committed events do.
  await agent.ports.live?.flush();
  const result = await agent.store.call('commitStep', {
    ...agent.fence,
    seq: agent.seq,
    completion,
    observations,
    usage: completion.usage,
    consumed: effects.consumed,
    sent: effects.sent,
    spawned: effects.spawned,
    changes: effects.changes,
    events: effects.events,
    calls: step.calls,
    final: step.final,
    now: agent.clock.now(),
  });
  if (result.status === 'exhausted') return ended('budget-exhausted');
  if (result.status === 'interrupted') return ended('interrupted');
  appendStep(transcript, completion, observations);
  assembly.stepShown(agent.seq);
  run.freshness?.note(agent.seq, completion.toolCalls, observations, changedIn(effects.events));
  if (result.status === 'committed') for (const text of result.steers ?? []) transcript.push(steerTurn(text));
  agent.seq++;
  return step.final ? ended(step.final.status) : { kind: 'next' };
}
