/**
 * The names the runtime's own tools take, read from their declarations so a new built-in
 * is never missed: an embedder's tool may not take one (see ./host-tool.ts).
 */
import { workspaceTools } from './families/workspace.js';
import { registryFor } from './registry.js';

let builtIn: ReadonlySet<string> | null = null;

/** The names the runtime's own tools use (read from their declarations); an embedder's tool may not take one. */
export function builtInToolNames(): ReadonlySet<string> {
  builtIn ??= new Set(
    registryFor({
      mode: 'workspace',
      planGate: true,
      skills: true,
      tiers: true,
      memory: true,
      git: true,
      workspaceTools,
    })
      .definitions()
      .map((definition) => definition.name),
  );
  return builtIn;
}
