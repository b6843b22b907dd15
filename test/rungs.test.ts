/**
 * The rungs below a fold, each off by default and turned on in withContext: collapse sends
 * a result too long for its part of a request shortened (and without it the same run
 * sends it whole); snip drops old find and grep results before old reads; microcompact
 * replaces an old step's results with a counted line. Asserted on the recorded wire: the
 * request after a rung ran differs from the one before it only in the results the rung
 * replaced, as its `@compact` step names them; a run killed right after that step and
 * resumed sends the uncrashed run's bytes.
 */
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { appendSteered } from '../dist/actors/agent/step.js';
import { Memory, OpenAI, Policy, runWith, Store, TaskContract } from '../dist/index.js';
import { collapseAt, microcompact, snip } from '../dist/runtime/context/rungs.js';
import { type ScriptedCall, ScriptedModelServer } from '../dist/testing/index.js';
import { tempStorePath } from './support/processes.js';
// @ts-expect-error: a plain script the driver loads too
import { lookupScript } from './support/scripts/context.mjs';
import { driveKilledOrWhole, later, loggedRequests, tempWorkspace } from './support/workspace.js';

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

type Message = { role: string; content: unknown; tool_call_id?: string };
type Replacement = { seq: number; index: number; content: string };

const FOLD_ASKED = 'Your context is nearly full';
const isFold = (call: ScriptedCall) =>
  JSON.stringify((call.body as { messages: Message[] }).messages.at(-1)?.content ?? '').includes(FOLD_ASKED);
const messagesOf = (call: ScriptedCall) => (call.body as { messages: Message[] }).messages;

async function store() {
  const opened = await Store.open(tempStorePath());
  cleanup.push(async () => opened.close());
  return opened;
}

function workspace(): string {
  const lines = Array.from({ length: 60 }, (_, n) => `line ${n}: ${'0123456789'.repeat(3)}`);
  return tempWorkspace({ 'big.txt': `${lines.join('\n')}\n` });
}

/** A run of the lookup model (find, grep, read_file each step) with the rungs given, on a 16,000-token window. */
async function lookups(rungs: Record<string, unknown>, steps = 20) {
  const dir = workspace();
  const trace = await store();
  const log = join(tempWorkspace(), 'requests.log');
  const server = await ScriptedModelServer.start(lookupScript({ log, steps }), { keepCalls: true });
  later(() => server.close());
  const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
  const contract = TaskContract.workspace('look things up', dir)
    .withBudget({ steps: 80 })
    .withContext({ window: 16_000, ...rungs });
  const result = await runWith(contract, provider, trace, Policy.default());
  expect(result.outcome.kind, JSON.stringify(result.outcome)).toBe('finished');
  const compactions = trace
    .steps(result.runId)
    .filter((step) => step.observations[0]?.name === '@compact')
    .map((step) => ({
      seq: step.seq,
      ...(step.observations[0]?.compacted as { rungs: string[]; replacements: Replacement[] }),
    }));
  const events = trace.events(result.runId);
  return { calls: server.calls, compactions, events, result };
}

/**
 * The requests either side of the first compaction: the one after it carries the one
 * before unchanged but for the results replaced, which come back keyed by call id.
 */
function aroundFirstCompaction(calls: readonly ScriptedCall[], compactionSeq: number) {
  // Steps 1.. each sent one request; the compaction sent none, so the request after it is the compaction's seq.
  const before = messagesOf(calls[compactionSeq - 2] as ScriptedCall);
  const after = messagesOf(calls[compactionSeq - 1] as ScriptedCall);
  expect(after.length).toBeGreaterThan(before.length);
  const changed = new Map<string, string>();
  for (const [index, message] of before.entries()) {
    const now = after[index] as Message;
    if (JSON.stringify(now) === JSON.stringify(message)) continue;
    // Only a tool result's content may differ, never its place, its call or any other message.
    expect(message.role).toBe('tool');
    expect({ ...now, content: null }).toEqual({ ...message, content: null });
    changed.set(message.tool_call_id as string, now.content as string);
  }
  return changed;
}

