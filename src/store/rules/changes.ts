/**
 * A change a resume or a join went on under (see src/supervisor/fingerprint.ts): the root's
 * spec takes the release and the tools of the process that accepted it, so the next resume
 * compares with them, and the root's trace records what changed and who accepted it.
 */
import type { RunSpec } from '../records.js';
import type { Q } from '../sql.js';
import * as sql from '../sql.js';
import { type RuleContext, recordEvent, runRow } from './context.js';

export interface AcceptChangesInput {
  rootId: string;
  release: string;
  tools: NonNullable<RunSpec['tools']>;
  changes: string[];
  by: 'resume()' | 'join()';
  owner: string;
  now: number;
}

export function* acceptChanges(context: RuleContext, input: AcceptChangesInput): Q<void> {
  const root = yield* runRow(context, input.rootId);
  const spec = JSON.parse(root.spec) as RunSpec;
  const { tools: _was, ...rest } = spec;
  const now: RunSpec = { ...rest, ...(input.tools.length > 0 ? { tools: input.tools } : {}), release: input.release };
  yield* sql.put('UPDATE runs SET spec = ? WHERE run_id = ?', JSON.stringify(now), root.run_id);
  yield* recordEvent(
    context,
    root,
    null,
    root.generation,
    { type: 'changes-accepted', changes: input.changes, by: input.by, owner: input.owner, release: input.release },
    input.now,
  );
}
