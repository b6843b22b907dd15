/**
 * What runs around a write and around the final answer: the toolchain's cheap checker
 * (only on an outright allow), the review gate (a second model, never the writer's),
 * the tool mask on the early-read path, and a whole-run rewind taking back the spawn
 * backlog.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  CallbackApprover,
  type HarnessEvent,
  Policy,
  rewindRun,
  runWith,
  Supervisor,
  TaskContract,
  Verification,
} from '../dist/index.js';
import { Driver, tempStorePath } from './support/processes.js';
import { later, openStore, serve, turns } from './support/workspace.js';

function project(): string {
  const root = mkdtempSync(join(tmpdir(), 'io-harness-checks-'));
  later(() => rmSync(root, { recursive: true, force: true }));
  writeFileSync(join(root, 'package.json'), '{ "name": "tiny", "type": "module" }\n');
  mkdirSync(join(root, 'src'));
  writeFileSync(join(root, 'src', 'add.js'), 'export function add(a, b) {\n  return a - b;\n}\n');
  return root;
}

const BROKEN = 'export function add(a, b) {\n  return a +;\n}\n';

describe('the checker after a write', () => {
  const writeBroken = () =>
    turns([
      { text: 'writing', toolCalls: [{ name: 'write_file', args: { path: 'src/add.js', content: BROKEN } }] },
      { text: 'done' },
    ]);
  // node --check is a real, cheap syntax checker; the override stands in for tsc --noEmit.
  const checked = (root: string) =>
    TaskContract.workspace('fix add', root).withToolchain({ node: { check: ['node', '--check', 'src/add.js'] } });

  it('runs the project checker when the policy allows it outright and attaches what it found', async () => {
    const root = project();
    const store = await openStore();
    const { provider } = await serve(writeBroken());
    const policy = Policy.default().layer('checks').allowExec('node --check*');
    const result = await runWith(checked(root), provider, store, policy);
    const [observation] = store.steps(result.runId)[0]?.observations ?? [];
    expect(observation?.content).toContain('wrote src/add.js');
    expect(observation?.content).toContain('check: node --check src/add.js exited with status 1');
    expect(observation?.content).toContain('SyntaxError');
    const events = store.events(result.runId).filter((event) => event.type === 'toolchain-checked');
    expect(events).toMatchObject([
      { ecosystem: 'node', argv: ['node', '--check', 'src/add.js'], exitStatus: 1, ran: true },
    ]);
  });

  it('skips it silently when the policy only asks, and never puts the question to the approver', async () => {
    const root = project();
    const store = await openStore();
    const { provider } = await serve(writeBroken());
    const asked: string[] = [];
    const approver = new CallbackApprover((request) => {
      asked.push(request.subject);
      return 'approve';
    });
    const result = await runWith(checked(root), provider, store, Policy.default(), approver);
    const [observation] = store.steps(result.runId)[0]?.observations ?? [];
    expect(observation?.content).toBe('wrote src/add.js (+1 -1)');
    expect(asked).toEqual([]);
    const events = store.events(result.runId).filter((event) => event.type === 'toolchain-checked');
    expect(events).toMatchObject([{ ran: false, exitStatus: null }]);
  });
});

describe('the review gate', () => {
  it('has a second model judge the change against the rubric, feeding a failure back', async () => {
    const root = project();
    const store = await openStore();
    const fix = '@@ -1,3 +1,3 @@\n export function add(a, b) {\n-  return a - b;\n+  return a + b;\n }\n';
    const writer = await serve(
      turns([
        { text: 'fixing', toolCalls: [{ name: 'patch_file', args: { path: 'src/add.js', patch: fix } }] },
        { text: 'add() adds now' },
      ]),
    );
    const reviews = [
      '{"verdict": "fail", "reasons": ["no test covers it"]}',
      '{"verdict": "pass", "reasons": ["fine"]}',
    ];
    let review = 0;
    const reviewer = await serve(() => ({ text: reviews[Math.min(review++, 1)] }), 'gpt-reviewer');
    const contract = TaskContract.workspace('make add() add', root)
      .withVerification(Verification.review(reviewer.provider, 'The change must make add() return the sum.'))
      .withRetries(1);
    const result = await runWith(contract, writer.provider, store, Policy.default());
    expect(result.outcome.kind).toBe('finished');
    expect(store.gateEvaluations(result.runId).map((gate) => [gate.criterion, gate.verdict, gate.reasons])).toEqual([
      ['review', 'failed', ['no test covers it']],
      ['review', 'passed', ['fine']],
    ]);
    const asked = JSON.stringify(reviewer.server.calls[0]?.body);
    expect(asked).toContain('The change must make add() return the sum.');
    expect(asked).toContain('+  return a + b;');
    // The reviewer's calls are accounted like any other.
    const reviewCalls = store.modelCalls({ runId: result.runId }).filter((call) => call.model === 'gpt-reviewer');
    expect(reviewCalls.map((call) => call.provider)).toEqual(['review:openai', 'review:openai']);
  });

  it('refuses to review with the model that writes the change, before anything runs', async () => {
    const root = project();
    const store = await openStore();
    const writer = await serve(turns([{ text: 'done' }]));
    const contract = TaskContract.workspace('make add() add', root).withVerification(
      Verification.review(writer.provider, 'anything'),
    );
    await expect(runWith(contract, writer.provider, store)).rejects.toThrow(/the model that writes the change/);
    expect(store.runs()).toEqual([]);
    expect(writer.server.calls).toHaveLength(0);
  });
});

describe('the tool mask on the early-read path', () => {
  it('does not start a masked read early and refuses it', async () => {
    const root = project();
    writeFileSync(join(root, 'notes.txt'), 'before\n');
    const store = await openStore();
    const provider = {
      kind: 'module' as const,
      module: fileURLToPath(new URL('./support/scripts/early-read.mjs', import.meta.url)),
      options: { root, file: 'notes.txt', announce: true },
    };
    const contract = TaskContract.workspace('read notes', root).withToolMask(['read_file']);
    const result = await runWith(contract, provider, store, Policy.permissive());
    const [read] = store.steps(result.runId)[0]?.observations ?? [];
    expect(read?.isError).toBe(true);
    expect(read?.content).toContain('withheld');
    expect(store.events(result.runId).filter((event) => event.type === 'refusal')).toMatchObject([
      { tool: 'read_file', rule: 'tool-mask' },
    ]);
  });
});

/**
 * A driver process whose root has finished with two children queued behind the one slot
 * (child 0 holds it, its model slow); the driver is still alive, and is SIGKILLed after the test.
 */
