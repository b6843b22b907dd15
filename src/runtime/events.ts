/**
 * The event bus's vocabulary. Every event is written to the store's events table in
 * the transaction that made it true, then delivered to observers in commit order.
 * Names are noun-verb (`step-end`, `message-sent`).
 */
import type { Clamp } from './budget.js';
import type { ContainedReport } from './exec/containment/contained.js';

/**
 * A run's state. `pending`: reserved by a parent's step that has not committed yet;
 * `queued`: waiting for a concurrency slot; `running`: driven by an actor; the rest
 * are terminal.
 */
export type RunStatus =
  | 'pending'
  | 'queued'
  | 'running'
  /** Waiting on a person: an approval, a plan, a question or an interrupted command. Resumable once answered. */
  | 'paused'
  | 'finished'
  | 'gate-failed'
  | 'schema-unsatisfied'
  | 'budget-exhausted'
  | 'failed'
  | 'cancelled'
  /** A person interrupted the turn: it ended at a step boundary, its committed steps kept. */
  | 'interrupted';

export const TERMINAL_STATUSES: readonly RunStatus[] = [
  'finished',
  'gate-failed',
  'schema-unsatisfied',
  'budget-exhausted',
  'failed',
  'cancelled',
  'interrupted',
];

/** What a paused run waits on. */
export type QuestionKind = 'approval' | 'plan' | 'question' | 'intent';

/** One step of a plan, optionally naming the agent that owns it. */
export interface PlanStep {
  description: string;
  owner?: string;
}

/** How one evaluation of a verification gate came out; `errored` is a criterion that could not run at all. */
export type GateVerdict = 'passed' | 'failed' | 'errored';

