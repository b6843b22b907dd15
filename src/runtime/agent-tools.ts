/**
 * The tools every agent of a tree has: spawn_agent, send_message, read_messages.
 * Their effects are the actor's to carry out (see actors/agent-worker.ts); this file
 * fixes their names, arguments and descriptions.
 */
import type { ArgumentSchema } from './arguments.js';
import { type Tool, ToolRegistry, type ToolResult } from './tools.js';

export interface SpawnArgs {
  task: string;
  as?: string;
  wait?: boolean;
  background_after_secs?: number;
  budget?: { steps?: number; tokens?: number; wall_secs?: number };
  max_wait_secs?: number;
  policy?: { deny?: RuleLists; allow?: RuleLists };
}

/** Patterns per act, as a spawn names them. */
export interface RuleLists {
  read?: string[];
  write?: string[];
  exec?: string[];
  net?: string[];
}

const RULE_LISTS: ArgumentSchema = {
  type: 'object',
  properties: {
    read: { type: 'array', items: { type: 'string', minLength: 1 } },
    write: { type: 'array', items: { type: 'string', minLength: 1 } },
    exec: { type: 'array', items: { type: 'string', minLength: 1 } },
    net: { type: 'array', items: { type: 'string', minLength: 1 } },
  },
  additionalProperties: false,
};

export interface SendArgs {
  to: string;
  body: string;
}

export interface ReadArgs {
  wait_secs?: number;
  limit?: number;
}

const spawnParameters: ArgumentSchema = {
  type: 'object',
  properties: {
    task: { type: 'string', minLength: 1, description: 'What the new agent is to do.' },
    as: {
      type: 'string',
      description: 'An address for the new agent, unique within this tree; derived from yours when omitted.',
    },
    wait: {
      type: 'boolean',
      description: 'Wait for the agent to finish and return its result (default true). False returns at once.',
    },
    background_after_secs: {
      type: 'number',
      exclusiveMinimum: 0,
      description: 'With wait, stop waiting after this many seconds; the agent carries on and reports to your inbox.',
    },
    budget: {
      type: 'object',
      description: 'Ceilings for the new agent; never more than you have left.',
      properties: {
        steps: { type: 'integer', minimum: 0 },
        tokens: { type: 'integer', minimum: 0 },
        wall_secs: { type: 'number', minimum: 0 },
      },
      additionalProperties: false,
    },
    max_wait_secs: {
      type: 'number',
      minimum: 0,
      description: 'Lower the longest inbox wait the new agent may ask for.',
    },
    policy: {
      type: 'object',
      description:
        'Narrow what the new agent may do: `deny` adds rules (patterns per act) on top of your own policy. A child can never be allowed more than you.',
      properties: { deny: RULE_LISTS, allow: RULE_LISTS },
      additionalProperties: false,
    },
  },
  required: ['task'],
  additionalProperties: false,
};

const sendParameters: ArgumentSchema = {
  type: 'object',
  properties: {
    to: { type: 'string', minLength: 1, description: 'The address of an agent in this tree.' },
    body: { type: 'string', description: 'The message.' },
  },
  required: ['to', 'body'],
  additionalProperties: false,
};

const readParameters: ArgumentSchema = {
  type: 'object',
  properties: {
    wait_secs: {
      type: 'number',
      minimum: 0,
      description: 'If the inbox is empty, wait up to this many seconds for a message (capped by the run).',
    },
    limit: {
      type: 'integer',
      minimum: 1,
      description: 'Return at most this many messages; the rest stay for a later read.',
    },
  },
  additionalProperties: false,
};

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
    parameters: spawnParameters,
    kind: 'acts',
    handler: (args, effects, callIndex) => effects.spawn(args as unknown as SpawnArgs, callIndex),
  },
  {
    name: 'send_message',
    description: 'Send a message to another agent of this tree by its address. It is delivered when this step commits.',
    parameters: sendParameters,
    kind: 'acts',
    handler: (args, effects) => effects.send(args as unknown as SendArgs),
  },
  {
    name: 'read_messages',
    description: 'Read the messages sent to you, oldest first; each is returned exactly once. May wait a bounded time.',
    parameters: readParameters,
    kind: 'reads',
    handler: (args, effects) => effects.read(args as ReadArgs),
  },
];

export function agentToolRegistry(): ToolRegistry<AgentEffects> {
  const registry = new ToolRegistry<AgentEffects>();
  for (const tool of tools) registry.register(tool);
  return registry;
}
