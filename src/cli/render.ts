/**
 * A run's trace as text for a person: what `io-harness show` prints. Each step with the
 * model call that made it (tokens, latency, time to first token), its tool calls and
 * what they returned, refusals with the rule and layer that refused, the draw against the
 * ledger; then gates, questions, children, the reply and the run's diff.
 */
import type { HarnessEvent } from '../runtime/events.js';
import type { PostgresStore } from '../store/postgres/index.js';
import type { ModelCallRow, RunRecord, WebSourceRow } from '../store/records.js';
import type { TraceReader } from '../store/sqlite/reader.js';

/** `text` on one line, cut to `max` characters with an ellipsis. */
export const clip = (text: string, max: number) => {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
};

/** 850 ms, 3.2 s, 4 min 05 s. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const seconds = Math.round(ms / 1000);
  return `${Math.floor(seconds / 60)} min ${String(seconds % 60).padStart(2, '0')} s`;
}

/** One line for an event, as `show` and `follow` print it. */
export function describeEvent(event: HarnessEvent): string {
  switch (event.type) {
    case 'run-start':
      return `${event.resumed ? 'resumed' : 'started'} ${event.address}: ${clip(event.task, 80)}`;
    case 'run-end':
      return `ended ${event.status}${event.reason ? `: ${clip(event.reason, 100)}` : ''}`;
    case 'step-end':
      return `step ${event.seq ?? '?'} committed: ${event.toolCalls.length} tool call${event.toolCalls.length === 1 ? '' : 's'}, ${event.inputTokens} in, ${event.outputTokens} out (${event.model})`;
    case 'tool-call':
      return `call ${event.name} ${clip(JSON.stringify(event.args), 100)}${event.invalid ? ` (invalid: ${event.invalid.reason})` : ''}`;
    case 'refusal':
      return `REFUSED ${event.tool}: rule ${event.rule}, layer ${event.layer}: ${clip(event.reason, 120)}`;
    case 'spend':
      return `draw ${event.draw.steps} step${event.draw.steps === 1 ? '' : 's'}, ${event.draw.tokens} tokens (tree: ${event.treeSpent.steps} steps, ${event.treeSpent.tokens} tokens)`;
    case 'budget-exhausted':
      return `budget exhausted: ${event.account} at ${event.spent} of ${event.limit} (ceiling of ${event.ceiling})`;
    case 'spawn-queued':
      return `spawned ${event.address} (${event.childId}): ${clip(event.task, 80)}`;
    case 'spawn-started':
      return `child ${event.address} started`;
    case 'spawn-refused':
      return `spawn REFUSED (${event.rule}): ${clip(event.reason, 100)}`;
    case 'message-sent':
      return `message ${event.msgId} to ${event.to}`;
    case 'message-read':
      return `read ${event.msgIds.length} message${event.msgIds.length === 1 ? '' : 's'}`;
    case 'file-changed':
      return `changed ${event.path} (+${event.added} -${event.removed})`;
    case 'gate-evaluated':
      return `gate (${event.criterion}) ${event.verdict}${event.exitStatus === null ? '' : `, exit ${event.exitStatus}`}${event.reasons.length > 0 ? `: ${clip(event.reasons.join('; '), 120)}` : ''}`;
    case 'gate-output':
      return `gate output of ${event.argv.join(' ')} (exit ${event.exitStatus ?? event.signal}):${indent(`${event.stdout}${event.stderr}`.trimEnd(), 4)}`;
    case 'run-paused':
      return `paused on ${event.kind} ${event.questionId}: ${event.summary}`;
    case 'question-answered':
      return `${event.kind} ${event.questionId} answered ${JSON.stringify(event.answer)} by ${event.by}`;
    case 'policy-decision':
      return `policy ${event.effect} ${event.act} ${clip(event.subject, 80)}${event.rule ? ` (rule ${event.rule}, layer ${event.layer})` : ''}${event.answer ? `, answered ${event.answer}` : ''}`;
    case 'schema-invalid':
      return `answer did not meet the schema${event.reprompted ? ' (asked again)' : ''}: ${clip(event.errors.join('; '), 120)}`;
    case 'model-retry':
      return `model retry (${event.kind}${event.statusCode ? ` ${event.statusCode}` : ''}) in ${formatDuration(event.delayMs)}: ${clip(event.message, 80)}`;
    case 'model-failed':
      return `model FAILED (${event.kind}${event.statusCode ? ` ${event.statusCode}` : ''}): ${clip(event.message, 100)}`;
    case 'toolchain-checked':
      return event.ran
        ? `toolchain check ${event.argv.join(' ')}: exit ${event.exitStatus}`
        : `toolchain check ${event.argv.join(' ')} skipped (the policy does not allow it outright)`;
    case 'contained':
      return `commands contained on ${event.rung}: ${event.access}, network ${event.network}`;
    case 'process-containment':
      return `commands kept by ${event.mechanism}${event.reason ? ` (${event.reason})` : ''}`;
    case 'context-window':
      return `window ${event.tokens} tokens (${event.source}), ${Math.round(event.share * 100)}% used for requests`;
    case 'cap-reached':
      return `command stopped at its cap ${event.cap} (${event.limit})`;
    case 'steered':
      return `steered by ${event.by}: ${clip(event.text, 100)}`;
    case 'budget-clamped':
      return `budget of ${event.childId} clamped to what is left`;
    case 'model-fallback':
      return `fell back from ${event.from} to ${event.to ?? 'nothing'} (${event.kind})`;
    case 'bundle-problem':
      return `bundle ${event.plugin}${event.dropped ? ' dropped' : ''}: ${clip(event.message, 100)}`;
    case 'lease-taken':
      return `lease taken by ${event.owner} (pid ${event.pid}, generation ${event.generation})`;
    default:
      return event.type;
  }
}

