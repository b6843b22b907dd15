/**
 * A run another process drives on a SQLite file, followed from the store by one that only
 * follows it (session.reconnect): from the follower's start, as a bus would give it (an
 * earlier pause of the run is not its end), to its end; and told when the process driving
 * it is gone, for the follower to take it over. A real store file, a real run; the rows a
 * second process would write are written to it directly.
 */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { runWith } from '../dist/index.js';
import { StoreFollower } from '../dist/supervisor/store-follow.js';
import { moduleScript } from './support/harness.js';
import { tempStorePath } from './support/processes.js';
import { openStore } from './support/workspace.js';

describe('a run followed from the store', () => {
  it('starts after what was committed, ends on a later end, and says when the process driving it is gone', async () => {
    const path = tempStorePath();
    const store = await openStore(path);
    const done = await runWith('answer', moduleScript('turns', { turns: [{ text: 'answered' }] }), store);
    const runId = done.runId;
    expect(store.events(runId).some((event) => event.type === 'run-end')).toBe(true);
    // As a second process would have it: the run taken up again after an earlier end (a
    // paused run resumed there), held by a live process, its lease far from lapsing.
    const db = new Database(path);
    const far = Date.now() + 3_600_000;
    db.prepare(
      "UPDATE runs SET status = 'running', lease_owner = 'other', lease_pid = ?, lease_expires_at = ? WHERE run_id = ?",
    ).run(process.pid, far, runId);
    const follower = new StoreFollower(store, runId, runId);
    const seen: string[] = [];
    const stop = follower.observe((event) => seen.push(event.type), { rootId: runId, live: true });
    let settled: string | null = null;
    const settling = follower
      .settled(() => Date.now())
      .then((how) => {
        settled = how;
        return how;
      });
    // Several looks at the store later, the earlier end has not ended it.
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect(settled).toBeNull();
    expect(seen).toEqual([]);
    // The process holding it is gone (a pid that is no process's): it is the follower's to take over.
    db.prepare('UPDATE runs SET lease_pid = ? WHERE run_id = ?').run(2 ** 22 + 12345, runId);
    expect(await settling).toBe('lapsed');
    // Or it ends: a follower made now is done at once.
    db.prepare("UPDATE runs SET status = 'finished', lease_owner = NULL WHERE run_id = ?").run(runId);
    expect(await new StoreFollower(store, runId, runId).settled(() => Date.now())).toBe('ended');
    stop();
    db.close();
  });
});
