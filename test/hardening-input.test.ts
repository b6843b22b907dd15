/**
 * Bad input from a hostile model is an observation, and the run goes on: a NUL in a
 * path or an argv, arguments that are not a JSON object (on both wires), arguments far
 * over a tool's limits (refused before the store holds them), and policy patterns that
 * cannot be compiled (refused when the rule is added). And a file with several names
 * (hard links) is neither read nor written by the file tools.
 */
import { existsSync, linkSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  type HttpProviderSpec,
  InvalidArgumentError,
  Policy,
  type PolicyData,
  rewind,
  runWith,
  type Store,
  TaskContract,
} from '../dist/index.js';
import type { ScriptedToolCall } from '../dist/testing/index.js';
import { tempStorePath } from './support/processes.js';
import { type Answer, later, openStore, serve, tempWorkspace, thrown, turns } from './support/workspace.js';

type Observation = { callId: string; name: string; content: string; isError: boolean };

/** Every byte the store wrote: the database file and its write-ahead log. */
function storeBytes(path: string): Buffer {
  return Buffer.concat([path, `${path}-wal`].filter((file) => existsSync(file)).map((file) => readFileSync(file)));
}

/** One turn making `calls`, then a turn that finishes: the second step runs only if the first did not kill the run. */
function script(calls: ScriptedToolCall[]): Answer[] {
  return [{ text: 'trying', toolCalls: calls }, { text: 'done' }];
}

async function runCalls(
  root: string,
  calls: ScriptedToolCall[],
  options: { policy?: Policy; wire?: 'openai' | 'anthropic' } = {},
): Promise<{ store: Store; storePath: string; runId: string; observations: Observation[] }> {
  const storePath = tempStorePath();
  later(() => rmSync(join(storePath, '..'), { recursive: true, force: true }));
  const store = await openStore(storePath);
  const { server, provider } = await serve(turns(script(calls)));
  const spec: HttpProviderSpec =
    options.wire === 'anthropic'
      ? { kind: 'anthropic', model: 'claude-scripted', baseUrl: server.url, apiKey: 'k', retry: { baseDelayMs: 1 } }
      : provider;
  const result = await runWith(
    // Calls of megabytes stay in the transcript: a window that holds them keeps folding out of these runs.
    TaskContract.workspace('probe the boundary', root).withContext({ window: 100_000_000 }),
    spec,
    store,
    options.policy ?? Policy.permissive(),
  );
  // The run went on past the bad step: it finished, with the second turn's reply.
  expect(result.outcome).toEqual({ kind: 'finished', reply: 'done' });
  const steps = store.steps(result.runId);
  expect(steps).toHaveLength(2);
  return { store, storePath, runId: result.runId, observations: (steps[0]?.observations ?? []) as Observation[] };
}