function indent(text: string, by: number): string {
  if (text === '') return '';
  const pad = ' '.repeat(by);
  return `\n${text
    .split('\n')
    .map((line) => `${pad}${line}`)
    .join('\n')}`;
}

const QUIET = new Set(['step-end', 'tool-call', 'run-start', 'lease-taken', 'intent-started', 'intent-finished']);

/** What `show` leaves out of a step: the parts the step's own lines say, and decisions that allowed. */
const shown = (event: HarnessEvent) =>
  !QUIET.has(event.type) && !(event.type === 'policy-decision' && event.effect === 'allow');

const SOURCE_MARK = { result: 'found', fetched: 'fetched', citation: 'cited' } as const;

/** What the vendor's own web tools did for a step's answer: its counts, then each page. */
function webLines(call: ModelCallRow | undefined, sources: readonly WebSourceRow[], seq: number): string[] {
  const lines: string[] = [];
  if (call && (call.webSearches > 0 || call.webFetches > 0))
    lines.push(`  web: ${call.webSearches} searches, ${call.webFetches} fetches (by the vendor)`);
  for (const source of sources) {
    if (source.seq !== seq) continue;
    const title = source.title ? ` (${clip(source.title, 80)})` : '';
    const quoted = source.citedText ? `: "${clip(source.citedText, 120)}"` : '';
    lines.push(`  ${SOURCE_MARK[source.kind]} ${source.url}${title}${quoted}`);
  }
  return lines;
}

