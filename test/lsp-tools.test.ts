/**
 * The language servers' tools (`withLsp()`), against a real typescript-language-server on
 * a small TypeScript project, started under the run's real containment: definition,
 * references, symbols and hover answer; a rename answers with patches that patch_file
 * applies and after which `tsc --noEmit` still passes; what the policy denies or asks about
 * reading is hidden from the server, so no answer (a reference, a hover's type) carries it,
 * and a run whose containment cannot hide it starts no server; a server that never answers
 * is a tool error at its deadline; a run that names no server is offered none of the five;
 * and the server is gone when the run ends.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { Policy, runWith, TaskContract } from '../dist/index.js';
import type { ModelScript } from '../dist/testing/index.js';
import { assistantTurns } from '../dist/testing/index.js';
import { type Answer, openStore, serve, tempWorkspace } from './support/workspace.js';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const TSLS = join(REPO, 'node_modules', 'typescript-language-server', 'lib', 'cli.mjs');
const TSSERVER = join(REPO, 'node_modules', 'typescript', 'lib', 'tsserver.js');
const TSC = join(REPO, 'node_modules', 'typescript', 'bin', 'tsc');

const SERVER = {
  command: [process.execPath, TSLS, '--stdio'],
  extensions: ['.ts'],
  // One tsserver, the project's: its syntax-only twin answers while the project loads, from the open files alone.
  initializationOptions: {
    tsserver: { path: TSSERVER, useSyntaxServer: 'never' },
    disableAutomaticTypingAcquisition: true,
  },
  timeoutSecs: 120,
};

/**
 * A small project: a function, a module that uses it, one under secret/ (denied: hidden
 * from the contained server too) and one under review/ (asked about: the server reads it,
 * the model is shown nothing of it without asking) that use it too.
 */
function project(): string {
  return tempWorkspace({
    'tsconfig.json': JSON.stringify({
      compilerOptions: { strict: true, target: 'es2022', module: 'commonjs', noEmit: true, types: [] },
      include: ['src', 'secret', 'review'],
    }),
    'src/math.ts': 'export function addOne(value: number): number {\n  return value + 1;\n}\n',
    'src/main.ts':
      "import { addOne } from './math';\n\nexport const two = addOne(1);\nexport const three = addOne(two);\n",
    'secret/private.ts': "import { addOne } from '../src/math';\n\nexport const hidden = addOne(41);\n",
    'review/pending.ts': "import { addOne } from '../src/math';\n\nexport const pending = addOne(9);\n",
    'review/keys.ts': "export const KEY = 'sk-live-0123456789';\n",
    'src/use.ts': "import { KEY } from '../review/keys';\n\nexport const copy = KEY;\n",
  });
}

// The server may start (it is a command); nothing under secret/ may be read, and reading review/ asks.
const POLICY = Policy.default()
  .layer('test')
  .allowExec('<arbitrary code>*')
  .allowExec('*')
  .denyRead('secret/**')
  .askRead('review/**');

/** The last tool message the model was sent (OpenAI wire). */
function lastObservation(call: Parameters<ModelScript>[0]): string {
  const messages = (call.body as { messages: { role: string; content: unknown }[] }).messages;
  return String([...messages].reverse().find((message) => message.role === 'tool')?.content ?? '');
}

/** patch_file calls for each `path: X` block of a rename's answer. */
function patchCalls(answer: string): Answer {
  const blocks = answer.split('\n\npath: ').slice(1);
  return {
    toolCalls: blocks.map((block) => {
      const newline = block.indexOf('\n');
      return { name: 'patch_file', args: { path: block.slice(0, newline), patch: block.slice(newline + 1) } };
    }),
  };
}

async function run(
  root: string,
  script: ModelScript,
  contract = TaskContract.workspace('navigate', root).withLsp(SERVER),
) {
  const store = await openStore();
  const { server, provider } = await serve(script);
  const result = await runWith(contract, provider, store, POLICY);
  const observations = store.steps(result.runId).flatMap((step) => step.observations.map((o) => o.content));
  const first = server.calls[0]?.body as { tools?: { function: { name: string } }[] } | undefined;
  return { result, observations, tools: (first?.tools ?? []).map((tool) => tool.function.name), store };
}

/** Whether a process whose command line holds `needle` is running on this host. */
function running(needle: string): boolean {
  const out = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' });
  return out.split('\n').some((line) => line.includes(needle) && !line.includes('ps -eo'));
}