describe('a NUL byte in a path or an argument', () => {
  it('is an observation for every file tool, and the run goes on', async () => {
    const root = tempWorkspace({ 'a.txt': 'hello\n' });
    const path = 'a.txt\u0000../../etc/passwd';
    const { observations } = await runCalls(root, [
      { name: 'read_file', args: { path } },
      { name: 'write_file', args: { path, content: 'x' } },
      { name: 'edit_file', args: { path, old_string: 'hello', new_string: 'bye' } },
      { name: 'patch_file', args: { path, patch: '@@ -1 +1 @@\n-hello\n+bye\n' } },
      { name: 'grep', args: { pattern: 'hello', path } },
      { name: 'find', args: { pattern: '*', path } },
      { name: 'write_file', args: { path: 'b.txt', content: 'made\u0000up' } },
    ]);
    expect(observations).toHaveLength(7);
    for (const observation of observations) {
      expect(observation.isError).toBe(true);
      expect(observation.content).toContain('contains a NUL character');
    }
    expect(readFileSync(join(root, 'a.txt'), 'utf8')).toBe('hello\n');
    expect(existsSync(join(root, 'b.txt'))).toBe(false);
  });

  it('is an observation inside an exec argv and a shell line, and nothing runs', async () => {
    const root = tempWorkspace();
    const marker = join(root, 'ran');
    const { observations } = await runCalls(root, [
      { name: 'exec', args: { argv: ['touch', `${marker}\u0000x`] } },
      { name: 'exec', args: { argv: ['sh', '-c', `touch ${marker}`, '\u0000'] } },
      { name: 'shell', args: { command: `touch ${marker}\u0000` } },
    ]);
    expect(observations.map((observation) => observation.content)).toEqual([
      expect.stringContaining('argv[1]: contains a NUL character'),
      expect.stringContaining('argv[3]: contains a NUL character'),
      expect.stringContaining('command: contains a NUL character'),
    ]);
    expect(existsSync(marker)).toBe(false);
  });

  it('is denied by the policy itself, as a decision, instead of throwing', () => {
    const policy = Policy.permissive();
    for (const act of [
      { kind: 'read' as const, path: 'a\u0000b' },
      { kind: 'write' as const, path: '/tmp/x\u0000' },
      { kind: 'exec' as const, argv: ['cat', 'a\u0000b'] },
    ]) {
      expect(policy.decide(act, tmpdir())).toMatchObject({ effect: 'deny', rule: 'input.nul', layer: 'runtime' });
    }
  });
});

describe('arguments that are not a JSON object', () => {
  const bad = ['{"path": "a.txt"', 'not json at all', '[1, 2, 3]', '42', '"a.txt"', 'null'];

  it('on the OpenAI wire, are an observation naming the tool; the run goes on and the trace keeps what was sent', async () => {
    const root = tempWorkspace({ 'a.txt': 'hello\n' });
    const { store, runId, observations } = await runCalls(
      root,
      bad.map((raw) => ({ name: 'read_file', args: {}, rawArguments: raw })),
    );
    expect(observations.map((observation) => observation.content)).toEqual([
      expect.stringMatching(
        /^the arguments to read_file are not JSON \(.+\), so it was not run; .*must be a JSON object/,
      ),
      expect.stringMatching(/^the arguments to read_file are not JSON/),
      expect.stringContaining('are JSON an array, not an object'),
      expect.stringContaining('are JSON a number, not an object'),
      expect.stringContaining('are JSON a string, not an object'),
      expect.stringContaining('are JSON null, not an object'),
    ]);
    const calls = store.events(runId).filter((event) => event.type === 'tool-call');
    expect(calls.map((event) => (event as { invalid?: { sent: string } }).invalid?.sent)).toEqual(bad);
  });

  it('on the Anthropic wire (input_json_delta pieces), are an observation; the run goes on', async () => {
    const root = tempWorkspace({ 'a.txt': 'hello\n' });
    const { observations } = await runCalls(
      root,
      [
        { name: 'write_file', args: {}, rawArguments: '{"path": "b.txt", "content": ' },
        { name: 'grep', args: {}, rawArguments: '["hello"]' },
        { name: 'read_file', args: { path: 'a.txt' } },
      ],
      { wire: 'anthropic' },
    );
    expect(observations.map((observation) => observation.content)).toEqual([
      expect.stringMatching(/^the arguments to write_file are not JSON/),
      expect.stringContaining('the arguments to grep are JSON an array, not an object'),
      'hello\n',
    ]);
    expect(existsSync(join(root, 'b.txt'))).toBe(false);
  });

  it('keeps only the start of long undecodable arguments in the store', async () => {
    const root = tempWorkspace();
    const raw = `{"path": "b.txt", "content": "${'y'.repeat(200_000)}TAIL-OF-BROKEN-JSON`;
    const { storePath, observations } = await runCalls(root, [{ name: 'write_file', args: {}, rawArguments: raw }]);
    expect(observations[0]?.content).toMatch(/^the arguments to write_file are not JSON/);
    expect(storeBytes(storePath).includes('TAIL-OF-BROKEN-JSON')).toBe(false);
  });
});

