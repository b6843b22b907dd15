/**
 * What the file operations answer the model with when they do not do what was asked: an
 * error, or a refusal naming its rule. Each says what happened and what to do instead,
 * because its reader is the model.
 */
import type { ToolResult } from '../tools/tool.js';
import type { Refused } from './beneath.js';

export function error(content: string): ToolResult {
  return { content, isError: true };
}

export function refusal(rule: string, reason: string): ToolResult {
  return { content: reason, isError: true, refusal: { rule, reason } };
}

/** A refusal of the file acts beneath the root (a link on the way, a protected path), for the model. */
export function refusedResult(refused: Refused): ToolResult {
  return {
    content: refused.reason,
    isError: true,
    refusal: { rule: refused.rule, reason: refused.reason, layer: 'runtime' },
  };
}

export function boundary(reason: string): { ok: false; result: ToolResult } {
  return { ok: false, result: refusal('workspace.boundary', reason) };
}

/**
 * A regular file with more than one name. The other names cannot be found from this one,
 * and one may lie outside the workspace or under a path the policy denies, so the file
 * tools neither read nor write it.
 */
export function hardLinkRefusal(path: string, names: number, act: 'read' | 'write'): ToolResult {
  const reason = `${path} has ${names} names (hard links); one may lie outside the workspace or under a denied path, so the file tools do not ${act} it. Remove the extra link or copy the file.`;
  return { content: reason, isError: true, refusal: { rule: 'fs.hard-link', reason, layer: 'runtime' } };
}

export function binaryRefusal(rule: string, path: string, size: number, why: string): ToolResult {
  return refusal(rule, `${path} is a binary file (${size} bytes, not UTF-8 text); ${why}.`);
}
