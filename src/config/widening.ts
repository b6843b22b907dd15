/**
 * The rule of the workspace's files: a file inside the workspace may narrow the boundary
 * and never widen it. The keys that would widen it are refused, each naming the user file
 * where it may go instead.
 */
import { relative } from 'node:path';
import { ConfigError, ErrorCode } from '../errors.js';
import { escapes, realTarget } from '../runtime/policy/policy.js';
import { isTable, type Table } from './toml.js';

/** Whether `path` lies in `root`, both by their real paths (links followed, a path not made yet by its nearest parent). */
export const inside = (path: string, root: string) => !escapes(relative(realTarget(root), realTarget(path)));

/**
 * The keys a workspace file may not set, because each would widen the boundary: sections
 * that name a program to run or an endpoint a credential is sent to, a policy rule that is
 * not a denial (or a base other than the empty one), and every sandbox grant. Budgets and
 * caps may only be lowered: that is checked as the files merge.
 */
export function widening(body: Table, prefix: string, refused: (key: string, why: string) => void): void {
  if (body.provider !== undefined) refused(`${prefix}provider`, 'names an endpoint a credential is sent to');
  if (body.mcp !== undefined) refused(`${prefix}mcp`, 'names a program to run or an endpoint to dial');
  if (body.toolchain !== undefined) refused(`${prefix}toolchain`, 'names programs to run');
  if (body.hook !== undefined) refused(`${prefix}hook`, 'names a program to run or a file to write with the events');
  if (body.lsp !== undefined) refused(`${prefix}lsp`, 'names a program to run');
  if (body.web !== undefined) refused(`${prefix}web`, 'opens a route to the web');
  if (body.browser !== undefined) refused(`${prefix}browser`, 'names a program to run and opens a route to the web');
  if (body.codeact !== undefined) refused(`${prefix}codeact`, 'names programs to run');
  if (body.documents !== undefined)
    refused(`${prefix}documents`, "turns on parsers for files the workspace's authors could have shaped");
  const policy = isTable(body.policy) ? body.policy : {};
  if (policy.base !== undefined && policy.base !== 'empty')
    refused(
      `${prefix}policy.base`,
      `sets the policy's base to ${JSON.stringify(policy.base)} (only "empty", which narrows, may be set here)`,
    );
  if (Array.isArray(policy.layer))
    policy.layer.forEach((layer, i) => {
      const rules = isTable(layer) && Array.isArray(layer.rule) ? layer.rule : [];
      rules.forEach((rule, j) => {
        if (isTable(rule) && rule.effect !== 'deny')
          refused(
            `${prefix}policy.layer[${i}].rule[${j}]`,
            `is a policy rule whose effect is ${JSON.stringify(rule.effect)} (only "deny" may be set here)`,
          );
      });
    });
  const sandbox = isTable(body.sandbox) ? body.sandbox : {};
  if (sandbox.access !== undefined && sandbox.access !== 'read-only')
    refused(
      `${prefix}sandbox.access`,
      `grants ${JSON.stringify(sandbox.access)} access (only "read-only" may be set here)`,
    );
  if (sandbox.writable_roots !== undefined)
    refused(`${prefix}sandbox.writable_roots`, 'grants writes outside the workspace');
  if (sandbox.shared_caches !== undefined && sandbox.shared_caches !== false)
    refused(`${prefix}sandbox.shared_caches`, 'shares the toolchains’ caches with the host');
  if (sandbox.rung !== undefined) refused(`${prefix}sandbox.rung`, 'chooses how commands are contained');
}

/** Throws the refusal of a widening key, naming the user file where it may go. */
export function refuse(file: string, line: number | null, key: string, why: string, userFile: string): never {
  throw new ConfigError(
    ErrorCode.ConfigRefused,
    `${file}:${line ?? 1}: ${key} ${why}; a file inside the workspace may narrow the boundary and never widen it. If you mean it, put it in your user file, ${userFile} (nothing of the configuration was used).`,
    { details: { file, line, key, userFile } },
  );
}