describe('arguments far over a tool’s limits', () => {
  it('refuses a 50 MB write before the store holds it, and the run goes on', async () => {
    const root = tempWorkspace();
    const tail = 'END-OF-THE-50-MB-CONTENT';
    const content = `${'x'.repeat(50 * 1024 * 1024)}${tail}`;
    const { store, storePath, runId, observations } = await runCalls(root, [
      { name: 'write_file', args: { path: 'huge.txt', content } },
    ]);
    expect(observations[0]?.content).toContain('above the limit of 8454144 bytes for one call, so it was not run');
    expect(existsSync(join(root, 'huge.txt'))).toBe(false);
    // Not in the completion, the tool-call event, a diff or a restore point.
    const bytes = storeBytes(storePath);
    expect(bytes.includes(tail)).toBe(false);
    expect(bytes.length).toBeLessThan(4 * 1024 * 1024);
    const [call] = store.events(runId).filter((event) => event.type === 'tool-call');
    expect(call).toMatchObject({
      name: 'write_file',
      args: {},
      invalid: { sent: expect.stringContaining('huge.txt') },
    });
  });

  it('states the limit for a 10 MB pattern, a 1 MB path and an argv of 100,000 items', async () => {
    const root = tempWorkspace({ 'a.txt': 'hello\n' });
    const marker = join(root, 'ran');
    const { storePath, observations } = await runCalls(root, [
      { name: 'grep', args: { pattern: `${'a'.repeat(10 * 1024 * 1024)}PATTERN-TAIL` } },
      { name: 'read_file', args: { path: `${'d/'.repeat(512 * 1024)}PATH-TAIL` } },
      { name: 'exec', args: { argv: ['touch', marker, ...Array.from({ length: 100_000 }, () => 'ARGV-ITEM')] } },
      { name: 'find', args: { pattern: `${'*'.repeat(5000)}` } },
    ]);
    expect(observations.map((observation) => observation.content)).toEqual([
      expect.stringContaining('the arguments to grep are 10485786 bytes of JSON, above the limit of 8454144 bytes'),
      expect.stringContaining("path: is 1048585 characters long, above this tool's limit of 4096"),
      expect.stringContaining("argv: holds 100002 items, above this tool's limit of 4096"),
      expect.stringContaining("pattern: is 5000 characters long, above this tool's limit of 4096"),
    ]);
    expect(existsSync(marker)).toBe(false);
    const bytes = storeBytes(storePath);
    for (const tail of ['PATTERN-TAIL', 'PATH-TAIL']) expect(bytes.includes(tail)).toBe(false);
    expect(bytes.length).toBeLessThan(2 * 1024 * 1024);
  });

  it('refuses a change that would leave a file above the 8 MiB write limit, storing no restore point or diff', async () => {
    // Within the per-argument limits, but the file it would leave is too big: refused at the plan.
    const big = `START\n${'a'.repeat(7 * 1024 * 1024)}\n`;
    const root = tempWorkspace({ 'big.txt': big });
    const { store, storePath, runId, observations } = await runCalls(root, [
      { name: 'edit_file', args: { path: 'big.txt', old_string: 'START', new_string: 'b'.repeat(2 * 1024 * 1024) } },
      { name: 'write_file', args: { path: 'euro.txt', content: '€'.repeat(3 * 1024 * 1024) } },
    ]);
    expect(observations[0]?.content).toContain('above the write limit of 8388608 bytes, so nothing was written');
    // 3 Mi characters of three bytes each: over the call's byte limit, refused before the store.
    expect(observations[1]?.content).toContain('bytes for one call, so it was not run');
    expect(readFileSync(join(root, 'big.txt'), 'utf8')).toBe(big);
    expect(existsSync(join(root, 'euro.txt'))).toBe(false);
    expect(store.events(runId).filter((event) => event.type === 'refusal')).toMatchObject([
      { tool: 'edit_file', rule: 'write.ceiling' },
    ]);
    // Neither the 7 MiB file's restore point nor a diff of it was stored.
    expect(storeBytes(storePath).includes('a'.repeat(100_000))).toBe(false);
  });
});

