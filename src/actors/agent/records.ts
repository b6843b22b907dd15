/** How a step's model calls and observations become trace records and transcript turns. */

import { callTarget, collapsedContent } from '../../runtime/context/rungs.js';
import type { EventData } from '../../runtime/events.js';
import type { CallAttempt, Completion, ProviderSpec, TranscriptEntry } from '../../runtime/provider.js';
import { MAX_ARGUMENT_DEPTH, nestedDeeperThan } from '../../runtime/tools/registry.js';
import type { ModelCallRecord, Observation } from '../../store/records.js';

/** The trace of the tries a model call took: each retry, each fallback, and a final failure. */
export function attemptEvents(attempts: CallAttempt[], answeredBy: string | null): EventData[] {
  return attempts.map((attempt, index): EventData => {
    if (attempt.next === 'retry') {
      return {
        type: 'model-retry',
        provider: attempt.provider,
        model: attempt.model,
        kind: attempt.kind,
        statusCode: attempt.statusCode,
        delayMs: attempt.delayMs,
        message: attempt.message,
      };
    }
    if (attempt.next === 'fallback') {
      return {
        type: 'model-fallback',
        from: attempt.provider,
        to: attempts[index + 1]?.provider ?? answeredBy,
        kind: attempt.kind,
        statusCode: attempt.statusCode,
        message: attempt.message,
      };
    }
    return {
      type: 'model-failed',
      provider: attempt.provider,
      model: attempt.model,
      kind: attempt.kind,
      statusCode: attempt.statusCode,
      message: attempt.message,
    };
  });
}

export function failedCall(attempt: CallAttempt): ModelCallRecord {
  return {
    provider: attempt.provider,
    model: attempt.model,
    outcome: attempt.kind,
    statusCode: attempt.statusCode,
    inputTokens: 0,
    outputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    reasoningTokens: 0,
    latencyMs: attempt.latencyMs,
    ttftMs: null,
  };
}

export function answeredCall(completion: Completion, fallbackName: string): ModelCallRecord {
  return {
    provider: completion.provider ?? fallbackName,
    model: completion.model,
    outcome: 'ok',
    statusCode: null,
    inputTokens: completion.usage.inputTokens,
    outputTokens: completion.usage.outputTokens,
    cacheReadTokens: completion.usage.cacheReadTokens ?? 0,
    cacheWriteTokens: completion.usage.cacheWriteTokens ?? 0,
    reasoningTokens: completion.usage.reasoningTokens ?? 0,
    latencyMs: completion.latencyMs ?? null,
    ttftMs: completion.timeToFirstTokenMs ?? null,
    ...(completion.usageReported === false ? { usageReported: false } : {}),
    ...(completion.web ? { web: completion.web } : {}),
  };
}

/**
 * The name a model's call is recorded under: its own, unless it begins with `@`, which
 * marks what the runtime itself tells the model (a re-prompt, a refresh, a fold). A call a
 * model names `@schema` is refused as an unknown tool like any other, and recorded without
 * the `@`, so its result stays a tool result paired with its call.
 */
export function observedName(name: string): string {
  return name.startsWith('@') ? name.replace(/^@+/, '') || 'unnamed' : name;
}

/**
 * A committed step as transcript turns: its assistant turn, then each observation (a
 * runtime feedback as a user turn). A result the collapse rung marked is sent shortened;
 * `replaced` holds what the mechanical rungs put in place of this step's results, by index.
 */
export function appendStep(
  transcript: TranscriptEntry[],
  completion: Completion,
  observations: Observation[],
  replaced?: (index: number) => string | undefined,
): void {
  transcript.push({ role: 'assistant', text: completion.text, toolCalls: completion.toolCalls });
  for (const [index, observation] of observations.entries()) {
    if (observation.name.startsWith('@')) {
      transcript.push({ role: 'user', text: observation.content });
      continue;
    }
    // What a rung put in its place (its images go with its content), else the result, collapsed when it was marked so.
    const instead = replaced?.(index);
    const call = observation.collapsed ? completion.toolCalls.find((item) => item.id === observation.callId) : null;
    const content =
      instead ??
      (observation.collapsed
        ? collapsedContent(observation.name, callTarget(call?.args), observation.content, observation.collapsed.shown)
        : observation.content);
    transcript.push({
      role: 'tool',
      callId: observation.callId,
      name: observation.name,
      content,
      isError: observation.isError,
      ...(observation.images && instead === undefined ? { images: observation.images } : {}),
    });
  }
}

/** Arguments compared as JSON with sorted keys. */
export function sameArguments(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  // Arguments nested past the limit are refused as a call, and never compared by recursion.
  if (nestedDeeperThan(a, MAX_ARGUMENT_DEPTH) || nestedDeeperThan(b, MAX_ARGUMENT_DEPTH)) return false;
  return canonical(a) === canonical(b);
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    return `{${Object.keys(record)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical(record[key])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

/** A provider spec as the trace names it: kind (or name) and model. */
export function providerLabel(spec: ProviderSpec): string {
  if (spec.kind === 'fallback') return spec.providers.map(providerLabel).join(' then ');
  if (spec.kind === 'module') return spec.module;
  if (spec.kind === 'host') return `host:${spec.name}`;
  if (spec.kind === 'ai-sdk') return `${spec.name ?? `ai-sdk:${spec.package}`}:${spec.model}`;
  return `${spec.name ?? spec.preset ?? spec.kind}:${spec.model}`;
}
