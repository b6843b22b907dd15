/**
 * How a run ended, read from the store: the outcome as a union to switch on, the answer and
 * its parsed output, the tool errors and the tree's usage. Read by runWith, sessions and
 * the UI message stream, whoever drove the run.
 */
import { InvalidArgumentError } from '../errors.js';
import type { RunStatus } from '../runtime/events.js';
import { TraceQueries } from '../store/queries.js';
import type { Q } from '../store/sql.js';
import type { TraceReader } from '../store/sqlite/reader.js';
import { outputQuery } from './output.js';

/** How a run ended, as a union to switch on. */
export type Outcome =
  | { kind: 'finished'; reply: string | null }
  | { kind: 'gate-failed'; reason: string; verdict: 'failed' | 'errored' | null }
  | { kind: 'schema-unsatisfied'; reason: string; reply: string | null }
  | { kind: 'budget-exhausted'; reason: string }
  /** Waiting on a person: `questions` are the ids to answer (answerQuestion), then resume. */
  | { kind: 'paused'; reason: string; questions: string[] }
  | { kind: 'cancelled'; reason: string }
  /** A person interrupted it (a session turn): it ended at a step boundary, its committed steps kept. */
  | { kind: 'interrupted'; reason: string }
  | { kind: 'failed'; reason: string };

export interface RunResult<Output = unknown> {
  runId: string;
  outcome: Outcome;
  /** The final answer, when the model gave one. */
  reply: string | null;
  /**
   * The answer as data, when the contract declared an OutputSchema and the run finished:
   * the reply parsed and checked, typed by a zod schema's type. `null` otherwise.
   */
  output: Output | null;
  /**
   * The tool calls of the whole tree whose tool answered with an error (`errors`, refusals
   * included), and of those the ones whose tool threw (`threw`: the error's class, message
   * and stack are with the observation; see `show`).
   */
  toolErrors: { errors: number; threw: number };
  /** What the whole tree spent, and the token detail from the accounting rows. */
  usage: {
    steps: number;
    tokens: number;
    inputTokens: number;
    outputTokens: number;
    cacheReadTokens: number;
    reasoningTokens: number;
  };
}

/** The outcome of a run in a store, whoever drove it. */
export function outcomeOf(store: TraceReader, runId: string): RunResult {
  return store.query(outcomeQuery(runId));
}

const reads = new TraceQueries();

/** The outcome of a run, read from either backend. */
export function* outcomeQuery(runId: string): Q<RunResult> {
  const run = yield* reads.run(runId);
  if (!run) throw new InvalidArgumentError(`no run ${runId} in this store.`);
  const reason = run.outcome?.reason ?? '';
  const status: RunStatus = run.status;
  let outcome: Outcome;
  switch (status) {
    case 'finished':
      outcome = { kind: 'finished', reply: run.reply };
      break;
    case 'gate-failed': {
      const last = (yield* reads.gateEvaluations(runId)).at(-1);
      const verdict = last && last.verdict !== 'passed' ? last.verdict : null;
      outcome = { kind: 'gate-failed', reason, verdict };
      break;
    }
    case 'schema-unsatisfied':
      outcome = { kind: 'schema-unsatisfied', reason, reply: run.reply };
      break;
    case 'budget-exhausted':
      outcome = { kind: 'budget-exhausted', reason };
      break;
    case 'cancelled':
      outcome = { kind: 'cancelled', reason };
      break;
    case 'interrupted':
      outcome = { kind: 'interrupted', reason };
      break;
    case 'failed':
      outcome = { kind: 'failed', reason };
      break;
    case 'paused': {
      const open = yield* reads.questions({ runId, status: 'open' });
      outcome = {
        kind: 'paused',
        reason: open.length > 0 ? `waiting on ${open.map((q) => `${q.kind} ${q.questionId}`).join(', ')}` : 'paused',
        questions: open.map((q) => q.questionId),
      };
      break;
    }
    default:
      outcome = { kind: 'paused', reason: reason || `the run is ${status}`, questions: [] };
  }
  const account = yield* reads.account(runId);
  const usage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, reasoningTokens: 0 };
  for (const call of yield* reads.modelCalls({ rootId: run.rootId })) {
    usage.inputTokens += call.inputTokens;
    usage.outputTokens += call.outputTokens;
    usage.cacheReadTokens += call.cacheReadTokens;
    usage.reasoningTokens += call.reasoningTokens;
  }
  const toolErrors = { errors: 0, threw: 0 };
  for (const each of yield* reads.runs(run.rootId))
    for (const step of yield* reads.steps(each.runId))
      for (const observation of step.observations) {
        if (!observation.isError || observation.name.startsWith('@')) continue;
        toolErrors.errors++;
        if (observation.error) toolErrors.threw++;
      }
  return {
    runId,
    outcome,
    reply: run.reply,
    output: yield* outputQuery(runId),
    toolErrors,
    usage: { steps: account?.spent.steps ?? 0, tokens: account?.spent.tokens ?? 0, ...usage },
  };
}
