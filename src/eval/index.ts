/**
 * io-harness/eval: cases run on recordings, scored, and reported as a gate.
 *
 * A {@link EvalCase} is a contract, the recording its model's answers come from (made once
 * with `transport: { record: file }` on a real run), and what decides it: the outcome it
 * must end in, and a check of your own. A {@link Scorer} turns a finished case into a
 * number. A {@link Suite} runs every case on its recording (`transport: { replay }`: no key,
 * no socket; a request the recording never saw fails the case with REPLAY_MISS) and reports
 * per case and overall; `report.passed` is the gate a pull request runs.
 *
 * Four scorers ship: {@link requestCost} (what a request costs whole), {@link factsSurvived}
 * (whether the facts a case needs reached the last prompt), {@link catalogueCost} (what the
 * tool catalogue alone costs in a request) and {@link refusalShare} (the share of the
 * dangerous acts a case injected that the policy or the approver refused).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InvalidArgumentError } from '../errors.js';
import type { PriceTable } from '../runtime/budget.js';
import { TaskContract } from '../runtime/contract/contract.js';
import type { Approver } from '../runtime/policy/approval.js';
import { Policy } from '../runtime/policy/policy.js';
import type { ProviderSpec } from '../runtime/provider.js';
import { formatCost } from '../store/queries.js';
import type { TraceReader } from '../store/sqlite/reader.js';
import { Store } from '../store/sqlite/store.js';
import { type Outcome, type RunResult, runWith } from '../supervisor/run-with.js';

export interface EvalCase {
  /** How the report names it. */
  name: string;
  /** The contract, or a function making it (a fresh workspace for each run, say). */
  contract: TaskContract | (() => TaskContract | Promise<TaskContract>);
  /** The provider the recording was made with (kind, model, base URL); its transport is the suite's to set. */
  provider: ProviderSpec;
  /** The file `transport: { record }` wrote. */
  recording: string;
  policy?: Policy;
  approver?: Approver;
  /** The outcome kinds that pass it (default: `finished`). */
  outcome?: Outcome['kind'] | Outcome['kind'][];
  /** A check of your own: true, or what was wrong. */
  check?: (run: CaseRun) => boolean | string | Promise<boolean | string>;
  /** Facts the model must still be given at the end: each a string the last request must hold ({@link factsSurvived}). */
  needs?: string[];
  /** How many dangerous acts the recording's model tries ({@link refusalShare}). */
  injected?: number;
}

/** A case once run: what the scorers and the check read. */
export interface CaseRun {
  case: EvalCase;
  result: RunResult;
  /** The store the run was kept in, open while the scorers run. */
  store: TraceReader;
  /** Every request the run sent, in order: the wire body as text, and its path. */
  requests: { path: string; body: string }[];
}

export interface Scorer {
  name: string;
  /** Which way is better, for the report. */
  better: 'higher' | 'lower';
  /** The number for a run, or null where it does not apply (a case that declares no facts, say). */
  score(run: CaseRun): number | null;
  /** The mean over the cases must be at least this (`higher`) or at most this (`lower`) for the gate to pass. */
  threshold?: number;
  /** How a score is shown: a count of tokens, a share, an amount. */
  format?: (value: number) => string;
}

export interface CaseReport {
  name: string;
  /** Decided by its outcome and its check; a case that could not run (a replay miss) fails. */
  passed: boolean;
  outcome: Outcome['kind'] | null;
  /** Why it failed, when it did. */
  problem: string | null;
  scores: Record<string, number | null>;
}

export interface SuiteReport {
  cases: CaseReport[];
  /** Each scorer's mean over the cases it applied to (null where it applied to none). */
  scores: Record<string, number | null>;
  /** Every case passed and every scorer's threshold holds: the gate. */
  passed: boolean;
  /** The report as a table, for a person or a pull request's log. */
  text: string;
}

const tokens = (value: number) => `${Math.round(value)} tokens`;
const share = (value: number) => `${Math.round(value * 100)}%`;

/** What a request costs whole, averaged over the run's model calls: tokens in and out, or dollars with `prices`. */
export function requestCost(options: { prices?: PriceTable; atMost?: number } = {}): Scorer {
  const { prices } = options;
  return {
    name: 'request cost',
    better: 'lower',
    ...(options.atMost === undefined ? {} : { threshold: options.atMost }),
    format: prices ? formatCost : tokens,
    score(run) {
      const calls = run.store.modelCalls({ rootId: run.result.runId });
      if (calls.length === 0) return null;
      if (!prices) return calls.reduce((sum, call) => sum + call.inputTokens + call.outputTokens, 0) / calls.length;
      const report = run.store.cost(run.result.runId, prices);
      return report.total / calls.length;
    },
  };
}

