import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { HarnessError, Store, Supervisor } from '../dist/index.js';
import { type Harness, harness, moduleScript, runByAddress, script } from './support/harness.js';
import { tempStorePath } from './support/processes.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('the supervisor', () => {
  it('moves through its lifecycle: running, then stopped; a closed one refuses new runs', async () => {
    const store = await Store.open(tempStorePath());
    const supervisor = await Supervisor.start(store);
    expect(supervisor.state).toBe('running');
    await supervisor.close();
    expect(supervisor.state).toBe('stopped');
    try {
      supervisor.run({ task: 'x', provider: await script('loop') });
      throw new Error('run() after close succeeded');
    } catch (error) {
      expect(HarnessError.isInstance(error) && error.code).toBe('SUPERVISOR_CLOSED');
    }
    store.close();
  });

  it('rejects everything pending when an actor\u2019s worker dies mid-run, and leaves the run resumable', async () => {
    h = await harness();
    const marker = join(dirname(h.store.path), 'exited-once');
    rmSync(marker, { force: true });
    const handle = h.supervisor.run({
      task: 'die once',
      provider: moduleScript('loop', { steps: 6, exitAtStep: 3, marker }),
    });
    const failure = await handle.result.catch((error: unknown) => error);
    expect(HarnessError.isInstance(failure) && failure.code).toBe('ACTOR_EXITED');
    expect((failure as Error).message).toContain(`supervisor.resume("${handle.rootId}")`);
    const run = h.store.run(handle.rootId);
    expect(run?.status).toBe('running');
    expect(run?.lastSeq).toBe(3);
    // Its lease was given back, so another process could resume it at once.
    for (let tries = 0; h.store.run(handle.rootId)?.lease.owner !== null && tries < 200; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(h.store.run(handle.rootId)?.lease.owner).toBeNull();
    const resumed = await h.supervisor.resume(handle.rootId);
    const result = await resumed.result;
    expect(result).toMatchObject({ status: 'finished', reply: 'done after 6 steps' });
    expect(h.store.steps(handle.rootId).map((step) => step.seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(
      h.store
        .events(handle.rootId)
        .filter((event) => event.type === 'run-start')
        .map((event) => event.type === 'run-start' && event.resumed),
    ).toEqual([false, true]);
  });

  it('makes cancel stick: a tree cancelled before its root started never calls the model', async () => {
    h = await harness();
    const handle = h.supervisor.run({
      task: 'never mind',
      provider: await script('fanout', { children: 3, steps: 3 }),
    });
    await handle.cancel();
    const result = await handle.result;
    expect(result.status).toBe('cancelled');
    expect(result.runs).toBe(1);
    expect(h.store.steps(handle.rootId)).toEqual([]);
  });

  it('moves a waited-on child to the background after background_after_secs, and still reads its report', async () => {
    h = await harness();
    const result = await h.supervisor.run({
      task: 'delegate then carry on',
      provider: await script('program', {
        latencyMs: 40,
        programs: {
          root: [
            {
              toolCalls: [
                { name: 'spawn_agent', args: { task: 'slow', as: 'slow', wait: true, background_after_secs: 0.05 } },
              ],
            },
            { toolCalls: [{ name: 'read_messages', args: { wait_secs: 30 } }] },
            { text: 'heard back' },
          ],
          slow: [
            { toolCalls: [{ name: 'read_messages', args: {} }] },
            { toolCalls: [{ name: 'read_messages', args: {} }] },
            { toolCalls: [{ name: 'read_messages', args: {} }] },
            { text: 'slow work done' },
          ],
        },
      }),
    }).result;
    expect(result.reply).toBe('heard back');
    const [spawned, read] = h.store.steps(result.rootId).flatMap((step) => step.observations);
    expect(spawned?.content).toContain('carries on in the background');
    expect(read?.content).toContain('[slow finished] slow work done');
    expect(runByAddress(h.store, result.rootId, 'slow').status).toBe('finished');
  });

  it('gives the lease back when a run cannot go on in this process, so another supervisor resumes it at once', async () => {
    const path = tempStorePath();
    const store = await Store.open(path);
    const served = await script('loop', { steps: 2 });
    // The key is read from a variable this process does not have (yet): the agent cannot build its provider.
    const provider = { ...served, apiKey: undefined, apiKeyEnv: 'IO_HARNESS_TEST_LATE_KEY' };
    delete process.env.IO_HARNESS_TEST_LATE_KEY;
    const first = await Supervisor.start(store);
    const handle = first.run({ task: 'long', provider });
    await expect(handle.result).rejects.toMatchObject({ code: 'PROVIDER_LOAD_FAILED' });
    expect(store.run(handle.rootId)?.status).toBe('running');
    await first.close();
    process.env.IO_HARNESS_TEST_LATE_KEY = 'k';
    try {
      // Another supervisor in this same (live) process: it finds no lease held, so no CONFLICT.
      const second = await Supervisor.start(store);
      const result = await (await second.resume(handle.rootId)).result;
      expect(result.reply).toBe('done after 2 steps');
      await second.close();
    } finally {
      delete process.env.IO_HARNESS_TEST_LATE_KEY;
      store.close();
    }
  });

  it('resumes a tree an earlier supervisor was closed on, from its last committed step', async () => {
    const path = tempStorePath();
    const store = await Store.open(path);
    const first = await Supervisor.start(store);
    const provider = await script('loop', { steps: 40, latencyMs: 10 });
    const handle = first.run({ task: 'long', provider });
    await new Promise<void>((resolve) => {
      first.observe((event) => {
        if (event.type === 'step-end' && event.seq === 3) resolve();
      });
    });
    await first.close();
    await expect(handle.result).rejects.toMatchObject({ code: 'SUPERVISOR_CLOSED' });
    const second = await Supervisor.start(store);
    // The key was handed in directly, so it was never stored: without the provider the tree cannot go on,
    // and says so, and stays resumable.
    const keyless = await second.resume(handle.rootId);
    await expect(keyless.result).rejects.toMatchObject({ code: 'PROVIDER_LOAD_FAILED' });
    await expect(keyless.result).rejects.toThrow(/no API key.*keys are never stored with a run/);
    expect(JSON.stringify(store.spec(handle.rootId))).not.toContain('test-key');
    expect(store.run(handle.rootId)?.status).toBe('running');
    const result = await (await second.resume(handle.rootId, { provider })).result;
    expect(result.reply).toBe('done after 40 steps');
    expect(store.steps(handle.rootId)).toHaveLength(41);
    await second.close();
    store.close();
  });
});
