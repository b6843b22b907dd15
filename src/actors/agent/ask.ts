/**
 * The ask stage: the model a step asks (a stronger one once the gate has failed often
 * enough), the request fitted to the window first (see ./check-window.ts), and the call
 * itself, whose stream starts reads early and publishes text on the live channel. A call
 * that fails, or that a cancel or the deadline stops, ends the run with the tries in the
 * trace; a paused step is not asked again, it acts on the completion it kept.
 */
import { ErrorCode, HarnessError } from '../../errors.js';
import type { EventData } from '../../runtime/events.js';
import type {
  CallAttempt,
  Completion,
  CompletionHooks,
  Provider,
  ProviderSpec,
  ToolCall,
} from '../../runtime/provider.js';
import type { HostModelChannel } from '../../runtime/providers/host-model.js';
import { loadProvider } from '../../runtime/providers/registry.js';
import type { ToolResult } from '../../runtime/tools/tool.js';
import { startEarly, withheldBy } from './act.js';
import type { Admitted } from './check.js';
import { checkWindow } from './check-window.js';
import type { PreparedRun } from './prepare.js';
import { attemptEvents, failedCall, providerLabel } from './records.js';
import { endRun, exhaust, isOutcome, metadataOf, type Replay, type StepOutcome } from './stage.js';

/** What the model answered (or what a paused step kept), and what the step records of asking. */
export interface Asked {
  replay: Replay | null;
  completion: Completion;
  model: Provider;
  /** The `model-escalated` event, the first time the stronger model is named. */
  escalated: EventData | null;
  /** What assembling the request noted (a broken prefix, a cache miss). */
  assembled: EventData[];
  requestTokens: number;
  withheld: (name: string) => ToolResult | null;
}

/**
 * Escalation: once the gate has failed often enough, a stronger model answers. Counted
 * from the trace like the re-prompts, so a resumed run stays escalated.
 */
export class Escalation {
  readonly #from: ProviderSpec;
  readonly #to: { provider: ProviderSpec; afterGateFailures: number };
  /** Built only for a call it will make: a replayed step makes none. */
  #stronger: Provider | null = null;
  /** Whether the trace names the escalation yet. */
  #trace: 'unnamed' | 'named';
  readonly #channel: HostModelChannel;

  constructor(
    from: ProviderSpec,
    to: { provider: ProviderSpec; afterGateFailures: number },
    named: boolean,
    channel: HostModelChannel,
  ) {
    this.#from = from;
    this.#to = to;
    this.#channel = channel;
    this.#trace = named ? 'named' : 'unnamed';
  }

  /** The model a step asks after `gateFailures` failed gates, and the event naming the change the first time. */
  async choose(
    base: Provider,
    gateFailures: number,
    replay: boolean,
  ): Promise<{ model: Provider; event: EventData | null }> {
    if (gateFailures < this.#to.afterGateFailures) return { model: base, event: null };
    let model = base;
    if (!replay) {
      this.#stronger ??= await loadProvider(this.#to.provider, this.#channel);
      model = this.#stronger;
    }
    if (this.#trace === 'named') return { model, event: null };
    this.#trace = 'named';
    return {
      model,
      event: {
        type: 'model-escalated',
        from: providerLabel(this.#from),
        to: providerLabel(this.#to.provider),
        gateFailures,
      },
    };
  }
}

/** Asks the model for the step's completion, or takes the one a paused step kept. */
export async function ask(run: PreparedRun, admitted: Admitted): Promise<StepOutcome | Asked> {
  const { agent, assembly, transcript, tiered } = run;
  const { replay } = admitted;
  const chosen = run.escalation
    ? await run.escalation.choose(run.provider, run.spent.gate, replay !== null)
    : { model: run.provider, event: null };
  const { model, event: escalated } = chosen;
  agent.step.early = new Map();
  // The tiers this request offers: a family opened during the step is offered from the next.
  const offered = tiered?.offered();
  // A paused step's own expand_tools call is not made again on its replay: what it opened
  // is offered from the next step, as it would have been.
  if (replay && tiered) tiered.open(run.restored.draftExpanded);
  const withheld = (name: string) => withheldBy(run.mask, offered, run.registry, name);
  const asked = { replay, model, escalated, withheld };
  if (replay) return { ...asked, completion: replay.completion, assembled: [], requestTokens: 0 };
  try {
    const fitted = await checkWindow(run, model, offered);
    if (isOutcome(fitted)) return fitted;
    agent.ports.live?.publish({ type: 'model-call-start', seq: agent.seq });
    const breakpoint = assembly.breakpoint();
    const answer = await model.complete(
      {
        system: assembly.system,
        transcript,
        tools: fitted.tools,
        options: breakpoint === null ? run.options : { ...run.options, cacheBreakpoint: breakpoint },
        metadata: metadataOf(run),
      },
      agent.signal,
      hooks(run, withheld),
    );
    const completion = { ...answer, requestChars: fitted.chars };
    const missed = assembly.answered(completion, fitted.chars);
    const assembled = missed ? [...fitted.assembled, missed] : fitted.assembled;
    return { ...asked, completion, assembled, requestTokens: fitted.tokens };
  } catch (error) {
    return unanswered(run, error, escalated);
  }
}

/** How the run ends when its model call did not answer: cancelled, out of time, or failed with its tries in the trace. */
async function unanswered(run: PreparedRun, error: unknown, escalated: EventData | null): Promise<StepOutcome> {
  const { agent } = run;
  if (agent.cancelled) return endRun(agent, 'cancelled', agent.cancelReason);
  const before = escalated ? [escalated] : [];
  const overdue = agent.deadline.overdue;
  if (overdue) {
    // The deadline aborted the call: the step is not committed, as when a call fails; earlier tries are in the trace.
    const tried = (HarnessError.isInstance(error) ? (error.details.attempts as CallAttempt[] | undefined) : []) ?? [];
    return exhaust(agent, overdue, [...before, ...attemptEvents(tried, null)], tried.map(failedCall));
  }
  if (!HarnessError.isInstance(error) || error.code !== ErrorCode.ProviderFailed) throw error;
  // Every try failed: the step is not committed; the tries are the trace of why.
  const attempts = (error.details.attempts as CallAttempt[] | undefined) ?? [];
  return endRun(
    agent,
    'failed',
    `the model call failed: ${error.message}`,
    [...before, ...attemptEvents(attempts, null)],
    attempts.map(failedCall),
  );
}

/** What the model call reports as it streams: reads to start early, and text for the live channel. */
function hooks(run: PreparedRun, withheld: (name: string) => ToolResult | null): CompletionHooks | undefined {
  const { agent } = run;
  const live = agent.ports.live;
  const seq = agent.seq;
  const early = agent.workspace !== null || (agent.start.tools ?? []).some((tool) => tool.effect === 'reads');
  if (!early && !live) return undefined;
  return {
    ...(early ? { onToolCall: (call: ToolCall, index: number) => startEarly(run, call, index, withheld) } : {}),
    ...(live ? { onText: (text: string) => live.publish({ type: 'text-delta', seq, text }) } : {}),
  };
}