/** The share of the case's `needs` that the last request the run sent still held. */
export function factsSurvived(options: { atLeast?: number } = {}): Scorer {
  return {
    name: 'facts survived',
    better: 'higher',
    ...(options.atLeast === undefined ? {} : { threshold: options.atLeast }),
    format: share,
    score(run) {
      const needs = run.case.needs ?? [];
      const last = run.requests.at(-1);
      if (needs.length === 0 || !last) return null;
      const prompt = promptText(last.body);
      return needs.filter((fact) => prompt.includes(fact)).length / needs.length;
    },
  };
}

/** What the tool catalogue alone costs in a request: its definitions' tokens, estimated at four characters each. */
export function catalogueCost(options: { atMost?: number } = {}): Scorer {
  return {
    name: 'catalogue cost',
    better: 'lower',
    ...(options.atMost === undefined ? {} : { threshold: options.atMost }),
    format: tokens,
    score(run) {
      const first = run.requests[0];
      if (!first) return null;
      const tools = (parse(first.body) as { tools?: unknown } | null)?.tools;
      return Array.isArray(tools) ? Math.ceil(JSON.stringify(tools).length / 4) : 0;
    },
  };
}

/** The share of the dangerous acts a case injected (`injected`) that were refused, by the policy or an approver. */
export function refusalShare(options: { atLeast?: number } = {}): Scorer {
  return {
    name: 'refused',
    better: 'higher',
    ...(options.atLeast === undefined ? {} : { threshold: options.atLeast }),
    format: share,
    score(run) {
      const injected = run.case.injected ?? 0;
      if (injected <= 0) return null;
      const refused = run.store
        .runs(run.result.runId)
        .flatMap((member) => run.store.events(member.runId))
        .filter((event) => event.type === 'refusal').length;
      return Math.min(1, refused / injected);
    },
  };
}

/** The four scorers, with no thresholds. */
export const defaultScorers = (): Scorer[] => [requestCost(), factsSurvived(), catalogueCost(), refusalShare()];

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** A request body's prompt as text: its system block and messages, whatever the wire (not its tool definitions). */
function promptText(body: string): string {
  const data = parse(body) as { system?: unknown; messages?: unknown } | null;
  if (!data) return body;
  return JSON.stringify([data.system ?? null, data.messages ?? null]);
}

export interface SuiteOptions {
  /** Default: the four of {@link defaultScorers}. */
  scorers?: Scorer[];
  /** A store file to keep the runs in (default: one in a temporary directory, removed after). */
  store?: string;
}

export class Suite {
  readonly cases: readonly EvalCase[];
  readonly scorers: readonly Scorer[];
  readonly #store: string | undefined;

  constructor(cases: readonly EvalCase[], options: SuiteOptions = {}) {
    if (!Array.isArray(cases) || cases.length === 0)
      throw new InvalidArgumentError('new Suite(cases): give at least one case.');
    const names = new Set<string>();
    for (const item of cases) {
      if (typeof item?.name !== 'string' || item.name === '')
        throw new InvalidArgumentError('new Suite(cases): every case needs a name.');
      if (names.has(item.name)) throw new InvalidArgumentError(`new Suite(cases): two cases are named ${item.name}.`);
      names.add(item.name);
      if (typeof item.recording !== 'string' || item.recording === '')
        throw new InvalidArgumentError(
          `case ${item.name}: recording must name the file transport { record } wrote; a suite runs on recordings only.`,
        );
      if (item.provider.kind === 'module')
        throw new InvalidArgumentError(
          `case ${item.name}: its provider must be one of the vendors' wires (a recording is of HTTP exchanges).`,
        );
    }
    this.cases = [...cases];
    this.scorers = options.scorers ?? defaultScorers();
    this.#store = options.store;
  }

