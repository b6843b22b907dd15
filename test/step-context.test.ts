/**
 * One Tool type: every tool, built-in or new, is one declaration whose handler is given
 * its arguments and the step context, and does everything beyond computing its result
 * through it: the policy's decision (recorded, asked about, refused by rule and layer),
 * the intent journal, restore points, the step's events and diffs. The registry these
 * tests dispatch through is the one the agent loop dispatches through; only the step
 * context is the test's own, recording what each tool asked of it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Policy, TaskContract } from '../dist/index.js';
import { policyGate } from '../dist/runtime/exec/containment/proxy.js';
import { executorFor } from '../dist/runtime/exec/factory.js';
import type { Act } from '../dist/runtime/policy/policy.js';
import type { AgentCall } from '../dist/runtime/tools/context.js';
import { settleCommand, settleDecision } from '../dist/runtime/tools/decisions.js';
import { personTools } from '../dist/runtime/tools/families/people.js';
import { TREE_TOOLS } from '../dist/runtime/tools/families/tree.js';
import { workspaceTools } from '../dist/runtime/tools/families/workspace.js';
import { registryFor, ToolRegistry } from '../dist/runtime/tools/registry.js';
import type { Tool, ToolResult } from '../dist/runtime/tools/tool.js';
import { WorkspaceSession } from '../dist/runtime/workspace/session.js';
import { later, tempWorkspace } from './support/workspace.js';

/** A workspace session over `root`, its commands run by the executor factory's executor for a run, closed after the test. */
function workspaceSession(root: string, policy: Policy): WorkspaceSession {
  const contract = TaskContract.workspace('t', root).toJSON();
  const executor = executorFor({ purpose: 'run', contract, policy, egress: policyGate(policy, root) });
  const made = new WorkspaceSession(contract, policy, [], executor);
  later(() => made.close());
  return made;
}

interface Asked {
  authorized: Act[];
  intents: string[];
  restorePoints: { path: string; content: string | null }[];
  events: Record<string, unknown>[];
  changes: string[];
}

/** A step context over a real policy (its decisions settled the way the loop settles them), recording what a tool asks of it. */
function recordingContext(
  policy: Policy,
  root: string,
  options: { workspace?: WorkspaceSession | null; started?: ToolResult; agent?: unknown } = {},
): { context: AgentCall; asked: Asked } {
  const asked: Asked = { authorized: [], intents: [], restorePoints: [], events: [], changes: [] };
  const decisions = {
    ask: async () => 'deny' as const,
    event: (event: Record<string, unknown>) => asked.events.push(event),
  };
  const context = {
    callIndex: 0,
    callId: 'call-0',
    signal: new AbortController().signal,
    planning: false,
    started: options.started,
    agent: options.agent,
    workspace: options.workspace ?? null,
    mail: null,
    decide: (act: Act) => policy.decide(act, root).effect,
    authorize: (act: Act) => {
      asked.authorized.push(act);
      return settleDecision(decisions, act, policy.decide(act, root), [], 0);
    },
    authorizeCommand: (act: Act, check: Parameters<typeof settleCommand>[2]) => {
      asked.authorized.push(act);
      return settleCommand(decisions, act, check, 0);
    },
    intent: async (kind: string, detail: string, run: () => Promise<ToolResult>) => {
      asked.intents.push(`${kind}: ${detail}`);
      return run();
    },
    restorePoint: async (path: string, content: Uint8Array | null) => {
      asked.restorePoints.push({ path, content: content === null ? null : Buffer.from(content).toString('utf8') });
    },
    record: (event: Record<string, unknown>) => asked.events.push(event),
    change: (change: { path: string; diff: string }) => asked.changes.push(change.path),
  } as unknown as AgentCall;
  return { context, asked };
}

