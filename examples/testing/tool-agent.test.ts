import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Policy, Store, Supervisor, tool } from 'io-harness';
import { ScriptedModelServer, wireToolResults } from 'io-harness/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';

// The agent under test: one tool of your own.
const orders = new Map([['A-1001', 'shipped']]);
const lookupOrder = tool({
  name: 'lookup_order',
  description: 'Says where an order is.',
  parameters: z.object({ id: z.string() }),
  effect: 'reads',
  execute: ({ id }) => orders.get(id) ?? `no order ${id}`,
});
const policy = Policy.empty().layer('support').allowTool('lookup_order');

// The model: asked by the root, it looks the order up, then answers with what the tool said.
let outage = 0; // how many of the next requests answer 503
const model = await ScriptedModelServer.start((call) => {
  if (outage > 0) {
    outage--;
    return { fault: 'status', status: 503, retryAfter: '0' };
  }
  if (call.agent !== 'root') return { text: `unexpected agent ${call.agent}` };
  const [result] = wireToolResults(call);
  if (!result) return { toolCalls: [{ name: 'lookup_order', args: { id: 'A-1001' } }], usage: { inputTokens: 900 } };
  return { text: `Order A-1001 is ${result.content}.`, usage: { inputTokens: 950, outputTokens: 8 }, latencyMs: 5 };
});

const dir = mkdtempSync(join(tmpdir(), 'tool-agent-test-'));
let store: Store;
let supervisor: Supervisor;
beforeAll(async () => {
  store = await Store.open(join(dir, 'runs.db'));
  supervisor = await Supervisor.start(store, { tools: [lookupOrder] });
});
afterAll(async () => {
  await supervisor.close();
  store.close();
  await model.close();
  rmSync(dir, { recursive: true, force: true });
});

it('looks the order up and answers with what the tool said', async () => {
  const handle = supervisor.run({ task: 'Where is order A-1001?', provider: model.provider(), policy });
  const result = await handle.result;
  expect(result).toMatchObject({ status: 'finished', reply: 'Order A-1001 is shipped.' });
  // What the tool returned is in the trace, step by step.
  const [first] = store.steps(handle.rootId);
  expect(first?.observations).toMatchObject([{ name: 'lookup_order', content: 'shipped', isError: false }]);
  // Every request came from the root, and the usage the model reported was drawn.
  expect(model.calls.map((call) => call.agent)).toEqual(['root', 'root']);
  expect(store.modelCalls({ rootId: handle.rootId }).map((call) => call.inputTokens)).toEqual([900, 950]);
});

it('retries a vendor outage and keeps the retry in the trace', async () => {
  outage = 1;
  const handle = supervisor.run({ task: 'Where is order A-1001?', provider: model.provider(), policy });
  expect((await handle.result).status).toBe('finished');
  const retries = store.events(handle.rootId).filter((event) => event.type === 'model-retry');
  expect(retries).toMatchObject([{ statusCode: 503 }]);
});
