/**
 * What shapes a tree's behaviour beyond its stored spec, recorded when the tree starts so a
 * resume or a join in another process (a newer release in a rolling deploy, a tool whose
 * schema was edited) is not taken for the same program: the release of io-harness, and a
 * digest of each of the embedder's and MCP servers' tools as the model is shown it. The
 * contract, the policy and the configuration a tree was started with are in its spec and
 * a resume reads them from there, so they cannot change under it.
 *
 * A resume or join that finds a change is refused, naming it (FINGERPRINT_CHANGED), unless
 * it is given `acceptChanges: true`: then the change is recorded in the root's trace
 * (`changes-accepted`) and becomes the tree's, so the next resume compares with it. A
 * tree started before this was recorded has nothing to compare and resumes as before.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ErrorCode, HarnessError } from '../errors.js';
import { packageFile } from '../package-files.js';
import type { HostTool } from '../runtime/tools/host-tool.js';
import type { ToolDefinitionData } from '../runtime/tools/tool.js';
import type { RunSpec } from '../store/records.js';

/** This package's release: its version, as package.json says. */
export const RELEASE: string = (JSON.parse(readFileSync(packageFile('package.json'), 'utf8')) as { version: string })
  .version;

/** A tool as the model is shown it, as a short digest: its description and its parameters. */
export function toolDigest(definition: Pick<ToolDefinitionData, 'description' | 'parameters'>): string {
  const shown = JSON.stringify({ description: definition.description, parameters: definition.parameters });
  return createHash('sha256').update(shown).digest('hex').slice(0, 16);
}

/**
 * What differs between the tree as its spec recorded it and this process: the release, a
 * tool given back with another description or parameters, a tool the tree did not have.
 * (A tool the tree had and this process was not given is refused apart, as TOOLS_MISSING.)
 */
export function changesSince(spec: RunSpec | null, given: ReadonlyMap<string, HostTool<never>>): string[] {
  if (!spec?.release) return [];
  const changes: string[] = [];
  if (spec.release !== RELEASE) changes.push(`io-harness ${spec.release} started it and this process runs ${RELEASE}`);
  const stored = new Map((spec.tools ?? []).map((tool) => [tool.name, tool]));
  for (const [name, tool] of [...given].sort(([a], [b]) => a.localeCompare(b))) {
    const was = stored.get(name);
    if (!was) changes.push(`the tool ${name} is new to it`);
    else if (was.digest !== undefined && was.digest !== toolDigest(tool.definition))
      changes.push(`the tool ${name} is shown to the model with another description or parameters`);
  }
  return changes;
}

/** Refuses a resume or join under changes not accepted; returns the changes it goes on under. */
export function checkChanges(
  rootId: string,
  spec: RunSpec | null,
  given: ReadonlyMap<string, HostTool<never>>,
  accept: boolean,
  where: 'resume()' | 'join()',
): string[] {
  const changes = changesSince(spec, given);
  if (changes.length === 0 || accept) return changes;
  throw new HarnessError(
    ErrorCode.FingerprintChanged,
    `${where}: tree ${rootId} has changed under this process: ${changes.join('; ')}. Nothing was resumed, and the tree stays resumable. ` +
      `Resume it where it was started (the release and tools it had), or go on under the change with ${where.slice(0, -2)}(rootId, { acceptChanges: true }), which the tree's trace records.`,
    { details: { rootId, changes } },
  );
}
