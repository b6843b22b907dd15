import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { tempStorePath } from './support/processes.js';

/**
 * Runs an example as a user would. Its temp directory is one of this test's own (the
 * examples make theirs under TMPDIR and leave them for the user to look at), removed after.
 */
const run = (file: string, ...args: string[]) => {
  const temp = dirname(tempStorePath());
  try {
    return execFileSync(process.execPath, [fileURLToPath(new URL(`../examples/${file}`, import.meta.url)), ...args], {
      encoding: 'utf8',
      env: { ...process.env, TMPDIR: temp },
    });
  } finally {
    rmSync(temp, { recursive: true, force: true });
  }
};

describe('the README and the demo', () => {
  it('runs the README example as written', () => {
    const out = run('quickstart/main.mjs', tempStorePath());
    expect(out).toContain("status: 'finished'");
    expect(out).toContain("reply: 'the counter reported back'");
    expect(out).toMatch(/spawn-queued/);
  });

  it('runs the README workspace example: patch, suite, gate, and the diff in the trace', () => {
    const out = run('workspace/main.mjs', tempStorePath());
    expect(out).toContain("kind: 'finished'");
    expect(out).toContain("gate:    [ 'passed' ]");
    expect(out).toContain('+  return a + b;');
  });

  it("runs the tools guide's example: a zod-typed tool, a bad call read as an observation, then the answer", () => {
    const out = run('tools/main.mjs', tempStorePath());
    expect(out).toContain('lookup_order: the arguments to lookup_order are not valid: id: ');
    expect(out).toContain('lookup_order: {"status":"shipped","eta":"2026-12-04"}');
    expect(out).toContain('finished: Order A-1001 has shipped and arrives on 2026-12-04.');
  });

  it("shows the testing guide's example test as it is (the suite runs it from examples/testing)", () => {
    const guide = readFileSync(new URL('../docs/guides/testing.md', import.meta.url), 'utf8');
    expect(guide).toContain(readFileSync(new URL('../examples/testing/tool-agent.test.ts', import.meta.url), 'utf8'));
  });

  it("runs the sessions guide's example: a streamed turn, a reply that reads the first, a steered turn, a resume by id", () => {
    const out = run('sessions/main.mjs', tempStorePath());
    expect(out).toContain('turn 1 streamed: It names release 2.4.1, owned by ada.');
    expect(out).toContain('turn 2 (reply): The owner is ada.');
    expect(out).toContain('turn 3 (work): Only NOTES.md, as you asked.');
    expect(out).toContain(
      'turns: What does NOTES.md say? -> finished | Who owns it? -> finished | List the files -> finished',
    );
    expect(out).toContain('head is turn 3: true');
    // The README shows this program as it is.
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    expect(readme).toContain(readFileSync(new URL('../examples/sessions/main.mjs', import.meta.url), 'utf8'));
  });

  it("runs the memory guide's example: notes kept between runs, a restatement reported, a pinned note refused", () => {
    const out = run('memory/main.mjs', tempStorePath());
    expect(out).toContain('run 1 remember: Kept the fact "test-command".');
    expect(out).toContain('run 2 remember: Kept the fact "runner". It restates the note "test-command";');
    expect(out).toContain('run 3 remember: The note "test-command" is pinned:');
    expect(out).toContain('kept: test-command (runs that drew on it: 2, pinned: true)');
    expect(out).toContain('kept: runner (runs that drew on it: 1, pinned: false)');
    // The guide shows this program as it is.
    const guide = readFileSync(new URL('../docs/guides/context-and-memory.md', import.meta.url), 'utf8');
    expect(guide).toContain(readFileSync(new URL('../examples/memory/main.mjs', import.meta.url), 'utf8'));
  });

  it("runs the bundles guide's example: AGENTS.md read, a bundle's agent started by name, its deny rule, an audit log", () => {
    const out = run('config/main.mjs', tempStorePath());
    expect(out).toContain('outcome: finished');
    expect(out).toContain('guidance: AGENTS.md');
    expect(out).toContain('agent: root.kit__reviewer finished');
    expect(out).toContain('refused by kit__reviewer: write notes.txt is denied');
    expect(out).toContain('audit: run-start, run-start, refusal, run-end, run-end');
    const guide = readFileSync(new URL('../docs/guides/bundles.md', import.meta.url), 'utf8');
    expect(guide).toContain(readFileSync(new URL('../examples/config/main.mjs', import.meta.url), 'utf8'));
  });

  it('runs the demo: a root, eight workers messaging each other, the ledger and the trace', () => {
    const out = run('demo.mjs');
    expect(out).toMatch(/outcome: finished — All 8 workers reported/);
    expect(out).toMatch(/ledger: {2}\d+\/200 steps/);
    expect(out).toMatch(/trace: {3}\S+runs\.db/);
    expect(out.match(/-> worker-\d/g)?.length).toBe(4);
    // The root's words as they streamed, one live text delta at a time.
    expect(out).toContain('root      streams: Splitting the survey across 8 workers.\n');
    expect(out).toMatch(/root {6}streams: All 8 workers reported: /);
    // Every step was one HTTP call to the scripted model server.
    const steps = Number(/ledger: {2}(\d+)\/200 steps/.exec(out)?.[1]);
    const calls = Number(/model: {3}(\d+) calls over HTTP to the scripted model server/.exec(out)?.[1]);
    expect(calls).toBe(steps);
    expect(steps).toBeGreaterThanOrEqual(18);
  });
});
