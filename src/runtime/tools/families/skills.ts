/**
 * `read_skill`, offered to a run whose spec carries skills (see runtime/skills.ts): it
 * opens a skill's SKILL.md, or a file beside it, after the run's read policy has allowed
 * the file's real path. A path that resolves outside the skill's folder is refused first.
 */
import { readFileSync } from 'node:fs';
import { MAX_SKILL_CHARS, readSkillParameters, skillFile } from '../../skills.js';
import type { AgentCall } from '../context.js';
import type { Tool, ToolResult } from '../tool.js';

export const READ_SKILL: Tool<AgentCall> = {
  name: 'read_skill',
  description:
    'Open a skill from the catalogue in the system prompt: its SKILL.md, or with `path` a file in its folder that it refers to.',
  parameters: readSkillParameters,
  kind: 'reads',
  family: 'skills',
  execute: async (args, call): Promise<ToolResult> => {
    const where = skillFile(call.agent.skills, String(args.name), args.path as string | undefined);
    if (!where.ok) return { content: where.reason, isError: true };
    const refused = await call.authorize({ kind: 'read', path: where.path });
    if (refused) return refused;
    const text = readFileSync(where.path, 'utf8');
    return {
      content:
        text.length > MAX_SKILL_CHARS
          ? `${text.slice(0, MAX_SKILL_CHARS)}\n(${text.length - MAX_SKILL_CHARS} more characters were not kept)`
          : text,
      isError: false,
    };
  },
};