describe('one Tool type', () => {
  it('declares every built-in tool once, in its family, with a handler of its arguments and the step context', () => {
    const registry = registryFor({ mode: 'workspace', planGate: true, workspaceTools });
    const declared = [...TREE_TOOLS, ...workspaceTools('workspace'), ...personTools(true)] as Tool<AgentCall>[];
    expect(registry.definitions().map((definition) => definition.name)).toEqual(
      declared.map((tool) => tool.name).sort(),
    );
    for (const tool of declared) {
      // execute(args, context): the call's index, id and signal are the context's.
      expect(tool.execute.length).toBe(2);
      expect(['reads', 'acts', 'asks', 'host']).toContain(tool.kind);
    }
  });

  it('has a workspace write ask the step context for its decision, its restore point, its diff and its event', async () => {
    const root = tempWorkspace({ 'a.txt': 'alpha\n' });
    const policy = Policy.default();
    const session = workspaceSession(root, policy);
    const registry = registryFor({ mode: 'workspace', workspaceTools });
    const { context, asked } = recordingContext(policy, root, { workspace: session });
    const result = await registry.dispatch('write_file', { path: 'a.txt', content: 'beta\n' }, context);
    expect(result.isError).toBe(false);
    expect(readFileSync(join(root, 'a.txt'), 'utf8')).toBe('beta\n');
    expect(asked.authorized).toEqual([{ kind: 'write', path: 'a.txt' }]);
    expect(asked.restorePoints).toEqual([{ path: 'a.txt', content: 'alpha\n' }]);
    expect(asked.changes).toEqual(['a.txt']);
    expect(asked.events.map((event) => event.type)).toEqual(['policy-decision', 'file-changed']);
    expect(asked.events[1]).toMatchObject({ callId: 'call-0', tool: 'write_file', path: 'a.txt' });
  });

  it('has a command journaled through the step context, and a refusal named by rule and layer before anything runs', async () => {
    const root = tempWorkspace();
    const policy = Policy.default().layer('team').allowExec('node *').denyExec('rm *');
    const session = workspaceSession(root, policy);
    const registry = registryFor({ mode: 'workspace', workspaceTools });
    const ran = recordingContext(policy, root, { workspace: session });
    const result = await registry.dispatch('exec', { argv: ['node', '--version'] }, ran.context);
    expect(result.content).toContain(process.version);
    expect(ran.asked.intents).toEqual(['exec: node --version']);
    const refused = recordingContext(policy, root, { workspace: session });
    const denied = await registry.dispatch('exec', { argv: ['rm', '-rf', 'x'] }, refused.context);
    expect(denied.refusal).toMatchObject({ layer: 'team' });
    expect(refused.asked.intents).toEqual([]);
  });

  it('gives a read started early its result only after the same decision as ever', async () => {
    const root = tempWorkspace({ 'a.txt': 'alpha\n' });
    const policy = Policy.default();
    const session = workspaceSession(root, policy);
    const registry = registryFor({ mode: 'workspace', workspaceTools });
    const early = registry.startEarly(
      'read_file',
      { path: 'a.txt' },
      recordingContext(policy, root, { workspace: session }).context,
    );
    expect(early).toMatchObject({ isError: false });
    const { context, asked } = recordingContext(policy, root, { workspace: session, started: early as ToolResult });
    expect(await registry.dispatch('read_file', { path: 'a.txt' }, context)).toBe(early);
    expect(asked.authorized).toEqual([{ kind: 'read', path: 'a.txt' }]);
    // What the policy does not allow outright is not started before the completion ends.
    const guarded = Policy.default().layer('team').askRead('a.txt');
    expect(
      registry.startEarly(
        'read_file',
        { path: 'a.txt' },
        recordingContext(guarded, root, { workspace: session }).context,
      ),
    ).toBeNull();
  });

  it('lets a new tool be one declaration: its act decided and journaled through the context like a built-in', async () => {
    const calls: string[] = [];
    const lookup: Tool = {
      name: 'lookup_host',
      description: 'Resolves a host name.',
      parameters: { type: 'object', properties: { host: { type: 'string' } }, required: ['host'] },
      kind: 'acts',
      execute: async (args, context) => {
        const refused = await context.authorize({ kind: 'net', host: String(args.host), port: 443 });
        if (refused) return refused;
        return context.intent('lookup', String(args.host), async () => {
          calls.push(String(args.host));
          return { content: `${args.host} resolves`, isError: false };
        });
      },
    };
    const registry = new ToolRegistry().register(lookup);
    const policy = Policy.default().layer('net').allowNet('example.com').denyNet('evil.test');
    const allowed = recordingContext(policy, '/');
    expect(await registry.dispatch('lookup_host', { host: 'example.com' }, allowed.context)).toMatchObject({
      isError: false,
    });
    expect(allowed.asked.intents).toEqual(['lookup: example.com']);
    const denied = recordingContext(policy, '/');
    const refusal = await registry.dispatch('lookup_host', { host: 'evil.test' }, denied.context);
    expect(refusal.refusal).toMatchObject({ layer: 'net' });
    expect(denied.asked.events).toMatchObject([{ type: 'policy-decision', act: 'net', effect: 'deny' }]);
    expect(await registry.dispatch('lookup_host', {}, denied.context)).toMatchObject({ isError: true });
    expect(calls).toEqual(['example.com']);
  });
});
