/**
 * The workspace agent end to end: a real Node project in a temp dir, the scripted model
 * server on loopback, real worker threads and a real `node --test` as the gate.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { HarnessError, Policy, runWith, Supervisor, TaskContract, Verification } from '../dist/index.js';
import { ScriptedModelServer } from '../dist/testing/index.js';
import { later, openStore, serve, turns } from './support/workspace.js';

function project(): string {
  const root = mkdtempSync(join(tmpdir(), 'io-harness-ws-'));
  later(() => rmSync(root, { recursive: true, force: true }));
  writeFileSync(join(root, 'package.json'), `${JSON.stringify({ name: 'tiny', type: 'module' }, null, 2)}\n`);
  mkdirSync(join(root, 'src'));
  mkdirSync(join(root, 'test'));
  writeFileSync(join(root, 'src', 'add.js'), 'export function add(a, b) {\n  return a - b;\n}\n');
  writeFileSync(
    join(root, 'test', 'add.test.js'),
    "import assert from 'node:assert/strict';\nimport { test } from 'node:test';\nimport { add } from '../src/add.js';\n\ntest('adds', () => {\n  assert.equal(add(2, 3), 5);\n});\n",
  );
  return root;
}

/** Answers from a list by turn; the last repeats. */
const FIX = '@@ -1,3 +1,3 @@\n export function add(a, b) {\n-  return a - b;\n+  return a + b;\n }\n';
const WRONG = '@@ -1,3 +1,3 @@\n export function add(a, b) {\n-  return a - b;\n+  return a * b;\n }\n';
const testPolicy = Policy.default().layer('test').allowExec('node --test*');

