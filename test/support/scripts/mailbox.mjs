// Mailbox scenarios, chosen by options.scenario.
//  ordered:   root spawns "reader", sends m1..m3 in one step and m4 in the next; the reader
//             reads (two at a time) until it has four, then answers with what it read, in order.
//  timeout:   root reads with wait_secs = options.wait and nothing ever arrives.
//  outsider:  root sends to options.to, an address of another tree.
import { scriptedProvider, toolResults, turn } from '../../../dist/testing/index.js';

export default function mailboxModel(options = {}) {
  return scriptedProvider((request) => {
    const { address } = request.metadata;
    const step = turn(request);
    if (options.scenario === 'ordered') {
      if (address === 'root') {
        if (step === 0)
          return { toolCalls: [{ name: 'spawn_agent', args: { task: 'read four', as: 'reader', wait: false } }] };
        if (step === 1) {
          return {
            toolCalls: ['m1', 'm2', 'm3'].map((body) => ({ name: 'send_message', args: { to: 'reader', body } })),
          };
        }
        if (step === 2) return { toolCalls: [{ name: 'send_message', args: { to: 'reader', body: 'm4' } }] };
        return { text: 'sent four' };
      }
      const read = toolResults(request)
        .filter((r) => r.name === 'read_messages' && r.content.startsWith('['))
        .flatMap((r) => JSON.parse(r.content).map((m) => m.body));
      if (read.length < 4) return { toolCalls: [{ name: 'read_messages', args: { wait_secs: 30, limit: 2 } }] };
      return { text: read.join(',') };
    }
    if (options.scenario === 'timeout') {
      if (step === 0) return { toolCalls: [{ name: 'read_messages', args: { wait_secs: options.wait } }] };
      return { text: toolResults(request)[0].content };
    }
    if (options.scenario === 'outsider') {
      if (step === 0) return { toolCalls: [{ name: 'send_message', args: { to: options.to, body: 'psst' } }] };
      return { text: 'tried' };
    }
    return { text: 'no scenario' };
  });
}
