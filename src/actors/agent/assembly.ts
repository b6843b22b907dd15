/**
 * The agent's side of context assembly: the run's window found once (and recorded, so a
 * resume reads it back), each request checked against its share before it is sent, the
 * old steps folded when it would not fit, and a request that does not extend the one
 * before it named. The rules themselves are in runtime/context/.
 */
import { ErrorCode, HarnessError } from '../../errors.js';
import {
  calibrated,
  DEFAULT_SHARE,
  entryChars,
  FOLD_PROMPT,
  foldEntry,
  mechanicalNotes,
  planFold,
  prefixBreak,
  requestChars,
  shortened,
  stepStarts,
  toolsJson,
} from '../../runtime/context/assembler.js';
import { memoryBlock, type NoteRecord, runTerms } from '../../runtime/context/memory.js';
import {
  applyReplacement,
  collapseAt,
  DEFAULT_COLLAPSE_OVER,
  type HeadStep,
  microcompact,
  type Replacement,
  RUNG_TARGET,
  snip,
} from '../../runtime/context/rungs.js';
import { RunningSize } from '../../runtime/context/running-size.js';
import {
  assumedWindow,
  type ContextWindow,
  catalogueWindow,
  primarySpec,
  readsCatalogue,
  referenceWindow,
} from '../../runtime/context/window.js';
import type { EventData } from '../../runtime/events.js';
import type { Policy } from '../../runtime/policy/policy.js';
import type {
  Completion,
  ModelRequest,
  Provider,
  ProviderSpec,
  ToolDefinition,
  TranscriptEntry,
} from '../../runtime/provider.js';
import { loadProvider } from '../../runtime/providers/registry.js';
import type { RunContext } from '../../runtime/tools/context.js';
import { usedWeb } from '../../runtime/web/web.js';
import type { Observation } from '../../store/records.js';
import { answeredCall } from './records.js';
import { COMPACT, FOLD, type RestoredRun, steerTurn } from './step.js';

/** The part of the window a fold's own request may fill before its longest entries are cut for it. */
const FOLD_ROOM = 0.9;

/** The part of a request a fold's notes may fill. */
const NOTES_SHARE = 0.25;

/** How long the catalogue may take to answer before the window is assumed instead. */
const CATALOGUE_TIMEOUT_MS = 10_000;

/**
 * The window the run's requests are fitted to: the one recorded when it first started, or
 * found now and recorded. A string when the run is refused: the catalogue's host is one
 * the policy denies by a rule of its own.
 */
export async function findWindow(
  agent: RunContext,
  providerSpec: ProviderSpec,
  policy: Policy | null,
  recorded: RestoredRun['window'],
): Promise<ContextWindow | string> {
  if (recorded) return recorded as ContextWindow;
  const context = agent.contract?.context ?? {};
  const primary = primarySpec(providerSpec);
  let found: ContextWindow | null = context.window === undefined ? null : { tokens: context.window, source: 'stated' };
  if (!found && primary && readsCatalogue(primary)) {
    const provider = await loadProvider(primary);
    const refused = catalogueRefused(provider, policy, agent.contract?.root ?? process.cwd());
    if (refused) return refused;
    const tokens = await catalogued(provider, primary.model, agent.signal);
    if (tokens !== null && tokens > 0) found = { tokens, source: 'catalogue' };
  }
  if (!found && context.referenceCatalogue && primary && (primary.kind === 'openai' || primary.kind === 'anthropic')) {
    const tokens = referenceWindow(primary.model);
    if (tokens !== null) found = { tokens, source: 'reference' };
  }
  const window = found ?? assumedWindow(primary);
  await agent.store.call('recordEvents', {
    ...agent.fence,
    events: [
      {
        type: 'context-window',
        tokens: window.tokens,
        source: window.source,
        share: context.share ?? DEFAULT_SHARE,
        model: primary?.model ?? 'unknown',
      },
    ],
    now: agent.clock.now(),
  });
  return window;
}

/** Windows read from a catalogue in this thread, by endpoint and model: a tree's agents on one thread ask once. */
const catalogues = new Map<string, Promise<number | null>>();