export function isTerminal(status: string): boolean {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

export interface DrawAmount {
  steps: number;
  tokens: number;
}

export type EventData =
  | { type: 'run-start'; task: string; address: string; parentId: string | null; resumed: boolean }
  | { type: 'run-end'; status: RunStatus; reply: string | null; reason?: string }
  | {
      type: 'step-end';
      toolCalls: string[];
      inputTokens: number;
      outputTokens: number;
      /** Prompt tokens served from the vendor's cache, and their share of the prompt. */
      cacheReadTokens: number;
      cachedShare: number;
      provider: string | null;
      model: string;
    }
  | {
      type: 'model-retry';
      provider: string;
      model: string;
      kind: string;
      statusCode: number | null;
      delayMs: number;
      message: string;
    }
  | {
      type: 'model-fallback';
      from: string;
      to: string | null;
      kind: string;
      statusCode: number | null;
      message: string;
    }
  | { type: 'model-failed'; provider: string; model: string; kind: string; statusCode: number | null; message: string }
  | { type: 'provider-unreachable'; provider: string; message: string }
  /** The run's gate failed often enough that a stronger model answers from here on (`withEscalation`). */
  | { type: 'model-escalated'; from: string; to: string; gateFailures: number }
  /** `invalid`: the arguments could not be used (see ToolCall.invalid); `args` is then `{}`, `sent` their start. */
  | {
      type: 'tool-call';
      callId: string;
      name: string;
      args: Record<string, unknown>;
      invalid?: { reason: string; sent: string };
      /** Set when the tool threw: what it threw (its class and message; the stack is with the observation). */
      failed?: { name: string; message: string };
    }
  | { type: 'refusal'; callId: string; tool: string; rule: string; layer: string; reason: string }
  /** An act of a program (`run_program`): its own call id (`<program's>.<n>`), the program's call, the tool and arguments. */
  | {
      type: 'program-act';
      callId: string;
      program: string;
      tool: string;
      args: Record<string, unknown>;
      /** Set once the act has answered: whether its tool answered with an error. */
      isError?: boolean;
    }
  /** A language `withCodeAct` asks for that this host has no usable interpreter for, and what the run is offered instead. */
  | { type: 'codeact-fallback'; language: string; reason: string; offered: string }
  | { type: 'spend'; draw: DrawAmount; treeSpent: DrawAmount }
  /** A person's correction, given to the root as the user's words before step `before`. */
  | { type: 'steered'; text: string; before: number; by: string }
  /** A tool tier opened by `expand_tools`: its tools are offered from the next step. */
  | { type: 'tools-expanded'; family: string; tools: string[] }
  /** The window the run's requests are fitted to, in tokens, and where it came from (see runtime/context/window.ts). */
  | { type: 'context-window'; tokens: number; source: string; share: number; model: string }
  /**
   * A request was rebuilt to fit its share of the window: `rung` is what ran (`fold`: the
   * steps up to `through` folded into notes, `kept` steps kept whole), with the estimated
   * tokens before and after.
   */
  | {
      type: 'assembled';
      rung: 'fold';
      through: number;
      folded: number;
      kept: number;
      tokensBefore: number;
      tokensAfter: number;
      limit: number;
    }
  /**
   * A rung below the fold ran (see runtime/context/rungs.ts): `collapse` sent `entries`
   * results shortened the first time they were sent; `reduce` cut the memory block to
   * `entries` notes; `snip` and `microcompact` replaced `entries` old results. The estimated
   * tokens of the request before and after.
   */
  | {
      type: 'assembled';
      rung: 'collapse' | 'reduce' | 'snip' | 'microcompact';
      entries: number;
      tokensBefore: number;
      tokensAfter: number;
      limit: number;
    }
  /**
   * The memory block a run's requests carry, found at its start (`withMemory()`): the keys
   * of the notes in it, how many the workspace held, and its text (read back on a resume,
   * so the bytes stay the same whatever the memory holds by then).
   */
  | {
      type: 'memory-block';
      notes: string[];
      held: number;
      chars: number;
      text: string;
      /** The notes in it as they were then, so a reduce after a resume ranks what the block held. */
      kept?: import('./context/memory.js').NoteRecord[];
    }
  /** A request that did not extend the one before it other than at a fold, and why: its system block, its tools, or an entry already sent changed. */
  | { type: 'prefix-broke'; cause: 'system' | 'tools' | 'transcript' }
  /** A bundle of the configuration was dropped (`dropped`), or one of its contributions refused. */
  | { type: 'bundle-problem'; plugin: string; file: string; message: string; dropped: boolean }
  /** A request that extended the one before it read less from the vendor's cache than that one did: it paid again for a prefix that had been cached. */
  | { type: 'cache-miss'; expected: number; read: number }
  | { type: 'budget-clamped'; childId: string; clamps: Clamp[] }
  | {
      type: 'budget-exhausted';
      draw: DrawAmount;
      ceiling: string /** The run whose ceiling the draw would cross. */;
      account: string;
      spent: number;
      limit: number;
    }
  | { type: 'spawn-queued'; childId: string; address: string; task: string }
  | { type: 'spawn-started'; childId: string; address: string }
  | { type: 'spawn-refused'; reason: string; rule: string }
  | { type: 'message-sent'; msgId: string; to: string }
  | { type: 'message-read'; msgIds: string[] }
  | { type: 'lease-taken'; owner: string; pid: number; generation: number; previousOwner: string | null }
  | { type: 'lease-lost'; owner: string; generation: number }
  /**
   * A resume or join went on although the tree had changed under it (another release, a
   * tool shown with another description or parameters, a new tool), told to with
   * `acceptChanges: true`: what changed, which call, whose supervisor, and the release now.
   */
  | { type: 'changes-accepted'; changes: string[]; by: 'resume()' | 'join()'; owner: string; release: string }
  /** A cancel of the tree was asked for, by this supervisor (`owner`), from whichever host: every host driving a run of it cancels it. */
  | { type: 'cancel-asked'; owner: string; reason: string | null }
  | { type: 'file-changed'; callId: string; tool: string; path: string; added: number; removed: number }
  | {
      type: 'toolchain-checked';
      callId: string;
      ecosystem: string;
      argv: string[];
      exitStatus: number | null;
      /** `skipped`: the policy does not allow that exec outright (an ask is a silent skip). */
      ran: boolean;
    }
  | {
      /**
       * How the run's commands are kept from outliving their end, recorded when its first
       * command starts: `pid-namespace` (everything a command started dies with it), or
       * `process-group` where that is not available (`reason` says why), which a process
       * that leaves its group escapes.
       */
      type: 'process-containment';
      mechanism: 'pid-namespace' | 'process-group';
      reason: string | null;
    }
  | {
      /** A command was stopped by one of the contract's sandbox caps (the cap and its limit). */
      type: 'cap-reached';
      callId: string;
      cap: 'cpuSecs' | 'fileBytes' | 'writtenBytes' | 'processes' | 'memoryBytes' | 'outputBytes' | 'wallSecs';
      limit: number;
    }
  | ({
      /**
       * How the run's commands are contained, recorded when its first command starts:
       * the rung, what it enforces (writes, protected paths, the network, processes), the
       * Landlock ABI, and the stronger rungs this host did not offer and why.
       */
      type: 'contained';
    } & ContainedReport)
  | {
      type: 'gate-evaluated';
      criterion: 'command' | 'review';
      verdict: GateVerdict;
      exitStatus: number | null;
      reasons: string[];
      /** Evaluated again after the run ended, by retryGate. */
      retried: boolean;
      /**
       * The rung a command gate ran on (`full-access` where the contract asked for none);
       * null for a review gate, which starts no process. Absent from events recorded
       * before it was.
       */
      containment?: ContainedReport['rung'] | null;
    }
  | {
      /** What a failing command gate printed (both streams, bounded) and how it exited. */
      type: 'gate-output';
      argv: string[];
      exitStatus: number | null;
      signal: string | null;
      stdout: string;
      stderr: string;
      truncated: boolean;
    }
  | { type: 'schema-invalid'; errors: string[]; reprompted: boolean }
  | { type: 'run-paused'; questionId: string; kind: QuestionKind; summary: string }
  | { type: 'question-answered'; questionId: string; kind: QuestionKind; answer: unknown; by: string }
  | { type: 'plan-submitted'; steps: PlanStep[] }
  | { type: 'plan-decided'; decision: 'approve' | 'correct' | 'cancel'; steps: PlanStep[]; note: string | null }
  | { type: 'intent-started'; key: string; kind: string; detail: string }
  /** A step interrupted by a crash is re-run from the committed state: the files it had written were put back. */
  | { type: 'step-rolled-back'; paths: string[] }
  | { type: 'intent-finished'; key: string; outcome: string }
  | {
      type: 'policy-decision';
      act: 'read' | 'write' | 'exec' | 'net' | 'tool';
      subject: string;
      effect: 'allow' | 'deny' | 'ask';
      rule: string | null;
      layer: string | null;
      /** For an ask: what the approver answered. */
      answer?: 'approve' | 'deny' | 'defer';
    };

export type EventType = EventData['type'];

/** Every committed event's type, sorted: what a hook's `events` may name. */
export const EVENT_TYPES = [
  'assembled',
  'budget-clamped',
  'budget-exhausted',
  'bundle-problem',
  'cache-miss',
  'cancel-asked',
  'cap-reached',
  'changes-accepted',
  'codeact-fallback',
  'contained',
  'context-window',
  'file-changed',
  'gate-evaluated',
  'gate-output',
  'intent-finished',
  'intent-started',
  'lease-lost',
  'lease-taken',
  'memory-block',
  'message-read',
  'message-sent',
  'model-escalated',
  'model-failed',
  'model-fallback',
  'model-retry',
  'plan-decided',
  'plan-submitted',
  'policy-decision',
  'prefix-broke',
  'process-containment',
  'program-act',
  'provider-unreachable',
  'question-answered',
  'refusal',
  'run-end',
  'run-paused',
  'run-start',
  'schema-invalid',
  'spawn-queued',
  'spawn-refused',
  'spawn-started',
  'spend',
  'steered',
  'step-end',
  'step-rolled-back',
  'tool-call',
  'toolchain-checked',
  'tools-expanded',
] as const satisfies readonly EventType[];

// A type added to EventData and not to EVENT_TYPES fails to compile here.
type Unlisted = Exclude<EventType, (typeof EVENT_TYPES)[number]>;
const everyTypeListed: [Unlisted] extends [never] ? true : Unlisted = true;
void everyTypeListed;

/** An event as stored and delivered. */
export type HarnessEvent = EventData & {
  eventId: number;
  rootId: string;
  runId: string;
  seq: number | null;
  generation: number;
  at: number;
  /** Never set on a committed event: `event.live` alone tells a live event from one (it narrows under --strict). */
  live?: never;
};
