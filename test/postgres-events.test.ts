/**
 * A tree's events followed from any host on PostgreSQL (src/supervisor/tree-tail.ts): a
 * supervisor that drives none of a tree, and never joined it, iterates
 * `events({ rootId })` and sees every event the driving host commits, in commit order,
 * the stream ending once the tree settles; the driving host's own stream sees the same; a
 * stream asked for after the tree settled ends at once; an observer of the tree on the
 * watching host sees what its stream sees; one scoped to a run sees that
 * run's only; and config.hooks()'s audit log on each host holds every host's events, in
 * order, once, across a restart of the observer. Two supervisors on one database under two host names, as the several-hosts
 * suite runs them (its SIGKILL and takeover case is there).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { hookObserver } from '../dist/config/hooks.js';
import type { HarnessEvent } from '../dist/index.js';
import { Attach, Supervisor } from '../dist/index.js';
import { PostgresStore } from '../dist/store/postgres/index.js';
import { script } from './support/harness.js';
import { freshDatabase } from './support/postgres.js';
import { tempWorkspace } from './support/workspace.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function host(url: string, name: string): Promise<Supervisor<PostgresStore>> {
  const store = await PostgresStore.open(url);
  cleanups.push(() => store.close());
  const supervisor = await Supervisor.start(store, { host: name, pollMs: 200 });
  cleanups.push(() => supervisor.close());
  return supervisor;
}

/** A fresh database with two hosts on it: one to drive trees, one to watch them. */
async function twoHosts() {
  const db = await freshDatabase();
  cleanups.push(() => db.drop());
  return { driver: await host(db.url, 'driver'), watcher: await host(db.url, 'watcher') };
}

async function collect(stream: AsyncIterable<HarnessEvent>): Promise<HarnessEvent[]> {
  const seen: HarnessEvent[] = [];
  for await (const event of stream) seen.push(event);
  return seen;
}

