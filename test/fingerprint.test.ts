/**
 * Versioned resume (src/supervisor/fingerprint.ts): a tree records the release that started
 * it and a digest of each of its tools as the model is shown it. A resume under a changed
 * tool schema, a new tool or another release is refused naming the change, taking and
 * changing nothing; with `acceptChanges` it goes on, the root's trace records the change,
 * and the tree's spec takes it, so the next resume compares with it. A tree whose spec
 * recorded no release (started before this) resumes as before. Each tree is left
 * unfinished by closing its supervisor while the root's tool call hangs, as a process
 * that went away would leave it. On PostgreSQL, a host whose tools differ is refused the
 * tree at join() and leaves its runs to a host that has the tree's own.
 */
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { HarnessError, OpenAI, Store, Supervisor, tool } from '../dist/index.js';
import { PostgresStore } from '../dist/store/postgres/index.js';
import { serveScript } from '../dist/testing/index.js';
import { numericClient } from './support/invariants.js';
import { freshDatabase } from './support/postgres.js';
import { tempStorePath } from './support/processes.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A lookup tool; `hang` makes its calls never answer (the process "goes away" during one). */
function lookup(parameters: Record<string, unknown>, hang: { called?: () => void } | null = null) {
  return tool({
    name: 'lookup',
    description: 'Looks a word up.',
    parameters: { type: 'object', properties: parameters, additionalProperties: false },
    effect: 'reads',
    execute: () => {
      if (!hang) return 'found it';
      hang.called?.();
      return new Promise<string>(() => undefined);
    },
  });
}

const v1 = { word: { type: 'string' } };
const v2 = { word: { type: 'string' }, language: { type: 'string' } };

/** A store with a tree whose root called lookup (v1) and was left mid-call; its model answers after one call. */
async function unfinishedTree() {
  const path = tempStorePath();
  cleanups.push(() => rmSync(dirname(path), { recursive: true, force: true }));
  const store = await Store.open(path);
  const left = await leftMidCall(store);
  const supervisor = await Supervisor.start(store);
  cleanups.push(async () => {
    await supervisor.close();
    store.close();
  });
  return { path, store, supervisor, ...left };
}

/** Starts a tree on `store` whose root calls lookup (v1), and closes its supervisor while the call hangs (unless `keep`). */
async function leftMidCall(store: Store | PostgresStore, keep = false) {
  const server = await serveScript((request) =>
    request.transcript.some((entry) => entry.role === 'tool')
      ? { text: 'done' }
      : { toolCalls: [{ name: 'lookup', args: { word: 'harness' } }] },
  );
  cleanups.push(() => server.close());
  const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
  const first = await Supervisor.start(store);
  let called: () => void = () => undefined;
  const calledOnce = new Promise<void>((resolve) => {
    called = resolve;
  });
  const handle = first.run({ task: 'look it up', provider, tools: [lookup(v1, { called })] });
  handle.result.catch(() => undefined);
  await calledOnce;
  if (keep) cleanups.push(() => first.close());
  else await first.close();
  return { rootId: handle.rootId, provider };
}

/** The root's stored spec, read from the file. */
function storedSpec(path: string, rootId: string): Record<string, unknown> {
  const db = new Database(path, { readonly: true });
  try {
    const row = db.prepare('SELECT spec FROM runs WHERE run_id = ?').get(rootId) as { spec: string };
    return JSON.parse(row.spec) as Record<string, unknown>;
  } finally {
    db.close();
  }
}

async function refusal(promise: Promise<unknown>): Promise<HarnessError> {
  const error = await promise.then(
    () => null,
    (caught: unknown) => caught,
  );
  if (!HarnessError.isInstance(error)) throw new Error(`expected a refusal, got ${String(error)}`);
  return error;
}

