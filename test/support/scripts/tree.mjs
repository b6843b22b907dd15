// A seeded fan-out tree for the crash tests: a root spawns `workers` children in
// batches, even children message their odd partner (every tenth also waits on a
// grandchild), and the root reads one report per step until it has them all. Every
// step charges a fixed number of tokens, so the ledger of a run does not depend on
// the order in which concurrent children happen to finish.
import { scriptedProvider, toolResults, turn } from '../../../dist/testing/index.js';

const pad = (n) => String(n).padStart(2, '0');

export default function treeModel(options = {}) {
  const workers = options.workers ?? 50;
  const perStep = options.perStep ?? 10;
  const usage = { inputTokens: 10, outputTokens: 5 };
  return scriptedProvider(
    (request) => {
      const { address } = request.metadata;
      const step = turn(request);
      if (address === 'root') {
        const batches = Math.ceil(workers / perStep);
        if (step < batches) {
          const first = step * perStep + 1;
          const last = Math.min(workers, first + perStep - 1);
          const toolCalls = [];
          for (let i = first; i <= last; i++) {
            toolCalls.push({ name: 'spawn_agent', args: { task: `part ${pad(i)}`, as: `w${pad(i)}`, wait: false } });
          }
          return { text: `batch ${step + 1}`, toolCalls, usage };
        }
        const reports = toolResults(request).filter(
          (r) => r.name === 'read_messages' && r.content.startsWith('['),
        ).length;
        if (reports < workers)
          return { toolCalls: [{ name: 'read_messages', args: { wait_secs: 30, limit: 1 } }], usage };
        return { text: `collected ${workers} reports`, usage };
      }
      if (address.startsWith('g')) return { text: `grandchild ${address} done`, usage };
      const index = Number(address.slice(1));
      if (index % 2 === 0) {
        const spawner = index % 10 === 0;
        if (spawner && step === 0) {
          return {
            toolCalls: [
              { name: 'spawn_agent', args: { task: `deeper ${pad(index)}`, as: `g${pad(index)}`, wait: true } },
            ],
            usage,
          };
        }
        if (step === (spawner ? 1 : 0)) {
          return {
            toolCalls: [{ name: 'send_message', args: { to: `w${pad(index - 1)}`, body: `finding ${pad(index)}` } }],
            usage,
          };
        }
        return { text: `w${pad(index)} done`, usage };
      }
      if (index + 1 <= workers && step === 0) {
        return { toolCalls: [{ name: 'read_messages', args: { wait_secs: 30 } }], usage };
      }
      return { text: `w${pad(index)} done`, usage };
    },
    { latencyMs: options.latencyMs ?? 0 },
  );
}
