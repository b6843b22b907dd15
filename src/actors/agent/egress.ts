/**
 * How an agent's run decides the connections its commands ask the egress proxy for: the
 * run's policy on `net` host:port, an `ask` put to the tree's approver at connect time
 * (one question per host and port for the run), and every decision and refusal recorded
 * in the step under way, against the tool call whose command made it.
 */
import type { EventData } from '../../runtime/events.js';
import { type EgressGate, recordingGate } from '../../runtime/exec/containment/proxy.js';
import type { Policy } from '../../runtime/policy/policy.js';
import type { RunContext } from '../../runtime/tools/context.js';
import { approveNow } from '../../runtime/tools/decisions.js';

export function egressGate(
  context: RunContext,
  policy: Policy | null,
  root: string,
  record: (event: EventData) => void,
): EgressGate {
  // One question per host and port for the run: a second connection waits on the first answer.
  const answers = new Map<string, Promise<'approve' | 'deny' | 'defer'>>();
  return recordingGate(policy, root, record, (act, decision) => {
    let pending = answers.get(decision.subject);
    if (!pending) {
      pending = approveNow(context, act, decision);
      answers.set(decision.subject, pending);
    }
    return pending;
  });
}