/** The call id the lookup model gives the observation at `index` of step `seq`. */
const callId = (item: { seq: number; index: number }) => `${['find', 'grep', 'read'][item.index]}_${item.seq}`;

describe('rungs below the fold', () => {
  it('snip drops old grep results before old reads, and changes nothing else', { timeout: 60_000 }, async () => {
    const { calls, compactions, events } = await lookups({ snip: true });
    expect(compactions.length).toBeGreaterThanOrEqual(2);
    const first = compactions[0] as (typeof compactions)[number];
    expect(first.rungs).toEqual(['snip']);
    // Every grep of the head goes before the first read does; find's results are shorter than the line, so stay.
    const kinds = first.replacements.map((item) => item.index);
    expect(kinds[0]).toBe(1);
    expect(kinds.lastIndexOf(1)).toBeLessThan(kinds.indexOf(2) === -1 ? Infinity : kinds.indexOf(2));
    expect(kinds).not.toContain(0);
    const greps = new Set(first.replacements.filter((item) => item.index === 1).map((item) => item.seq));
    for (const item of first.replacements.filter((candidate) => candidate.index === 2))
      expect(greps).toContain(item.seq);
    // On the wire: exactly those results replaced, each by the line naming the lookup.
    const changed = aroundFirstCompaction(calls, first.seq);
    expect([...changed.keys()].sort()).toEqual(first.replacements.map(callId).sort());
    for (const [id, content] of changed)
      expect(content).toMatch(
        id.startsWith('grep')
          ? /^\[snipped to fit the context window: an old grep line result of \d+ characters/
          : /^\[snipped to fit the context window: an old read_file big\.txt result of \d+ characters/,
      );
    expect(events.filter((event) => event.type === 'assembled' && event.rung === 'snip')).toHaveLength(
      compactions.length,
    );
    expect(events.filter((event) => event.type === 'prefix-broke')).toEqual([]);
    // Snip was enough: the model was never asked to fold.
    expect(calls.filter(isFold)).toEqual([]);
  });

  it('microcompact replaces an old step’s results with one counted line', { timeout: 60_000 }, async () => {
    const { calls, compactions, events } = await lookups({ microcompact: true });
    const first = compactions[0] as (typeof compactions)[number];
    expect(first.rungs).toEqual(['microcompact']);
    // Whole steps, oldest first, each with all three of its results.
    const seqs = [...new Set(first.replacements.map((item) => item.seq))];
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    for (const seq of seqs)
      expect(first.replacements.filter((item) => item.seq === seq).map((item) => item.index)).toEqual([0, 1, 2]);
    const changed = aroundFirstCompaction(calls, first.seq);
    expect(changed.size).toBe(first.replacements.length);
    expect(changed.get('find_1')).toMatch(
      /^\[compacted to fit the context window: this step's 3 results \(find ×1, grep ×1, read_file ×1; \d+ characters\) were replaced by this line/,
    );
    expect(changed.get('grep_1')).toBe('[compacted: see the first result of this step.]');
    const ran = events.filter((event) => event.type === 'assembled');
    expect(ran.length).toBeGreaterThan(0);
    for (const event of ran) expect(event).toMatchObject({ rung: 'microcompact' });
    for (const event of ran)
      expect((event as { tokensAfter: number }).tokensAfter).toBeLessThan(
        (event as { tokensBefore: number }).tokensBefore,
      );
  });

  it('without a rung turned on, the same run folds instead and replaces nothing', { timeout: 60_000 }, async () => {
    const { calls, compactions, events } = await lookups({});
    expect(compactions).toEqual([]);
    expect(calls.filter(isFold).length).toBeGreaterThan(0);
    expect(events.filter((event) => event.type === 'assembled').map((event) => event.rung)).not.toContain('snip');
  });

  it('collapse sends a result too long for its part of a request shortened; off, the same run sends it whole', async () => {
    const text = Array.from({ length: 500 }, (_, n) => `row ${n}: ${'abcdefghij'.repeat(4)}`).join('\n');
    // One workspace for both runs, so their openings are the same bytes.
    const dir = tempWorkspace({ 'wide.txt': text, 'small.txt': 'small\n' });
    const run = async (collapse: boolean) => {
      const trace = await store();
      const server = await ScriptedModelServer.start(
        (call) =>
          messagesOf(call).some((message) => message.role === 'tool')
            ? { text: 'done' }
            : {
                text: 'reading',
                toolCalls: [
                  { id: 'wide', name: 'read_file', args: { path: 'wide.txt' } },
                  { id: 'small', name: 'read_file', args: { path: 'small.txt' } },
                ],
              },
        { keepCalls: true },
      );
      later(() => server.close());
      const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
      const contract = TaskContract.workspace('read wide.txt', dir).withContext({ window: 16_000, collapse });
      const result = await runWith(contract, provider, trace, Policy.default());
      expect(result.outcome.kind, JSON.stringify(result.outcome)).toBe('finished');
      const stored = trace.steps(result.runId)[0]?.observations ?? [];
      return { second: messagesOf(server.calls[1] as ScriptedCall), stored, events: trace.events(result.runId) };
    };
    const on = await run(true);
    const off = await run(false);
    const wide = (messages: Message[]) =>
      messages.find((message) => message.tool_call_id === 'wide')?.content as string;
    expect(text.length).toBeGreaterThan(20_000);
    expect(wide(on.second)).toMatch(
      new RegExp(
        `^\\[collapsed to fit the context window: read_file wide\\.txt returned ${text.length} characters; the first (\\d+) follow\\.`,
      ),
    );
    const shown = Number(/the first (\d+) follow/.exec(wide(on.second))?.[1]);
    expect(shown).toBeLessThan(text.length);
    expect(wide(on.second).endsWith(text.slice(0, shown))).toBe(true);
    // The trace keeps it whole, marked; the small one is untouched.
    expect(on.stored[0]).toMatchObject({ content: text, collapsed: { shown } });
    expect(on.stored[1]?.collapsed).toBeUndefined();
    expect(on.events.filter((event) => event.type === 'assembled')).toMatchObject([{ rung: 'collapse', entries: 1 }]);
    // Off: the same request sends it whole, and nothing else differs.
    expect(wide(off.second)).toBe(text);
    expect(off.events.filter((event) => event.type === 'assembled')).toEqual([]);
    const differing = on.second.flatMap((message, index) =>
      JSON.stringify(message) === JSON.stringify(off.second[index]) ? [] : [message.tool_call_id],
    );
    expect(differing).toEqual(['wide']);
  });

  it('resumes a run killed right after a compaction to the bytes the uncrashed run sent', {
    timeout: 120_000,
  }, async () => {
    const dir = workspace();
    const logs = tempWorkspace();
    const run = async (name: string, killAt: string | null) => {
      const log = join(logs, `${name}.log`);
      const storePath = tempStorePath();
      const base = {
        store: storePath,
        wireScript: 'context#lookupScript',
        options: { log, steps: 14 },
        workspace: {
          goal: 'look things up',
          root: dir,
          policy: 'default' as const,
          context: { window: 16_000, snip: true, microcompact: true },
          budget: { steps: 60 },
        },
      };
      const rootId = await driveKilledOrWhole(base, killAt);
      const trace = await Store.open(storePath);
      const compacted = trace.steps(rootId).filter((step) => step.observations[0]?.name === '@compact');
      trace.close();
      const requests = loggedRequests<{ fold: boolean; messages: Message[] }>(log);
      return { requests, compacted: compacted.map((step) => step.seq) };
    };
    const whole = await run('whole', null);
    expect(whole.compacted.length).toBeGreaterThan(0);
    // Killed the moment the first compaction's step is committed.
    const resumed = await run('resumed', `commitStep:${whole.compacted[0]}:after`);
    expect(resumed.compacted).toEqual(whole.compacted);
    expect(resumed.requests.length).toBe(whole.requests.length);
    const differing = whole.requests.flatMap((request, index) =>
      JSON.stringify(request.messages) === JSON.stringify(resumed.requests[index]?.messages) ? [] : [index],
    );
    expect(differing).toEqual([]);
  });

  it('never replaces the newest step’s results, which the model has not seen yet', { timeout: 60_000 }, async () => {
    const huge = Array.from({ length: 1_000 }, (_, n) => `entry ${n}: ${'abcdefghij'.repeat(4)}`).join('\n');
    const dir = tempWorkspace({ 'small.txt': 'small\n'.repeat(300), 'huge.txt': huge });
    const trace = await store();
    const plan = ['small.txt', 'small.txt', 'small.txt', 'huge.txt'];
    let done = 0;
    const server = await ScriptedModelServer.start(
      (call) => {
        if (isFold(call)) return { text: 'notes: read the small file three times and the huge one once.' };
        const path = plan[done++];
        return path
          ? { text: `read ${path}`, toolCalls: [{ id: `read_${done}`, name: 'read_file', args: { path } }] }
          : { text: 'done' };
      },
      { keepCalls: true },
    );
    later(() => server.close());
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const contract = TaskContract.workspace('read them', dir).withContext({ window: 16_000, snip: true });
    const result = await runWith(contract, provider, trace, Policy.default());
    expect(result.outcome.kind, JSON.stringify(result.outcome)).toBe('finished');
    const compactions = trace.steps(result.runId).filter((step) => step.observations[0]?.name === '@compact');
    // The huge read made the next request too big: snip ran on the old reads, never on the huge one.
    expect(compactions.length).toBeGreaterThan(0);
    for (const step of compactions) {
      const replaced = (step.observations[0]?.compacted?.replacements ?? []).map((item) => item.seq);
      expect(replaced.length).toBeGreaterThan(0);
      expect(replaced).not.toContain(step.seq - 1);
    }
  });

  it('never makes a result longer: short results are left as they are', () => {
    const transcript = [
      { role: 'user', text: 'go' },
      {
        role: 'assistant',
        text: '',
        toolCalls: [
          { id: 'a', name: 'grep', args: { pattern: 'x' } },
          { id: 'b', name: 'find', args: { pattern: 'y' } },
        ],
      },
      { role: 'tool', callId: 'a', name: 'grep', content: 'x1', isError: false },
      { role: 'tool', callId: 'b', name: 'find', content: 'y1', isError: false },
      { role: 'assistant', text: '', toolCalls: [] },
    ];
    const head = [{ seq: 1, at: 1, end: 4 }];
    expect(microcompact(transcript as never, head, 1_000, new Set())).toEqual([]);
    expect(snip(transcript as never, head, 1_000, new Set())).toEqual([]);
    // A result only just over its part is sent whole: shortening it would add the collapse line.
    expect(collapseAt(201, 800, 0.25)).toBeNull();
    expect(collapseAt(2_000, 800, 0.25)).toBe(200);
  });

  it('resumes a run killed between a compaction and the fold after it, running neither again', {
    timeout: 120_000,
  }, async () => {
    const dir = workspace();
    const logs = tempWorkspace();
    const filler =
      ' It was checked twice, and the details are kept here in full so a later run need not look again.'.repeat(3);
    const run = async (name: string, killAt: string | null) => {
      const log = join(logs, `${name}.log`);
      const storePath = tempStorePath();
      const seeded = await Store.open(storePath);
      const memory = Memory.of(seeded, { workspace: dir });
      for (let n = 0; n < 24; n++) memory.remember(`n${String(n).padStart(2, '0')}`, `Observation ${n}.${filler}`);
      seeded.close();
      const base = {
        store: storePath,
        wireScript: 'context#readerScript',
        options: { log, steps: 14 },
        workspace: {
          goal: 'read big.txt',
          root: dir,
          policy: 'default' as const,
          context: { window: 16_000, reduce: true },
          memory: { share: 0.15 },
          budget: { steps: 60 },
        },
      };
      const rootId = await driveKilledOrWhole(base, killAt);
      const trace = await Store.open(storePath);
      const kinds = trace
        .steps(rootId)
        .map((step) => [step.seq, step.observations[0]?.name ?? ''] as const)
        .filter(([, kind]) => kind === '@compact' || kind === '@fold');
      trace.close();
      const requests = loggedRequests<{ fold: boolean; messages: Message[] }>(log);
      return { requests, kinds };
    };
    const whole = await run('whole', null);
    // The case this is about: a compaction whose request was still over, so a fold came right after it.
    const at = whole.kinds.findIndex(
      ([seq, kind], index) => kind === '@compact' && whole.kinds[index + 1]?.[0] === seq + 1,
    );
    expect(at).toBeGreaterThanOrEqual(0);
    const resumed = await run('resumed', `commitStep:${whole.kinds[at]?.[0]}:after`);
    expect(resumed.kinds).toEqual(whole.kinds);
    expect(resumed.requests.length).toBe(whole.requests.length);
    const differing = whole.requests.flatMap((request, index) =>
      JSON.stringify(request.messages) === JSON.stringify(resumed.requests[index]?.messages) ? [] : [index],
    );
    expect(differing).toEqual([]);
  });

  it('rebuilds a correction taken just before a compaction or a fold where the live run had it', () => {
    const step = (seq: number, extra: object = {}) => ({
      seq,
      completion: {
        text: `s${seq}`,
        toolCalls: [{ id: `c${seq}`, name: 'read_file', args: { path: 'a' } }],
        usage: { inputTokens: 1, outputTokens: 1 },
        model: 'm',
      },
      observations: [{ callId: `c${seq}`, name: 'read_file', content: `r${seq}`, isError: false }],
      ...extra,
    });
    const none = { text: '', toolCalls: [], usage: { inputTokens: 0, outputTokens: 0 }, model: 'none' };
    const compaction = (seq: number) => ({
      seq,
      completion: none,
      observations: [
        {
          callId: 'compact',
          name: '@compact',
          content: 'snip ran',
          isError: false,
          compacted: { rungs: ['snip'], replacements: [{ seq: 1, index: 0, content: 'snipped' }] },
        },
      ],
    });
    const fold = (seq: number, through: number) => ({
      seq,
      completion: none,
      observations: [{ callId: 'fold', name: '@fold', content: 'notes', isError: false, folded: { through } }],
    });
    const shape = (history: { role: string; text?: string; content?: string }[]) =>
      history.map((entry) => (entry.role === 'assistant' ? entry.text : (entry.text ?? entry.content)));
    const rebuilt = (steps: object[], steers: { before: number; text: string }[], next: number) => {
      const history: never[] = [];
      appendSteered(history, steps as never, steers, next);
      return shape(history);
    };
    // The live run: steps 1 to 3, a correction taken at 3's commit, then a compaction, then step 5.
    expect(rebuilt([step(1), step(2), step(3), compaction(4), step(5)], [{ before: 4, text: 'use tabs' }], 6)).toEqual([
      's1',
      'snipped',
      's2',
      'r2',
      's3',
      'r3',
      'use tabs',
      's5',
      'r5',
    ]);
    // A fold that kept steps 2 and 3 kept the correction after them.
    expect(rebuilt([step(1), step(2), step(3), fold(4, 1)], [{ before: 4, text: 'use tabs' }], 5)).toEqual([
      'notes',
      's2',
      'r2',
      's3',
      'r3',
      'use tabs',
    ]);
    // A fold that kept nothing folded it into its notes.
    expect(rebuilt([step(1), fold(2, 1)], [{ before: 2, text: 'use tabs' }], 3)).toEqual(['notes']);
  });

  it('refuses rung options that are not on or off, and a collapse share outside (0, 1)', () => {
    const contract = TaskContract.workspace('x', tempWorkspace());
    expect(() => contract.withContext({ snip: 'yes' as unknown as boolean })).toThrow(/snip must be true or false/);
    expect(() => contract.withContext({ collapse: { over: 1.5 } })).toThrow(/collapse is true, false, or \{ over \}/);
    expect(() => contract.withContext({ ladder: true } as never)).toThrow(/there is no option "ladder"/);
    expect(contract.withContext({ collapse: { over: 0.1 }, snip: true }).toJSON().context).toEqual({
      collapse: { over: 0.1 },
      snip: true,
    });
  });
});