describe('a policy pattern that cannot be compiled', () => {
  it('is refused when the rule is added by a builder, naming the rule and why', () => {
    const long = thrown(() => Policy.default().allowRead(`src/${'a'.repeat(5000)}`));
    expect(long).toBeInstanceOf(InvalidArgumentError);
    expect(long.message).toMatch(
      /^the rule allow-read src\/a+… \(5004 characters\) cannot be used: .*above the limit of 4096/,
    );
    const braces = thrown(() => Policy.default().denyRead('{a,b}'.repeat(20)));
    expect(braces).toBeInstanceOf(InvalidArgumentError);
    expect(braces.message).toContain('the rule deny-read {a,b}{a,b}');
    expect(braces.message).toContain('more than 256 alternatives');
    const extglobs = thrown(() => Policy.default().askWrite(`${'+(a|'.repeat(500)}${')'.repeat(500)}`));
    expect(extglobs.message).toMatch(/^the rule ask-write .* cannot be used: .*too many extglobs/);
    const exec = thrown(() => Policy.default().allowExec('x'.repeat(4097)));
    expect(exec.message).toContain('above the limit of 4096');
  });

  it('is refused by Policy.from, before a run is stored', async () => {
    const store = await openStore();
    const data: PolicyData = {
      layers: [{ name: 'from-file', rules: [{ effect: 'deny', act: 'read', pattern: '{x,y}'.repeat(12) }] }],
    };
    const root = tempWorkspace();
    const { server, provider } = await serve(turns([{ text: 'done' }]));
    let refused: unknown = null;
    try {
      await runWith(TaskContract.workspace('x', root), provider, store, Policy.from(data));
    } catch (error) {
      refused = error;
    }
    expect(refused).toBeInstanceOf(InvalidArgumentError);
    expect((refused as Error).message).toContain('the rule deny-read {x,y}{x,y}');
    expect((refused as Error).message).toContain('more than 256 alternatives');
    expect(store.runs()).toEqual([]);
    expect(server.calls).toHaveLength(0);
  });

  it('matches exec wildcards without pathological backtracking, and a valid brace glob still works', () => {
    const policy = Policy.empty().layer('app').allowExec('*a*a*a*a*a*a*b').allowRead('src/{a,b}{c,d}.ts');
    const argv = ['echo', 'a'.repeat(5000)];
    expect(policy.decide({ kind: 'exec', argv }, tmpdir()).effect).toBe('deny');
    expect(policy.decide({ kind: 'exec', argv: ['echo', 'aaaaaab'] }, tmpdir()).effect).toBe('allow');
    expect(policy.decide({ kind: 'read', path: 'src/bd.ts' }, tmpdir()).effect).toBe('allow');
    expect(policy.decide({ kind: 'read', path: 'src/bx.ts' }, tmpdir()).effect).toBe('deny');
  });
});

