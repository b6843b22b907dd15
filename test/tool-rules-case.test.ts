/**
 * Tool rules match names whatever their case, as path deny rules do: a server may list
 * `Delete_All` beside `delete_all`, and a deny written for one must refuse the other. The
 * same holds for allow and ask, in every layer. Decided by the policy, then in a real run
 * on a worker thread over the scripted model server.
 */
import { describe, expect, it } from 'vitest';
import { OpenAI, Policy, Store, Supervisor, tool } from '../dist/index.js';
import { assistantTurns, ScriptedModelServer } from '../dist/testing/index.js';
import { tempStorePath } from './support/processes.js';
import { later } from './support/workspace.js';

const ROOT = '/nonexistent-root';

describe('tool rules', () => {
  it('match a name in any case, for deny, allow and ask, in every layer', () => {
    const policy = Policy.empty()
      .layer('app')
      .allowTool('EVIL__*')
      .askTool('evil__Ask*')
      .layer('guard')
      .denyTool('evil__delete*');
    const decide = (name: string) => policy.decide({ kind: 'tool', name }, ROOT);
    expect(decide('evil__Delete_All')).toMatchObject({
      effect: 'deny',
      rule: 'deny-tool evil__delete*',
      layer: 'guard',
    });
    expect(decide('EVIL__DELETE')).toMatchObject({ effect: 'deny', rule: 'deny-tool evil__delete*' });
    expect(decide('evil__list')).toMatchObject({ effect: 'allow', rule: 'allow-tool EVIL__*', layer: 'app' });
    expect(decide('Evil__ASKME')).toMatchObject({ effect: 'ask', rule: 'ask-tool evil__Ask*', layer: 'app' });
    // The subject stays as the model wrote it, so the trace shows what was called.
    expect(decide('evil__Delete_All').subject).toBe('evil__Delete_All');
    // What no rule covers is still denied.
    expect(decide('good__thing').effect).toBe('deny');
  });

  it('refuse a call to a tool whose name differs from the deny rule only in case, in a real run', async () => {
    const calls: string[] = [];
    const make = (name: string) =>
      tool({
        name,
        description: `The ${name} tool.`,
        parameters: { type: 'object', properties: {} },
        execute: () => {
          calls.push(name);
          return 'done';
        },
      });
    const store = await Store.open(tempStorePath());
    const supervisor = await Supervisor.start(store, { tools: [make('evil__Delete_All'), make('evil__list')] });
    later(async () => {
      await supervisor.close();
      store.close();
    });
    const server = await ScriptedModelServer.start((call) =>
      assistantTurns(call) === 0
        ? {
            text: 'calling',
            toolCalls: [
              { name: 'evil__Delete_All', args: {} },
              { name: 'evil__list', args: {} },
            ],
          }
        : { text: 'done' },
    );
    later(() => server.close());
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const policy = Policy.empty().layer('tools').allowTool('evil__*').denyTool('evil__delete*');
    const result = await supervisor.run({ task: 'clean up', provider, policy }).result;
    expect(result.status).toBe('finished');
    expect(calls).toEqual(['evil__list']);
    expect(store.events(result.rootId).filter((event) => event.type === 'refusal')).toMatchObject([
      { tool: 'evil__Delete_All', rule: 'deny-tool evil__delete*', layer: 'tools' },
    ]);
  });
});
