/**
 * Running sizes: a request's size is kept as the transcript grows, not measured whole for
 * every step. A run measures each transcript entry once and serialises its tool list once,
 * however many steps it takes: counted (what the assembler measured), never timed. The
 * running size is always what a full re-measure gives, across appends, corrections, a
 * rung's replacements, folds, a tool list or a system block that changes (a seeded walk
 * of such changes); the suite's strict mode also re-measures every request of every run in
 * full and fails the run on a difference, which a run through snip, microcompact and folds
 * here passes.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../dist/clock.js';
import { OpenAI, TaskContract } from '../dist/index.js';
import { foldEntry, measured, prefixBreak, requestChars } from '../dist/runtime/context/assembler.js';
import { applyReplacement } from '../dist/runtime/context/rungs.js';
import { RunningSize } from '../dist/runtime/context/running-size.js';
import type { ToolDefinition, TranscriptEntry } from '../dist/runtime/provider.js';
import { ScriptedModelServer } from '../dist/testing/index.js';
import { runInProcess } from './support/in-process.js';
// @ts-expect-error: a plain script the driver loads too
import { lookupScript } from './support/scripts/context.mjs';
import { later, serve, setEnv, tempWorkspace } from './support/workspace.js';

type Message = { role: string };

/** A workspace run in this thread of `steps` reads and an answer; what the assembler measured for it. */
async function reads(steps: number) {
  const root = tempWorkspace({ 'a.txt': 'alpha\n'.repeat(40) });
  let asked = 0;
  const { server, provider } = await serve(() =>
    ++asked <= steps
      ? { text: `read ${asked}`, toolCalls: [{ name: 'read_file', args: { path: 'a.txt' } }] }
      : { text: 'done' },
  );
  const contract = TaskContract.workspace('read a.txt again and again', root).withBudget({ steps: steps + 5 });
  const entries = measured.entries;
  const toolLists = measured.toolLists;
  const { exit } = await runInProcess(contract, provider, new ManualClock(Date.now()));
  expect(exit).toEqual({ kind: 'ended', status: 'finished' });
  // The last request's transcript: its messages less the system block.
  const last = server.calls.at(-1)?.body as { messages: Message[] };
  expect(last.messages[0]?.role).toBe('system');
  return {
    sent: last.messages.length - 1,
    entries: measured.entries - entries,
    toolLists: measured.toolLists - toolLists,
  };
}