async function rootWithQueue(root: string) {
  const path = tempStorePath();
  const driver = new Driver({
    store: path,
    mode: 'run',
    wireScript: 'workspace-fanout#fanoutScript',
    workspace: { goal: 'fan out', root },
    supervisor: { maxConcurrentAgents: 1 },
  });
  later(() => {
    driver.child.kill('SIGKILL');
  });
  const store = await openStore(path);
  await driver.waitFor((line) => line.rootId !== undefined);
  const rootId = driver.rootId as string;
  const queued = () => store.queue(rootId).filter((entry) => entry.state === 'queued');
  for (let i = 0; i < 500 && (store.run(rootId)?.status !== 'finished' || queued().length < 2); i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  expect(queued()).toHaveLength(2);
  return { driver, store, rootId, queued };
}

describe('rewindRun and the spawn backlog', () => {
  it('after a crash, cancels the children a run left queued, and keeps its steps and ledger', async () => {
    const root = project();
    const { driver, store, rootId, queued } = await rootWithQueue(root);
    // While the driver lives, its running child is held by a live owner: no rewind.
    expect(() => rewindRun(root, store, rootId)).toThrow(/held by/);
    driver.child.kill('SIGKILL');
    await driver.exited;
    const waiting = queued().map((entry) => entry.childRunId);
    const steps = JSON.stringify(store.steps(rootId));
    const ledger = JSON.stringify(store.ledger(rootId));
    const whole = rewindRun(root, store, rootId);
    expect(whole.cancelled.sort()).toEqual(waiting.sort());
    for (const id of whole.cancelled) {
      expect(store.run(id)).toMatchObject({
        status: 'cancelled',
        outcome: { reason: 'cancelled by a rewind of its parent' },
      });
      expect(store.steps(id)).toEqual([]);
    }
    expect(JSON.stringify(store.steps(rootId))).toBe(steps);
    expect(JSON.stringify(store.ledger(rootId))).toBe(ledger);
  }, 60_000);

  it('goes through the store actor with a supervisor running: its observers see the children end', async () => {
    const root = project();
    const { driver, store, rootId, queued } = await rootWithQueue(root);
    driver.child.kill('SIGKILL');
    await driver.exited;
    const waiting = queued().map((entry) => entry.childRunId);
    const supervisor = await Supervisor.start(store);
    try {
      const seen: HarnessEvent[] = [];
      supervisor.observe((event) => seen.push(event));
      const whole = await supervisor.rewindRun(root, rootId);
      expect(whole.cancelled.sort()).toEqual(waiting.sort());
      for (const id of waiting) {
        expect(store.run(id)?.status).toBe('cancelled');
        expect(seen.filter((event) => event.runId === id && event.type === 'run-end')).toMatchObject([
          { status: 'cancelled', reason: 'cancelled by a rewind of its parent' },
        ]);
      }
    } finally {
      await supervisor.close();
    }
  }, 60_000);
});

describe('grep and find under the policy', () => {
  it('search from the root, and show nothing a deny below the starting point covers', async () => {
    const root = project();
    mkdirSync(join(root, 'src', 'private'));
    writeFileSync(join(root, 'src', 'private', 'creds.txt'), 'PASSWORD=hunter2\n');
    writeFileSync(join(root, 'src', 'notes.txt'), 'PASSWORD goes in the vault\n');
    const store = await openStore();
    const { provider } = await serve(
      turns([
        {
          text: 'searching',
          toolCalls: [
            { name: 'grep', args: { pattern: 'PASSWORD' } },
            { name: 'find', args: { pattern: '*.txt' } },
            { name: 'read_file', args: { path: 'src/private/creds.txt' } },
          ],
        },
        { text: 'done' },
      ]),
    );
    const policy = Policy.default().layer('secrets').denyRead('src/private/**');
    const result = await runWith(TaskContract.workspace('look', root), provider, store, policy);
    const [grep, find, read] = store.steps(result.runId)[0]?.observations ?? [];
    expect(grep?.isError).toBe(false);
    expect(grep?.content).toContain('src/notes.txt:1:PASSWORD goes in the vault');
    expect(grep?.content).not.toContain('hunter2');
    expect(grep?.content).toContain('withheld by the policy');
    expect(find?.content).toContain('src/notes.txt');
    expect(find?.content).not.toContain('creds');
    expect(read?.isError).toBe(true);
    expect(store.events(result.runId).filter((event) => event.type === 'refusal')).toMatchObject([
      { tool: 'read_file', rule: 'deny-read src/private/**' },
    ]);
  });
});