describe('a file with several names (hard links)', () => {
  function linked(): { root: string; outside: string } {
    const outsideDir = mkdtempSync(join(tmpdir(), 'io-harness-outside-'));
    later(() => rmSync(outsideDir, { recursive: true, force: true }));
    const outside = join(outsideDir, 'config.txt');
    writeFileSync(outside, 'OUTSIDE-ORIGINAL-7c1\n');
    const root = tempWorkspace({ 'plain.txt': 'plain\n' });
    mkdirSync(join(root, 'secrets'));
    writeFileSync(join(root, 'secrets', 'key.txt'), 'SECRET-KEY-93f2\n');
    linkSync(outside, join(root, 'out-link.txt'));
    linkSync(join(root, 'secrets', 'key.txt'), join(root, 'key-link.txt'));
    return { root, outside };
  }

  // The model does not know the content: it guesses, so whatever of it reaches the store came from the file.
  const attempts = (path: string): ScriptedToolCall[] => [
    { name: 'read_file', args: { path } },
    { name: 'edit_file', args: { path, old_string: 'guess', new_string: 'CHANGED' } },
    { name: 'write_file', args: { path, content: 'CHANGED\n' } },
    { name: 'patch_file', args: { path, patch: '@@ -1 +1 @@\n-guess\n+CHANGED\n' } },
  ];

  it('is refused for read_file, edit_file, write_file and patch_file, and grep does not print it', async () => {
    const { root, outside } = linked();
    const policy = Policy.default().layer('app').denyRead('secrets/**');
    const { store, storePath, runId, observations } = await runCalls(
      root,
      [
        ...attempts('out-link.txt'),
        ...attempts('key-link.txt'),
        { name: 'grep', args: { pattern: 'SECRET|OUTSIDE' } },
        { name: 'grep', args: { pattern: 'SECRET', path: 'key-link.txt' } },
      ],
      { policy },
    );
    const refusals = store.events(runId).filter((event) => event.type === 'refusal');
    expect(refusals).toHaveLength(8);
    for (const refusal of refusals) expect(refusal).toMatchObject({ rule: 'fs.hard-link', layer: 'runtime' });
    expect(observations[0]?.content).toBe(
      'out-link.txt has 2 names (hard links); one may lie outside the workspace or under a denied path, so the file tools do not read it. Remove the extra link or copy the file.',
    );
    expect(observations[8]?.content).toContain('2 files with several names (hard links) skipped');
    expect(readFileSync(outside, 'utf8')).toBe('OUTSIDE-ORIGINAL-7c1\n');
    expect(readFileSync(join(root, 'secrets', 'key.txt'), 'utf8')).toBe('SECRET-KEY-93f2\n');
    expect(observations[9]?.content).toContain('1 file with several names (hard links) skipped');
    for (const observation of observations) {
      expect(observation.content).not.toContain('SECRET-KEY-93f2');
      expect(observation.content).not.toContain('OUTSIDE-ORIGINAL-7c1');
    }
    // Neither file's content reached the store: no diff, no restore point, no observation.
    const bytes = storeBytes(storePath);
    expect(bytes.includes('SECRET-KEY-93f2')).toBe(false);
    expect(bytes.includes('OUTSIDE-ORIGINAL-7c1')).toBe(false);
  });

  it('is replaced by name, not written through, when a rewind puts a file back', async () => {
    const { root, outside } = linked();
    const { store, runId } = await runCalls(root, [
      { name: 'write_file', args: { path: 'plain.txt', content: 'rewritten\n' } },
    ]);
    // Since the run, plain.txt became a second name of the file outside.
    rmSync(join(root, 'plain.txt'));
    linkSync(outside, join(root, 'plain.txt'));
    rewind(root, store, runId, 'plain.txt');
    expect(readFileSync(join(root, 'plain.txt'), 'utf8')).toBe('plain\n');
    expect(readFileSync(outside, 'utf8')).toBe('OUTSIDE-ORIGINAL-7c1\n');
  });
});

describe('a tool name the runtime uses for its own words', () => {
  it("is refused as an unknown tool and recorded as a tool result, not as the runtime's words or a re-prompt", async () => {
    const root = tempWorkspace({ 'a.txt': 'a\n' });
    const { observations, store, runId } = await runCalls(root, [
      { name: '@schema', args: {} },
      { name: '@fold', args: {} },
      { name: 'read_file', args: { path: 'a.txt' } },
    ]);
    // Recorded without the @: a tool result, not the user's words, and not a re-prompt spent.
    expect(observations.map((item) => [item.name, item.isError])).toEqual([
      ['schema', true],
      ['fold', true],
      ['read_file', false],
    ]);
    expect(observations[0]?.content).toMatch(/schema/);
    expect(store.steps(runId)[0]?.observations.some((item) => item.name.startsWith('@'))).toBe(false);
  });
});