describe('a resume under a changed fingerprint', () => {
  it('is refused naming the changed tool, goes on with acceptChanges, and the trace and the spec record it', async () => {
    const { path, store, supervisor, rootId, provider } = await unfinishedTree();
    const before = storedSpec(path, rootId);
    expect(before.release).toMatch(/^\d+\.\d+\.\d+/);
    const refused = await refusal(supervisor.resume(rootId, { provider, tools: [lookup(v2)] }));
    expect(refused.code).toBe('FINGERPRINT_CHANGED');
    expect(refused.message).toContain('the tool lookup is shown to the model with another description or parameters');
    expect(refused.message).toContain('acceptChanges: true');
    expect(refused.details).toEqual({ rootId, changes: [expect.stringContaining('lookup')] });
    // Nothing was taken or changed: the spec is as it was, and the same tools resume it.
    expect(storedSpec(path, rootId)).toEqual(before);
    expect(store.events(rootId).some((event) => event.type === 'changes-accepted')).toBe(false);

    const resumed = await supervisor.resume(rootId, { provider, tools: [lookup(v2)], acceptChanges: true });
    expect(await resumed.result).toMatchObject({ status: 'finished', reply: 'done' });
    const accepted = store.events(rootId).filter((event) => event.type === 'changes-accepted');
    expect(accepted).toEqual([
      expect.objectContaining({
        runId: rootId,
        changes: ['the tool lookup is shown to the model with another description or parameters'],
        by: 'resume()',
        owner: supervisor.owner,
        release: before.release,
      }),
    ]);
    // The tree's spec took the change: a later resume with v2 compares with it.
    const after = storedSpec(path, rootId) as { tools: { name: string; digest: string }[] };
    expect(after.tools[0]?.digest).not.toBe((before.tools as { digest: string }[])[0]?.digest);
  });

  it('is refused for a tool the tree did not have and for another release, and not for a tree that recorded none', async () => {
    const { path, supervisor, rootId, provider } = await unfinishedTree();
    const extra = tool({
      name: 'define',
      description: 'Defines a word.',
      parameters: { type: 'object', properties: {} },
      execute: () => 'a definition',
    });
    const added = await refusal(supervisor.resume(rootId, { provider, tools: [lookup(v1), extra] }));
    expect(added.code).toBe('FINGERPRINT_CHANGED');
    expect(added.details?.changes).toEqual(['the tool define is new to it']);

    // The tree as an older release would have stored it.
    const db = new Database(path);
    const spec = { ...storedSpec(path, rootId), release: '0.0.1' };
    db.prepare('UPDATE runs SET spec = ? WHERE run_id = ?').run(JSON.stringify(spec), rootId);
    const released = await refusal(supervisor.resume(rootId, { provider, tools: [lookup(v1)] }));
    expect(released.details?.changes).toEqual([
      expect.stringMatching(/^io-harness 0\.0\.1 started it and this process runs \d+\.\d+\.\d+/),
    ]);

    // Started before releases were recorded: nothing to compare, so it resumes as it always did.
    const { release: _release, ...unrecorded } = spec;
    db.prepare('UPDATE runs SET spec = ? WHERE run_id = ?').run(JSON.stringify(unrecorded), rootId);
    db.close();
    const resumed = await supervisor.resume(rootId, { provider, tools: [lookup(v1)] });
    expect(await resumed.result).toMatchObject({ status: 'finished', reply: 'done' });
  });

  it('writes an accepted change only once the resume has its leases: refused by a live owner, it changes nothing', async () => {
    const path = tempStorePath();
    cleanups.push(() => rmSync(dirname(path), { recursive: true, force: true }));
    const store = await Store.open(path);
    cleanups.push(() => store.close());
    // The first supervisor still drives the tree: its lease is live.
    const { rootId, provider } = await leftMidCall(store, true);
    const before = storedSpec(path, rootId);
    const second = await Supervisor.start(store);
    cleanups.push(() => second.close());
    const conflict = await refusal(second.resume(rootId, { provider, tools: [lookup(v2)], acceptChanges: true }));
    expect(conflict.code).toBe('CONFLICT');
    expect(storedSpec(path, rootId)).toEqual(before);
    expect(store.events(rootId).some((event) => event.type === 'changes-accepted')).toBe(false);
  });

  it('refuses acceptChanges that is not true or false', async () => {
    const { supervisor, rootId } = await unfinishedTree();
    await expect(supervisor.resume(rootId, { acceptChanges: 'yes' as unknown as boolean })).rejects.toThrow(
      /acceptChanges must be true or false/,
    );
  });

  it('is refused at join(), so a host whose tools differ leaves the tree to a host with its own', async () => {
    const db = await freshDatabase();
    cleanups.push(() => db.drop());
    const open = async () => {
      const store = await PostgresStore.open(db.url, { idleInTransactionTimeoutMs: 500 });
      cleanups.push(() => store.close());
      return store;
    };
    const { rootId, provider } = await leftMidCall(await open());
    const other = await Supervisor.start(await open(), { host: 'other-release', leaseTtlMs: 2_000 });
    cleanups.push(() => other.close());
    const refused = await refusal(other.join(rootId, { provider, tools: [lookup(v2)] }));
    expect(refused.code).toBe('FINGERPRINT_CHANGED');
    expect(refused.message).toMatch(/^join\(\): .*the tool lookup/);
    const own = await Supervisor.start(await open(), { host: 'own-release', leaseTtlMs: 2_000 });
    cleanups.push(() => own.close());
    const joined = await own.join(rootId, { provider, tools: [lookup(v1)] });
    expect(await joined.result).toMatchObject({ status: 'finished', reply: 'done' });
    // The refused host took no run of the tree (its claims look only at the trees it drives); the other host took them.
    const client = await numericClient(db.url);
    cleanups.push(() => client.end());
    const owners = (
      await client.query<{ data: string }>("SELECT data FROM events WHERE root_id = $1 AND type = 'lease-taken'", [
        rootId,
      ])
    ).rows.map((row) => (JSON.parse(row.data) as { owner: string }).owner);
    expect(owners).toContain(own.owner);
    expect(owners).not.toContain(other.owner);
  });
});