describe('a workspace run', () => {
  it('reads, patches, runs the suite; the command gate passes and the trace holds the diff', async () => {
    const root = project();
    const store = await openStore();
    const { provider } = await serve(
      turns([
        { text: 'look first', toolCalls: [{ name: 'read_file', args: { path: 'src/add.js' } }] },
        { text: 'fix it', toolCalls: [{ name: 'patch_file', args: { path: 'src/add.js', patch: FIX } }] },
        { text: 'run the tests', toolCalls: [{ name: 'exec', args: { argv: ['node', '--test'] } }] },
        { text: 'add() now adds; the suite passes.' },
      ]),
    );
    const contract = TaskContract.workspace('the tests fail; fix them', root).withVerification(
      Verification.command(['node', '--test']),
    );
    const result = await runWith(contract, provider, store, testPolicy);
    expect(result.outcome).toEqual({ kind: 'finished', reply: 'add() now adds; the suite passes.' });
    expect(readFileSync(join(root, 'src', 'add.js'), 'utf8')).toContain('return a + b;');
    const seen = store.steps(result.runId).flatMap((step) => step.observations);
    expect(seen[0]?.content).toBe('export function add(a, b) {\n  return a - b;\n}\n');
    expect(seen[2]?.content).toContain('node --test exited with status 0');
    const changes = store.fileChanges(result.runId);
    expect(changes).toHaveLength(1);
    expect(changes[0]?.path).toBe('src/add.js');
    expect(changes[0]?.diff).toContain('-  return a - b;');
    expect(changes[0]?.diff).toContain('+  return a + b;');
    expect(store.patch(result.runId)).toContain(`# io-harness run ${result.runId} step 2`);
    const gates = store.gateEvaluations(result.runId);
    expect(gates.map((gate) => [gate.verdict, gate.exitStatus])).toEqual([['passed', 0]]);
    // Every act the policy decided is in the trace, with its rule and layer.
    const decisions = store.events(result.runId).filter((event) => event.type === 'policy-decision');
    expect(decisions.map((event) => [event.act, event.effect, event.layer])).toEqual([
      ['read', 'allow', 'default'],
      ['write', 'allow', 'default'],
      ['exec', 'allow', 'test'],
    ]);
    expect(result.usage.steps).toBe(4);
  });

  it('ends as gate-failed with the test output in the event when the gate keeps failing', async () => {
    const root = project();
    const store = await openStore();
    const { provider } = await serve(
      turns([
        { text: 'fix it', toolCalls: [{ name: 'patch_file', args: { path: 'src/add.js', patch: WRONG } }] },
        { text: 'done, I think' },
      ]),
    );
    const contract = TaskContract.workspace('the tests fail; fix them', root)
      .withVerification(Verification.command(['node', '--test']))
      .withRetries(1);
    const supervisorEvents: string[] = [];
    const result = await runWith(contract, provider, store, testPolicy, undefined, {
      onStart: (supervisor) => supervisor.observe((event) => supervisorEvents.push(event.type)),
    });
    expect(result.outcome.kind).toBe('gate-failed');
    expect(result.outcome).toMatchObject({ verdict: 'failed' });
    const gates = store.gateEvaluations(result.runId);
    expect(gates.map((gate) => gate.verdict)).toEqual(['failed', 'failed']);
    const outputs = store.events(result.runId).filter((event) => event.type === 'gate-output');
    expect(outputs).toHaveLength(2);
    expect(outputs[0]).toMatchObject({ argv: ['node', '--test'], exitStatus: 1, signal: null });
    expect(`${outputs[0]?.stdout}${outputs[0]?.stderr}`).toContain('not ok');
    // The first failure went back to the model as an observation; the second ended the run.
    const steps = store.steps(result.runId);
    expect(steps.at(-2)?.observations.at(-1)?.content).toContain('The verification gate (command) failed');
    expect(supervisorEvents).toContain('gate-output');
  });

  it('puts the gate that could not run as errored, and retryGate re-runs only the criterion', async () => {
    const root = project();
    const store = await openStore();
    const { provider, server } = await serve(turns([{ text: 'nothing to do' }]));
    const contract = TaskContract.workspace('check it', root).withVerification(
      Verification.command(['io-harness-no-such-program']),
    );
    const result = await runWith(contract, provider, store, testPolicy);
    expect(result.outcome).toMatchObject({ kind: 'gate-failed', verdict: 'errored' });
    expect(store.gateEvaluations(result.runId)[0]?.reasons[0]).toContain('was not found');
    const calls = server.calls.length;
    const { retryGate } = await import('../dist/index.js');
    // Make the criterion runnable: a program on PATH now exists under that name.
    const bin = mkdtempSync(join(tmpdir(), 'io-harness-bin-'));
    later(() => rmSync(bin, { recursive: true, force: true }));
    writeFileSync(join(bin, 'io-harness-no-such-program'), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
    const path = process.env.PATH;
    process.env.PATH = `${bin}:${path}`;
    try {
      const retried = await retryGate(store, result.runId);
      expect(retried).toMatchObject({ verdict: 'passed', status: 'finished' });
    } finally {
      process.env.PATH = path;
    }
    expect(server.calls.length).toBe(calls);
    expect(store.run(result.runId)?.status).toBe('finished');
    expect(store.gateEvaluations(result.runId).map((gate) => [gate.verdict, gate.retried])).toEqual([
      ['errored', false],
      ['passed', true],
    ]);
  });
});

describe('OutputSchema in a run', () => {
  const schema = {
    type: 'object',
    properties: { summary: { type: 'string' } },
    required: ['summary'],
    additionalProperties: false,
  };

  it('re-prompts an invalid answer with the validation error, then accepts a valid one', async () => {
    const root = project();
    const store = await openStore();
    const { provider, server } = await serve(turns([{ text: 'It is fixed.' }, { text: '{"summary": "fixed"}' }]));
    const contract = TaskContract.workspace('summarise', root).withOutputSchema(schema);
    const result = await runWith(contract, provider, store, testPolicy);
    expect(result.outcome).toEqual({ kind: 'finished', reply: '{"summary": "fixed"}' });
    const body = server.calls[0]?.body as { response_format?: unknown };
    expect(body.response_format).toEqual({
      type: 'json_schema',
      json_schema: { name: 'output', schema, strict: false },
    });
    // The validation error reached the model as an ordinary turn.
    const second = JSON.stringify(server.calls[1]?.body);
    expect(second).toContain('does not satisfy the required output schema');
  });

  it('ends as schema-unsatisfied when the retries run out', async () => {
    const root = project();
    const store = await openStore();
    const { provider } = await serve(turns([{ text: '{"wrong": 1}' }]));
    const contract = TaskContract.workspace('summarise', root).withOutputSchema(schema).withRetries(2);
    const result = await runWith(contract, provider, store, testPolicy);
    expect(result.outcome.kind).toBe('schema-unsatisfied');
    expect(result.usage.steps).toBe(3);
    const invalid = store.events(result.runId).filter((event) => event.type === 'schema-invalid');
    expect(invalid.map((event) => event.reprompted)).toEqual([true, true, false]);
    expect(invalid[0]?.errors.join(' ')).toContain("required property 'summary'");
  });

  it('sends no response_format on the Anthropic wire and still checks the answer', async () => {
    const root = project();
    const store = await openStore();
    const server = await ScriptedModelServer.start(turns([{ text: 'not json' }]));
    later(() => server.close());
    const contract = TaskContract.workspace('summarise', root).withOutputSchema(schema).withRetries(0);
    const result = await runWith(
      contract,
      { kind: 'anthropic', model: 'claude-scripted', baseUrl: server.url, apiKey: 'k', retry: { baseDelayMs: 1 } },
      store,
      testPolicy,
    );
    expect(result.outcome.kind).toBe('schema-unsatisfied');
    expect(JSON.stringify(server.calls[0]?.body)).not.toContain('response_format');
  });
});

describe('ToolMask', () => {
  it('keeps the definitions byte-identical, states the mask after the breakpoint and refuses the call', async () => {
    const store = await openStore();
    const script = turns([
      { text: 'writing', toolCalls: [{ name: 'write_file', args: { path: 'x.txt', content: 'x\n' } }] },
      { text: 'done' },
    ]);
    const masked = await serve(script);
    const plain = await serve(script);
    const rootA = project();
    const rootB = project();
    const a = await runWith(
      TaskContract.workspace('write x', rootA).withToolMask(['write_file']),
      masked.provider,
      store,
      testPolicy,
    );
    const b = await runWith(TaskContract.workspace('write x', rootB), plain.provider, store, testPolicy);
    const tools = (server: ScriptedModelServer) =>
      JSON.stringify(((server.calls[0] as { body: unknown }).body as { tools: unknown }).tools);
    expect(tools(masked.server)).toBe(tools(plain.server));
    const firstUser = (server: ScriptedModelServer) =>
      JSON.stringify(
        ((server.calls[0] as { body: unknown }).body as { messages: { role: string; content: unknown }[] }).messages[1],
      );
    expect(firstUser(masked.server)).toContain('withheld for this run');
    expect(firstUser(masked.server)).toContain('write_file');
    expect(existsSync(join(rootA, 'x.txt'))).toBe(false);
    expect(existsSync(join(rootB, 'x.txt'))).toBe(true);
    const refusals = store.events(a.runId).filter((event) => event.type === 'refusal');
    expect(refusals.map((event) => [event.tool, event.rule])).toEqual([['write_file', 'tool-mask']]);
    expect(store.events(b.runId).some((event) => event.type === 'refusal')).toBe(false);
  });
});

describe('early reads', () => {
  const earlyProvider = (root: string, announce: boolean) => ({
    kind: 'module' as const,
    module: fileURLToPath(new URL('./support/scripts/early-read.mjs', import.meta.url)),
    options: { root, file: 'notes.txt', announce },
  });

  it('starts a leading read-only call while the completion is still streaming', async () => {
    const root = project();
    writeFileSync(join(root, 'notes.txt'), 'as it was when the call was streamed\n');
    const store = await openStore();
    const result = await runWith(
      TaskContract.workspace('read notes', root),
      earlyProvider(root, true),
      store,
      testPolicy,
    );
    expect(result.outcome.kind).toBe('finished');
    const [read] = store.steps(result.runId)[0]?.observations ?? [];
    expect(read?.content).toBe('as it was when the call was streamed\n');
  });

  it('without the stream announcing the call, the same read runs after the completion, with the same trace shape', async () => {
    const root = project();
    writeFileSync(join(root, 'notes.txt'), 'as it was when the call was streamed\n');
    const store = await openStore();
    const late = await runWith(
      TaskContract.workspace('read notes', root),
      earlyProvider(root, false),
      store,
      testPolicy,
    );
    const [read] = store.steps(late.runId)[0]?.observations ?? [];
    expect(read?.content).toBe('changed while the completion was still streaming\n');
    const root2 = project();
    writeFileSync(join(root2, 'notes.txt'), 'as it was when the call was streamed\n');
    const early = await runWith(
      TaskContract.workspace('read notes', root2),
      earlyProvider(root2, true),
      store,
      testPolicy,
    );
    const shape = (runId: string) =>
      store
        .events(runId)
        .map((event) => (event.type === 'policy-decision' ? `${event.type}:${event.act}:${event.effect}` : event.type));
    expect(shape(early.runId)).toEqual(shape(late.runId));
  });
});

describe('escalation to a stronger model', () => {
  const FIXED = 'export function add(a, b) {\n  return a + b;\n}\n';
  /** The last message of a call: the gate's feedback, a tool's result, or the task. */
  const last = (call: { body: unknown }) => {
    const messages = (call.body as { messages: { role: string; content: unknown }[] }).messages;
    return messages.at(-1) as { role: string; content: unknown };
  };

  it('moves to the stronger model after the gate fails twice, and that model finishes the change', async () => {
    const root = project();
    const store = await openStore();
    const { server, provider } = await serve((call) => {
      const model = (call.body as { model: string }).model;
      const message = last(call);
      if (model === 'gpt-strong') {
        return message.role === 'tool'
          ? { text: 'fixed' }
          : { text: 'rewriting', toolCalls: [{ name: 'write_file', args: { path: 'src/add.js', content: FIXED } }] };
      }
      // The small model: one wrong patch, then it insists it is done.
      if (message.role === 'user' && String(message.content).includes('verification gate')) return { text: 'done' };
      return message.role === 'tool'
        ? { text: 'done, I think' }
        : { text: 'fix it', toolCalls: [{ name: 'patch_file', args: { path: 'src/add.js', patch: WRONG } }] };
    }, 'gpt-small');
    process.env.IO_HARNESS_TEST_STRONG_KEY = 'k';
    later(() => {
      delete process.env.IO_HARNESS_TEST_STRONG_KEY;
    });
    const strong = { ...provider, model: 'gpt-strong', apiKey: undefined, apiKeyEnv: 'IO_HARNESS_TEST_STRONG_KEY' };
    const contract = TaskContract.workspace('the tests fail; fix them', root)
      .withVerification(Verification.command(['node', '--test']))
      .withRetries(2)
      .withEscalation(strong, { afterGateFailures: 2 });
    const result = await runWith(contract, provider, store, testPolicy);
    expect(result.outcome.kind).toBe('finished');
    expect(readFileSync(join(root, 'src', 'add.js'), 'utf8')).toBe(FIXED);
    expect(store.gateEvaluations(result.runId).map((gate) => gate.verdict)).toEqual(['failed', 'failed', 'passed']);
    const models = server.calls.map((call) => (call.body as { model: string }).model);
    expect(models).toEqual(['gpt-small', 'gpt-small', 'gpt-small', 'gpt-strong', 'gpt-strong']);
    const escalations = store.events(result.runId).filter((event) => event.type === 'model-escalated');
    expect(escalations).toEqual([
      expect.objectContaining({ from: 'openai:gpt-small', to: 'openai:gpt-strong', gateFailures: 2 }),
    ]);
    expect(store.modelCalls({ runId: result.runId }).map((row) => row.model)).toEqual(models);
  });

  it('keeps the key variables of every model from the gate, and says it escalated even when the call then fails', async () => {
    const root = project();
    const store = await openStore();
    const { server, provider } = await serve(() => ({ text: 'done' }), 'gpt-small');
    process.env.IO_HARNESS_TEST_STRONG_AUTH = 'sk-gate-auth';
    later(() => {
      delete process.env.IO_HARNESS_TEST_STRONG_AUTH;
    });
    // The stronger model cannot be reached: its call fails for good.
    const strong = {
      kind: 'openai' as const,
      model: 'gpt-strong',
      baseUrl: 'http://127.0.0.1:1/v1',
      apiKeyEnv: 'IO_HARNESS_TEST_STRONG_AUTH',
      retry: { maxAttempts: 1 },
    };
    const printer = [
      'node',
      '-e',
      'process.stdout.write(String(process.env.IO_HARNESS_TEST_STRONG_AUTH)); process.exit(1)',
    ];
    const contract = TaskContract.workspace('say done', root)
      .withVerification(Verification.command(printer))
      .withRetries(1)
      .withEscalation(strong, { afterGateFailures: 1 });
    const result = await runWith(contract, provider, store, Policy.default());
    expect(result.outcome.kind).toBe('failed');
    const outputs = store.events(result.runId).filter((event) => event.type === 'gate-output');
    expect(outputs.map((output) => output.stdout)).toEqual(['undefined']);
    expect(JSON.stringify(server.calls.map((call) => call.body))).not.toContain('sk-gate-auth');
    expect(store.events(result.runId).filter((event) => event.type === 'model-escalated')).toHaveLength(1);

    // Reachable this time: the run ends gate-failed, and retryGate (outside any run) keeps the key from the gate too.
    const reachable = { ...strong, baseUrl: provider.baseUrl as string };
    const second = await runWith(
      contract.withEscalation(reachable, { afterGateFailures: 1 }),
      provider,
      store,
      Policy.default(),
    );
    expect(second.outcome.kind).toBe('gate-failed');
    const { retryGate } = await import('../dist/index.js');
    expect(await retryGate(store, second.runId)).toMatchObject({ verdict: 'failed' });
    const gated = store.events(second.runId).filter((event) => event.type === 'gate-output');
    expect(gated.map((output) => output.stdout)).toEqual(['undefined', 'undefined', 'undefined']);
  });

  it('refuses an escalation that could never happen, or that carries a key, before anything runs', async () => {
    const root = project();
    const strong = { kind: 'openai' as const, model: 'gpt-strong', apiKeyEnv: 'OPENAI_API_KEY' };
    const base = TaskContract.workspace('fix it', root);
    expect(() => base.withEscalation({ ...strong, apiKey: 'sk-direct' })).toThrow(/environment variable/);
    expect(() => base.withEscalation(strong, { afterGateFailures: 0 })).toThrow(/at least 1/);
    const store = await openStore();
    const supervisor = await Supervisor.start(store);
    later(() => supervisor.close());
    const writer = { kind: 'openai' as const, model: 'gpt-small', apiKey: 'k' };
    expect(() => supervisor.run({ contract: base.withEscalation(strong), provider: writer })).toThrow(/has no gate/);
    const gated = base.withVerification(Verification.command(['node', '--test']));
    expect(() =>
      supervisor.run({
        contract: gated.withRetries(1).withEscalation(strong, { afterGateFailures: 2 }),
        provider: writer,
      }),
    ).toThrow(/would never escalate; raise withRetries to at least 2/);
    const reviewed = base.withVerification(Verification.review(strong, 'the change fixes the tests'));
    expect(() => supervisor.run({ contract: reviewed.withEscalation(strong), provider: writer })).toThrow(
      /reviewer is the model that writes the change \(gpt-strong\)/,
    );
    const unset = { ...strong, apiKeyEnv: 'IO_HARNESS_TEST_UNSET_KEY' };
    delete process.env.IO_HARNESS_TEST_UNSET_KEY;
    expect(() => supervisor.run({ contract: gated.withEscalation(unset), provider: writer })).toThrow(
      /IO_HARNESS_TEST_UNSET_KEY, which is not set in this process/,
    );
    expect(store.runs()).toEqual([]);
  });
});

describe('bad input, before anything runs', () => {
  it('refuses a workspace root that does not exist, an empty goal and a budget of zero', () => {
    const missing = join(tmpdir(), 'io-harness-no-such-dir', 'deeper');
    expect(() => TaskContract.workspace('fix it', missing)).toThrow(/does not exist/);
    try {
      TaskContract.workspace('fix it', missing);
    } catch (error) {
      expect(HarnessError.isInstance(error) && error.code).toBe('WORKSPACE_NOT_FOUND');
    }
    const root = project();
    expect(() => TaskContract.workspace('', root)).toThrow(/needs a goal/);
    expect(() => TaskContract.workspace('   ', root)).toThrow(/needs a goal/);
    expect(() => TaskContract.workspace('fix', root).withBudget({ steps: 0 })).toThrow(/at least 1.*zero/);
    expect(() => TaskContract.workspace('fix', root).withBudget({ tokens: 0 })).toThrow(/tokens/);
    expect(() => TaskContract.workspace('fix', root).withBudget({ wallSecs: 0 })).toThrow(/wallSecs/);
    expect(() => TaskContract.workspace('fix', root).withToolMask(['rm_rf'])).toThrow(/no tool named "rm_rf"/);
    expect(() => Verification.command([])).toThrow(/argv/);
  });

  it('writes nothing to the store when the contract is refused', async () => {
    const store = await openStore();
    const supervisor = await Supervisor.start(store);
    later(() => supervisor.close());
    expect(() =>
      supervisor.run({ contract: 'not a contract' as never, provider: { kind: 'openai', model: 'm', apiKey: 'k' } }),
    ).toThrow(/TaskContract/);
    expect(store.runs()).toEqual([]);
  });
});

describe('single-file mode', () => {
  it('reaches the one file and nothing else, and offers no grep or find', async () => {
    const root = project();
    const store = await openStore();
    const { provider, server } = await serve(
      turns([
        {
          text: 'editing',
          toolCalls: [
            { name: 'edit_file', args: { path: 'add.js', old_string: 'a - b', new_string: 'a + b' } },
            { name: 'write_file', args: { path: 'other.js', content: 'no\n' } },
          ],
        },
        { text: 'done' },
      ]),
    );
    const result = await runWith(
      TaskContract.file('fix add', join(root, 'src', 'add.js')),
      provider,
      store,
      testPolicy,
    );
    expect(result.outcome.kind).toBe('finished');
    expect(readFileSync(join(root, 'src', 'add.js'), 'utf8')).toContain('a + b');
    expect(existsSync(join(root, 'src', 'other.js'))).toBe(false);
    const names = (
      (server.calls[0] as { body: unknown }).body as { tools: { function: { name: string } }[] }
    ).tools.map((tool) => tool.function.name);
    expect(names).not.toContain('grep');
    expect(names).not.toContain('find');
    const [edited, refused] = store.steps(result.runId)[0]?.observations ?? [];
    expect(edited?.isError).toBe(false);
    expect(refused?.isError).toBe(true);
    expect(refused?.content).toContain('add.js');
    const refusals = store.events(result.runId).filter((event) => event.type === 'refusal');
    expect(refusals.map((event) => event.rule)).toEqual(['workspace.single-file']);
  });
});