/** The whole of `show`'s text for one run. */
export async function renderRun(reader: TraceReader | PostgresStore, run: RunRecord): Promise<string> {
  const out: string[] = [];
  const account = await reader.account(run.runId);
  const took = run.endedAt === null ? 'still going' : `took ${formatDuration(run.endedAt - run.createdAt)}`;
  out.push(`run ${run.runId}  ${run.status}`);
  out.push(`  address ${run.address}${run.parentId ? `, parent ${run.parentId}` : ''}, tree ${run.rootId}`);
  out.push(`  task: ${clip(run.task, 200)}`);
  out.push(`  started ${new Date(run.createdAt).toISOString()}, ${took}`);
  if (account) {
    const { steps, tokens } = account.ceilings;
    const ceilings = [steps === null ? null : `${steps} steps`, tokens === null ? null : `${tokens} tokens`].filter(
      (part) => part !== null,
    );
    out.push(
      `  spent ${account.spent.steps} steps, ${account.spent.tokens} tokens${ceilings.length > 0 ? ` (ceiling ${ceilings.join(', ')})` : ''}`,
    );
  }
  if (run.outcome?.reason) out.push(`  reason: ${run.outcome.reason}`);
  const events = await reader.events(run.runId);
  const calls = await reader.modelCalls({ runId: run.runId });
  const bySeq = new Map<number, HarnessEvent[]>();
  const loose: HarnessEvent[] = [];
  for (const event of events) {
    if (event.seq === null) loose.push(event);
    else bySeq.set(event.seq, [...(bySeq.get(event.seq) ?? []), event]);
  }
  const steps = await reader.steps(run.runId);
  const sources = await reader.webSources(run.runId);
  // What a tool threw: its class and message, then where, a frame a line.
  const thrown = (error: { name: string; message: string; stack: string | null }): string[] => [
    `      threw ${error.name}: ${clip(error.message, 300)}`,
    ...(error.stack ?? '')
      .split('\n')
      .filter((line) => /^\s+at /.test(line))
      .slice(0, 8)
      .map((line) => `        ${line.trim()}`),
  ];
  for (const step of steps) {
    out.push('');
    const call = calls.filter((item) => item.seq === step.seq).at(-1);
    const usage = step.usage;
    const timing = call
      ? `, ${call.latencyMs === null ? '' : formatDuration(call.latencyMs)}${call.ttftMs === null ? '' : ` (first token ${formatDuration(call.ttftMs)})`}`
      : '';
    out.push(
      `step ${step.seq}  ${step.completion.model}  ${usage.inputTokens} in, ${usage.outputTokens} out${usage.cacheReadTokens ? `, ${usage.cacheReadTokens} cached` : ''}${timing}`,
    );
    if (step.completion.text.trim() !== '') out.push(`  says: ${clip(step.completion.text, 200)}`);
    out.push(...webLines(call, sources, step.seq));
    for (const [index, toolCall] of step.completion.toolCalls.entries()) {
      out.push(`  → ${toolCall.name} ${clip(JSON.stringify(toolCall.args), 160)}`);
      const observation = step.observations.find((item) => item.callId === toolCall.id) ?? step.observations[index];
      if (observation)
        out.push(`    ${observation.isError ? '✗' : '←'} ${clip(observation.content, 200) || '(nothing)'}`);
      if (observation?.error) out.push(...thrown(observation.error));
    }
    for (const event of bySeq.get(step.seq) ?? []) if (shown(event)) out.push(`  ${describeEvent(event)}`);
    bySeq.delete(step.seq);
  }
  // What the vendor found for an answer that was no step (a reply, the call of a run that ended).
  const stepless = [...new Set(sources.map((source) => source.seq))].filter((seq) => !steps.some((s) => s.seq === seq));
  for (const seq of stepless) {
    out.push('', `the answer after step ${seq - 1}:`);
    out.push(...webLines(calls.filter((item) => item.seq === seq).at(-1), sources, seq));
  }
  const rest = [...[...bySeq.values()].flat(), ...loose].filter(shown).sort((a, b) => a.eventId - b.eventId);
  if (rest.length > 0) {
    out.push('');
    for (const event of rest) out.push(describeEvent(event));
  }
  const open = await reader.questions({ runId: run.runId, status: 'open' });
  if (open.length > 0) {
    out.push('');
    out.push('open questions (answer with: io-harness answer <question> <answer>):');
    for (const question of open) out.push(`  ${question.questionId}  ${question.kind}`);
  }
  const children = (await reader.runs(run.rootId)).filter((other) => other.parentId === run.runId);
  if (children.length > 0) {
    out.push('');
    out.push('children:');
    for (const child of children) out.push(`  ${child.runId}  ${child.address}  ${child.status}`);
  }
  if (run.reply) {
    out.push('');
    out.push(`reply:${indent(run.reply, 2)}`);
  }
  const patch = await reader.patch(run.runId);
  if (patch.trim() !== '') {
    out.push('');
    out.push('diff:');
    out.push(patch.trimEnd());
  }
  return `${out.join('\n')}\n`;
}
