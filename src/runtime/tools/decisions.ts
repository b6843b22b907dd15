/**
 * How a policy decision is settled, for every tool alike: `allow` goes on, `deny` is a
 * refusal naming its rule and layer, `ask` is put to the tree's approver (or read from the
 * answer a person stored while the run was paused), and every decision is recorded in the
 * step. A deferral, or a cancel while a person is asked, is a {@link Halt}: the step stops
 * at the call, never throwing.
 */

import type { EventData, QuestionKind } from '../events.js';
import type { CommandCheck } from '../policy/commands/index.js';
import type { Act, Decision } from '../policy/policy.js';
import type { RunContext } from './context.js';
import { CANCELLED, type Halt, halted, type ToolResult } from './tool.js';

/**
 * Where a call is in its step: its index in the completion, or `<index>.<act>#<fingerprint>`
 * for an act of the program that call ran (see ../codeact/): what its questions are keyed
 * by, and its intents by the place alone.
 */
export type CallAt = number | `${number}.${number}#${string}`;

/** Who refused an ask: the approver that was asked, or nobody, since none was given. */
function whoRefused(answer: string | undefined): string {
  return answer === 'no-approver'
    ? 'no approver was given to ask, so it was refused; pass one to run() ({ approver }), or allow it in the policy'
    : 'the approver denied it';
}

/** What settling a decision needs of the run: a person to ask, and the step's events to record in. */
export interface DecisionHost {
  /**
   * Asks the tree's approver about an act the policy marked `ask` (or reads the answer a
   * person stored while the run was paused). A deferral, or a cancel while waiting, is a
   * {@link Halt}: the step stops at this call.
   */
  ask(
    act: Act,
    decision: Extract<Decision, { effect: 'ask' }>,
    callIndex: CallAt,
  ): Promise<'approve' | 'deny' | 'no-approver' | Halt>;
  event(event: EventData): void;
}

/** Records a policy decision (with the person's answer, when one was asked) in the step. */
export function recordDecision(
  host: DecisionHost,
  subject: string,
  act: Act['kind'],
  decision: Decision,
  answer?: 'approve' | 'deny',
): void {
  host.event(decisionEvent(subject, act, decision, answer));
}

/** The trace's record of a decision on `subject`, and a person's answer where one was asked. */
export function decisionEvent(
  subject: string,
  act: Act['kind'],
  decision: Decision,
  answer?: 'approve' | 'deny',
): EventData {
  return {
    type: 'policy-decision',
    act,
    subject,
    effect: decision.effect,
    rule: decision.rule,
    layer: decision.layer,
    ...(answer === undefined ? {} : { answer }),
  };
}

/**
 * Settles a decision on one act: asks when it says ask, records it (and the `others` the
 * act also needed), and returns the refusal to give the model, or null when the act may go on.
 */
export async function settleDecision(
  host: DecisionHost,
  act: Act,
  decision: Decision,
  others: Decision[],
  callIndex: CallAt,
): Promise<ToolResult | null> {
  let answer: 'approve' | 'deny' | 'no-approver' | undefined;
  if (decision.effect === 'ask') {
    const asked = await host.ask(act, decision, callIndex);
    if (typeof asked !== 'string') return halted(asked);
    answer = asked;
  }
  for (const other of others) recordDecision(host, other.subject, act.kind, other);
  recordDecision(host, decision.subject, act.kind, decision, answer === 'no-approver' ? 'deny' : answer);
  if (decision.effect === 'allow' || answer === 'approve') return null;
  const rule = decision.rule ?? 'policy.no-rule';
  const reason =
    decision.effect === 'deny'
      ? `${act.kind} ${decision.subject} is denied: ${decision.reason}${decision.layer ? ` (layer ${decision.layer})` : ''}.`
      : `${act.kind} ${decision.subject} needs approval (${decision.rule}, layer ${decision.layer}) and ${whoRefused(answer)}.`;
  return { content: reason, isError: true, refusal: { rule, reason, layer: decision.layer ?? 'policy' } };
}

/**
 * Settles a command checked as the programs it really runs (wrappers unwrapped, every
 * stage of a line): a stage the checker refused refuses the whole; the stages that ask
 * are one question, naming them all, whose answer is for the whole command. Every
 * decision is recorded. Returns the refusal, or null when the command may run.
 */
