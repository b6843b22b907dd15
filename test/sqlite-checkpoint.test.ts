/**
 * The store actor's SQLite writer moves its log into the database file between batches
 * (BatchWriter.idle, run once every reply is posted), not inside a commit as SQLite does by
 * default, so a commit's reply never waits for it; a writer that is never idle still moves
 * it inside a commit once the log has grown eight times as large. Read from the database
 * file's size: pages reach the file only when the log is moved.
 */
import { rmSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { BatchWriter } from '../dist/store/sqlite/batch.js';
import { tempStorePath } from './support/processes.js';
import { rootInput } from './support/writer.js';

let path: string | undefined;
afterEach(() => {
  if (path) rmSync(dirname(path), { recursive: true, force: true });
  path = undefined;
});

describe("the store actor's log on SQLite", () => {
  it('is moved into the database file between batches, not inside a commit, and inside one once it is far past due', () => {
    path = tempStorePath();
    const writer = new BatchWriter(path, { synchronous: 'NORMAL' });
    try {
      const created = writer.run([{ op: 'createRoot', input: rootInput('r', { owner: 'o' }) }]).outcomes[0];
      if (!created?.ok) throw new Error('the root was not created');
      const fence = { runId: 'r', generation: (created.value as { generation: number }).generation, owner: 'o' };
      const write = (count: number) => {
        for (let i = 0; i < count; i++) {
          const events = [
            { type: 'spend' as const, draw: { steps: 0, tokens: 0 }, treeSpent: { steps: 0, tokens: 0 } },
          ];
          const { outcomes } = writer.run([{ op: 'recordEvents', input: { ...fence, events, now: i } }]);
          expect(outcomes[0]?.ok).toBe(true);
        }
      };
      const file = () => statSync(path as string).size;
      const before = file();
      // 64 writes in all, each its own batch: none of their commits moved the log.
      write(63);
      expect(file()).toBe(before);
      // Between batches it is moved.
      writer.idle();
      const moved = file();
      expect(moved).toBeGreaterThan(before);
      // Never idle: the commit that takes the log past 512 writes moves it itself.
      write(511);
      expect(file()).toBe(moved);
      write(1);
      expect(file()).toBeGreaterThan(moved);
    } finally {
      writer.close();
    }
    // Nothing was lost on the way: the 575 written, and the root's own (its lease taken).
    const db = new Database(path, { readonly: true });
    try {
      expect(db.prepare("SELECT count(*) AS n FROM events WHERE run_id = 'r'").get()).toEqual({ n: 576 });
    } finally {
      db.close();
    }
  });
});
