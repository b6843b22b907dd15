/**
 * What users hand the supervisor is checked at the edge, on zod schemas: an option that
 * does not exist is named (with the ones that do), a value of the wrong kind says what it
 * must be, and nothing is started or stored when the options are wrong.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { HarnessError, InvalidArgumentError, Store, Supervisor, tool } from '../dist/index.js';
import { tempStorePath } from './support/processes.js';

const provider = { kind: 'module' as const, module: '/x.js' };
let store: Store | undefined;
let supervisor: Supervisor | undefined;
afterEach(async () => {
  await supervisor?.close();
  store?.close();
  supervisor = undefined;
  store = undefined;
});

function refusal(fn: () => unknown): InvalidArgumentError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect(HarnessError.isInstance(error) && error.code).toBe('INVALID_ARGUMENT');
    return error as InvalidArgumentError;
  }
  throw new Error('no error was thrown');
}

async function startRefusal(options: unknown): Promise<string> {
  store ??= await Store.open(tempStorePath());
  const error = await Supervisor.start(store, options as never).catch((thrown: unknown) => thrown);
  expect(error).toBeInstanceOf(InvalidArgumentError);
  return (error as Error).message;
}

describe('options at the edge', () => {
  it('names an option that does not exist, and lists those that do', async () => {
    const message = await startRefusal({ maxIdleWorkers: 4 });
    expect(message).toMatch(/^Supervisor\.start: there is no option "maxIdleWorkers" \(the options are /);
    expect(message).toContain('isolation');
    expect(message).toContain('threads');
  });

  it('says what each supervisor option must be', async () => {
    expect(await startRefusal({ isolation: 'process' })).toBe(
      `Supervisor.start: isolation must be 'shared' (many actors to a thread, the default), 'thread' (a thread each) or 'in-process' (on the calling thread, no worker thread at all), got "process".`,
    );
    expect(await startRefusal({ threads: 1.5 })).toContain('threads must be a whole number of at least 1, got 1.5.');
    expect(await startRefusal({ leaseTtlMs: '30s' })).toContain(
      'leaseTtlMs must be a whole number of at least 1, got "30s".',
    );
    expect(await startRefusal({ clock: { time: () => 0 } })).toContain('clock must have a now(...) method');
    expect(await startRefusal('fast')).toBe('Supervisor.start: options must be an object, got "fast".');
    // Options that belong to the other isolation are refused, saying which goes with which.
    expect(await startRefusal({ isolation: 'thread', threads: 4 })).toContain(
      "threads sizes the shared pool, and with isolation: 'thread' each agent has a thread of its own",
    );
    expect(await startRefusal({ isolation: 'in-process', warmWorkers: 2 })).toContain(
      "with isolation: 'in-process' the agents run on the calling thread and no worker thread starts; drop threads and warmWorkers",
    );
    expect(await startRefusal({ idleThreadMs: 1000 })).toContain(
      "idleThreadMs is how long an idle thread of isolation: 'thread' waits",
    );
    // Several problems are named together.
    const both = await startRefusal({ threads: 0, warmWorkers: -1 });
    expect(both).toContain('threads must be a whole number of at least 1, got 0;');
    expect(both).toContain('warmWorkers must be a whole number of at least 0, got -1.');
  });

  it('checks run() and resume() options before anything is stored', async () => {
    store = await Store.open(tempStorePath());
    supervisor = await Supervisor.start(store);
    const running = supervisor;
    expect(refusal(() => running.run({ task: 'x', provider, maxWait: 5 } as never)).message).toMatch(
      /^run\(\): there is no option "maxWait" \(the options are task, provider, /,
    );
    expect(refusal(() => running.run({ task: 'x' } as never)).message).toContain(
      'run(): provider must be a provider spec',
    );
    expect(refusal(() => running.run({ task: 'x', provider, maxWaitSecs: -1 })).message).toBe(
      'run(): maxWaitSecs must be a number of seconds of at least 0, got -1.',
    );
    expect(refusal(() => running.run({ task: 'x', provider, approver: {} as never })).message).toBe(
      'run(): approver must have a decide(...) method, e.g. new ApproveAll().',
    );
    expect(refusal(() => running.run({ task: 7 as never, provider })).message).toBe(
      'run(): task must be a string, got 7.',
    );
    expect(store.runs()).toEqual([]);
    const resumed = await running.resume('no-such-tree', { approvers: [] } as never).catch((error: unknown) => error);
    expect(resumed).toBeInstanceOf(InvalidArgumentError);
    expect((resumed as Error).message).toMatch(/^resume\(\): there is no option "approvers"/);
  });
});

describe('tool declarations at the edge', () => {
  const execute = () => 'ok';
  it('names a key a tool does not have, and where its schema goes', () => {
    const message = refusal(() =>
      tool({ name: 'lookup', description: 'Looks up.', inputSchema: z.object({}), execute } as never),
    ).message;
    expect(message).toBe(
      'tool(lookup): parameters must be a zod object schema or a JSON Schema object; a tool has no "inputSchema" (it is declared with name, description, parameters, effect, family and execute; its schema goes in parameters).',
    );
  });

  it('says what each field must be, all at once', () => {
    const message = refusal(() =>
      tool({ name: 'lookup', description: ' ', parameters: z.object({}), effect: 'writes', execute: 5 } as never),
    ).message;
    expect(message).toBe(
      "tool(lookup): the description must be a non-empty string; the model reads it; effect must be 'reads' or 'acts', got \"writes\"; execute must be a function.",
    );
    expect(refusal(() => tool({ name: 'two words', description: 'x', parameters: {}, execute } as never)).message).toBe(
      'tool(): the name must be 1 to 64 letters, digits, _ or -, got "two words".',
    );
  });
});