export async function settleCommand(
  host: DecisionHost,
  act: Act,
  check: CommandCheck,
  callIndex: CallAt,
): Promise<ToolResult | null> {
  if (!check.ok) {
    for (const decision of check.decisions) recordDecision(host, decision.subject, act.kind, decision);
    const rule = check.rule;
    const reason = `${act.kind === 'exec' ? 'the command' : act.kind} is refused: ${check.reason}${check.layer ? ` (layer ${check.layer})` : ''}.`;
    return { content: reason, isError: true, refusal: { rule, reason, layer: check.layer ?? 'boundary' } };
  }
  const asking = check.decisions.filter((decision) => decision.effect === 'ask') as Extract<
    Decision,
    { effect: 'ask' }
  >[];
  if (asking.length === 0) {
    for (const decision of check.decisions) recordDecision(host, decision.subject, act.kind, decision);
    return null;
  }
  const question: Extract<Decision, { effect: 'ask' }> =
    asking.length === 1
      ? (asking[0] as Extract<Decision, { effect: 'ask' }>)
      : {
          effect: 'ask',
          rule: [...new Set(asking.map((decision) => decision.rule))].join(' + '),
          layer: [...new Set(asking.map((decision) => decision.layer))].join(' + '),
          subject: asking.map((decision) => decision.subject).join(' | '),
        };
  const answer = await host.ask(act, question, callIndex);
  if (typeof answer !== 'string') return halted(answer);
  for (const decision of check.decisions) {
    const recorded = answer === 'no-approver' ? 'deny' : answer;
    recordDecision(host, decision.subject, act.kind, decision, decision.effect === 'ask' ? recorded : undefined);
  }
  if (answer === 'approve') return null;
  const reason = `${act.kind} ${question.subject} needs approval (${question.rule}, layer ${question.layer}) and ${whoRefused(answer)}.`;
  return { content: reason, isError: true, refusal: { rule: question.rule, reason, layer: question.layer } };
}

/** Set in place of an answer when the step's signal fired first. */
export function isCancelled(value: unknown): value is typeof CANCELLED {
  return value === CANCELLED;
}

/** A question's id: the same call of the same step asks the same question after a resume. */
export function questionId(context: RunContext, kind: QuestionKind, callIndex: CallAt): string {
  return `${kind}:${context.run.runId}:${context.seq}:${callIndex}`;
}

/** An answer a person already gave while the run was paused, if any. */
export async function answered(context: RunContext, id: string): Promise<unknown> {
  const question = await context.store.question(id);
  return question?.status === 'answered' ? question.answer : undefined;
}

/** A person's answer, unless the step's signal fires first: a cancel or the deadline does not wait on an approver. */
export function unlessCancelled<T>(signal: AbortSignal, answer: Promise<T>): Promise<T | typeof CANCELLED> {
  if (signal.aborted) return Promise.resolve(CANCELLED);
  return new Promise<T | typeof CANCELLED>((resolve, reject) => {
    const onAbort = () => resolve(CANCELLED);
    signal.addEventListener('abort', onAbort, { once: true });
    answer.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** The approver's answer about an act the policy marked ask; a deferral pauses the run. */
export async function askApprover(
  context: RunContext,
  act: Act,
  decision: Extract<Decision, { effect: 'ask' }>,
  callIndex: CallAt,
): Promise<'approve' | 'deny' | 'no-approver' | Halt> {
  const id = questionId(context, 'approval', callIndex);
  const stored = await answered(context, id);
  if (stored === 'approve' || stored === 'deny') return stored;
  // Nobody to ask: refused, and the refusal says that no approver was given rather than that one denied it.
  if (!context.approver) return 'no-approver';
  const answer = await putToApprover(context, act, decision);
  if (isCancelled(answer)) return CANCELLED;
  if (answer !== 'defer') return answer;
  return {
    kind: 'pause',
    question: {
      questionId: id,
      kind: 'approval',
      payload: { act, subject: decision.subject, rule: decision.rule, layer: decision.layer },
      summary: `approve ${act.kind} ${decision.subject}? (${decision.rule}, layer ${decision.layer})`,
    },
    events: [
      {
        type: 'policy-decision',
        act: act.kind,
        subject: decision.subject,
        effect: 'ask',
        rule: decision.rule,
        layer: decision.layer,
        answer: 'defer',
      },
    ],
  };
}

/**
 * The approver's answer about a connection a command is making now, through the egress
 * proxy: asked there and then, since a command cannot pause mid-connection. A deferral or
 * a cancel is a refusal.
 */
export async function approveNow(
  context: RunContext,
  act: Act,
  decision: Extract<Decision, { effect: 'ask' }>,
): Promise<'approve' | 'deny' | 'defer'> {
  const answer = await putToApprover(context, act, decision);
  return isCancelled(answer) ? 'deny' : answer;
}

/** The tree's approver asked about `act`, unless the run is cancelled first. */
function putToApprover(
  context: RunContext,
  act: Act,
  decision: Extract<Decision, { effect: 'ask' }>,
): Promise<'approve' | 'deny' | 'defer' | typeof CANCELLED> {
  const { run } = context;
  return unlessCancelled(
    context.signal,
    context.host.approve({
      rootId: run.rootId,
      runId: run.runId,
      address: run.address,
      act,
      subject: decision.subject,
      rule: decision.rule,
      layer: decision.layer,
    }),
  );
}

/** What settling a decision asks of `agent`: its approver, and the step under way to record in. */
export function decisionHost(agent: RunContext): DecisionHost {
  return {
    ask: (act, decision, callIndex) => askApprover(agent, act, decision, callIndex),
    event: (event) => agent.step.events.push(event),
  };
}
