/**
 * How an agent's run decides the connections its commands ask the egress proxy for: the
 * run's policy on `net` host:port, an `ask` put to the tree's approver at connect time
 * (one question per host and port for the run), and every decision and refusal recorded
 * in the step under way, against the tool call whose command made it.
 */
import type { EventData } from '../../runtime/events.js';
import {
  type CommandOrigin,
  type EgressGate,
  type EgressVerdict,
  netVerdict,
} from '../../runtime/exec/containment/proxy.js';
import type { Act, Policy } from '../../runtime/policy/policy.js';
import type { RunContext } from './context.js';
import { approveNow } from './people.js';

export function egressGate(
  context: RunContext,
  policy: Policy | null,
  root: string,
  record: (event: EventData) => void,
): EgressGate {
  const answers = new Map<string, Promise<'approve' | 'deny' | 'defer'>>();
  const refusal = (verdict: Extract<EgressVerdict, { ok: false }>, origin: CommandOrigin | null): void => {
    record({
      type: 'refusal',
      callId: origin?.callId ?? '',
      tool: origin?.tool ?? 'net',
      rule: verdict.rule,
      layer: verdict.layer,
      reason: verdict.reason,
    });
  };
  return {
    async decide(target, origin) {
      if (!policy) return { ok: true };
      const act: Act = { kind: 'net', host: target.host, port: target.port };
      const decision = policy.decide(act, root);
      let answer: 'approve' | 'deny' | 'defer' | undefined;
      if (decision.effect === 'ask') {
        let pending = answers.get(decision.subject);
        if (!pending) {
          pending = approveNow(context, act, decision);
          answers.set(decision.subject, pending);
        }
        answer = await pending;
      }
      record({
        type: 'policy-decision',
        act: 'net',
        subject: decision.subject,
        effect: decision.effect,
        rule: decision.rule,
        layer: decision.layer,
        ...(answer === undefined ? {} : { answer }),
      });
      const verdict = netVerdict(decision, answer);
      if (verdict.ok) return verdict;
      refusal(verdict, origin);
      return verdict;
    },
    refused(target, verdict, origin) {
      record({
        type: 'policy-decision',
        act: 'net',
        subject: `${target.host}:${target.port}`,
        effect: 'deny',
        rule: verdict.rule,
        layer: verdict.layer,
      });
      refusal(verdict, origin);
    },
  };
}
