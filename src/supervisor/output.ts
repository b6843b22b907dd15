/**
 * A run's structured answer: the final reply of a run that declared an {@link OutputSchema}
 * (in its contract, or as a plain run's `outputSchema`), parsed and checked as its gate checked it. `null` when the run did
 * not finish, gave no reply, or declared no schema.
 */
import type { ContractData } from '../runtime/contract/contract.js';
import { checkOutput } from '../runtime/contract/output-check.js';
import type { JsonSchema } from '../runtime/contract/output-schema.js';
import { TraceQueries } from '../store/queries.js';
import type { Q } from '../store/sql.js';
import type { TraceReader } from '../store/sqlite/reader.js';

const reads = new TraceQueries();

/** The answer, read from either backend. */
export function* outputQuery(runId: string): Q<unknown> {
  const run = yield* reads.run(runId);
  if (run?.status !== 'finished' || run.reply === null) return null;
  const spec = (yield* reads.spec(runId)) as {
    contract?: ContractData;
    outputSchema?: ContractData['outputSchema'];
  } | null;
  // A contract's shape, or a plain run's.
  const declared = spec?.contract?.outputSchema ?? spec?.outputSchema;
  if (!declared) return null;
  const check = checkOutput(declared.schema as JsonSchema, run.reply);
  return check.ok ? check.value : null;
}

export function outputOf(store: TraceReader, runId: string): unknown {
  return store.query(outputQuery(runId));
}
