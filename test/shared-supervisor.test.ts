/**
 * The supervisor runWith shares (src/supervisor/shared.ts), on real worker threads and a
 * real store, over the scripted model server: two calls one after the other, and two at
 * once, run on one supervisor and its one pool thread; options that cannot share get a
 * supervisor of their own, closed after; a shared supervisor stopped under a call is
 * replaced by the next; a closed store handle is refused with the store's own error and
 * takes its supervisor with it, and the store opened again gets a fresh one; a process that
 * calls runWith once and closes nothing exits by itself. Runs on both backends (vitest.config.ts).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  type HarnessError,
  type HttpProviderSpec,
  Policy,
  runWith,
  type Supervisor,
  systemClock,
  TaskContract,
} from '../dist/index.js';
import { type EitherStore, freshStore, openAt, openInScript, SUITE_BACKEND } from './support/backends.js';
import { serve, tempWorkspace, turns } from './support/workspace.js';

type Seen = Supervisor<EitherStore>;

/** A contract in a fresh workspace, a model that answers at once, and runWith on `store` that says which supervisor ran it. */
async function setup() {
  const root = tempWorkspace({ 'notes.txt': 'hello\n' });
  const { provider } = await serve(turns([{ text: 'done' }]));
  const run = async (store: EitherStore, supervisor?: Parameters<typeof runWith>[5]) => {
    let seen: Seen | null = null;
    const result = await runWith(
      TaskContract.workspace('say done', root),
      provider,
      store,
      Policy.default(),
      undefined,
      {
        ...supervisor,
        onStart: (given) => {
          seen = given;
        },
      },
    );
    expect(result.outcome).toEqual({ kind: 'finished', reply: 'done' });
    return seen as unknown as Seen;
  };
  return { root, provider, run };
}

async function rejection(action: () => Promise<unknown>): Promise<HarnessError> {
  try {
    await action();
  } catch (error) {
    return error as HarnessError;
  }
  throw new Error('expected a rejection');
}

/** Waits, turn by turn of the event loop, until `done()` holds (bounded by the test's timeout, not by a duration). */
async function until(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((resolve) => setTimeout(resolve, 10));
}

describe('the supervisor runWith shares', () => {
  it('runs two calls on one store, one after the other and two at once, on one supervisor with one pool thread', async () => {
    const store = await openAt(await freshStore());
    const { run } = await setup();
    const first = await run(store);
    const second = await run(store);
    expect(second).toBe(first);
    // Up for the next call, on the one thread one agent at a time needs.
    expect(first.state).toBe('running');
    expect(first.threads).toEqual({ isolation: 'shared', live: 1 });
    const [a, b] = await Promise.all([run(store), run(store)]);
    expect(a).toBe(first);
    expect(b).toBe(first);
    expect(first.state).toBe('running');
  });

  it('gives a call whose options cannot share a supervisor of its own, closed after; equal plain options share theirs', async () => {
    const store = await openAt(await freshStore());
    const { run } = await setup();
    const shared = await run(store);
    const clocked = await run(store, { supervisor: { clock: systemClock } });
    expect(clocked).not.toBe(shared);
    expect(clocked.state).toBe('stopped');
    const capped = await run(store, { supervisor: { maxConcurrentAgents: 4 } });
    expect(capped).not.toBe(shared);
    expect(await run(store, { supervisor: { maxConcurrentAgents: 4 } })).toBe(capped);
    expect(capped.state).toBe('running');
    expect(await run(store)).toBe(shared);
  });

  it('starts a fresh shared supervisor for the call after one that was stopped under it', async () => {
    const store = await openAt(await freshStore());
    const { root, provider, run } = await setup();
    const first = await run(store);
    const refused = await rejection(() =>
      runWith(TaskContract.workspace('say done', root), provider, store, Policy.default(), undefined, {
        onStart: (supervisor) => supervisor.close(),
      }),
    );
    expect(refused.code).toBe('SUPERVISOR_CLOSED');
    expect(first.state).toBe('stopped');
    const next = await run(store);
    expect(next).not.toBe(first);
    expect(next.state).toBe('running');
  });

  it('closes with its store handle: the closed handle is refused as its writes are, the store opened again gets a fresh one', async () => {
    const location = await freshStore();
    const store = await openAt(location);
    const { root, provider, run } = await setup();
    const first = await run(store);
    await store.close();
    await until(() => first.state === 'stopped');
    const refused = await rejection(() => runWith(TaskContract.workspace('say done', root), provider, store));
    expect(refused.message).toMatch(/is closed; open it again/);
    const again = await openAt(location);
    const fresh = await run(again);
    expect(fresh).not.toBe(first);
    expect(fresh.state).toBe('running');
  });

  it('lets a process that called runWith once, closing nothing, exit by itself', async () => {
    const location = await freshStore();
    const root = tempWorkspace({ 'notes.txt': 'hello\n' });
    const { provider } = await serve(
      turns([{ text: 'looking', toolCalls: [{ name: 'note', args: { text: 'hi' } }] }, { text: 'noted' }]),
    );
    const script = join(tempWorkspace(), 'once.mjs');
    writeFileSync(script, onceScript(location, root, provider));
    const child = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 110_000 });
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
    });
    child.stderr.on('data', (chunk) => {
      out += chunk;
    });
    const [code, signal] = await once(child, 'exit');
    // A liveness check: it ended on its own (the spawn's timeout would have killed it with SIGTERM).
    expect({ code, signal }, out).toEqual({ code: 0, signal: null });
    const lines = out.trim().split('\n');
    expect(lines[0]).toBe('finished noted');
    // And not at the end of a timer: once the run settled none held the event loop (the shared
    // supervisor's idle close is unref'd). On PostgreSQL the embedder's own handle, left open,
    // holds timers of its idle connections until they lapse: only SQLite's list is ours alone.
    const holding = JSON.parse(lines[1] ?? '[]') as string[];
    if (SUITE_BACKEND.name === 'SQLite') expect(holding).not.toContain('Timeout');
  });
});

/** A program that runs one tool call and its answer with runWith, prints the outcome and what holds its event loop, and ends without closing anything. */
function onceScript(location: string, root: string, provider: HttpProviderSpec): string {
  const dist = new URL('../dist/index.js', import.meta.url).href;
  return `${openInScript(location)}
    const { runWith, TaskContract, tool } = await import(${JSON.stringify(dist)});
    const note = tool({
      name: 'note',
      description: 'Takes a note.',
      parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
      effect: 'reads',
      execute: ({ text }) => 'noted ' + text,
    });
    const result = await runWith(TaskContract.workspace('take a note', ${JSON.stringify(root)}), ${JSON.stringify(provider)}, store, undefined, undefined, { tools: [note] });
    console.log(result.outcome.kind + ' ' + result.reply);
    await new Promise((resolve) => setImmediate(resolve));
    console.log(JSON.stringify(process.getActiveResourcesInfo()));
  `;
}