describe('the language server tools', () => {
  it('answer definition, references, symbols and hover, withholding what the policy hides', {
    timeout: 180_000,
  }, async () => {
    const root = project();
    const steps: Answer[] = [
      { toolCalls: [{ name: 'lsp_definition', args: { path: 'src/main.ts', line: 1, column: 10 } }] },
      { toolCalls: [{ name: 'lsp_references', args: { path: 'src/math.ts', line: 1, column: 17 } }] },
      { toolCalls: [{ name: 'lsp_symbols', args: { path: 'src/main.ts' } }] },
      { toolCalls: [{ name: 'lsp_hover', args: { path: 'src/main.ts', line: 3, column: 20 } }] },
      { toolCalls: [{ name: 'lsp_definition', args: { path: 'secret/private.ts', line: 3, column: 24 } }] },
      { toolCalls: [{ name: 'lsp_hover', args: { path: 'README.md', line: 1, column: 1 } }] },
      // A name imported from a file the policy asks about, and one whose type is inferred from it.
      { toolCalls: [{ name: 'lsp_hover', args: { path: 'src/use.ts', line: 1, column: 10 } }] },
      { toolCalls: [{ name: 'lsp_hover', args: { path: 'src/use.ts', line: 3, column: 14 } }] },
      { toolCalls: [{ name: 'lsp_definition', args: { path: 'src/use.ts', line: 1, column: 10 } }] },
      { text: 'done' },
    ];
    // The server starts in the background as the run opens (the policy allows its start outright): it is
    // running before the model has answered once, so its index is not paid for inside the first question.
    let startedAtOpen = false;
    const { result, observations, tools, store } = await run(root, async (call) => {
      const turn = assistantTurns(call);
      if (turn === 0)
        for (let i = 0; i < 1200 && !startedAtOpen; i++) {
          startedAtOpen = running(TSLS);
          if (!startedAtOpen) await new Promise((resolve) => setTimeout(resolve, 50));
        }
      return steps[turn] as Answer;
    });
    expect(result.outcome.kind, JSON.stringify(observations)).toBe('finished');
    expect(startedAtOpen).toBe(true);
    expect(tools.filter((name) => name.startsWith('lsp_')).sort()).toEqual([
      'lsp_definition',
      'lsp_hover',
      'lsp_references',
      'lsp_rename',
      'lsp_symbols',
    ]);
    expect(observations[0]).toBe('src/math.ts:1:17: export function addOne(value: number): number {');
    // The declaration and main.ts's three uses: what secret/ (denied) and review/ (asked about) hold, the server never saw.
    expect(observations[1]?.split('\n')).toEqual([
      'src/math.ts:1:17: export function addOne(value: number): number {',
      "src/main.ts:1:10: import { addOne } from './math';",
      'src/main.ts:3:20: export const two = addOne(1);',
      'src/main.ts:4:22: export const three = addOne(two);',
    ]);
    expect(observations[1]).not.toContain('secret');
    expect(observations[1]).not.toContain('review');
    expect(observations[2]).toContain('constant two (line 3)');
    expect(observations[2]).toContain('constant three (line 4)');
    expect(observations[3]).toContain('addOne(value: number): number');
    // A path the policy denies is refused before the server hears of it.
    expect(observations[4]).toMatch(/secret\/\*\*|denied|refused/i);
    expect(observations[5]).toContain('no language server of this run answers for README.md');
    // Nothing of review/keys.ts reaches the model: not its value through a hover, not its place.
    for (const answer of observations.slice(6, 9)) {
      expect(answer).not.toContain('sk-live');
      expect(answer).not.toContain('review/keys.ts');
    }
    // The server's start was decided as the command it is, and recorded with the run's start, before its first step.
    const events = store.events(result.runId);
    const decided = events.findIndex(
      (event) => event.type === 'policy-decision' && JSON.stringify(event).includes(TSLS),
    );
    expect(decided).toBeGreaterThan(events.findIndex((event) => event.type === 'run-start'));
    expect(decided).toBeLessThan(events.findIndex((event) => event.type === 'tool-call'));
    // Gone with the run.
    expect(running(TSLS)).toBe(false);
  });

  it('hide from the server what no rule lets be read, as they hide what a rule denies or asks about', {
    timeout: 180_000,
  }, async () => {
    const root = project();
    // Reads of src/ and the project's file only: review/ and secret/ are read by no rule.
    const narrow = Policy.empty()
      .layer('test')
      .allowRead('src/**')
      .allowRead('tsconfig.json')
      .allowExec('<arbitrary code>*')
      .allowExec('*');
    const steps: Answer[] = [
      { toolCalls: [{ name: 'lsp_hover', args: { path: 'src/use.ts', line: 3, column: 14 } }] },
      { toolCalls: [{ name: 'lsp_references', args: { path: 'src/math.ts', line: 1, column: 17 } }] },
      { text: 'done' },
    ];
    const store = await openStore();
    const { provider } = await serve((call) => steps[assistantTurns(call)] as Answer);
    const contract = TaskContract.workspace('navigate', root).withLsp(SERVER);
    const result = await runWith(contract, provider, store, narrow);
    const observations = store.steps(result.runId).flatMap((step) => step.observations.map((o) => o.content));
    expect(result.outcome.kind, JSON.stringify(observations)).toBe('finished');
    expect(observations[0]).toContain('copy');
    expect(observations[0]).not.toContain('sk-live');
    expect(observations[1]).toContain('src/main.ts:3:20');
    expect(observations[1]).not.toMatch(/review|secret|withheld/);
  });

  it('rename answers with patches that patch_file applies, after which the project still compiles', {
    timeout: 180_000,
  }, async () => {
    const root = project();
    let renamedAnswer = '';
    const script: ModelScript = (call) => {
      const turn = assistantTurns(call);
      if (turn === 0)
        return {
          toolCalls: [
            { name: 'lsp_rename', args: { path: 'src/math.ts', line: 1, column: 17, new_name: 'increment' } },
          ],
        };
      if (turn === 1) {
        renamedAnswer = lastObservation(call);
        return patchCalls(renamedAnswer);
      }
      return { text: 'done' };
    };
    const before = readFileSync(join(root, 'secret/private.ts'), 'utf8');
    const { result, observations } = await run(root, script);
    expect(result.outcome.kind, JSON.stringify(observations)).toBe('finished');
    // Nothing was changed by the rename itself: the patches were.
    expect(renamedAnswer).toContain('nothing has been changed yet');
    expect(renamedAnswer).toContain('path: src/math.ts');
    expect(renamedAnswer).toContain('path: src/main.ts');
    expect(renamedAnswer).not.toContain('secret/private.ts');
    expect(renamedAnswer).not.toContain('review/pending.ts');
    expect(readFileSync(join(root, 'src/math.ts'), 'utf8')).toContain('export function increment(value: number)');
    expect(readFileSync(join(root, 'src/main.ts'), 'utf8')).toBe(
      "import { increment } from './math';\n\nexport const two = increment(1);\nexport const three = increment(two);\n",
    );
    expect(readFileSync(join(root, 'secret/private.ts'), 'utf8')).toBe(before);
    // The project without the withheld file compiles as renamed.
    writeFileSync(
      join(root, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { strict: true, noEmit: true, types: [] }, include: ['src'] }),
    );
    execFileSync(process.execPath, [TSC, '--noEmit', '-p', root], { encoding: 'utf8' });
  });

  it('is a tool error at its deadline when the server never answers, and is ended with the run', {
    timeout: 60_000,
  }, async () => {
    const root = project();
    // A "server" that reads its input and never answers.
    const silent = join(root, 'silent.cjs');
    writeFileSync(silent, 'process.stdin.resume();\nsetInterval(() => {}, 1000);\n');
    const contract = TaskContract.workspace('navigate', root).withLsp({
      command: [process.execPath, silent],
      extensions: ['.ts'],
      timeoutSecs: 1,
    });
    const steps: Answer[] = [
      { toolCalls: [{ name: 'lsp_hover', args: { path: 'src/main.ts', line: 3, column: 20 } }] },
      { text: 'done' },
    ];
    const { result, observations } = await run(root, (call) => steps[assistantTurns(call)] as Answer, contract);
    expect(result.outcome.kind).toBe('finished');
    expect(observations[0]).toMatch(/did not answer to start within 1 s/);
    expect(running(silent)).toBe(false);
  });

  it('is absent from a run that names no server, refused on a single-file contract or with bad options, and where nothing can be hidden', {
    timeout: 60_000,
  }, async () => {
    const root = project();
    const { tools } = await run(root, () => ({ text: 'done' }), TaskContract.workspace('navigate', root));
    // The catalogue of a workspace run that names none of the opt-in families, pinned.
    expect([...tools].sort()).toEqual([
      'ask_operator',
      'edit_file',
      'exec',
      'find',
      'grep',
      'patch_file',
      'read_file',
      'read_messages',
      'send_message',
      'shell',
      'shell_kill',
      'shell_poll',
      'shell_start',
      'spawn_agent',
      'write_file',
    ]);
    expect(() => TaskContract.file('x', join(root, 'src/main.ts')).withLsp(SERVER)).toThrow(
      /needs a workspace contract/,
    );
    const contract = TaskContract.workspace('x', root);
    expect(() => contract.withLsp([])).toThrow(/at least one server/);
    expect(() => contract.withLsp({ command: '', extensions: ['.ts'] })).toThrow(/command must name a program/);
    expect(() => contract.withLsp({ command: 'tsls', extensions: ['ts'] })).toThrow(/write each with its dot/);
    expect(() =>
      contract.withLsp([
        { command: 'a', extensions: ['.ts'] },
        { command: 'b', extensions: ['.TS'] },
      ]),
    ).toThrow(/already answered by server 1/);
    expect(() => contract.withLsp({ command: 'a', extensions: ['.ts'], port: 3 } as never)).toThrow(/no option "port"/);
    // With full access nothing can be hidden from a server: one is started only where the policy keeps no file from being read.
    const open = TaskContract.workspace('navigate', root).withLsp(SERVER).withFullAccess();
    const hover = { toolCalls: [{ name: 'lsp_hover', args: { path: 'src/main.ts', line: 3, column: 20 } }] };
    const steps: Answer[] = [hover, { text: 'done' }];
    const refused = await run(root, (call) => steps[assistantTurns(call)] as Answer, open);
    expect(refused.observations[0]).toMatch(
      /language servers cannot be started: the policy keeps some files from being read/,
    );
    expect(running(TSLS)).toBe(false);
  });
});
