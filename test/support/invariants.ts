/**
 * The durability invariants, checked straight against the store's rows, read with plain
 * SQL from the SQLite file or the PostgreSQL database (not through the library's own read
 * API, so a bug there cannot hide one here).
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { expect } from 'vitest';

export interface TreeSnapshot {
  rootStatus: string;
  rootReply: string | null;
  runs: number;
  /** address -> [steps, tokens] spent by that run and its descendants */
  spent: Record<string, [number, number]>;
  statuses: Record<string, string>;
  /** address -> what each of its tool calls observed (a read as its message count, since arrival order varies) */
  observed: Record<string, string[]>;
}

type Row = Record<string, unknown>;

/** A tree's rows, each table's in its stored order. */
export interface TreeRows {
  runs: Row[];
  /** Every step of the tree, by run then seq. */
  steps: Row[];
  draws: Row[];
  ledger: Row[];
  mailbox: Row[];
  events: Row[];
}

const TREE_QUERIES = {
  runs: 'SELECT * FROM runs WHERE root_id = $1',
  steps: 'SELECT s.* FROM steps s JOIN runs r ON r.run_id = s.run_id WHERE r.root_id = $1 ORDER BY s.run_id, s.seq',
  draws: 'SELECT * FROM draws WHERE root_id = $1',
  ledger: 'SELECT * FROM ledger WHERE root_id = $1',
  mailbox: 'SELECT * FROM mailbox WHERE root_id = $1 ORDER BY ordinal',
  events: 'SELECT * FROM events WHERE root_id = $1 ORDER BY event_id',
} as const;

/** A tree's rows from a SQLite file. */
export function sqliteRows(path: string, rootId: string): TreeRows {
  const db = new Database(path, { readonly: true });
  try {
    const out: Record<string, Row[]> = {};
    for (const [table, text] of Object.entries(TREE_QUERIES))
      out[table] = db.prepare(text.replace('$1', '?')).all(rootId) as Row[];
    return out as unknown as TreeRows;
  } finally {
    db.close();
  }
}

/** The roots of every tree a store holds. */
const ROOTS = 'SELECT run_id FROM runs WHERE parent_id IS NULL ORDER BY run_id';

export function sqliteRoots(path: string): string[] {
  const db = new Database(path, { readonly: true });
  try {
    return (db.prepare(ROOTS).all() as { run_id: string }[]).map((row) => row.run_id);
  } finally {
    db.close();
  }
}

export async function postgresRoots(url: string): Promise<string[]> {
  const client = await numericClient(url);
  try {
    return (await client.query<{ run_id: string }>(ROOTS)).rows.map((row) => row.run_id);
  } finally {
    await client.end();
  }
}

/** A tree's rows from a PostgreSQL store, its 64-bit integers read as numbers (as SQLite gives them). */
export async function postgresRows(url: string, rootId: string): Promise<TreeRows> {
  const client = await numericClient(url);
  try {
    const out: Record<string, Row[]> = {};
    for (const [table, text] of Object.entries(TREE_QUERIES)) out[table] = (await client.query(text, [rootId])).rows;
    return out as unknown as TreeRows;
  } finally {
    await client.end();
  }
}

/** A connected `pg` client whose 64-bit integers and sums read as numbers, as SQLite gives them. */
export async function numericClient(url: string): Promise<pg.Client> {
  const client = new pg.Client({
    connectionString: url,
    types: {
      getTypeParser: (oid: number, format?: string) =>
        oid === 20 || oid === 1700 ? Number : pg.types.getTypeParser(oid, format as 'text'),
    },
  });
  await client.connect();
  return client;
}

export function snapshot(path: string, rootId: string): TreeSnapshot {
  return snapshotOf(sqliteRows(path, rootId), rootId);
}

/** What a finished tree came to, from its rows. */
export function snapshotOf(rows: TreeRows, rootId: string): TreeSnapshot {
  const runs = rows.runs;
  const root = runs.find((run) => run.run_id === rootId) as Row;
  const spent: Record<string, [number, number]> = {};
  const statuses: Record<string, string> = {};
  const observed: Record<string, string[]> = {};
  const stepsOf = (runId: unknown) => rows.steps.filter((step) => step.run_id === runId);
  const ledgerOf = new Map(rows.ledger.map((account) => [account.run_id, account]));
  for (const run of runs) {
    observed[run.address as string] = stepsOf(run.run_id).flatMap((step) =>
      (JSON.parse(step.observations as string) as { name: string; content: string; isError: boolean }[]).map(
        (o) =>
          `${o.name}${o.isError ? '!' : ''}: ${o.name === 'read_messages' ? (o.content.startsWith('[') ? JSON.parse(o.content).length : 0) : o.content}`,
      ),
    );
    const ledger = ledgerOf.get(run.run_id) as Row;
    spent[run.address as string] = [ledger.steps_spent as number, ledger.tokens_spent as number];
    statuses[run.address as string] = run.status as string;
  }
  return {
    rootStatus: root.status as string,
    rootReply: root.reply as string | null,
    runs: runs.length,
    spent,
    statuses,
    observed,
  };
}

