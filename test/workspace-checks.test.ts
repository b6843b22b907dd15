/**
 * What runs around a write and around the final answer: the toolchain's cheap checker
 * (only on an outright allow), the review gate (a second model, never the writer's),
 * the tool mask on the early-read path, and a whole-run rewind taking back the spawn
 * backlog.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CallbackApprover,
  type HttpProviderSpec,
  Policy,
  rewindRun,
  runWith,
  Store,
  Supervisor,
  TaskContract,
  Verification,
} from '../dist/index.js';
import { assistantTurns, type ModelScript, ScriptedModelServer } from '../dist/testing/index.js';
import { tempStorePath } from './support/processes.js';

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

function project(): string {
  const root = mkdtempSync(join(tmpdir(), 'io-harness-checks-'));
  cleanup.push(() => rmSync(root, { recursive: true, force: true }));
  writeFileSync(join(root, 'package.json'), '{ "name": "tiny", "type": "module" }\n');
  mkdirSync(join(root, 'src'));
  writeFileSync(join(root, 'src', 'add.js'), 'export function add(a, b) {\n  return a - b;\n}\n');
  return root;
}

async function openStore(): Promise<Store> {
  const store = await Store.open(tempStorePath());
  cleanup.push(() => store.close());
  return store;
}

async function serve(
  script: ModelScript,
  model = 'gpt-writer',
): Promise<{ server: ScriptedModelServer; provider: HttpProviderSpec }> {
  const server = await ScriptedModelServer.start(script);
  cleanup.push(() => server.close());
  return {
    server,
    provider: { kind: 'openai', model, baseUrl: `${server.url}/v1`, apiKey: 'k', retry: { baseDelayMs: 1 } },
  };
}

function turns(list: Awaited<ReturnType<ModelScript>>[]): ModelScript {
  return (call) => list[Math.min(assistantTurns(call), list.length - 1)] as Awaited<ReturnType<ModelScript>>;
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
    expect(store.modelCalls({ runId: result.runId }).filter((call) => call.model === 'gpt-reviewer')).toHaveLength(2);
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

describe('rewindRun and the spawn backlog', () => {
  it('cancels the children a finished run left queued, and keeps its steps and ledger', async () => {
    const root = project();
    const store = await openStore();
    // The root spawns three children without waiting and finishes; with one slot, the first
    // child holds it (its model is slow) while the other two wait in the queue.
    const script: ModelScript = (call) => {
      const messages = (call.body as { messages: { role: string; content: unknown }[] }).messages;
      const task = String(messages.find((message) => message.role === 'user')?.content ?? '');
      if (task.startsWith('child 0')) return { text: 'child 0 done', latencyMs: 1500 };
      if (task.startsWith('child ')) return { text: 'child done' };
      return assistantTurns(call) === 0
        ? {
            text: 'spawning',
            toolCalls: [0, 1, 2].map((i) => ({
              name: 'spawn_agent',
              args: { task: `child ${i}`, wait: false, as: `child-${i}` },
            })),
          }
        : { text: 'root done' };
    };
    const { provider } = await serve(script);
    const supervisor = await Supervisor.start(store, { maxConcurrentAgents: 1 });
    cleanup.push(() => supervisor.close());
    const handle = supervisor.run({
      contract: TaskContract.workspace('fan out', root),
      provider,
      policy: Policy.permissive(),
    });
    for (let i = 0; i < 500 && store.run(handle.rootId)?.status !== 'finished'; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(store.run(handle.rootId)?.status).toBe('finished');
    const queued = store.queue(handle.rootId).filter((entry) => entry.state === 'queued');
    expect(queued).toHaveLength(2);
    const steps = JSON.stringify(store.steps(handle.rootId));
    const ledger = JSON.stringify(store.ledger(handle.rootId));
    const whole = rewindRun(root, store, handle.rootId);
    expect(whole.cancelled.sort()).toEqual(queued.map((entry) => entry.childRunId).sort());
    for (const id of whole.cancelled) {
      expect(store.run(id)).toMatchObject({
        status: 'cancelled',
        outcome: { reason: 'cancelled by a rewind of its parent' },
      });
    }
    expect(JSON.stringify(store.steps(handle.rootId))).toBe(steps);
    expect(JSON.stringify(store.ledger(handle.rootId))).toBe(ledger);
    const tree = await handle.result;
    expect(tree.status).toBe('finished');
    for (const id of whole.cancelled) expect(store.steps(id)).toEqual([]);
  });
});
