/**
 * A tool that throws is visible, and bad input names what was wrong: the thrown error's
 * class, message and stack kept with the observation (scrubbed of secrets), the committed
 * `tool-call` event saying it failed, `show` printing it, the outcome counting it; a store
 * reader given the wrong shape of argument raising a HarnessError that names it; a key
 * with a stray space or line break refused where it is given, and a 401 naming where the
 * key came from.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { OpenAI, Policy, runWith, TaskContract, tool } from '../dist/index.js';
import { cli } from './support/cli.js';
import { openStore, serve, setEnv, tempWorkspace, turns } from './support/workspace.js';

describe('a tool that throws', () => {
  it('leaves its class, message and stack in the trace, says so in its event and in show, and is counted', async () => {
    const root = tempWorkspace();
    // The provider's key: a secret every row the store writes is scrubbed of.
    const secret = 'sk-live-0123456789abcdef';
    const parse = tool({
      name: 'parse_config',
      description: 'Parses the configuration.',
      parameters: z.object({ text: z.string() }),
      effect: 'reads',
      execute: ({ text }) => {
        const config = JSON.parse(text) as { port?: { value: number } };
        // A TypeError of the embedder's own: reading a field of undefined, with a secret in its message.
        return (config.port as { value: number }).value.toFixed(0);
      },
    });
    const failing = tool({
      name: 'check_key',
      description: 'Checks the key.',
      parameters: z.object({}),
      effect: 'reads',
      execute: () => {
        throw new TypeError(`the key ${secret} is not valid here`);
      },
    });
    const store = await openStore();
    const { provider } = await serve(
      turns([
        { toolCalls: [{ name: 'parse_config', args: { text: '{}' } }] },
        { toolCalls: [{ name: 'check_key', args: {} }] },
        { text: 'done' },
      ]),
    );
    const result = await runWith(
      TaskContract.workspace('parse it', root),
      { ...provider, apiKey: secret },
      store,
      Policy.default(),
      undefined,
      { tools: [parse, failing] },
    );
    // The run ends as the model ended it, and the outcome says two tools threw.
    expect(result.outcome.kind).toBe('finished');
    expect(result.toolErrors).toEqual({ errors: 2, threw: 2 });
    const observations = store.steps(result.runId).flatMap((step) => step.observations);
    const first = observations[0];
    expect(first?.content).toContain('parse_config failed: Cannot read properties of undefined');
    expect(first?.error?.name).toBe('TypeError');
    expect(first?.error?.message).toMatch(/undefined/);
    expect(first?.error?.stack).toMatch(/\n\s+at /);
    expect(first?.error?.stack).toContain('tool-failures.test.ts');
    // Scrubbed like every row: the secret is not in the stored error, nor its message.
    const second = observations[1];
    expect(second?.error?.name).toBe('TypeError');
    expect(JSON.stringify(store.steps(result.runId))).not.toContain(secret);
    const calls = store.events(result.runId).filter((event) => event.type === 'tool-call');
    expect(calls.map((event) => (event as { failed?: { name: string } }).failed?.name)).toEqual([
      'TypeError',
      'TypeError',
    ]);
    const shown = await cli(['show', result.runId, '--store', store.path]);
    expect(shown.stdout).toContain('threw TypeError');
    expect(shown.stdout).toMatch(/\n\s+at .*tool-failures\.test\.ts/);
    expect(shown.stdout).not.toContain(secret);
  });
});

describe('bad input names what was wrong', () => {
  it('raises a HarnessError naming the argument when a store reader is given the wrong shape', async () => {
    const store = await openStore();
    const thrown = (fn: () => unknown) => {
      try {
        fn();
      } catch (error) {
        return error as { code: string; message: string; details: Record<string, unknown> };
      }
      throw new Error('expected an error');
    };
    const wrong = thrown(() => store.steps({ runId: 'x' } as never));
    expect(wrong.code).toBe('INVALID_ARGUMENT');
    expect(wrong.message).toContain(
      'store.steps: runId is a run\'s id, a non-empty string; got {"runId":"x"} (pass steps(x.runId), not steps(x))',
    );
    expect(wrong.details).toMatchObject({ reader: 'steps', argument: 'runId' });
    expect(thrown(() => store.events(42 as never)).message).toContain('store.events: runId');
    expect(thrown(() => store.questions('open' as never)).message).toContain('store.questions: takes a filter object');
    expect(thrown(() => store.questions({ runId: 7 } as never)).message).toContain('store.questions: runId');
    // The right shape still reads.
    expect(store.steps('no-such-run')).toEqual([]);
  });

  it('refuses a key with a stray line break where it is given, and names where a refused key came from', async () => {
    expect(() => OpenAI.create({ model: 'gpt-4.1', apiKey: 'sk-abc\n' })).toThrow(
      /apiKey has a stray space or line break/,
    );
    expect(() => OpenAI.create({ model: 'gpt-4.1', apiKey: ' sk-abc' })).toThrow(/stray space/);
    const root = tempWorkspace();
    const store = await openStore();
    const { server } = await serve(() => ({ fault: 'status', status: 401 }));
    // A key from the environment with a newline at its end: the run is refused as it starts, naming the variable.
    setEnv({ IO_HARNESS_TEST_KEY: 'sk-from-a-file\n', IO_HARNESS_GOOD_KEY: 'sk-good' });
    const spaced = OpenAI.create({ model: 'gpt-4.1', baseUrl: `${server.url}/v1`, apiKeyEnv: 'IO_HARNESS_TEST_KEY' });
    await expect(runWith(TaskContract.workspace('x', root), spaced, store)).rejects.toThrow(
      'the API key from the environment variable IO_HARNESS_TEST_KEY has a stray space or line break',
    );
    // A 401: the vendor's refusal names the variable the key came from.
    const good = OpenAI.create({
      model: 'gpt-4.1',
      baseUrl: `${server.url}/v1`,
      apiKeyEnv: 'IO_HARNESS_GOOD_KEY',
      retry: { baseDelayMs: 1 },
    });
    const unauthorized = await runWith(TaskContract.workspace('x', root), good, store);
    expect(unauthorized.outcome.kind).toBe('failed');
    expect((unauthorized.outcome as { reason: string }).reason).toContain(
      'the key came from the environment variable IO_HARNESS_GOOD_KEY',
    );
  });
});