/**
 * Checks every invariant of a finished tree. `acks` are the (run, seq) pairs some
 * process was told had committed, across every process that drove the tree.
 */
export function checkInvariants(path: string, rootId: string, acks: [string, number][]): void {
  checkInvariantsOf(sqliteRows(path, rootId), acks);
}

/** {@link checkInvariants} on a tree's rows, from either backend. */
export function checkInvariantsOf(rows: TreeRows, acks: [string, number][]): void {
  const runs = rows.runs;
  const runById = new Map(runs.map((run) => [run.run_id as string, run]));
  // Every child reached a terminal state.
  for (const run of runs) expect(['finished', 'budget-exhausted', 'failed', 'cancelled']).toContain(run.status);

  // 1. Acknowledged commits are durable.
  const stepKeys = new Set(rows.steps.map((step) => `${step.run_id}#${step.seq}`));
  for (const [runId, seq] of acks) expect(stepKeys.has(`${runId}#${seq}`), `acked step ${runId}#${seq}`).toBe(true);

  // 2. At most one step row per (run, seq), contiguous from 1.
  const steps = rows.steps;
  const byRun = new Map<string, Row[]>();
  for (const step of steps) {
    const list = byRun.get(step.run_id as string) ?? [];
    list.push(step);
    byRun.set(step.run_id as string, list);
  }
  for (const run of runs) {
    const list = byRun.get(run.run_id as string) ?? [];
    expect(list.map((step) => step.seq)).toEqual(list.map((_, i) => i + 1));
    expect(run.last_seq).toBe(list.length);
  }

  // 3. One draw per committed step; the sum of draws under every account equals its spend; spend within ceilings.
  const draws = rows.draws;
  expect(draws.length).toBe(steps.length);
  const drawIds = new Set(draws.map((draw) => draw.draw_id));
  for (const step of steps) expect(drawIds.has(`${step.run_id}:${step.seq}`)).toBe(true);
  const accounts = rows.ledger;
  for (const account of accounts) {
    const id = account.run_id as string;
    const inSubtree = draws.filter((draw) => {
      const run = runById.get(draw.run_id as string) as Row;
      return draw.run_id === id || (JSON.parse(run.ancestry as string) as string[]).includes(id);
    });
    expect(inSubtree.reduce((sum, draw) => sum + (draw.steps as number), 0)).toBe(account.steps_spent);
    expect(inSubtree.reduce((sum, draw) => sum + (draw.tokens as number), 0)).toBe(account.tokens_spent);
    if (account.max_steps !== null)
      expect(account.steps_spent as number).toBeLessThanOrEqual(account.max_steps as number);
    if (account.max_tokens !== null)
      expect(account.tokens_spent as number).toBeLessThanOrEqual(account.max_tokens as number);
  }

  // 4. Each message consumed exactly once, in the step that read it, and in send order per reader.
  const messages = rows.mailbox;
  const messageById = new Map(messages.map((message) => [message.msg_id as string, message]));
  const readBy = new Map<string, string[]>();
  const seen = new Set<string>();
  for (const step of steps) {
    const observations = JSON.parse(step.observations as string) as { name: string; content: string }[];
    const ids = observations
      .filter((o) => o.name === 'read_messages' && o.content.startsWith('['))
      .flatMap((o) => (JSON.parse(o.content) as { id: string }[]).map((m) => m.id));
    for (const id of ids) {
      expect(seen.has(id), `message ${id} read twice`).toBe(false);
      seen.add(id);
      const message = messageById.get(id) as Row;
      expect(message.consumed_by).toBe(step.run_id);
      expect(message.consumed_seq).toBe(step.seq);
      expect(message.consumed_generation).toBe(step.generation);
      const list = readBy.get(step.run_id as string) ?? [];
      list.push(id);
      readBy.set(step.run_id as string, list);
    }
  }
  for (const message of messages) {
    if (message.consumed_by !== null) expect(seen.has(message.msg_id as string)).toBe(true);
  }
  for (const ids of readBy.values()) {
    const ordinals = ids.map((id) => (messageById.get(id) as Row).ordinal as number);
    expect(ordinals).toEqual([...ordinals].sort((a, b) => a - b));
  }

  // 5. No committed row carries a stale generation: nothing a run committed came after a newer lease was taken.
  const events = rows.events;
  const newest = new Map<string, number>();
  for (const event of events) {
    const runId = event.run_id as string;
    if (event.type === 'lease-taken') {
      newest.set(runId, Math.max(newest.get(runId) ?? 0, event.generation as number));
    } else {
      expect(event.generation as number, `${event.type} of ${runId} after a takeover`).toBe(newest.get(runId) ?? 0);
    }
  }
  for (const step of steps)
    expect(step.generation as number).toBeLessThanOrEqual(newest.get(step.run_id as string) ?? 0);
}