/** The catalogue's window for a model, or null when it cannot be read (the window is then assumed, and the event says so). */
function catalogued(provider: Provider, model: string, signal: AbortSignal): Promise<number | null> {
  const key = `${provider.baseUrl ?? provider.name} ${model}`;
  let found = catalogues.get(key);
  if (!found) {
    const bounded = AbortSignal.any([signal, AbortSignal.timeout(CATALOGUE_TIMEOUT_MS)]);
    found = (provider.models?.(bounded) ?? Promise.resolve(null))
      .then((models) => (models ? catalogueWindow(models, model) : null))
      .catch(() => null);
    // A lookup that failed is tried again by the next run, not remembered.
    void found.then((tokens) => {
      if (tokens === null) catalogues.delete(key);
    });
    catalogues.set(key, found);
  }
  return found;
}

/** Why the catalogue may not be read: its host is denied by a rule the policy states (its default denial does not count: the provider's own host is the embedder's choice). */
function catalogueRefused(provider: Provider, policy: Policy | null, root: string): string | null {
  if (!policy || !provider.baseUrl) return null;
  const url = new URL(provider.baseUrl);
  const port = Number(url.port) || (url.protocol === 'https:' ? 443 : 80);
  const decision = policy.decide({ kind: 'net', host: url.hostname, port }, root);
  if (decision.effect !== 'deny' || decision.rule === null) return null;
  return `refused to start: the model's catalogue is on ${url.hostname}, which the policy denies (${decision.rule}, layer ${decision.layer}); state the model's window instead, withContext({ window: 128000 }), and no catalogue is read.`;
}

/** Every path the transcript's calls have named (an argument called `path`), for ranking the memory's notes. */
export function namedPaths(transcript: readonly TranscriptEntry[]): string[] {
  const paths = new Set<string>();
  for (const entry of transcript)
    if (entry.role === 'assistant')
      for (const call of entry.toolCalls) if (typeof call.args?.path === 'string') paths.add(call.args.path);
  return [...paths];
}

/** What fitting a request hands back: the steps it committed (a compaction, a fold), or how the run ended at a commit. */
export type Folded =
  | { kind: 'folded'; steps: number }
  | { kind: 'ended'; status: 'budget-exhausted' | 'interrupted' }
  | { kind: 'none' };

/**
 * One run's requests, each fitted to its share of the window. It keeps which step each
 * assistant turn of the transcript is, where the opening turn is, and the request before
 * this one (to name a request that does not extend it).
 */
export class Assembly {
  readonly #window: ContextWindow;
  readonly #share: number;
  /** The seq of each step whose turns are in the transcript after the opening, in order. */
  #shown: number[];
  #opening: number;
  #ratio: number;
  /** The run's transcript, whose request size is kept running: measured entry by entry as it grows. */
  readonly #transcript: readonly TranscriptEntry[];
  readonly #sizes = new RunningSize();
  /** The request before this one: its system block, tools and how many entries it sent. */
  #previous: { system: string; tools: readonly ToolDefinition[]; length: number } | null = null;
  /** IO_HARNESS_STRICT_PREFIX=1 (the test suite): a rewritten entry, or a running size off its full measure, is an error. */
  readonly #strict = process.env.IO_HARNESS_STRICT_PREFIX === '1';
  /** Set by a fold, so the next request is not taken for a broken prefix. */
  #justFolded = false;
  /** The request being sent extends the one before it (so what that one read from the cache should be read again). */
  #extended = false;
  /** The cache tokens the last answer reported reading, or null before the first. */
  #lastRead: number | null = null;
  /** The seq of the latest fold's step, or null. */
  #foldSeq: number | null;
  /** The rungs below the fold the contract turns on. */
  readonly #rungs: NonNullable<RunContext['contract']>['context'];
  /** The results a rung has replaced, as `seq:index`: never replaced twice. */
  readonly #replaced: Set<string>;
  /** What the system block is before the memory block. */
  readonly #base: string;
  /** The last step committed is a compaction: the rungs have run for the next request, which only a fold may shrink further. */
  #compactedLast: boolean;
  /** The memory block the requests carry, the notes in it, and the goal they were ranked by; null without memory. */
  #memory: { text: string; notes: NoteRecord[]; goal: string } | null = null;

