/**
 * The pipelined outbox (src/store/postgres/outbox.ts) blames the statement sent first when
 * several fail together, whichever of their promises settles first: a write's answer
 * that fails in the same packet as the transaction's own start (its lock timing out) is a
 * consequence of it, not the cause. Driven through its sender seam, so the failures can
 * be made to land in one tick, as one packet from the server makes them land.
 */
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Outbox } from '../dist/store/postgres/outbox.js';

describe('the pipelined outbox', () => {
  it('blames the failure of the statement sent first, not the first promise to settle', async () => {
    const sent: { text: string; reject: (error: Error) => void }[] = [];
    const send = (_client: pg.PoolClient, query: { text: string }) =>
      new Promise<pg.QueryResult>((_resolve, reject) => {
        sent.push({ text: query.text, reject });
      });
    const outbox = new Outbox({} as pg.PoolClient, send);
    // The transaction's own start, then a write's statement it waits on.
    outbox.write = -1;
    outbox.raw('SELECT pg_advisory_xact_lock(7310, 0)');
    outbox.write = 0;
    outbox.raw('SAVEPOINT request');
    const asked = outbox.ask({ op: 'get', text: 'SELECT * FROM runs WHERE run_id = ?', params: ['r'] });
    const cause = new Error('canceling statement due to lock timeout');
    // The server answers all three at once: the lock timed out, and what followed it in an aborted transaction.
    sent[0]?.reject(cause);
    sent[1]?.reject(new Error('current transaction is aborted'));
    sent[2]?.reject(new Error('current transaction is aborted'));
    await expect(asked).rejects.toBe(cause);
    expect(await outbox.blame(cause)).toEqual({ error: cause, write: -1 });
    expect(sent.map((item) => item.text)).toEqual([
      'SELECT pg_advisory_xact_lock(7310, 0)',
      'SAVEPOINT request',
      'SELECT * FROM runs WHERE run_id = ?',
    ]);
  });
});
