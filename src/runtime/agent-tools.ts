/**
 * The tools every agent of a tree has: spawn_agent, send_message, read_messages.
 * Their effects are the actor's to carry out (see actors/agent-worker.ts); this file
 * fixes their names, arguments and descriptions.
 */
import { z } from 'zod';
import { type Tool, ToolRegistry, type ToolResult } from './tools.js';

export const spawnArgs = z
  .object({
    task: z.string().min(1).describe('What the new agent is to do.'),
    as: z
      .string()
      .optional()
      .describe('An address for the new agent, unique within this tree; derived from yours when omitted.'),
    wait: z
      .boolean()
      .optional()
      .describe('Wait for the agent to finish and return its result (default true). False returns at once.'),
    background_after_secs: z
      .number()
      .positive()
      .optional()
      .describe('With wait, stop waiting after this many seconds; the agent carries on and reports to your inbox.'),
    budget: z
      .object({
        steps: z.number().int().min(0).optional(),
        tokens: z.number().int().min(0).optional(),
        wall_secs: z.number().min(0).optional(),
      })
      .strict()
      .optional()
      .describe('Ceilings for the new agent; never more than you have left.'),
    max_wait_secs: z.number().min(0).optional().describe('Lower the longest inbox wait the new agent may ask for.'),
  })
  .strict();
export type SpawnArgs = z.infer<typeof spawnArgs>;

export const sendArgs = z
  .object({
    to: z.string().min(1).describe('The address of an agent in this tree.'),
    body: z.string().describe('The message.'),
  })
  .strict();
export type SendArgs = z.infer<typeof sendArgs>;

export const readArgs = z
  .object({
    wait_secs: z
      .number()
      .min(0)
      .optional()
      .describe('If the inbox is empty, wait up to this many seconds for a message (capped by the run).'),
    limit: z
      .number()
      .int()
      .positive()
      .optional()
      .describe('Return at most this many messages; the rest stay for a later read.'),
  })
  .strict();
export type ReadArgs = z.infer<typeof readArgs>;

export interface AgentEffects {
  spawn(args: SpawnArgs, callIndex: number): Promise<ToolResult>;
  send(args: SendArgs): Promise<ToolResult>;
  read(args: ReadArgs): Promise<ToolResult>;
}

const tools: Tool<AgentEffects>[] = [
  {
    name: 'spawn_agent',
    description:
      'Start a sub-agent on a task. It shares this tree\u2019s budget ledger and can only narrow it. Returns its result when waited for.',
    schema: spawnArgs as unknown as z.ZodType<Record<string, unknown>>,
    handler: (args, effects, callIndex) => effects.spawn(args as SpawnArgs, callIndex),
  },
  {
    name: 'send_message',
    description: 'Send a message to another agent of this tree by its address. It is delivered when this step commits.',
    schema: sendArgs as unknown as z.ZodType<Record<string, unknown>>,
    handler: (args, effects) => effects.send(args as SendArgs),
  },
  {
    name: 'read_messages',
    description: 'Read the messages sent to you, oldest first; each is returned exactly once. May wait a bounded time.',
    schema: readArgs as unknown as z.ZodType<Record<string, unknown>>,
    handler: (args, effects) => effects.read(args as ReadArgs),
  },
];

export function agentToolRegistry(): ToolRegistry<AgentEffects> {
  const registry = new ToolRegistry<AgentEffects>();
  for (const tool of tools) registry.register(tool);
  return registry;
}
