// The crash tests' seeded fan-out tree, served over HTTP by the scripted model server: a
// root spawns `workers` children in batches, even children message their odd partner
// (every tenth also waits on a grandchild), and the root reads one report per step until
// it has them all (`readLimit` at a time, one by default). Every call reports a fixed number of tokens, so a run's ledger does not
// depend on the order in which concurrent children happen to finish.
import { assistantTurns, systemText, wireToolResults } from '../../../dist/testing/index.js';

const pad = (n) => String(n).padStart(2, '0');

export function treeScript(options = {}) {
  const workers = options.workers ?? 50;
  const perStep = options.perStep ?? 10;
  const readLimit = options.readLimit ?? 1;
  const usage = { inputTokens: 10, outputTokens: 5 };
  return (call) => {
    const address = /You are agent "([^"]+)"/.exec(systemText(call))?.[1] ?? '?';
    const step = assistantTurns(call);
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
      const reports = wireToolResults(call)
        .filter((r) => r.name === 'read_messages' && r.content.startsWith('['))
        .reduce((sum, r) => sum + JSON.parse(r.content).length, 0);
      if (reports < workers)
        return { toolCalls: [{ name: 'read_messages', args: { wait_secs: 30, limit: readLimit } }], usage };
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
  };
}