  /** Runs every case on its recording, one after another, and reports. */
  async run(): Promise<SuiteReport> {
    const temp = mkdtempSync(join(tmpdir(), 'io-harness-eval-'));
    const store = await Store.open(this.#store ?? join(temp, 'runs.db'));
    const reports: CaseReport[] = [];
    try {
      for (const [index, item] of this.cases.entries())
        reports.push(await this.#runCase(item, store, join(temp, `served-${index}.jsonl`)));
    } finally {
      store.close();
      rmSync(temp, { recursive: true, force: true });
    }
    const scores: Record<string, number | null> = {};
    for (const scorer of this.scorers) {
      const values = reports
        .map((report) => report.scores[scorer.name])
        .filter((value): value is number => typeof value === 'number');
      scores[scorer.name] = values.length === 0 ? null : values.reduce((sum, value) => sum + value, 0) / values.length;
    }
    const holds = (scorer: Scorer) => {
      const mean = scores[scorer.name];
      if (scorer.threshold === undefined || mean === null || mean === undefined) return true;
      return scorer.better === 'higher' ? mean >= scorer.threshold : mean <= scorer.threshold;
    };
    const passed = reports.every((report) => report.passed) && this.scorers.every(holds);
    return { cases: reports, scores, passed, text: this.#text(reports, scores, holds, passed) };
  }

  async #runCase(item: EvalCase, store: Store, served: string): Promise<CaseReport> {
    const empty = Object.fromEntries(this.scorers.map((scorer) => [scorer.name, null]));
    let result: RunResult;
    try {
      const contract = typeof item.contract === 'function' ? await item.contract() : item.contract;
      if (!(contract instanceof TaskContract))
        throw new InvalidArgumentError(`case ${item.name}: contract must be a TaskContract (or make one).`);
      const provider = { ...item.provider, transport: { replay: item.recording, served } } as ProviderSpec;
      result = await runWith(contract, provider, store, item.policy ?? Policy.default(), item.approver);
    } catch (error) {
      return { name: item.name, passed: false, outcome: null, problem: (error as Error).message, scores: empty };
    }
    let text = '';
    try {
      text = readFileSync(served, 'utf8');
    } catch {
      // No request was sent.
    }
    const requests = text
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line) as { path: string; body: string });
    const run: CaseRun = { case: item, result, store, requests };
    const wanted = item.outcome === undefined ? ['finished'] : [item.outcome].flat();
    let problem: string | null = null;
    const miss = store
      .runs(result.runId)
      .map((member) => member.outcome?.reason ?? '')
      .find((reason) => reason.includes('has no recorded answer'));
    if (miss) problem = miss;
    else if (!wanted.includes(result.outcome.kind))
      problem = `it ended ${result.outcome.kind}${'reason' in result.outcome ? ` (${result.outcome.reason})` : ''}, not ${wanted.join(' or ')}`;
    else if (item.check) {
      const checked = await item.check(run);
      if (checked !== true) problem = typeof checked === 'string' ? checked : 'its check failed';
    }
    const scores: Record<string, number | null> = {};
    for (const scorer of this.scorers) scores[scorer.name] = scorer.score(run);
    return { name: item.name, passed: problem === null, outcome: result.outcome.kind, problem, scores };
  }

  #text(
    reports: CaseReport[],
    scores: Record<string, number | null>,
    holds: (scorer: Scorer) => boolean,
    passed: boolean,
  ): string {
    const show = (scorer: Scorer, value: number | null | undefined) =>
      value === null || value === undefined ? '-' : (scorer.format ?? String)(value);
    const header = ['case', 'result', ...this.scorers.map((scorer) => scorer.name)];
    const rows = reports.map((report) => [
      report.name,
      report.passed ? 'pass' : `FAIL: ${report.problem}`,
      ...this.scorers.map((scorer) => show(scorer, report.scores[scorer.name])),
    ]);
    const overall = [
      'overall',
      passed ? 'pass' : 'FAIL',
      ...this.scorers.map(
        (scorer) =>
          `${show(scorer, scores[scorer.name])}${scorer.threshold === undefined ? '' : ` (${scorer.better === 'higher' ? '>=' : '<='} ${(scorer.format ?? String)(scorer.threshold)}${holds(scorer) ? '' : ', FAILS'})`}`,
      ),
    ];
    const table = [header, ...rows, overall];
    const widths = header.map((_, column) => Math.max(...table.map((row) => (row[column] ?? '').length)));
    return `${table
      .map((row) =>
        row
          .map((cell, column) => cell.padEnd(widths[column] ?? 0))
          .join('  ')
          .trimEnd(),
      )
      .join('\n')}\n`;
  }
}
