/**
 * A tree over time, for the viewer's timeline: each agent from the moment it was asked for
 * (created, maybe queued) through the moment it was admitted (its first start) to its end,
 * its steps as the times they committed, the spans it waited paused for a person, and its
 * spend. A few queries for the whole tree, however many agents it has (a thousand agents
 * are a thousand rows, not a thousand reads), on either backend.
 */

import type { Q } from '../store/sql.js';
import * as sql from '../store/sql.js';

/** One agent on the timeline. Times are milliseconds since the epoch. */
export interface TimelineRun {
  id: string;
  parentId: string | null;
  address: string;
  depth: number;
  status: string;
  /** Asked for (a spawn); queued until `admitted` when the tree was at its concurrency cap. */
  created: number;
  /** Its first start, or null while it waits in the queue. */
  admitted: number | null;
  ended: number | null;
  /** When each of its steps committed, in order. */
  steps: number[];
  /** Spans paused for a person: from the pause to the resume (null while still paused). */
  pauses: [number, number | null][];
  /** Its own spend: steps and the tokens its model calls used. */
  spent: { steps: number; tokens: number };
}

export interface Timeline {
  rootId: string;
  /** The tree's first moment, and now (the right edge while it runs). */
  start: number;
  now: number;
  runs: TimelineRun[];
}

type Row = Record<string, unknown>;

/** The timeline of the tree `rootId`, or null when there is no such tree. */
export function* timelineQuery(rootId: string, now: number): Q<Timeline | null> {
  const runs = (yield* sql.all(
    'SELECT run_id, parent_id, address, depth, status, created_at, ended_at FROM runs WHERE root_id = ? ORDER BY created_at, run_id',
    rootId,
  )) as Row[];
  if (runs.length === 0) return null;
  const events = (yield* sql.all(
    "SELECT run_id, type, at FROM events WHERE root_id = ? AND type IN ('run-start', 'run-paused') ORDER BY event_id",
    rootId,
  )) as Row[];
  const steps = (yield* sql.all(
    'SELECT steps.run_id, steps.at, steps.usage FROM steps JOIN runs ON runs.run_id = steps.run_id WHERE runs.root_id = ? ORDER BY steps.run_id, steps.seq',
    rootId,
  )) as Row[];
  const byId = new Map<string, TimelineRun>();
  for (const row of runs) {
    const id = row.run_id as string;
    byId.set(id, {
      id,
      parentId: (row.parent_id as string | null) ?? null,
      address: row.address as string,
      depth: Number(row.depth),
      status: row.status as string,
      created: Number(row.created_at),
      admitted: null,
      ended: row.ended_at === null ? null : Number(row.ended_at),
      steps: [],
      pauses: [],
      spent: { steps: 0, tokens: 0 },
    });
  }
  for (const row of events) {
    const run = byId.get(row.run_id as string);
    if (!run) continue;
    const at = Number(row.at);
    if (row.type === 'run-start') {
      run.admitted ??= at;
      // A start after a pause is its resume: the pause ends here.
      const open = run.pauses.at(-1);
      if (open && open[1] === null) open[1] = at;
    } else run.pauses.push([at, null]);
  }
  for (const row of steps) {
    const run = byId.get(row.run_id as string);
    if (!run) continue;
    run.steps.push(Number(row.at));
    run.spent.steps++;
    const usage = JSON.parse(row.usage as string) as { inputTokens?: number; outputTokens?: number };
    run.spent.tokens += (usage.inputTokens ?? 0) + (usage.outputTokens ?? 0);
  }
  // In the order they were asked for; those asked for in one step, by their addresses' natural order (c2 before c10).
  const all = [...byId.values()].sort(
    (a, b) => a.created - b.created || a.address.localeCompare(b.address, 'en', { numeric: true }),
  );
  return { rootId, start: Math.min(...all.map((run) => run.created)), now, runs: all };
}