describe('running sizes', () => {
  it('measures each entry once and the tool list once, however long the run', { timeout: 120_000 }, async () => {
    // The suite's strict mode re-measures every request in full to check the running size: this counts a run without it.
    setEnv({ IO_HARNESS_STRICT_PREFIX: '0' });
    const short = await reads(10);
    const long = await reads(40);
    // An opening, then a call and its result a step.
    expect(short.sent).toBe(1 + 2 * 10);
    expect(long.sent).toBe(1 + 2 * 40);
    // Each entry sent measured once, plus what a run measures once whatever its length (the
    // opening, for the check that the head fits at all): the same for 10 steps and for 40.
    // Measured whole every step, 40 steps would measure about 16 times what 10 did.
    expect(long.entries - long.sent).toBe(short.entries - short.sent);
    expect(long.entries - long.sent).toBeLessThanOrEqual(2);
    // The workspace's tool list serialised at most once a run (once a process, when the
    // runs share their registry's list), rather than every step.
    expect(short.toolLists).toBeLessThanOrEqual(1);
    expect(long.toolLists).toBeLessThanOrEqual(1);
  });

  it('always equals a full re-measure, across appends, replacements, folds and new tool lists', () => {
    // A seeded walk (the same every run) of what happens to a transcript between requests.
    let seed = 41;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const pick = (n: number) => Math.floor(random() * n);
    const text = () => 'word '.repeat(pick(40));
    const toolSets: ToolDefinition[][] = [
      [{ name: 'read_file', description: 'Reads a file.', parameters: { type: 'object' } }],
      [
        { name: 'grep', description: 'Searches.', parameters: { type: 'object', properties: { pattern: {} } } },
        { name: 'read_file', description: 'Reads a file.', parameters: { type: 'object' } },
      ],
    ];
    let tools = toolSets[0] as ToolDefinition[];
    let system = 'You are an agent.';
    const transcript: TranscriptEntry[] = [{ role: 'user', text: 'the task' }];
    const running = new RunningSize();
    let calls = 0;
    const kinds = new Map<string, number>();
    for (let change = 0; change < 3_000; change++) {
      const kind = (
        [
          'step',
          'step',
          'step',
          'steer',
          'replace a result',
          'fold',
          'drop the last',
          'tool list',
          'same list anew',
          'system',
          'nothing',
        ] as const
      )[pick(11)] as string;
      kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
      if (kind === 'step') {
        const id = `c${++calls}`;
        transcript.push({
          role: 'assistant',
          text: text(),
          toolCalls: [{ id, name: 'read_file', args: { path: text() } }],
        });
        transcript.push({
          role: 'tool',
          callId: id,
          name: 'read_file',
          content: text(),
          isError: random() < 0.1,
          ...(random() < 0.1 ? { images: [{ mimeType: 'image/png' as const, data: 'iVBORw0KGgo=' }] } : {}),
        });
      } else if (kind === 'steer') transcript.push({ role: 'user', text: text() });
      else if (kind === 'replace a result')
        applyReplacement(transcript, pick(transcript.length), `[replaced] ${text()}`);
      else if (kind === 'fold' && transcript.length > 3) {
        const opening = transcript[0] as TranscriptEntry;
        const kept = transcript.slice(1 + pick(transcript.length - 1));
        transcript.splice(0, transcript.length, opening, { role: 'user', text: foldEntry(calls, text()) }, ...kept);
      } else if (kind === 'drop the last' && transcript.length > 1) transcript.pop();
      else if (kind === 'tool list') tools = toolSets[pick(toolSets.length)] as ToolDefinition[];
      else if (kind === 'same list anew') tools = tools.map((tool) => ({ ...tool }));
      else if (kind === 'system') system = `You are an agent. ${text()}`;
      expect(running.chars(system, tools, transcript), `after change ${change} (${kind})`).toBe(
        requestChars(system, tools, transcript),
      );
    }
    // The walk went through every kind of change, many times.
    for (const count of kinds.values()) expect(count).toBeGreaterThan(100);
  });

  it('names the entries a request no longer carries where the one before it did', () => {
    const running = new RunningSize();
    const first: TranscriptEntry = { role: 'user', text: 'the task' };
    const second: TranscriptEntry = { role: 'user', text: 'more' };
    const transcript: TranscriptEntry[] = [first, second];
    running.chars('', [], transcript);
    expect(running.takeReplaced().size).toBe(0);
    transcript.push({ role: 'user', text: 'appended' });
    running.chars('', [], transcript);
    expect(running.takeReplaced().size).toBe(0);
    // Replaced twice between two looks: the one measured first at its place is named.
    transcript[1] = { role: 'user', text: 'changed' };
    running.chars('', [], transcript);
    transcript[1] = { role: 'user', text: 'changed again' };
    transcript.pop();
    running.chars('', [], transcript);
    expect([...running.takeReplaced()]).toEqual([
      [1, second],
      [2, { role: 'user', text: 'appended' }],
    ]);
    expect(running.takeReplaced().size).toBe(0);
  });

  it('names a broken prefix from what was replaced, without comparing the rest of the transcript', () => {
    const tools: ToolDefinition[] = [{ name: 'read_file', description: 'Reads.', parameters: { type: 'object' } }];
    const sent: TranscriptEntry = { role: 'user', text: 'sent' };
    const transcript: TranscriptEntry[] = [{ role: 'user', text: 'task' }, sent, { role: 'user', text: 'new' }];
    const before = { system: 's', tools, length: 2 };
    const now = { system: 's', tools, transcript };
    const none = new Map<number, TranscriptEntry>();
    expect(prefixBreak(before, now, none)).toBeNull();
    expect(prefixBreak(before, { ...now, system: 't' }, none)).toBe('system');
    // A new list with the same definitions extends the prefix; other definitions break it.
    expect(prefixBreak(before, { ...now, tools: tools.map((tool) => ({ ...tool })) }, none)).toBeNull();
    expect(prefixBreak(before, { ...now, tools: [] }, none)).toBe('tools');
    expect(prefixBreak({ ...before, length: 4 }, now, none)).toBe('transcript');
    // An entry the last request sent, put in place by another: broken unless it is the same JSON.
    expect(prefixBreak(before, now, new Map([[1, { role: 'user', text: 'other' }]]))).toBe('transcript');
    expect(prefixBreak(before, now, new Map([[1, { role: 'user', text: 'sent' }]]))).toBeNull();
    // One the last request did not send is no break.
    expect(prefixBreak(before, now, new Map([[2, { role: 'user', text: 'older' }]]))).toBeNull();
  });

  it('agrees with a full re-measure at every request of runs through snip, microcompact and folds', {
    timeout: 120_000,
  }, async () => {
    // Strict mode (the suite's own): a request whose running size differs from a full re-measure fails the run.
    setEnv({ IO_HARNESS_STRICT_PREFIX: '1' });
    const rungs = new Set<string>();
    for (const rung of ['snip', 'microcompact']) {
      const lines = Array.from({ length: 60 }, (_, n) => `line ${n}: ${'0123456789'.repeat(3)}`);
      const dir = tempWorkspace({ 'big.txt': `${lines.join('\n')}\n` });
      const log = join(tempWorkspace(), 'requests.log');
      const server = await ScriptedModelServer.start(lookupScript({ log, steps: 40 }), { keepCalls: true });
      later(() => server.close());
      const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
      const contract = TaskContract.workspace('look things up', dir)
        .withBudget({ steps: 80 })
        .withContext({ window: 16_000, [rung]: true });
      const { runId, exit, store } = await runInProcess(contract, provider, new ManualClock(Date.now()));
      expect(exit).toEqual({ kind: 'ended', status: 'finished' });
      for (const event of store.events(runId)) if (event.type === 'assembled') rungs.add(event.rung);
      expect(store.events(runId).filter((event) => event.type === 'prefix-broke')).toEqual([]);
    }
    // Every way a run rewrites its transcript happened, and every request after each was measured right.
    expect(rungs).toEqual(new Set(['fold', 'microcompact', 'snip']));
  });
});