  constructor(
    window: ContextWindow,
    share: number,
    restored: RestoredRun,
    transcript: readonly TranscriptEntry[],
    opening: number,
    rungs: NonNullable<RunContext['contract']>['context'] = {},
    base = '',
  ) {
    this.#base = base;
    this.#transcript = transcript;
    this.#window = window;
    this.#share = share;
    this.#shown = [...restored.shown];
    this.#opening = opening;
    this.#ratio = calibrated(restored.lastRequest);
    this.#foldSeq = restored.foldSeq;
    this.#rungs = rungs ?? {};
    this.#replaced = new Set(restored.replaced);
    this.#compactedLast = restored.compactedLast;
  }

  /**
   * Collapse, when the contract turns it on: a step's results that alone would take more
   * than their part of a request are marked to be sent shortened (the trace keeps them
   * whole). `requestTokens` is the estimate of the request the step answered. Returns the
   * `assembled` event naming them, or null when none was.
   */
  collapse(observations: Observation[], requestTokens: number): EventData | null {
    const option = this.#rungs?.collapse;
    if (!option) return null;
    const over = option === true ? DEFAULT_COLLAPSE_OVER : option.over;
    const limitChars = this.limit / this.#ratio;
    let entries = 0;
    let full = 0;
    let saved = 0;
    for (const observation of observations) {
      full += observation.content.length;
      if (observation.name.startsWith('@') || observation.collapsed) continue;
      const shown = collapseAt(observation.content.length, limitChars, over);
      if (shown === null) continue;
      observation.collapsed = { shown };
      entries++;
      saved += observation.content.length - shown;
    }
    if (entries === 0) return null;
    const before = requestTokens + Math.ceil(full * this.#ratio);
    return {
      type: 'assembled',
      rung: 'collapse',
      entries,
      tokensBefore: before,
      tokensAfter: before - Math.ceil(saved * this.#ratio),
      limit: this.limit,
    };
  }

  /**
   * Where a cache breakpoint goes: after the fold's notes, once a step after the fold has
   * been sent (the vendor is never asked to cache a prefix it has not seen once). The
   * notes are the second entry, after the opening.
   */
  breakpoint(): number | null {
    const folded = this.#foldSeq;
    return folded !== null && this.#shown.some((seq) => seq > folded) ? 1 : null;
  }

  /** The system block every request carries: the run's own, then its memory block. */
  get system(): string {
    const memory = this.#memory?.text ?? '';
    return memory === '' ? this.#base : `${this.#base}\n\n${memory}`;
  }

  /** The characters the memory block may take: its share of a request, at the estimate's ratio. */
  memoryRoom(share: number): number {
    return Math.floor((this.limit / this.#ratio) * share);
  }

  /** The memory block the requests carry from now (found at the run's start, or read back from the trace). */
  useMemory(memory: { text: string; notes: NoteRecord[]; goal: string }): void {
    this.#memory = memory;
  }

  /** The most tokens a request may hold. */
  get limit(): number {
    return Math.floor(this.#window.tokens * this.#share);
  }

  /**
   * Why no request can fit, or null: the window cannot hold even the system block, the
   * tool definitions and the opening turn, which no fold can make smaller.
   */
  noRoom(system: string, tools: readonly ToolDefinition[], transcript: readonly TranscriptEntry[]): string | null {
    const opening = transcript[this.#opening];
    const head = system.length + toolsJson(tools).length;
    const tokens = Math.ceil((head + (opening ? entryChars(opening) : 0)) * this.#ratio);
    if (tokens <= this.limit) return null;
    return `refused to start: the model's window of ${this.#window.tokens} tokens (${this.#window.source}), at a share of ${this.#share}, holds ${this.limit} tokens a request, and the system block, tool definitions and task alone are about ${tokens}; state a larger window or share with withContext({ window, share }), or give a shorter system prompt.`;
  }

  /**
   * The characters a request holds and what the vendor is expected to count them as. The
   * run's own transcript is measured by its running size (each entry once, as it comes);
   * another (a fold's own request) in full.
   */
  measure(system: string, tools: readonly ToolDefinition[], transcript: readonly TranscriptEntry[]) {
    const chars =
      transcript === this.#transcript ? this.#running(system, tools) : requestChars(system, tools, transcript);
    return { chars, tokens: Math.ceil(chars * this.#ratio) };
  }

  #running(system: string, tools: readonly ToolDefinition[]): number {
    const chars = this.#sizes.chars(system, tools, this.#transcript);
    if (this.#strict) {
      const full = requestChars(system, tools, this.#transcript);
      if (full !== chars)
        throw new HarnessError(
          ErrorCode.Internal,
          `a request's running size (${chars} characters) is not its full measure (${full})`,
        );
    }
    return chars;
  }

  /**
   * A step's answer came back: the vendor's count of its request calibrates the next
   * estimate. A `cache-miss` event when the request extended the one before it and read
   * less from the vendor's cache than that one did.
   */
  answered(completion: Completion, chars: number): EventData | null {
    // An answer the vendor searched or fetched for counts what that brought back as input too: not the request's size.
    if (completion.usageReported !== false && completion.usage.inputTokens > 0 && chars > 0 && !usedWeb(completion))
      this.#ratio = completion.usage.inputTokens / chars;
    const read = completion.usage.cacheReadTokens ?? 0;
    const before = this.#lastRead;
    this.#lastRead = read;
    return this.#extended && before !== null && before > 0 && read < before
      ? { type: 'cache-miss', expected: before, read }
      : null;
  }

  /** A step was committed with its turns appended to the transcript. */
  stepShown(seq: number): void {
    this.#shown.push(seq);
    this.#compactedLast = false;
  }

  /**
   * The request about to be sent, on the run's transcript: its size and estimate, and the
   * event naming it when it does not extend the one before it (null when it does). Past a
   * fold the head was rebuilt on purpose. Under IO_HARNESS_STRICT_PREFIX=1 (the test
   * suite) an entry already sent that changed is an error: it never should.
   */
  toSend(system: string, tools: readonly ToolDefinition[]): { chars: number; tokens: number; broke: EventData | null } {
    // Measuring brings the running size up to the transcript: what it replaced since the last request is known.
    const { chars, tokens } = this.measure(system, tools, this.#transcript);
    const replaced = this.#sizes.takeReplaced();
    const before = this.#previous;
    this.#previous = { system, tools, length: this.#transcript.length };
    if (!before || this.#justFolded) {
      this.#justFolded = false;
      this.#extended = false;
      return { chars, tokens, broke: null };
    }
    const cause = prefixBreak(before, { system, tools, transcript: this.#transcript }, replaced);
    this.#extended = cause === null;
    if (cause === 'transcript' && this.#strict)
      throw new HarnessError(
        ErrorCode.Internal,
        'a request rewrote a transcript entry it had already sent, between folds',
      );
    return { chars, tokens, broke: cause ? { type: 'prefix-broke', cause } : null };
  }

  /**
   * Fits the request to its share when it would not fit: first the mechanical rungs the
   * contract turns on (snip, then microcompact), committed as a step of their own when
   * they replaced anything; then, if the request is still over, a fold.
   */
  async fit(
    agent: RunContext,
    model: Provider,
    request: Omit<ModelRequest, 'transcript'>,
    transcript: TranscriptEntry[],
  ): Promise<Folded> {
    const { tokens } = this.measure(this.system, request.tools, transcript);
    if (tokens <= this.limit) return { kind: 'none' };
    let steps = 0;
    // Once a request: a run resumed after its compaction was committed goes on to the fold.
    if (!this.#compactedLast) {
      const compacted = await this.#compact(agent, agent.seq, request, transcript);
      if (compacted.kind === 'ended') return compacted;
      if (compacted.kind === 'folded') steps += compacted.steps;
    }
    // Reduce may have cut the memory block: the system block is the assembly's own from here.
    const folded = await this.#fold(agent, agent.seq + steps, model, { ...request, system: this.system }, transcript);
    if (folded.kind === 'ended') return folded;
    if (folded.kind === 'folded') steps += folded.steps;
    return steps > 0 ? { kind: 'folded', steps } : { kind: 'none' };
  }

  /** The steps of the transcript's head: those before the ones a fold would keep whole. */
  #head(transcript: readonly TranscriptEntry[]): HeadStep[] {
    const plan = planFold(transcript, this.#opening, this.#shown, this.limit / this.#ratio);
    if (!plan) return [];
    const starts = stepStarts(transcript, this.#opening);
    const head: HeadStep[] = [];
    // The newest step's results have not been sent yet: the model sees them whole once.
    for (const [k, at] of starts.slice(0, -1).entries()) {
      if (at >= plan.cut) break;
      head.push({ seq: this.#shown[k] as number, at, end: starts[k + 1] ?? transcript.length });
    }
    return head;
  }

  /**
   * Reduce, snip and microcompact, as the contract turns them on, down to {@link RUNG_TARGET}
   * of the limit; one step stores what they replaced (and the memory block reduce left).
   */
  async #compact(
    agent: RunContext,
    seq: number,
    request: Omit<ModelRequest, 'transcript'>,
    transcript: TranscriptEntry[],
  ): Promise<Folded> {
    const rungs = this.#rungs ?? {};
    if (!rungs.snip && !rungs.microcompact && !rungs.reduce) return { kind: 'none' };
    const head = this.#head(transcript);
    const events: EventData[] = [];
    const all: Replacement[] = [];
    const ran: string[] = [];
    const target = this.limit * RUNG_TARGET;
    let reduced: string | undefined;
    const memory = this.#memory;
    const overTarget = this.measure(this.system, request.tools, transcript).tokens > target;
    if (rungs.reduce && memory && memory.text !== '' && overTarget) {
      // The memory block first, to half its size: the notes the run is about by now are kept.
      const before = this.measure(this.system, request.tools, transcript).tokens;
      const terms = runTerms(memory.goal, namedPaths(transcript));
      const block = memoryBlock(memory.notes, terms, Math.floor(memory.text.length / 2));
      memory.text = block.text;
      memory.notes = block.kept;
      reduced = block.text;
      ran.push('reduce');
      events.push({
        type: 'assembled',
        rung: 'reduce',
        entries: block.kept.length,
        tokensBefore: before,
        tokensAfter: this.measure(this.system, request.tools, transcript).tokens,
        limit: this.limit,
      });
    }
    for (const [rung, run] of [
      ['snip', rungs.snip ? snip : null],
      ['microcompact', rungs.microcompact ? microcompact : null],
    ] as const) {
      if (!run || head.length === 0) continue;
      const before = this.measure(this.system, request.tools, transcript).tokens;
      if (before <= target) break;
      const replacements = run(transcript, head, (before - target) / this.#ratio, this.#replaced);
      if (replacements.length === 0) continue;
      for (const item of replacements) {
        const step = head.find((candidate) => candidate.seq === item.seq) as HeadStep;
        applyReplacement(transcript, step.at + 1 + item.index, item.content);
        this.#replaced.add(`${item.seq}:${item.index}`);
      }
      all.push(...replacements);
      ran.push(rung);
      events.push({
        type: 'assembled',
        rung,
        entries: replacements.length,
        tokensBefore: before,
        tokensAfter: this.measure(this.system, request.tools, transcript).tokens,
        limit: this.limit,
      });
    }
    if (ran.length === 0) return { kind: 'none' };
    const result = await agent.store.call('commitStep', {
      ...agent.fence,
      seq,
      completion: { text: '', toolCalls: [], usage: { inputTokens: 0, outputTokens: 0 }, model: 'none' },
      observations: [
        {
          callId: 'compact',
          name: COMPACT,
          content: `${ran.join(', ')} ran to fit the context window: ${all.length} old results replaced${reduced === undefined ? '' : `, the memory block cut to ${memory?.notes.length ?? 0} notes`}`,
          isError: false,
          compacted: {
            rungs: ran,
            replacements: all,
            ...(reduced === undefined ? {} : { memory: reduced, memoryNotes: memory?.notes ?? [] }),
          },
        },
      ],
      usage: { inputTokens: 0, outputTokens: 0 },
      consumed: [],
      sent: [],
      spawned: [],
      events,
      calls: [],
      final: null,
      fold: true,
      now: agent.clock.now(),
    });
    if (result.status === 'exhausted') return { kind: 'ended', status: 'budget-exhausted' };
    if (result.status === 'interrupted') return { kind: 'ended', status: 'interrupted' };
    this.#justFolded = true;
    this.#compactedLast = true;
    const steers = result.status === 'committed' ? (result.steers ?? []) : [];
    for (const words of steers) transcript.push(steerTurn(words));
    return { kind: 'folded', steps: 1 };
  }

  /**
   * Folds the old steps when the request would not fit: the model writes notes on what is
   * folded (asked after those entries, so the vendor's cache serves the request), the notes
   * are committed as a step of their own (tokens drawn, no step), and the transcript becomes
   * the opening turn, the notes and the steps kept whole.
   */
  async #fold(
    agent: RunContext,
    seq: number,
    model: Provider,
    request: Omit<ModelRequest, 'transcript'>,
    transcript: TranscriptEntry[],
  ): Promise<Folded> {
    const { chars, tokens } = this.measure(request.system, request.tools, transcript);
    if (tokens <= this.limit) return { kind: 'none' };
    const plan = planFold(transcript, this.#opening, this.#shown, this.limit / this.#ratio);
    if (!plan) return { kind: 'none' };
    const folded = transcript.slice(0, plan.cut);
    // The request that summarises must fit the window too: entries far over it are cut for it alone.
    const asked: TranscriptEntry[] = [...folded, { role: 'user', text: FOLD_PROMPT }];
    const fits = this.measure(request.system, request.tools, asked).tokens <= this.#window.tokens * FOLD_ROOM;
    const cap = Math.max(2_000, Math.floor(this.limit / this.#ratio / (2 * Math.max(1, folded.length))));
    // The notes are written from the transcript alone: no search of the vendor's while folding.
    const { web: _web, ...options } = request.options ?? {};
    const completion = await model.complete(
      {
        ...request,
        ...(request.options ? { options } : {}),
        transcript: fits ? asked : shortened(asked, cap),
      },
      agent.signal,
    );
    // Notes longer than a quarter of a request would leave no room for the steps after them.
    const most = Math.floor((this.limit / this.#ratio) * NOTES_SHARE);
    const written = completion.text.trim() || mechanicalNotes(folded);
    const notes = written.length <= most ? written : `${written.slice(0, most)}\n(the notes went on; cut to fit)`;
    const text = foldEntry(plan.through, notes);
    const opening = transcript[this.#opening] as TranscriptEntry;
    const rebuilt: TranscriptEntry[] = [opening, { role: 'user', text }, ...transcript.slice(plan.cut)];
    const after = this.measure(request.system, request.tools, rebuilt).tokens;
    const event: EventData = {
      type: 'assembled',
      rung: 'fold',
      through: plan.through,
      folded: this.#shown.length - plan.kept.length,
      kept: plan.kept.length,
      tokensBefore: tokens,
      tokensAfter: after,
      limit: this.limit,
    };
    const result = await agent.store.call('commitStep', {
      ...agent.fence,
      seq,
      completion: { ...completion, toolCalls: [], requestChars: chars },
      observations: [{ callId: 'fold', name: FOLD, content: text, isError: false, folded: { through: plan.through } }],
      usage: completion.usage,
      consumed: [],
      sent: [],
      spawned: [],
      events: [event],
      calls: [answeredCall(completion, model.name)],
      final: null,
      fold: true,
      now: agent.clock.now(),
    });
    if (result.status === 'exhausted') return { kind: 'ended', status: 'budget-exhausted' };
    if (result.status === 'interrupted') return { kind: 'ended', status: 'interrupted' };
    transcript.splice(0, transcript.length, ...rebuilt);
    this.#opening = 0;
    this.#shown = [...plan.kept];
    this.#foldSeq = seq;
    this.#justFolded = true;
    const steers = result.status === 'committed' ? (result.steers ?? []) : [];
    for (const words of steers) transcript.push(steerTurn(words));
    return { kind: 'folded', steps: 1 };
  }
}