describe('a tree followed on PostgreSQL', () => {
  it('is seen whole, in commit order, from a host that drives none of it, and its stream ends when it settles', {
    timeout: 60_000,
  }, async () => {
    const { driver, watcher } = await twoHosts();
    const handle = driver.run({
      task: 'fan out',
      provider: await script('fanout', { children: 4, steps: 2, latencyMs: 30 }),
    });
    // Asked for before the root's first commit can have landed, on both hosts; and an observer of the tree on the watcher.
    const watched = collect(watcher.events({ rootId: handle.rootId }));
    const own = collect(driver.events({ rootId: handle.rootId }));
    const observed: HarnessEvent[] = [];
    watcher.observe((event) => observed.push(event), { rootId: handle.rootId });
    const result = await handle.result;
    expect(result.status).toBe('finished');
    const [seen, ownSeen] = await Promise.all([watched, own]);
    const stored = (await driver.store.treeEvents(handle.rootId)).map((event) => event.eventId);
    // Every event from the watcher's start on, in order, each once; the last is the root's end.
    const ids = seen.map((event) => event.eventId);
    expect(ids.length).toBeGreaterThan(20);
    expect(ids).toEqual(stored.slice(stored.indexOf(ids[0] as number)));
    expect(seen.at(-1)).toMatchObject({ type: 'run-end', runId: handle.rootId });
    // The driving host's own stream reads the same, from the store.
    const ownIds = ownSeen.filter((event) => event.eventId > 0).map((event) => event.eventId);
    expect(ownIds).toEqual(stored.slice(stored.indexOf(ownIds[0] as number)));
    expect(ownIds.at(-1)).toBe(stored.at(-1));
    // The observer on the watcher, the same: every event from its first, in order, the root's end last.
    await until(() => observed.at(-1)?.type === 'run-end' && observed.at(-1)?.runId === handle.rootId);
    const observedIds = observed.map((event) => event.eventId);
    expect(observedIds.length).toBeGreaterThan(20);
    expect(observedIds).toEqual(stored.slice(stored.indexOf(observedIds[0] as number)));

    // A tree that settled before its stream was asked for: the stream ends at once, empty.
    expect(await collect(watcher.events({ rootId: handle.rootId }))).toEqual([]);
    expect(await collect(driver.events({ rootId: handle.rootId }))).toEqual([]);
  });

  it('is followed by Attach on another handle, woken by the hints of the host that commits it', {
    timeout: 60_000,
  }, async () => {
    const db = await freshDatabase();
    cleanups.push(() => db.drop());
    const driver = await host(db.url, 'driver');
    // A handle of its own, as another process would have: no supervisor on it.
    const reader = await PostgresStore.open(db.url);
    cleanups.push(() => reader.close());
    const handle = driver.run({
      task: 'fan out',
      provider: await script('fanout', { children: 3, steps: 3, latencyMs: 80 }),
    });
    await until(async () => (await reader.run(handle.rootId)) !== null);
    const attach = await Attach.open(reader, handle.rootId);
    // A poll far past the test's own limit: every read after the first is one a hint woke.
    const seen = await collect(attach.events({ pollMs: 3_600_000 }));
    expect((await handle.result).status).toBe('finished');
    const stored = (await reader.treeEvents(handle.rootId)).map((event) => event.eventId);
    expect(seen.map((event) => event.eventId)).toEqual(stored);
    expect(seen.at(-1)).toMatchObject({ type: 'run-end', runId: handle.rootId });
  });

  it("scoped to a run, holds that run's events only, in order", { timeout: 60_000 }, async () => {
    const { driver, watcher } = await twoHosts();
    const handle = driver.run({
      task: 'fan out',
      provider: await script('fanout', { children: 2, steps: 3, latencyMs: 60 }),
    });
    const watched = collect(watcher.events({ runId: handle.rootId }));
    await handle.result;
    const seen = await watched;
    expect(seen.length).toBeGreaterThan(3);
    expect(seen.every((event) => event.runId === handle.rootId)).toBe(true);
    const stored = (await driver.store.events(handle.rootId)).map((event) => event.eventId);
    const ids = seen.map((event) => event.eventId);
    expect(ids).toEqual(stored.slice(stored.indexOf(ids[0] as number)));
  });

  it('keeps an audit log on each host holding every event of every host, once and in commit order, across a restart', {
    timeout: 60_000,
  }, async () => {
    const { driver, watcher } = await twoHosts();
    const dir = tempWorkspace();
    const hook = (name: string) =>
      hookObserver(
        [
          {
            name: 'audit',
            events: ['*'],
            append: join(dir, `${name}.jsonl`),
            onFailure: 'ignore',
            timeoutMs: 5_000,
            from: 'test',
          },
        ],
        { cwd: dir },
      );
    const ids = (name: string) =>
      readFileSync(join(dir, `${name}.jsonl`), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => (JSON.parse(line) as HarnessEvent).eventId);
    const provider = await script('fanout', { children: 3, steps: 2, latencyMs: 20 });
    const watching = hook('watcher');
    const stopWatching = watcher.observe(watching);
    const driving = hook('driver');
    driver.observe(driving);
    cleanups.push(() => driving.close());
    expect((await driver.run({ task: 'one', provider }).result).status).toBe('finished');
    // The watcher's log stops (its host restarts, say) while a second tree runs, then starts again on its file.
    const partial = async () => {
      const stored = await driver.store.eventsAfter(0, 100_000);
      return stored.length > 0 && ids('watcher').at(-1) === stored.at(-1)?.eventId;
    };
    await until(partial);
    stopWatching();
    await watching.close();
    const before = ids('watcher').length;
    expect((await driver.run({ task: 'two', provider }).result).status).toBe('finished');
    const again = hook('watcher');
    watcher.observe(again);
    cleanups.push(() => again.close());
    const stored = (await driver.store.eventsAfter(0, 100_000)).map((event) => event.eventId);
    expect(stored.length).toBeGreaterThan(before);
    await until(async () => ids('watcher').length === stored.length && ids('driver').length === stored.length);
    expect(ids('watcher')).toEqual(stored);
    expect(ids('driver')).toEqual(stored);
    expect(again.failures).toEqual([]);
  });

  it('writes two hooks of one file, each with its own events, in commit order with none lost', {
    timeout: 60_000,
  }, async () => {
    const { driver, watcher } = await twoHosts();
    const dir = tempWorkspace();
    const file = join(dir, 'audit.jsonl');
    const both = hookObserver(
      [
        { name: 'ends', events: ['run-end'], append: file, onFailure: 'ignore', timeoutMs: 5_000, from: 'test' },
        { name: 'steps', events: ['step-end'], append: file, onFailure: 'ignore', timeoutMs: 5_000, from: 'test' },
      ],
      { cwd: dir },
    );
    watcher.observe(both);
    cleanups.push(() => both.close());
    const provider = await script('fanout', { children: 3, steps: 2, latencyMs: 20 });
    expect((await driver.run({ task: 'one', provider }).result).status).toBe('finished');
    const wanted = (await driver.store.eventsAfter(0, 100_000))
      .filter((event) => event.type === 'run-end' || event.type === 'step-end')
      .map((event) => event.eventId);
    const logged = () =>
      readFileSync(file, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => (JSON.parse(line) as HarnessEvent).eventId);
    await until(() => logged().length >= wanted.length);
    expect(logged()).toEqual(wanted);
  });
});

/** Waits for `check` to hold, looking every 50 ms; gives up (failing the test) after 30 s. */
async function until(check: () => Promise<boolean> | boolean): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('gave up waiting');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
