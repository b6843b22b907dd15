/**
 * A cancel any host can ask for: the root's row says it was asked (and why), the tree's
 * queued and paused runs end at once, and so do its running runs whose lease has lapsed or
 * was given back (no host drives them, and no host will: a cancelled tree is claimed by
 * none), and the root's trace records who asked. Every host that drives a run of the tree
 * sees the row, by the hint this commit sends or by its poll, and cancels what it drives
 * (src/supervisor/leases.ts); a host driving a cancelled tree asks again at each claim
 * pass, so a run whose host dies after the ask ends once its lease lapses.
 */
import type { Q } from '../sql.js';
import * as sql from '../sql.js';
import { type RuleContext, type RunRow, recordEvent } from './context.js';
import { cancelRuns } from './run-end.js';
import { cancelQueued } from './spawn.js';

export interface AskCancelInput {
  rootId: string;
  reason: string | null;
  owner: string;
  now: number;
}

export function* askCancel(
  context: RuleContext,
  input: AskCancelInput,
): Q<{ status: 'asked' | 'settled' | 'unknown' }> {
  const root = yield* sql.get<RunRow>(context.runById, input.rootId);
  if (!root || root.parent_id !== null) return { status: 'unknown' };
  const live = (yield* sql.get(
    `SELECT count(*) AS n FROM runs WHERE root_id = ? AND status IN ('pending', 'queued', 'running', 'paused')`,
    input.rootId,
  )) as { n: number };
  if (Number(live.n) === 0) return { status: 'settled' };
  if (Number(root.cancel_asked) === 0) {
    yield* sql.put('UPDATE runs SET cancel_asked = 1, cancel_reason = ? WHERE run_id = ?', input.reason, input.rootId);
    yield* recordEvent(
      context,
      root,
      null,
      root.generation,
      { type: 'cancel-asked', owner: input.owner, reason: input.reason },
      input.now,
    );
  }
  yield* cancelQueued(context, { rootId: input.rootId, now: input.now });
  yield* cancelRuns(
    context,
    `SELECT run_id FROM runs WHERE root_id = ? AND status = 'running'
      AND (lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at < ?) ORDER BY created_at`,
    [input.rootId, input.now],
    'cancelled while no host drove it',
    input.now,
  );
  return { status: 'asked' };
}
